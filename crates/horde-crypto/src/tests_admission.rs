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
    let (mut admitted, mut cookies) = (0, 0);
    for _ in 0..100 {
        match s.gate.check(init.initiation(), flood, T0, false) {
            Ok(Admission::Admit) => admitted += 1,
            Ok(Admission::Cookie(_)) => cookies += 1,
            Err(e) => assert_eq!(e, DropReason::RateLimited),
        }
    }
    // The address's burst, then cookie replies from the flow's own bucket.
    assert_eq!((admitted, cookies), (4, 4));
    assert_eq!(s.gate.drop_counters().get(DropReason::RateLimited), 92);
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
    // Two addresses, and one flow that was sent cookie replies.
    assert_eq!(s.gate.tracked_sources(), 3);
}

/// A neighbour behind the same address (a carrier-grade NAT) floods from many ports with
/// initiations that pass mac1 and carry no cookie, not even under load: it empties the
/// address's bucket, but a newcomer on another port gets a cookie reply of its own and is
/// admitted with it one round trip later.
#[test]
fn a_neighbour_on_the_same_address_cannot_starve_another_port() {
    let limit = RateLimit {
        per_second: 20.0,
        burst: 10.0,
        max_sources: 64,
    };
    let mut s = setup(8, limit);
    let stranger = Keypair::generate_with(&mut s.rng);
    let junk = Initiator::new(&stranger, s.responder.public(), 3, 1, &mut s.rng);
    for i in 0..10_000u32 {
        let port = 20_000 + (i % 500) as u16;
        let src = addr(&format!("100.64.0.1:{port}"));
        let _ = s.gate.check(junk.initiation(), src, T0, false);
    }
    assert!(s.gate.tracked_sources() <= 2 * 64, "bounded tables");
    let me = addr("100.64.0.1:40000");
    let mut init = Initiator::new(&s.client, s.responder.public(), 7, 1, &mut s.rng);
    let Ok(Admission::Cookie(reply)) = s.gate.check(init.initiation(), me, T0, false) else {
        panic!("the newcomer gets a cookie reply, not a refusal");
    };
    init.read_cookie_reply(&reply).unwrap();
    assert_eq!(
        s.gate.check(init.initiation(), me, T0, false),
        Ok(Admission::Admit)
    );
    // A proven flow of the neighbour's, flooding with its cookie, empties only its own bucket.
    let neighbour = addr("100.64.0.1:30001");
    let mut proven = Initiator::new(&stranger, s.responder.public(), 4, 2, &mut s.rng);
    let Ok(Admission::Cookie(reply)) = s.gate.check(proven.initiation(), neighbour, T0, true)
    else {
        panic!("a cookie reply for the neighbour's flow");
    };
    proven.read_cookie_reply(&reply).unwrap();
    for _ in 0..1000 {
        let _ = s.gate.check(proven.initiation(), neighbour, T0, true);
    }
    assert_eq!(
        s.gate.check(proven.initiation(), neighbour, T0, true),
        Err(DropReason::RateLimited)
    );
    let mut again = Initiator::new(&s.client, s.responder.public(), 8, 2, &mut s.rng);
    let Ok(Admission::Cookie(reply)) = s.gate.check(again.initiation(), me, T0, true) else {
        panic!("a cookie reply");
    };
    again.read_cookie_reply(&reply).unwrap();
    assert_eq!(
        s.gate.check(again.initiation(), me, T0, true),
        Ok(Admission::Admit)
    );
}

/// The cookie proves an address *and port*: it is refused from another port of the same
/// address, and from the same port of another address.
#[test]
fn a_cookie_is_bound_to_address_and_port() {
    let mut s = setup(9, RateLimit::default());
    let src = addr("100.64.0.1:4000");
    let mut init = Initiator::new(&s.client, s.responder.public(), 7, 1, &mut s.rng);
    let Ok(Admission::Cookie(reply)) = s.gate.check(init.initiation(), src, T0, true) else {
        panic!("expected a cookie reply");
    };
    init.read_cookie_reply(&reply).unwrap();
    assert_eq!(
        s.gate.check(init.initiation(), src, T0, true),
        Ok(Admission::Admit)
    );
    for other in ["100.64.0.1:4001", "100.64.0.2:4000", "[::1]:4000"] {
        assert!(
            matches!(
                s.gate.check(init.initiation(), addr(other), T0, true),
                Ok(Admission::Cookie(_))
            ),
            "the cookie for {src} must not prove {other}"
        );
    }
}

