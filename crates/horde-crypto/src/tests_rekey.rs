//! Key rotation on time and on message count, across reordering, with nothing lost.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::*;

fn pair(seed: u64) -> (Session, Session) {
    let mut rng = StdRng::seed_from_u64(seed);
    let client = Keypair::generate_with(&mut rng);
    let server = Keypair::generate_with(&mut rng);
    let mut responder = Responder::new(server, [*client.public()]);
    let mut init = Initiator::new(&client, responder.public(), 1, 1, &mut rng);
    let reply = responder.respond(init.initiation(), 2, &mut rng).unwrap();
    let c = init.read_response(reply.response()).unwrap();
    let Reply::NewSession { session, .. } = reply else {
        panic!("expected a new session")
    };
    (c, *session)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_continuous_stream_loses_nothing_across_time_rekeys() {
    let (mut client, mut server) = pair(1);
    let policy = RekeyPolicy::every(ms(100));
    client.set_rekey_policy(policy);
    server.set_rekey_policy(policy);
    let mut rng = StdRng::seed_from_u64(9);
    let mut delivered = 0u32;
    let mut phases = [0u32; 2];
    // 2 s of traffic, one datagram per millisecond on each of 3 channels, delivered in
    // batches of 20 shuffled (so datagrams sealed before a rotation arrive after it).
    let mut batch = Vec::new();
    for t in 0..2000u64 {
        client.tick(ms(t));
        server.tick(ms(t));
        for ch in 0..3u8 {
            let mut d = Vec::new();
            client.seal(ch, &t.to_le_bytes(), &mut d).unwrap();
            phases[usize::from(d[0] >> 7)] += 1;
            batch.push((ch, t, d));
        }
        if batch.len() >= 60 {
            batch.shuffle(&mut rng);
            for (ch, t, d) in batch.drain(..) {
                let mut out = Vec::new();
                let (got_ch, plain) = server.open(&d, &mut out).unwrap();
                assert_eq!((got_ch, plain), (ch, &t.to_le_bytes()[..]));
                delivered += 1;
            }
        }
    }
    assert_eq!(delivered, 6000);
    assert_eq!(server.drop_counters().total(), 0);
    // One rotation per 100 ms.
    let (sent, _) = client.rekeys();
    let (_, received) = server.rekeys();
    assert!((18..=20).contains(&sent), "{sent} rotations");
    assert_eq!(received, sent);
    assert!(phases[0] > 2000 && phases[1] > 2000, "{phases:?}");
    // The reverse direction rotates on its own schedule and works too.
    server.tick(ms(2500));
    let mut d = Vec::new();
    server.seal(0, b"back", &mut d).unwrap();
    let mut out = Vec::new();
    assert_eq!(client.open(&d, &mut out).unwrap().1, b"back");
}

#[test]
fn keys_rotate_on_message_count() {
    let (mut client, mut server) = pair(2);
    let policy = RekeyPolicy {
        rekey_after_messages: 50,
        ..RekeyPolicy::default()
    };
    client.set_rekey_policy(policy);
    let mut seen_phase = Vec::new();
    for i in 0..500u32 {
        let mut d = Vec::new();
        client.seal(1, &i.to_le_bytes(), &mut d).unwrap();
        seen_phase.push(d[0] >> 7);
        let mut out = Vec::new();
        assert_eq!(server.open(&d, &mut out).unwrap().1, i.to_le_bytes());
    }
    assert_eq!(client.rekeys().0, 9);
    assert_eq!(server.rekeys().1, 9);
    // The phase flips every 50 datagrams.
    assert_eq!(seen_phase[49], 0);
    assert_eq!(seen_phase[50], 1);
    assert_eq!(seen_phase[100], 0);
}

#[test]
fn old_generations_are_forgotten_and_stale_keys_refused() {
    let (mut client, mut server) = pair(3);
    let policy = RekeyPolicy::every(ms(100));
    client.set_rekey_policy(policy);
    server.set_rekey_policy(policy);
    let seal_at = |s: &mut Session, t: u64| {
        s.tick(ms(t));
        let mut d = Vec::new();
        s.seal(0, b"x", &mut d).unwrap();
        d
    };
    let mut out = Vec::new();
    let gen0 = seal_at(&mut client, 0);
    let gen0_late = seal_at(&mut client, 0);
    let gen1 = seal_at(&mut client, 100);
    let gen2 = seal_at(&mut client, 200);
    assert!(server.open(&gen0, &mut out).is_ok());
    assert!(
        server.open(&gen2, &mut out).is_err(),
        "skipping a generation"
    );
    assert!(server.open(&gen1, &mut out).is_ok());
    assert!(server.open(&gen2, &mut out).is_ok());
    // Generation 0 is two rotations back: its key is gone, though the counter is fresh.
    assert_eq!(server.open(&gen0_late, &mut out), Err(DropReason::BadTag));

    // A peer that stops rotating (it is never ticked) is refused after reject_after_time.
    let (mut lazy, mut strict) = pair(4);
    strict.set_rekey_policy(policy);
    let d = seal_at(&mut lazy, 0);
    strict.tick(ms(0));
    assert!(strict.open(&d, &mut out).is_ok());
    let mut d = Vec::new();
    lazy.seal(0, b"y", &mut d).unwrap();
    strict.tick(ms(151));
    assert_eq!(strict.open(&d, &mut out), Err(DropReason::KeyExpired));
    assert_eq!(strict.drop_counters().get(DropReason::KeyExpired), 1);
}

#[test]
fn key_status_reports_generation_age_use_and_the_next_rotation() {
    let (mut client, mut server) = pair(5);
    let policy = RekeyPolicy {
        rekey_after_messages: 10,
        ..RekeyPolicy::every(ms(100))
    };
    client.set_rekey_policy(policy);
    let fresh = client.key_status();
    assert_eq!((fresh.send_generation, fresh.send_key_messages), (0, 0));
    assert_eq!((fresh.send_key_age, fresh.rotate_in), (None, None));
    let mut out = Vec::new();
    for t in [0, 30, 60] {
        client.tick(ms(t));
        let mut d = Vec::new();
        client.seal(0, b"x", &mut d).unwrap();
        server.open(&d, &mut out).unwrap();
    }
    let s = client.key_status();
    assert_eq!(s.send_generation, 0);
    assert_eq!(s.send_key_messages, 3);
    assert_eq!(s.send_key_age, Some(ms(60)));
    assert_eq!(s.rotate_in, Some(ms(40)));
    assert_eq!(s.rotate_after_messages, 7);
    // Past the age limit the next seal rotates: a new generation, one datagram under it.
    client.tick(ms(100));
    let mut d = Vec::new();
    client.seal(0, b"y", &mut d).unwrap();
    server.open(&d, &mut out).unwrap();
    let s = client.key_status();
    assert_eq!((s.send_generation, s.send_key_messages), (1, 1));
    assert_eq!(s.send_key_age, Some(ms(0)));
    assert_eq!(server.key_status().recv_generation, 1);
}

#[test]
fn datagrams_prepared_in_order_and_sealed_on_another_thread_open_across_rekeys() {
    let (mut client, mut server) = pair(3);
    let policy = RekeyPolicy::every(ms(10));
    client.set_rekey_policy(policy);
    server.set_rekey_policy(policy);
    // The same datagram, sealed at once and prepared then sealed later, is the same bytes.
    let (mut twin, _) = pair(3);
    let (mut whole, mut halves) = (Vec::new(), Vec::new());
    twin.seal_append(0, b"same", &mut whole).unwrap();
    client.prepare_append(0, b"same", &mut halves).unwrap();
    client.send_key().seal_prepared(&mut halves);
    assert_eq!(whole, halves);
    assert_eq!(server.open(&halves, &mut Vec::new()).unwrap().1, b"same");

    // Prepared on this thread with the key of the moment, sealed on another after the
    // session has rotated past that key.
    let mut prepared = Vec::new();
    for t in 1..100u64 {
        client.tick(ms(t));
        let mut d = Vec::new();
        client.prepare_append(1, &t.to_le_bytes(), &mut d).unwrap();
        prepared.push((t, client.send_key(), d));
    }
    assert!(client.rekeys().0 >= 9, "{:?}", client.rekeys());
    let sealed = std::thread::spawn(move || {
        prepared
            .into_iter()
            .map(|(t, key, mut d)| {
                key.seal_prepared(&mut d);
                (t, d)
            })
            .collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    for (t, d) in sealed {
        server.tick(ms(t));
        let mut out = Vec::new();
        assert_eq!(
            server.open(&d, &mut out).unwrap(),
            (1, &t.to_le_bytes()[..])
        );
    }
}
