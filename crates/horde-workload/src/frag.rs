//! Splitting a frame into ADUs no larger than `max_adu`.

use std::time::Duration;

use horde_policy::{Fields, Value};

use super::AduSpec;

/// Append `size` bytes of one frame as ADUs of at most `max_adu` bytes: full ADUs first,
/// the remainder last, so every ADU but the last fills a slot. All fragments share the
/// frame's `fields` plus `frag` (index) and `frags` (count). A zero-size frame emits
/// nothing.
pub(crate) fn push_frame(
    size: u64,
    fields: &Fields,
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
    for frag in 0..frags {
        let this = left.min(max);
        left -= this;
        let mut f = fields.clone();
        f.set("frag", Value::Int(frag as i64));
        f.set("frags", Value::Int(frags as i64));
        out.push(AduSpec {
            size: this as u32,
            fields: f,
            at,
        });
    }
}

/// The fields every frame starts from.
pub(crate) fn frame_fields(media: &'static str, frame_seq: u64) -> Fields {
    let mut f = Fields::new();
    f.set("media", Value::from(media));
    f.set("frame_seq", Value::Int(frame_seq as i64));
    f
}