/// A replayed initiation the responder has decrypted before is recognised by a lookup:
/// the caller refuses it before the gate, so it takes no token, and costs no
/// Diffie-Hellman.
#[test]
fn replays_are_recognised_without_tokens_or_diffie_hellman() {
    let limit = RateLimit {
        per_second: 20.0,
        burst: 2.0,
        max_sources: 16,
    };
    let mut s = setup(10, limit);
    let old = Initiator::new(&s.client, s.responder.public(), 7, 1, &mut s.rng);
    let mut current = Initiator::new(&s.client, s.responder.public(), 8, 2, &mut s.rng);
    let attacker = addr("100.64.0.1:5000");
    // Unknown yet: the first copy goes through the gate and the Diffie-Hellman.
    assert!(s.responder.recognise(old.initiation()).is_none());
    assert_eq!(
        s.gate.check(old.initiation(), attacker, T0, false),
        Ok(Admission::Admit)
    );
    s.responder
        .respond(old.initiation(), 1, &mut s.rng)
        .unwrap();
    let reply = s
        .responder
        .respond(current.initiation(), 2, &mut s.rng)
        .unwrap();
    current.read_response(reply.response()).unwrap();

    // The caller's order: mac1, then the memory, and only then the gate (never reached).
    for _ in 0..10_000 {
        assert!(s.gate.mac1_ok(old.initiation()));
        match s.responder.recognise(old.initiation()) {
            Some(Err(DropReason::StaleInitiation)) => {}
            other => {
                panic!("an old initiation must be recognised as stale: {other:?}")
            }
        }
    }
    assert_eq!(
        s.responder.drop_counters().get(DropReason::StaleInitiation),
        10_000
    );
    // A copy of the current initiation is answered again from memory.
    assert!(matches!(
        s.responder.recognise(current.initiation()),
        Some(Ok(Reply::Resend { .. }))
    ));
    // The address still has its token: a newcomer on another port of it is admitted.
    let newcomer = Initiator::new(&s.client, s.responder.public(), 9, 3, &mut s.rng);
    assert_eq!(
        s.gate
            .check(newcomer.initiation(), addr("100.64.0.1:6000"), T0, false),
        Ok(Admission::Admit)
    );
    // A key that is not allowed is remembered too, until it is allowed.
    let stranger = Keypair::generate_with(&mut s.rng);
    let theirs = Initiator::new(&stranger, s.responder.public(), 10, 1, &mut s.rng);
    assert_eq!(
        s.responder
            .respond(theirs.initiation(), 3, &mut s.rng)
            .unwrap_err(),
        DropReason::NotAllowed
    );
    assert!(matches!(
        s.responder.recognise(theirs.initiation()),
        Some(Err(DropReason::NotAllowed))
    ));
    s.responder.allow(*stranger.public());
    assert!(s.responder.recognise(theirs.initiation()).is_none());
}

/// The memory of decrypted initiations is bounded.
#[test]
fn the_memory_of_initiations_is_bounded() {
    let mut s = setup(11, RateLimit::default());
    let first = Initiator::new(&s.client, s.responder.public(), 1, 1, &mut s.rng);
    s.responder
        .respond(first.initiation(), 1, &mut s.rng)
        .unwrap();
    for ts in 2..(KNOWN_INITIATIONS as u64 + 10) {
        let i = Initiator::new(&s.client, s.responder.public(), 1, ts, &mut s.rng);
        s.responder.respond(i.initiation(), 1, &mut s.rng).unwrap();
    }
    // Forgotten: not recognised any more, but still refused (after the Diffie-Hellman).
    assert!(s.responder.recognise(first.initiation()).is_none());
    assert_eq!(
        s.responder
            .respond(first.initiation(), 1, &mut s.rng)
            .unwrap_err(),
        DropReason::StaleInitiation
    );
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

/// A job's outcome is decided against the responder's records when it comes back: a
/// second copy of an initiation whose first copy's job finished first gets the same
/// response again, and a key revoked while its job ran is refused.
#[test]
fn jobs_finish_against_the_responders_records() {
    let mut rng = StdRng::seed_from_u64(9);
    let client = Keypair::generate_with(&mut rng);
    let server = Keypair::generate_with(&mut rng);
    let mut responder = Responder::new(server.clone(), [*client.public()]);
    let init = Initiator::new(&client, server.public(), 1, 10, &mut rng);
    let a = responder.job(init.initiation()).unwrap().run(7, &mut rng);
    let b = responder.job(init.initiation()).unwrap().run(8, &mut rng);
    let first = responder.finish(a).unwrap();
    assert!(matches!(first, Reply::NewSession { .. }));
    let second = responder.finish(b).unwrap();
    assert!(matches!(second, Reply::Resend { .. }));
    assert_eq!(first.response(), second.response());

    let newer = Initiator::new(&client, server.public(), 2, 20, &mut rng);
    let job = responder.job(newer.initiation()).unwrap();
    responder.revoke(client.public());
    assert_eq!(
        responder.finish(job.run(9, &mut rng)).unwrap_err(),
        DropReason::NotAllowed
    );
    // A job is only made for an initiation.
    assert_eq!(
        responder.job(&[3u8; 64]).unwrap_err(),
        DropReason::UnexpectedType
    );
}
