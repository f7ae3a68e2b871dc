//! A deadline that can no longer be met fires early, before the deadline, when the
//! channels slow down; the application's answer decides the fate.

use std::time::Duration;

use horde_proto::message::{Fate, MessageConfig, MessageEvent, MessageScheduler, MessageSpec};

use crate::model::{pattern_byte, FakeChannel, World};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Two channels of 100 000 B/s and 20 ms; pieces of 1000 bytes: 200 pieces per second.
fn world() -> World {
    let sender = MessageScheduler::new(MessageConfig {
        piece_size: 1000,
        ..MessageConfig::default()
    })
    .unwrap();
    World::new(
        sender,
        vec![
            FakeChannel::new(100_000.0, ms(20)),
            FakeChannel::new(100_000.0, ms(20)),
        ],
    )
}

#[test]
fn halving_the_rate_fires_early_before_the_deadline_and_cancel_frees_the_receiver() {
    let mut w = world();
    // 150 pieces by 1 s: 0.75 s of both channels, admitted.
    let urgent = w
        .sender
        .submit(w.now, MessageSpec::new(0, 150_000).with_deadline(ms(1000)))
        .unwrap();
    let bulk = w.sender.submit(w.now, MessageSpec::new(6, 30_000)).unwrap();
    w.run_until(ms(300));
    assert!(w.fate_of(urgent).is_empty(), "on time so far");
    let held = w.receiver.held_bytes();
    assert!(held > 0, "the receiver holds part of the urgent message");

    // Both channels halve: ~90 pieces left at 100 pieces/s cannot land by 1 s.
    w.set_rate(0, 50_000.0);
    w.set_rate(1, 50_000.0);
    let events = w.fate_of(urgent);
    let [MessageEvent::Early {
        at,
        deadline,
        remaining,
        ..
    }] = events[..]
    else {
        panic!("expected one early event, got {events:?}");
    };
    assert!(at < deadline, "fired at {at:?}, before {deadline:?}");
    assert_eq!(at, ms(300));
    assert!(remaining > 0 && remaining < 150_000);
    assert!(w.sender.status(urgent).unwrap().suspended);

    // The application cancels: the fate is `early`, and the receiver frees the message.
    w.sender.cancel(w.now, urgent).unwrap();
    w.run_until(ms(2000));
    assert!(matches!(
        w.fate_of(urgent)[..],
        [
            MessageEvent::Early { .. },
            MessageEvent::Finished {
                fate: Fate::Early,
                ..
            }
        ]
    ));
    assert_eq!(w.receiver.held_bytes(), 0);
    assert_eq!(w.receiver.partial_messages(), 0);
    // The bulk message had the channels to itself and arrived whole.
    assert!(matches!(
        w.fate_of(bulk)[..],
        [MessageEvent::Finished {
            fate: Fate::Delivered,
            ..
        }]
    ));
    let (_, message) = w.received.iter().find(|(_, m)| m.id == bulk).unwrap();
    assert_eq!(message.payload.len(), 30_000);
    assert!(message
        .payload
        .iter()
        .enumerate()
        .all(|(i, b)| *b == pattern_byte(i as u64)));
}

#[test]
fn after_an_early_callback_the_application_may_defer_or_continue() {
    let mut w = world();
    let deferred = w
        .sender
        .submit(w.now, MessageSpec::new(1, 100_000).with_deadline(ms(700)))
        .unwrap();
    let continued = w
        .sender
        .submit(w.now, MessageSpec::new(2, 40_000).with_deadline(ms(900)))
        .unwrap();
    w.run_until(ms(100));
    w.set_rate(0, 20_000.0);
    w.set_rate(1, 20_000.0);
    // 40 pieces/s now: neither fits (the second needs 40 pieces, 30 can land by 900 ms).
    for id in [deferred, continued] {
        assert!(
            matches!(w.fate_of(id)[..], [MessageEvent::Early { .. }]),
            "{id} fired early"
        );
    }
    // Defer: a new deadline of 5 s; continue: keep sending, whatever the estimate says.
    w.sender.defer(w.now, deferred, Some(ms(5000))).unwrap();
    w.sender.resume(continued).unwrap();
    w.run_until(ms(6000));
    assert!(matches!(
        w.fate_of(deferred)[..],
        [MessageEvent::Early { .. }, MessageEvent::Finished { fate: Fate::Delivered, at, .. }]
            if at < ms(5000)
    ));
    // The continued message waits behind the more important one and its deadline passes:
    // the callback had fired, so its fate is `early`, at the deadline.
    assert!(matches!(
        w.fate_of(continued)[..],
        [MessageEvent::Early { .. }, MessageEvent::Finished { fate: Fate::Early, at, .. }]
            if at == ms(900)
    ));
}

#[test]
fn a_message_suspended_past_its_deadline_expires() {
    let mut w = world();
    let id = w
        .sender
        .submit(w.now, MessageSpec::new(3, 50_000).with_deadline(ms(400)))
        .unwrap();
    w.sender.suspend(id).unwrap();
    w.run_until(ms(1000));
    assert!(matches!(
        w.fate_of(id)[..],
        [MessageEvent::Finished { fate: Fate::Expired, at, .. }] if at == ms(400)
    ));
    assert_eq!(w.sender.live_messages(), 0);
}

