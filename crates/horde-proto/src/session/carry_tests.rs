//! What `Session::inherit` does with a stream's queue: every ADU the application handed
//! over is carried (framed again) or nacked, never silently gone; and the back-pressure
//! an application waits on is carried with it.

use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;

use super::test_session::one_channel_session;
use super::*;
use crate::event::NackReason;
use crate::recovery::header;
use crate::recovery::sender::Kind;
use crate::recovery::{RecoveryConfig, RecoveryMode};
use crate::stream::{QueuedAdu, StreamConfig};

const STREAM: u32 = 1;

fn nacks(s: &mut Session) -> Vec<(u64, NackReason)> {
    std::iter::from_fn(|| s.poll_event())
        .filter_map(|e| match e {
            Event::Nack { adu, reason, .. } => Some((adu, reason)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_carried_adu_that_cannot_be_framed_again_is_nacked_and_layer_adus_are_not() {
    let now = Duration::from_millis(10);
    let mut old = one_channel_session(1);
    let config = StreamConfig {
        recovery: RecoveryConfig::new(RecoveryMode::Oec),
        ..StreamConfig::default()
    };
    old.open_stream(STREAM, config).unwrap();
    let ids: Vec<u64> = (0..3u8)
        .map(|i| {
            old.send_adu(now, STREAM, Bytes::from(vec![i; 100]), Fields::new())
                .unwrap()
                .id
        })
        .collect();
    // The middle ADU's frame is unreadable; a report the old layer made is queued too.
    let queue = &mut old.sender.streams.get_mut(&STREAM).unwrap().queue;
    queue[1].payload = Bytes::new();
    let report_id = 1000;
    queue.push_back(QueuedAdu {
        id: report_id,
        seq: 3,
        payload: header::encode_report(&[]),
        fields: Fields::new(),
        inserted: now,
        deferred_since: None,
    });
    old.recovery.bind(STREAM, report_id, Kind::Report);
    nacks(&mut old);

    let mut new = one_channel_session(2);
    new.inherit(&mut old, now);

    assert_eq!(
        new.queued(STREAM),
        2,
        "the two readable data ADUs are carried"
    );
    assert_eq!(
        nacks(&mut new),
        vec![(ids[1], NackReason::Abandoned)],
        "the unreadable one is reported to the application, the report is not"
    );
    assert_eq!(new.stats().adus_abandoned, 1);
    let carried: Vec<u64> = new.sender.streams[&STREAM]
        .queue
        .iter()
        .map(|q| q.id)
        .collect();
    assert_eq!(carried, vec![ids[0], ids[2]]);
    for q in &new.sender.streams[&STREAM].queue {
        assert!(
            matches!(header::decode(&q.payload), Ok(header::Frame::Data { .. })),
            "carried ADUs are framed in the new layer"
        );
    }
}

fn writable_events(s: &mut Session) -> usize {
    std::iter::from_fn(|| s.poll_event())
        .filter(|e| matches!(e, Event::Writable { stream: STREAM }))
        .count()
}

/// An ended session whose stream is blocked at its high-water mark, with `adus` ADUs of
/// 1000 bytes (the marks are at their 8 and 16 KiB floors before any allocation).
fn blocked_session(now: Duration, adus: usize) -> Session {
    let mut old = one_channel_session(1);
    old.open_stream(STREAM, StreamConfig::default()).unwrap();
    for _ in 0..20 {
        old.send_adu(now, STREAM, Bytes::from(vec![0; 1000]), Fields::new())
            .unwrap();
    }
    assert_eq!(old.writable(STREAM), Ok(false), "20 000 bytes block it");
    let s = old.sender.streams.get_mut(&STREAM).unwrap();
    while s.queue.len() > adus {
        let id = s.queue[0].id;
        s.take(id);
    }
    writable_events(&mut old);
    old
}

#[test]
fn a_blocked_stream_stays_blocked_in_the_successor_and_announces_its_drain() {
    let now = Duration::from_millis(10);
    let mut old = blocked_session(now, 12);
    let mut new = one_channel_session(2);
    new.inherit(&mut old, now);
    assert_eq!(
        new.writable(STREAM),
        Ok(false),
        "12 000 bytes are above the low-water mark: still blocked"
    );
    assert_eq!(writable_events(&mut new), 0);
    let s = new.sender.streams.get_mut(&STREAM).unwrap();
    while s.queued_bytes > 8 * 1024 {
        let id = s.queue[0].id;
        s.take(id);
    }
    new.note_drained();
    assert_eq!(
        writable_events(&mut new),
        1,
        "the application waiting since the old session hears the drain"
    );
    assert_eq!(new.writable(STREAM), Ok(true));
}

#[test]
fn a_blocked_stream_whose_carried_queue_is_short_is_writable_at_once() {
    let now = Duration::from_millis(10);
    let mut old = blocked_session(now, 2);
    let mut new = one_channel_session(2);
    new.inherit(&mut old, now);
    assert_eq!(writable_events(&mut new), 1);
    assert_eq!(new.writable(STREAM), Ok(true));
}
