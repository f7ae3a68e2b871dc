//! mac1, mac2, cookie replies and per-source limits at the handshake gate.

use std::net::SocketAddr;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

use crate::*;

struct Setup {
    rng: StdRng,
    client: Keypair,
    responder: Responder,
    gate: HandshakeGate,
}

fn setup(seed: u64, limit: RateLimit) -> Setup {
    let mut rng = StdRng::seed_from_u64(seed);
    let client = Keypair::generate_with(&mut rng);
    let server = Keypair::generate_with(&mut rng);
    let gate = HandshakeGate::new(server.public(), limit, &mut rng);
    let responder = Responder::new(server, [*client.public()]);
    Setup {
        rng,
        client,
        responder,
        gate,
    }
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

const T0: Duration = Duration::from_secs(1);

#[test]
fn mac1_admits_only_initiations_made_for_this_key() {
    let mut s = setup(1, RateLimit::default());
    let src = addr("127.0.0.1:4000");
    let init = Initiator::new(&s.client, s.responder.public(), 7, 1, &mut s.rng);
    assert_eq!(
        s.gate.check(init.initiation(), src, T0, false),
        Ok(Admission::Admit)
    );
    // Random bytes of the right size and type.
    let mut junk = vec![0u8; INITIATION_LEN];
    s.rng.fill_bytes(&mut junk);
    junk[0] = TYPE_INITIATION;
    assert_eq!(s.gate.check(&junk, src, T0, false), Err(DropReason::BadMac));
    // A real initiation, addressed to another responder key.
    let other = Keypair::generate_with(&mut s.rng);
    let elsewhere = Initiator::new(&s.client, other.public(), 8, 2, &mut s.rng);
    assert_eq!(
        s.gate.check(elsewhere.initiation(), src, T0, false),
        Err(DropReason::BadMac)
    );
    // Any altered byte before the MACs breaks mac1.
    let mut altered = init.initiation().to_vec();
    altered[60] ^= 4;
    assert_eq!(
        s.gate.check(&altered, src, T0, false),
        Err(DropReason::BadMac)
    );
    // The old formats (v1: 109 bytes, v2: 141 bytes, both type 1) are named as such, before
    // any MAC is computed; a cut-short current initiation is merely truncated.
    let mut old = init.initiation().to_vec();
    old[0] = TYPE_LEGACY_INITIATION;
    for len in [LEGACY_INITIATION_LEN, INITIATION_LEN] {
        assert_eq!(
            s.gate.check(&old[..len], src, T0, false),
            Err(DropReason::LegacyHandshake)
        );
    }
    assert_eq!(
        s.gate
            .check(&init.initiation()[..LEGACY_INITIATION_LEN], src, T0, false),
        Err(DropReason::Truncated)
    );
    assert_eq!(s.gate.drop_counters().get(DropReason::BadMac), 3);
    assert_eq!(s.gate.drop_counters().get(DropReason::LegacyHandshake), 2);
}

#[test]
fn under_load_a_cookie_round_trip_proves_the_address() {
    let mut s = setup(2, RateLimit::default());
    let src = addr("127.0.0.1:4000");
    let mut init = Initiator::new(&s.client, s.responder.public(), 7, 1, &mut s.rng);
    let first = init.initiation().to_vec();

    // Under load, no mac2: a cookie reply instead of Diffie-Hellman.
    let Ok(Admission::Cookie(reply)) = s.gate.check(&first, src, T0, true) else {
        panic!("expected a cookie reply");
    };
    assert_eq!(reply.len(), COOKIE_REPLY_LEN);
    assert_eq!(
        classify(&reply),
        Ok(Packet::CookieReply { receiver_index: 7 })
    );
    assert_eq!(s.gate.drop_counters().get(DropReason::NeedCookie), 1);

    // A reply that was tampered with, or addressed to another index, is refused.
    let mut bad = reply.clone();
    bad[40] ^= 1;
    assert_eq!(init.read_cookie_reply(&bad), Err(DropReason::BadTag));
    let mut other_index = reply.clone();
    other_index[1] ^= 1;
    assert_eq!(
        init.read_cookie_reply(&other_index),
        Err(DropReason::WrongIndex)
    );
    assert!(!init.has_cookie());

    init.read_cookie_reply(&reply).unwrap();
    assert!(init.has_cookie());
    let retry = init.initiation().to_vec();
    assert_eq!(
        retry[..MAC2_OFFSET],
        first[..MAC2_OFFSET],
        "only mac2 changes"
    );
    assert_ne!(retry[MAC2_OFFSET..], first[MAC2_OFFSET..]);
    assert_eq!(s.gate.check(&retry, src, T0, true), Ok(Admission::Admit));

    // The cookie is bound to the address: from another port it does not count.
    let elsewhere = addr("127.0.0.1:4001");
    assert!(matches!(
        s.gate.check(&retry, elsewhere, T0, true),
        Ok(Admission::Cookie(_))
    ));

    // The responder accepts the retried initiation, and answers a copy from memory.
    let reply = s.responder.respond(&retry, 9, &mut s.rng).unwrap();
    assert!(matches!(reply, Reply::NewSession { .. }));
    assert!(matches!(
        s.responder.respond(&first, 9, &mut s.rng).unwrap(),
        Reply::Resend { .. }
    ));
    init.read_response(reply.response()).unwrap();
    // A cookie reply after the handshake finished is stale.
    let Ok(Admission::Cookie(late)) = s.gate.check(&first, src, T0, true) else {
        panic!("expected a cookie reply");
    };
    assert_eq!(init.read_cookie_reply(&late), Err(DropReason::Replayed));
}

#[test]
fn a_cookie_reply_for_another_initiation_is_useless() {
    let mut s = setup(3, RateLimit::default());
    let src = addr("127.0.0.1:4000");
    let a = Initiator::new(&s.client, s.responder.public(), 7, 1, &mut s.rng);
    let mut b = Initiator::new(&s.client, s.responder.public(), 7, 2, &mut s.rng);
    let Ok(Admission::Cookie(reply_a)) = s.gate.check(a.initiation(), src, T0, true) else {
        panic!("expected a cookie reply");
    };
    // Same index, but the reply is bound to a's mac1.
    assert_eq!(b.read_cookie_reply(&reply_a), Err(DropReason::BadTag));
}

#[test]
fn cookies_expire_with_the_secret() {
    let mut s = setup(4, RateLimit::default());
    let src = addr("10.9.8.7:5000");
    let mut init = Initiator::new(&s.client, s.responder.public(), 7, 1, &mut s.rng);
    let Ok(Admission::Cookie(reply)) = s.gate.check(init.initiation(), src, T0, true) else {
        panic!("expected a cookie reply");
    };
    init.read_cookie_reply(&reply).unwrap();
    let just_before = T0 + COOKIE_SECRET_LIFETIME - Duration::from_millis(1);
    assert_eq!(
        s.gate.check(init.initiation(), src, just_before, true),
        Ok(Admission::Admit)
    );
    let after = T0 + COOKIE_SECRET_LIFETIME;
    assert!(matches!(
        s.gate.check(init.initiation(), src, after, true),
        Ok(Admission::Cookie(_))
    ));
}

#[test]
fn initiations_are_limited_per_source_address() {
    let limit = RateLimit {
        per_second: 10.0,
        burst: 4.0,
        max_sources: 16,
    };
    let mut s = setup(5, limit);
    let init = Initiator::new(&s.client, s.responder.public(), 7, 1, &mut s.rng);
    let flood = addr("127.0.0.2:9");
    let admitted = (0..100)
        .filter(|_| s.gate.check(init.initiation(), flood, T0, false) == Ok(Admission::Admit))
        .count();
    assert_eq!(admitted, 4);
    assert_eq!(s.gate.drop_counters().get(DropReason::RateLimited), 96);
    // Another address (any port) is not affected; the flooding one recovers with time.
    let good = addr("127.0.0.1:9");
    assert_eq!(
        s.gate.check(init.initiation(), good, T0, false),
        Ok(Admission::Admit)
    );
    let later = T0 + Duration::from_millis(100);
    assert_eq!(
        s.gate.check(init.initiation(), flood, later, false),
        Ok(Admission::Admit)
    );
    assert_eq!(s.gate.tracked_sources(), 2);
}

#[test]
fn cookie_replies_are_limited_per_source_too() {
    let limit = RateLimit {
        per_second: 10.0,
        burst: 4.0,
        max_sources: 16,
    };
    let mut s = setup(7, limit);
    let init = Initiator::new(&s.client, s.responder.public(), 7, 1, &mut s.rng);
    let flood = addr("127.0.0.2:9");
    let mut cookies = 0;
    for _ in 0..100 {
        match s.gate.check(init.initiation(), flood, T0, true) {
            Ok(Admission::Cookie(_)) => cookies += 1,
            other => assert_eq!(other, Err(DropReason::RateLimited)),
        }
    }
    assert_eq!(cookies, 4, "one reply per token");
    assert_eq!(s.gate.drop_counters().get(DropReason::RateLimited), 96);
}

#[test]
fn rejected_key_is_reported_once() {
    let mut s = setup(6, RateLimit::default());
    let stranger = Keypair::generate_with(&mut s.rng);
    let init = Initiator::new(&stranger, s.responder.public(), 7, 1, &mut s.rng);
    assert_eq!(
        s.responder
            .respond(init.initiation(), 1, &mut s.rng)
            .unwrap_err(),
        DropReason::NotAllowed
    );
    assert_eq!(s.responder.take_rejected_key(), Some(*stranger.public()));
    assert_eq!(s.responder.take_rejected_key(), None);
}