#[test]
fn after_an_early_callback_reprioritising_lets_the_message_through() {
    let mut w = world();
    let blocker = w.sender.submit(w.now, MessageSpec::new(1, 60_000)).unwrap();
    // 60 + 30 pieces by 500 ms: 96 can land.
    let target = w
        .sender
        .submit(w.now, MessageSpec::new(3, 30_000).with_deadline(ms(500)))
        .unwrap();
    w.set_rate(0, 50_000.0);
    w.set_rate(1, 50_000.0);
    // Now 48 can land by 500 ms: behind the blocker it cannot make it.
    assert!(matches!(
        w.fate_of(target)[..],
        [MessageEvent::Early { .. }]
    ));
    w.sender.reprioritise(target, 0).unwrap();
    assert!(!w.sender.status(target).unwrap().suspended);
    w.run_until(ms(3000));
    assert!(matches!(
        w.fate_of(target)[..],
        [MessageEvent::Early { .. }, MessageEvent::Finished { fate: Fate::Delivered, at, .. }]
            if at < ms(500)
    ));
    assert!(matches!(
        w.fate_of(blocker)[..],
        [MessageEvent::Finished {
            fate: Fate::Delivered,
            ..
        }]
    ));
}

/// Pieces of 1000 bytes over one channel of 100 000 B/s and 20 ms.
fn one_channel_scheduler() -> MessageScheduler {
    let mut s = MessageScheduler::new(MessageConfig {
        piece_size: 1000,
        ..MessageConfig::default()
    })
    .unwrap();
    s.set_channels(
        ms(0),
        &[horde_proto::message::ChannelEstimate {
            rate: 100_000.0,
            delay: ms(20),
            startup: None,
        }],
    )
    .unwrap();
    s
}

#[test]
fn pieces_already_out_that_will_land_late_fire_early_before_the_deadline() {
    let mut s = one_channel_scheduler();
    let sent = s
        .submit(ms(0), MessageSpec::new(0, 2_000).with_deadline(ms(300)))
        .unwrap();
    let partly = s
        .submit(ms(0), MessageSpec::new(1, 5_000).with_deadline(ms(400)))
        .unwrap();
    for _ in 0..3 {
        s.poll_piece(ms(0), 0).unwrap().unwrap();
    }
    assert!(s.status(sent).unwrap().fully_sent);
    assert_eq!(s.remaining(partly).unwrap(), 4_000);

    // The queues the pieces wait in are in time: nothing happens.
    s.expect_arrival(ms(50), sent, ms(300)).unwrap();
    s.expect_arrival(ms(50), partly, ms(200)).unwrap();
    assert_eq!(s.poll_event(), None);

    // They grew: both fire early, now; the one with pieces left is also suspended.
    s.expect_arrival(ms(60), sent, ms(301)).unwrap();
    s.expect_arrival(ms(60), partly, ms(450)).unwrap();
    assert_eq!(
        s.poll_event(),
        Some(MessageEvent::Early {
            id: sent,
            at: ms(60),
            deadline: ms(300),
            remaining: 0
        })
    );
    assert_eq!(
        s.poll_event(),
        Some(MessageEvent::Early {
            id: partly,
            at: ms(60),
            deadline: ms(400),
            remaining: 4_000
        })
    );
    assert!(s.status(partly).unwrap().suspended);
    assert_eq!(s.poll_piece(ms(60), 0).unwrap(), None);
    // Once per deadline.
    s.expect_arrival(ms(70), sent, ms(900)).unwrap();
    assert_eq!(s.poll_event(), None);

    // Continue the sent one: it may still be delivered. Cancel the other: `early`, and the
    // receiver is told to drop its piece.
    s.resume(sent).unwrap();
    s.expect_arrival(ms(80), sent, ms(900)).unwrap();
    assert_eq!(s.poll_event(), None);
    s.confirm_delivered(ms(320), sent).unwrap();
    s.cancel(ms(320), partly).unwrap();
    let fates: Vec<_> = std::iter::from_fn(|| s.poll_event())
        .map(|e| match e {
            MessageEvent::Finished { id, fate, .. } => (id, fate),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(fates, [(sent, Fate::Delivered), (partly, Fate::Early)]);
    assert_eq!(
        s.poll_control(),
        Some(horde_proto::message::ControlItem::Cancel(partly))
    );
    assert_eq!(
        s.expect_arrival(ms(330), sent, ms(331)),
        Err(horde_proto::message::MessageError::AlreadyDelivered(sent))
    );
}

#[test]
fn a_piece_that_lands_after_the_deadline_fires_early_before_its_message_is_confirmed() {
    let mut s = one_channel_scheduler();
    let late = s
        .submit(ms(0), MessageSpec::new(0, 1_000).with_deadline(ms(100)))
        .unwrap();
    let on_time = s
        .submit(ms(0), MessageSpec::new(0, 1_000).with_deadline(ms(100)))
        .unwrap();
    for _ in 0..2 {
        s.poll_piece(ms(0), 0).unwrap().unwrap();
    }
    // Forecast in time before the deadline; past it, one piece is known to land late
    // (lost and sent again, or acked with a landing after the deadline): the callback
    // fires then, once, before the delivery is confirmed. The other landed in time.
    s.expect_arrival(ms(90), late, ms(100)).unwrap();
    s.expect_arrival(ms(130), late, ms(160)).unwrap();
    s.expect_arrival(ms(140), late, ms(170)).unwrap();
    s.expect_arrival(ms(130), on_time, ms(99)).unwrap();
    s.confirm_delivered(ms(170), late).unwrap();
    s.confirm_delivered(ms(170), on_time).unwrap();
    let events: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
    assert_eq!(
        events,
        [
            MessageEvent::Early {
                id: late,
                at: ms(130),
                deadline: ms(100),
                remaining: 0
            },
            MessageEvent::Finished {
                id: late,
                fate: Fate::Delivered,
                at: ms(170),
                submitted: ms(0)
            },
            MessageEvent::Finished {
                id: on_time,
                fate: Fate::Delivered,
                at: ms(170),
                submitted: ms(0)
            },
        ]
    );
}
