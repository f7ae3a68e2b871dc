//! Before a channel's rate is measured: its controller's start-up rate counts as doubling
//! each round trip, so a large first message that the path carries in time is admitted,
//! one that no start-up could carry is refused, and one that the path turns out too slow
//! for fires early, before its deadline, once the start-up ends.

use std::time::Duration;

use horde_proto::message::{
    Fate, MessageConfig, MessageError, MessageEvent, MessageScheduler, MessageSpec, Refusal,
    Startup, STARTUP_ROUNDS,
};

use crate::model::{FakeChannel, World};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// One channel of 20 ms each way whose controller starts at 100 000 B/s (a 4 kB window
/// over its 40 ms round trip) and doubles each round trip; 1000-byte pieces.
fn starting_world() -> World {
    let sender = MessageScheduler::new(MessageConfig {
        piece_size: 1000,
        ..MessageConfig::default()
    })
    .unwrap();
    let mut channel = FakeChannel::new(100_000.0, ms(20));
    channel.startup = Some(Startup::new(ms(40), STARTUP_ROUNDS));
    World::new(sender, vec![channel])
}

/// Runs the start-up: the rate doubles every round trip until it meets `capacity`, where
/// the start-up ends and the rate is the path's. Then runs on until `until`.
fn ramp_to(w: &mut World, capacity: f64, until: Duration) {
    while let Some(startup) = w.channels[0].startup {
        let next = w.now + ms(40);
        w.run_until(next);
        let doubled = 2.0 * w.channels[0].rate;
        if doubled >= capacity {
            w.channels[0].rate = capacity;
            w.channels[0].startup = None;
        } else {
            w.channels[0].rate = doubled;
            w.channels[0].startup = (startup.rounds_left > 1)
                .then(|| Startup::new(startup.round_trip, startup.rounds_left - 1));
        }
        w.publish_estimates();
    }
    w.run_until(until);
}

#[test]
fn a_large_first_message_is_admitted_at_start_up_and_arrives_by_its_deadline() {
    let mut w = starting_world();
    // 1000 pieces by 2 s: the start rate held flat lands 198, the path (1 MB/s) all of
    // them in about 1.2 s once the start-up has grown to it.
    let spec = MessageSpec::new(0, 1_000_000).with_deadline(ms(2000));
    let mut flat = starting_world();
    flat.channels[0].startup = None;
    flat.publish_estimates();
    assert!(matches!(
        flat.sender.submit(flat.now, spec),
        Err(MessageError::Refused(Refusal::Unreachable {
            capacity: 198,
            ..
        }))
    ));

    let id = w.sender.submit(w.now, spec).unwrap();
    ramp_to(&mut w, 1_000_000.0, ms(2000));
    let events = w.fate_of(id);
    let [MessageEvent::Finished {
        fate: Fate::Delivered,
        at,
        ..
    }] = events[..]
    else {
        panic!("expected delivery alone, got {events:?}");
    };
    assert!(at <= ms(2000), "delivered at {at:?}");
}

#[test]
fn a_message_no_start_up_could_carry_is_refused() {
    let mut w = starting_world();
    // By 200 ms the start-up lands 100 pieces · 0.04 / ln 2 · (2^4.5 − 1) ≈ 124.
    let refused = w
        .sender
        .submit(w.now, MessageSpec::new(0, 200_000).with_deadline(ms(200)));
    assert!(
        matches!(
            refused,
            Err(MessageError::Refused(Refusal::Unreachable {
                needed: 200,
                capacity: 124,
                ..
            }))
        ),
        "{refused:?}"
    );
    let admitted = w
        .sender
        .submit(w.now, MessageSpec::new(0, 120_000).with_deadline(ms(200)));
    assert!(admitted.is_ok(), "{admitted:?}");
}

#[test]
fn a_start_up_that_meets_a_slow_path_fires_early_before_the_deadline() {
    let mut w = starting_world();
    // Admitted on the start-up's doubling; the path carries only 200 000 B/s, which the
    // start-up meets after one round trip: 1 MB then needs 5 s.
    let id = w
        .sender
        .submit(
            w.now,
            MessageSpec::new(0, 1_000_000).with_deadline(ms(2000)),
        )
        .unwrap();
    ramp_to(&mut w, 200_000.0, ms(100));
    let events = w.fate_of(id);
    let [MessageEvent::Early { at, deadline, .. }] = events[..] else {
        panic!("expected one early event, got {events:?}");
    };
    assert_eq!(at, ms(40), "fired when the start-up ended");
    assert!(at < deadline);
    w.sender.cancel(w.now, id).unwrap();
    w.drain_events();
    assert!(matches!(
        w.fate_of(id)[..],
        [
            MessageEvent::Early { .. },
            MessageEvent::Finished {
                fate: Fate::Early,
                ..
            }
        ]
    ));
}
