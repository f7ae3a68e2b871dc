//! Strict priority across levels, EDF within a level, pre-emption of a lower level.

use std::time::Duration;

use horde_proto::message::{
    ChannelEstimate, MessageConfig, MessageId, MessageScheduler, MessageSpec, PRIORITY_LEVELS,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn fast_channel() -> ChannelEstimate {
    ChannelEstimate {
        rate: 1e9,
        delay: Duration::from_millis(10),
        startup: None,
    }
}

#[test]
fn pieces_leave_in_priority_then_deadline_order_on_a_fixed_seed() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed);
    let now = Duration::ZERO;
    let mut sender = MessageScheduler::new(MessageConfig::default()).unwrap();
    sender.set_channels(now, &[fast_channel()]).unwrap();
    let mut expected = Vec::new();
    for n in 0..500u64 {
        let priority = rng.gen_range(0..PRIORITY_LEVELS);
        let deadline = rng
            .gen_bool(0.8)
            .then(|| Duration::from_millis(rng.gen_range(100..100_000)));
        let mut spec = MessageSpec::new(priority, 100);
        spec.deadline = deadline;
        let id = sender.submit(now, spec).expect("ample capacity admits all");
        expected.push((priority, deadline.unwrap_or(Duration::MAX), n, id));
    }
    expected.sort();
    let mut order: Vec<MessageId> = Vec::new();
    while let Some(piece) = sender.poll_piece(now, 0).unwrap() {
        assert!(piece.is_first() && piece.is_last(), "one piece per message");
        order.push(piece.message);
    }
    let expected: Vec<MessageId> = expected.into_iter().map(|(_, _, _, id)| id).collect();
    assert_eq!(order, expected);
}

#[test]
fn a_more_important_message_preempts_one_in_progress_at_the_next_piece() {
    let now = Duration::ZERO;
    let mut sender = MessageScheduler::new(MessageConfig {
        piece_size: 1000,
        ..MessageConfig::default()
    })
    .unwrap();
    sender.set_channels(now, &[fast_channel()]).unwrap();
    let bulk = sender.submit(now, MessageSpec::new(5, 10_000)).unwrap();
    for _ in 0..3 {
        assert_eq!(sender.poll_piece(now, 0).unwrap().unwrap().message, bulk);
    }
    let urgent = sender.submit(now, MessageSpec::new(1, 2_000)).unwrap();
    let next: Vec<_> = (0..4)
        .map(|_| sender.poll_piece(now, 0).unwrap().unwrap())
        .collect();
    assert_eq!(
        next.iter().map(|p| p.message).collect::<Vec<_>>(),
        [urgent, urgent, bulk, bulk]
    );
    // The bulk message resumes where it stopped.
    assert_eq!(next[2].offset, 3000);
    assert_eq!(sender.remaining(bulk).unwrap(), 10_000 - 5 * 1000);
}

#[test]
fn a_message_of_100_mb_is_cut_into_contiguous_pieces_with_its_boundary() {
    let now = Duration::ZERO;
    let mut sender = MessageScheduler::new(MessageConfig::default()).unwrap();
    sender.set_channels(now, &[fast_channel()]).unwrap();
    let size = 100_000_000;
    let id = sender.submit(now, MessageSpec::new(3, size)).unwrap();
    let mut next = 0u64;
    let mut pieces = 0u64;
    while let Some(piece) = sender.poll_piece(now, 0).unwrap() {
        assert_eq!((piece.message, piece.offset, piece.total), (id, next, size));
        assert_eq!(piece.is_first(), next == 0);
        next += u64::from(piece.len);
        assert_eq!(piece.is_last(), next == size);
        pieces += 1;
    }
    assert_eq!(next, size);
    assert_eq!(pieces, size.div_ceil(1200));
    assert!(sender.status(id).unwrap().fully_sent);
}

#[test]
fn a_slow_channel_skips_pieces_that_would_land_late_and_carries_the_others() {
    let now = Duration::ZERO;
    let mut sender = MessageScheduler::new(MessageConfig {
        piece_size: 1000,
        ..MessageConfig::default()
    })
    .unwrap();
    let fast = fast_channel();
    let slow = ChannelEstimate {
        rate: 1e6,
        delay: Duration::from_millis(300),
        startup: None,
    };
    sender.set_channels(now, &[fast, slow]).unwrap();
    let urgent = sender
        .submit(
            now,
            MessageSpec::new(0, 1000).with_deadline(Duration::from_millis(100)),
        )
        .unwrap();
    let relaxed = sender.submit(now, MessageSpec::new(4, 1000)).unwrap();
    // The slow channel's piece would land after 300 ms: it takes the relaxed message.
    assert_eq!(sender.poll_piece(now, 1).unwrap().unwrap().message, relaxed);
    assert_eq!(sender.poll_piece(now, 1).unwrap(), None);
    assert_eq!(sender.poll_piece(now, 0).unwrap().unwrap().message, urgent);
}
