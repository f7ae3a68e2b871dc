//! Splitting a frame into ADUs no larger than `max_adu`.

use std::cell::RefCell;
use std::time::Duration;

use horde_policy::{Fields, Value};

use super::AduSpec;

/// Append `size` bytes of one frame as ADUs of at most `max_adu` bytes: full ADUs first,
/// the remainder last, so every ADU but the last fills a slot. All fragments share the
/// frame's `fields` (from [`frame_fields`], which holds `frag` and `frags` already) with
/// `frag` (index) and `frags` (count) set. A zero-size frame emits nothing.
pub(crate) fn push_frame(
    size: u64,
    fields: Fields,
    at: Duration,
    max_adu: u32,
    out: &mut Vec<AduSpec>,
) {
    if size == 0 {
        return;
    }
    let max = u64::from(max_adu);
    let frags = size.div_ceil(max);
    let mut left = size;
    let mut fields = Some(fields);
    for frag in 0..frags {
        let this = left.min(max);
        left -= this;
        // The last fragment takes the frame's own list; only the others copy it.
        let mut f = if frag + 1 == frags {
            fields.take().expect("the last fragment takes the fields")
        } else {
            fields.clone().expect("fields until the last fragment")
        };
        f.set("frag", Value::Int(frag as i64));
        f.set("frags", Value::Int(frags as i64));
        out.push(AduSpec {
            size: this as u32,
            fields: f,
            at,
        });
    }
}

/// The fields every frame starts from: `media`, `frame_seq`, then `frame_type` if given,
/// and `frag` and `frags` for [`push_frame`] to set.
///
/// Made from a template per kind of frame, whose names (and `media` value) are shared:
/// setting a field that is already there only replaces its value, so a frame's fields
/// cost one list, not a block per name. A sender holds an ADU's fields while it is
/// queued, and an outage queues thousands: blocks per name were most of what it made
/// the heap hold.
pub(crate) fn frame_fields(
    media: &'static str,
    frame_seq: u64,
    frame_type: Option<Value>,
) -> Fields {
    thread_local! {
        static TEMPLATES: RefCell<Vec<(&'static str, bool, Fields)>> =
            const { RefCell::new(Vec::new()) };
    }
    let typed = frame_type.is_some();
    let mut f = TEMPLATES.with_borrow_mut(|templates| {
        if let Some((_, _, t)) = templates
            .iter()
            .find(|(m, ty, _)| *m == media && *ty == typed)
        {
            return t.clone();
        }
        let mut t = Fields::new();
        t.set("media", Value::from(media));
        t.set("frame_seq", Value::Int(0));
        if typed {
            t.set("frame_type", Value::Int(0));
        }
        t.set("frag", Value::Int(0));
        t.set("frags", Value::Int(1));
        templates.push((media, typed, t.clone()));
        t
    });
    f.set("frame_seq", Value::Int(frame_seq as i64));
    if let Some(v) = frame_type {
        f.set("frame_type", v);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(f: &Fields) -> Vec<&str> {
        f.iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn fragments_carry_the_frame_s_fields_in_order() {
        let mut out = Vec::new();
        let typed = frame_fields("video", 7, Some(Value::from("I")));
        push_frame(2500, typed, Duration::ZERO, 1000, &mut out);
        assert_eq!(out.len(), 3);
        for (i, a) in out.iter().enumerate() {
            assert_eq!(
                names(&a.fields),
                ["media", "frame_seq", "frame_type", "frag", "frags"]
            );
            assert_eq!(a.fields.get("media"), Some(&Value::from("video")));
            assert_eq!(a.fields.get("frame_seq"), Some(&Value::Int(7)));
            assert_eq!(a.fields.get("frame_type"), Some(&Value::from("I")));
            assert_eq!(a.fields.get("frag"), Some(&Value::Int(i as i64)));
            assert_eq!(a.fields.get("frags"), Some(&Value::Int(3)));
        }
        assert_eq!(
            out.iter().map(|a| a.size).collect::<Vec<_>>(),
            [1000, 1000, 500]
        );
        out.clear();
        push_frame(
            100,
            frame_fields("cbr", 3, None),
            Duration::ZERO,
            1000,
            &mut out,
        );
        assert_eq!(
            names(&out[0].fields),
            ["media", "frame_seq", "frag", "frags"]
        );
        assert_eq!(out[0].fields.get("frags"), Some(&Value::Int(1)));
        push_frame(
            0,
            frame_fields("cbr", 4, None),
            Duration::ZERO,
            1000,
            &mut out,
        );
        assert_eq!(out.len(), 1);
    }

    /// Frames share their field names (one block each for the whole run) instead of
    /// allocating them per ADU.
    #[test]
    fn frames_share_their_field_names() {
        let mut out = Vec::new();
        for seq in 0..3 {
            push_frame(
                100,
                frame_fields("cbr", seq, None),
                Duration::ZERO,
                1000,
                &mut out,
            );
        }
        let first: Vec<*const u8> = out[0].fields.iter().map(|(k, _)| k.as_ptr()).collect();
        for a in &out[1..] {
            let these: Vec<*const u8> = a.fields.iter().map(|(k, _)| k.as_ptr()).collect();
            assert_eq!(these, first);
        }
        assert_eq!(out[2].fields.get("frame_seq"), Some(&Value::Int(2)));
        assert_eq!(out[0].fields.get("frame_seq"), Some(&Value::Int(0)));
    }
}
