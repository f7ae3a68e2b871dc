//! Admission control: the worked example of `docs/messages.md`, replayed.

use std::time::Duration;

use horde_proto::message::{
    AdmissionPolicy, ChannelEstimate, MessageConfig, MessageError, MessageEvent, MessageScheduler,
    MessageSpec, Refusal,
};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Channel A: 100 000 B/s, 50 ms; channel B: 50 000 B/s, 200 ms; pieces of 1000 bytes.
fn example(policy: AdmissionPolicy) -> MessageScheduler {
    let mut sender = MessageScheduler::new(MessageConfig {
        piece_size: 1000,
        admission: policy,
        ..MessageConfig::default()
    })
    .unwrap();
    sender
        .set_channels(
            ms(0),
            &[
                ChannelEstimate {
                    rate: 100_000.0,
                    delay: ms(50),
                    startup: None,
                },
                ChannelEstimate {
                    rate: 50_000.0,
                    delay: ms(200),
                    startup: None,
                },
            ],
        )
        .unwrap();
    sender
}

#[test]
fn the_worked_example_refuses_exactly_the_message_that_breaks_an_admitted_deadline() {
    let mut sender = example(AdmissionPolicy::ProtectAll);
    let now = ms(0);
    // M1: 40 pieces by 500 ms (capacity 45 + 15 = 60). M2: 40 + 80 = 120 by 1 s (95 + 40).
    let m1 = sender
        .submit(now, MessageSpec::new(2, 40_000).with_deadline(ms(500)))
        .expect("M1 fits");
    let m2 = sender
        .submit(now, MessageSpec::new(2, 80_000).with_deadline(ms(1000)))
        .expect("M2 fits");
    // M3 at level 1 goes first: M1 would need 25 + 40 = 65 > 60.
    let m3 = sender.submit(now, MessageSpec::new(1, 25_000).with_deadline(ms(1000)));
    assert_eq!(
        m3,
        Err(MessageError::Refused(Refusal::Endangers {
            endangered: m1,
            deadline: ms(500),
            needed: 65,
            capacity: 60,
        }))
    );
    // 20 pieces would spare M1 (60 <= 60) but break M2 (140 > 135).
    let m3 = sender.submit(now, MessageSpec::new(1, 20_000).with_deadline(ms(1000)));
    assert!(matches!(
        m3,
        Err(MessageError::Refused(Refusal::Endangers { endangered, needed: 140, capacity: 135, .. }))
            if endangered == m2
    ));
    // 15 pieces fit exactly: M1 needs 55 <= 60, M2 needs 135 <= 135.
    let m3 = sender
        .submit(now, MessageSpec::new(1, 15_000).with_deadline(ms(1000)))
        .expect("M3' fits");
    // M4 at level 3 with 300 ms: 140 pieces before it, 30 can land.
    assert_eq!(
        sender.submit(now, MessageSpec::new(3, 5_000).with_deadline(ms(300))),
        Err(MessageError::Refused(Refusal::Unreachable {
            deadline: ms(300),
            needed: 140,
            capacity: 30,
        }))
    );
    // A message without deadline at the lowest level endangers nobody.
    sender
        .submit(now, MessageSpec::new(7, 1_000_000))
        .expect("no deadline behind all");
    assert!(sender.poll_event().is_none(), "nothing fired early");

    // Channel B fails: M1 needs 55 > 45 and fires early; M2 still fits (15 + 80 <= 95).
    sender
        .set_channels(
            now,
            &[ChannelEstimate {
                rate: 100_000.0,
                delay: ms(50),
                startup: None,
            }],
        )
        .unwrap();
    let early: Vec<_> = std::iter::from_fn(|| sender.poll_event()).collect();
    assert_eq!(
        early,
        [MessageEvent::Early {
            id: m1,
            at: now,
            deadline: ms(500),
            remaining: 40_000,
        }]
    );
    assert!(!sender.status(m2).unwrap().suspended);
    assert!(!sender.status(m3).unwrap().suspended);
}

#[test]
fn protecting_only_the_same_level_lets_a_more_important_message_push_others_early() {
    let mut sender = example(AdmissionPolicy::ProtectSameLevel);
    let now = ms(0);
    let m1 = sender
        .submit(now, MessageSpec::new(2, 40_000).with_deadline(ms(500)))
        .unwrap();
    sender
        .submit(now, MessageSpec::new(1, 25_000).with_deadline(ms(1000)))
        .expect("level 2 deadlines are not protected from level 1");
    sender.handle_timeout(now);
    assert!(matches!(
        sender.poll_event(),
        Some(MessageEvent::Early { id, .. }) if id == m1
    ));
}

#[test]
fn capacity_that_grows_admits_the_message_refused_before() {
    let mut sender = example(AdmissionPolicy::ProtectAll);
    let now = ms(0);
    sender
        .submit(now, MessageSpec::new(2, 40_000).with_deadline(ms(500)))
        .unwrap();
    let big = MessageSpec::new(1, 25_000).with_deadline(ms(1000));
    assert!(sender.submit(now, big).is_err());
    // Channel A doubles: 95 + 45 pieces... by 500 ms there are 90 + 15 = 105 >= 65.
    sender
        .set_channels(
            now,
            &[
                ChannelEstimate {
                    rate: 200_000.0,
                    delay: ms(50),
                    startup: None,
                },
                ChannelEstimate {
                    rate: 50_000.0,
                    delay: ms(200),
                    startup: None,
                },
            ],
        )
        .unwrap();
    sender.submit(now, big).expect("now it fits");
}

#[test]
fn queues_share_capacity_by_weight_and_top_level() {
    // One channel of 100 pieces/s, no delay: 100 pieces by 1 s.
    let mut sender = MessageScheduler::new(MessageConfig {
        piece_size: 1000,
        ..MessageConfig::default()
    })
    .unwrap();
    let now = ms(0);
    sender
        .set_channels(
            now,
            &[ChannelEstimate {
                rate: 100_000.0,
                delay: ms(0),
                startup: None,
            }],
        )
        .unwrap();
    let other = sender.create_queue(1).unwrap();
    // Queue 1 busy at level 0 (weight 1 × 8); queue 0 then gets 1/(8 + 1) at level 7.
    sender
        .submit(now, MessageSpec::new(0, 10_000_000).on_queue(other))
        .unwrap();
    let refused = sender.submit(now, MessageSpec::new(7, 12_000).with_deadline(ms(1000)));
    assert!(matches!(
        refused,
        Err(MessageError::Refused(Refusal::Unreachable {
            needed: 12,
            capacity: 11,
            ..
        }))
    ));
    sender
        .submit(now, MessageSpec::new(7, 11_000).with_deadline(ms(1000)))
        .expect("11 of 100 pieces are its share");
    // Pieces alternate by fair share: queue 0 gets about 1 in 9.
    let mine = (0..90)
        .filter(|_| sender.poll_piece(now, 0).unwrap().unwrap().queue.0 == 0)
        .count();
    assert!((9..=11).contains(&mine), "queue 0 got {mine} of 90 slots");
}

#[test]
fn busy_plain_streams_take_their_weight_of_the_capacity() {
    // 100 pieces by 1 s; a queue at level 0 weighs 8, streams 8 by default: half each.
    let mut sender = MessageScheduler::new(MessageConfig {
        piece_size: 1000,
        ..MessageConfig::default()
    })
    .unwrap();
    let now = ms(0);
    sender
        .set_channels(
            now,
            &[ChannelEstimate {
                rate: 100_000.0,
                delay: ms(0),
                startup: None,
            }],
        )
        .unwrap();
    let admitted = sender
        .submit(now, MessageSpec::new(0, 80_000).with_deadline(ms(1000)))
        .unwrap();
    sender.set_streams_active(now, true);
    assert!(matches!(
        sender.poll_event(),
        Some(MessageEvent::Early { id, .. }) if id == admitted
    ));
    assert!(matches!(
        sender.submit(now, MessageSpec::new(0, 51_000).with_deadline(ms(1000))),
        Err(MessageError::Refused(Refusal::Unreachable {
            needed: 51,
            capacity: 50,
            ..
        }))
    ));
    sender
        .submit(now, MessageSpec::new(0, 50_000).with_deadline(ms(1000)))
        .expect("half of 100 pieces");
}
