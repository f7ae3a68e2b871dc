//! Handshake and transport tests across the whole crate.

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::*;

struct Pair {
    client: Session,
    server: Session,
}

fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

fn keys(rng: &mut StdRng) -> (Keypair, Keypair) {
    (Keypair::generate_with(rng), Keypair::generate_with(rng))
}

/// Runs a complete handshake from `client` to `server`.
fn handshake(rng: &mut StdRng, client: &Keypair, responder: &mut Responder) -> Pair {
    let mut init = Initiator::new(client, responder.public(), 0x1111_1111, 1, rng);
    let reply = responder
        .respond(init.initiation(), 0x2222_2222, rng)
        .unwrap();
    let Reply::NewSession {
        peer,
        response,
        session,
    } = reply
    else {
        panic!("expected a new session");
    };
    assert_eq!(&peer, client.public());
    let client_session = init.read_response(&response).unwrap();
    Pair {
        client: client_session,
        server: *session,
    }
}

fn established(seed: u64) -> Pair {
    let mut rng = rng(seed);
    let (c, s) = keys(&mut rng);
    let mut responder = Responder::new(s, [*c.public()]);
    handshake(&mut rng, &c, &mut responder)
}

fn seal(s: &mut Session, channel: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    s.seal(channel, data, &mut out).unwrap();
    out
}

fn open(s: &mut Session, datagram: &[u8]) -> Result<(u8, Vec<u8>), DropReason> {
    let mut out = Vec::new();
    s.open(datagram, &mut out).map(|(c, p)| (c, p.to_vec()))
}

#[test]
fn handshake_both_ways() {
    let mut rng = rng(1);
    let (a, b) = keys(&mut rng);
    let mut responder_a = Responder::new(a.clone(), [*b.public()]);
    let mut responder_b = Responder::new(b.clone(), [*a.public()]);

    for (initiator, responder) in [(&a, &mut responder_b), (&b, &mut responder_a)] {
        let mut p = handshake(&mut rng, initiator, responder);
        assert_eq!(p.client.remote_static(), responder.public());
        assert_eq!(p.server.remote_static(), initiator.public());
        assert_eq!(
            (p.client.local_index(), p.client.remote_index()),
            (0x1111_1111, 0x2222_2222)
        );
        assert_eq!(
            (p.server.local_index(), p.server.remote_index()),
            (0x2222_2222, 0x1111_1111)
        );
        assert!(p.client.is_initiator() && !p.server.is_initiator());

        let d = seal(&mut p.client, 0, b"ping");
        assert_eq!(open(&mut p.server, &d), Ok((0, b"ping".to_vec())));
        let d = seal(&mut p.server, 0, b"pong");
        assert_eq!(open(&mut p.client, &d), Ok((0, b"pong".to_vec())));
    }
}

#[test]
fn sessions_from_different_handshakes_do_not_interoperate() {
    let mut p = established(2);
    let mut q = established(3);
    // Same indices in both pairs (the helper uses fixed ones), different keys.
    let d = seal(&mut p.client, 0, b"x");
    assert_eq!(open(&mut q.server, &d), Err(DropReason::BadTag));
    assert_eq!(open(&mut p.server, &d), Ok((0, b"x".to_vec())));
}

#[test]
fn wrong_responder_key_fails() {
    let mut rng = rng(4);
    let (c, s) = keys(&mut rng);
    let other = Keypair::generate_with(&mut rng);
    let mut responder = Responder::new(s, [*c.public()]);
    // The initiator believes the responder's key is `other`'s: mac1 gives it away before
    // any Diffie-Hellman.
    let init = Initiator::new(&c, other.public(), 1, 1, &mut rng);
    assert_eq!(
        responder
            .respond(init.initiation(), 2, &mut rng)
            .unwrap_err(),
        DropReason::BadMac
    );
    assert_eq!(responder.drop_counters().get(DropReason::BadMac), 1);
    // With a mac1 made for this responder, the Noise message itself still fails.
    let mut forged = init.initiation().to_vec();
    crate::cookie::MacKeys::for_responder(responder.public()).stamp(&mut forged, None);
    assert_eq!(
        responder.respond(&forged, 2, &mut rng).unwrap_err(),
        DropReason::BadTag
    );
}

#[test]
fn initiator_not_on_allow_list_is_rejected() {
    let mut rng = rng(5);
    let (c, s) = keys(&mut rng);
    let stranger = Keypair::generate_with(&mut rng);
    let mut responder = Responder::new(s, [*c.public()]);
    let init = Initiator::new(&stranger, responder.public(), 1, 1, &mut rng);
    assert_eq!(
        responder
            .respond(init.initiation(), 2, &mut rng)
            .unwrap_err(),
        DropReason::NotAllowed
    );
    // Allowing it later makes the same initiation acceptable.
    assert!(responder.allow(*stranger.public()));
    assert!(responder.respond(init.initiation(), 2, &mut rng).is_ok());
    // Revoking rejects new initiations again.
    assert!(responder.revoke(stranger.public()));
    assert!(!responder.is_allowed(stranger.public()));
    let init = Initiator::new(&stranger, responder.public(), 1, 2, &mut rng);
    assert_eq!(
        responder
            .respond(init.initiation(), 2, &mut rng)
            .unwrap_err(),
        DropReason::NotAllowed
    );
    assert_eq!(responder.drop_counters().get(DropReason::NotAllowed), 2);
}

#[test]
fn retransmitted_initiation_is_answered_again() {
    let mut rng = rng(6);
    let (c, s) = keys(&mut rng);
    let mut responder = Responder::new(s, [*c.public()]);
    let mut init = Initiator::new(&c, responder.public(), 9, 100, &mut rng);
    let first = responder.respond(init.initiation(), 10, &mut rng).unwrap();
    let Reply::NewSession {
        response: r1,
        session: mut server,
        ..
    } = first
    else {
        panic!("expected a new session")
    };
    // The response is lost; the initiator resends the same bytes.
    let again = responder.respond(init.initiation(), 11, &mut rng).unwrap();
    let Reply::Resend { response: r2, peer } = again else {
        panic!("expected a resend")
    };
    assert_eq!(r1, r2);
    assert_eq!(&peer, c.public());
    assert_eq!(responder.drop_counters().total(), 0);

    let mut client = init.read_response(&r2).unwrap();
    assert!(init.is_finished());
    // The duplicate response arrives later.
    assert_eq!(init.read_response(&r1).unwrap_err(), DropReason::Replayed);
    assert_eq!(init.drop_counters().get(DropReason::Replayed), 1);

    assert!(!server.is_confirmed());
    let d = seal(&mut client, 3, b"after resend");
    assert_eq!(open(&mut server, &d), Ok((3, b"after resend".to_vec())));
    assert!(server.is_confirmed());
}

#[test]
fn old_initiations_cannot_be_replayed() {
    let mut rng = rng(7);
    let (c, s) = keys(&mut rng);
    let mut responder = Responder::new(s, [*c.public()]);
    let old = Initiator::new(&c, responder.public(), 1, 100, &mut rng);
    let new = Initiator::new(&c, responder.public(), 2, 200, &mut rng);
    assert!(matches!(
        responder.respond(old.initiation(), 10, &mut rng),
        Ok(Reply::NewSession { .. })
    ));
    assert!(matches!(
        responder.respond(new.initiation(), 11, &mut rng),
        Ok(Reply::NewSession { .. })
    ));
    // An attacker replays the older initiation: authentic, but stale.
    assert_eq!(
        responder
            .respond(old.initiation(), 12, &mut rng)
            .unwrap_err(),
        DropReason::StaleInitiation
    );
    // A fresh initiation with an equal timestamp is stale too.
    let same = Initiator::new(&c, responder.public(), 3, 200, &mut rng);
    assert_eq!(
        responder
            .respond(same.initiation(), 13, &mut rng)
            .unwrap_err(),
        DropReason::StaleInitiation
    );
    // The latest one is still re-answered.
    assert!(matches!(
        responder.respond(new.initiation(), 14, &mut rng),
        Ok(Reply::Resend { .. })
    ));
    assert_eq!(
        responder.drop_counters().get(DropReason::StaleInitiation),
        2
    );
}

#[test]
fn altered_initiation_header_is_rejected() {
    let mut rng = rng(8);
    let (c, s) = keys(&mut rng);
    let mut responder = Responder::new(s, [*c.public()]);
    let init = Initiator::new(&c, responder.public(), 1, 1, &mut rng);
    // The sender index is bound into the handshake through the prologue.
    let mut altered = init.initiation().to_vec();
    altered[1] ^= 1;
    assert_eq!(
        responder.respond(&altered, 2, &mut rng).unwrap_err(),
        DropReason::BadMac
    );
    // Even with mac1 recomputed over the altered header.
    crate::cookie::MacKeys::for_responder(responder.public()).stamp(&mut altered, None);
    assert_eq!(
        responder.respond(&altered, 2, &mut rng).unwrap_err(),
        DropReason::BadTag
    );
    // And the genuine one still works afterwards.
    assert!(responder.respond(init.initiation(), 2, &mut rng).is_ok());
}

#[test]
fn forged_response_does_not_break_the_handshake() {
    let mut rng = rng(9);
    let (c, s) = keys(&mut rng);
    let mut responder = Responder::new(s, [*c.public()]);
    let mut init = Initiator::new(&c, responder.public(), 77, 1, &mut rng);
    let reply = responder.respond(init.initiation(), 88, &mut rng).unwrap();
    let genuine = reply.response().to_vec();

    for i in 0..RESPONSE_LEN {
        let mut bad = genuine.clone();
        bad[i] ^= 0x40;
        let expected = match i {
            0 => DropReason::UnknownType,
            1..=4 => DropReason::WrongIndex,
            _ => DropReason::BadTag,
        };
        assert_eq!(init.read_response(&bad).unwrap_err(), expected, "byte {i}");
    }
    assert!(!init.is_finished());
    let mut client = init.read_response(&genuine).unwrap();
    let Reply::NewSession {
        session: mut server,
        ..
    } = reply
    else {
        panic!()
    };
    let d = seal(&mut client, 0, b"ok");
    assert_eq!(open(&mut server, &d), Ok((0, b"ok".to_vec())));
    assert_eq!(
        init.drop_counters().get(DropReason::BadTag),
        (RESPONSE_LEN - 5) as u64
    );
}

#[test]
fn handshakes_are_reproducible_from_the_seed() {
    let run = |seed| {
        let mut rng = rng(seed);
        let (c, s) = keys(&mut rng);
        let mut responder = Responder::new(s, [*c.public()]);
        let init = Initiator::new(&c, responder.public(), 1, 1, &mut rng);
        let reply = responder.respond(init.initiation(), 2, &mut rng).unwrap();
        (init.initiation().to_vec(), reply.response().to_vec())
    };
    assert_eq!(run(10), run(10));
    assert_ne!(run(10).0, run(11).0);
}

#[test]
fn round_trip_on_several_channels() {
    let mut p = established(12);
    let channels = [0u8, 1, 2, 7, 128, 255];
    let mut sent = Vec::new();
    for round in 0..5u8 {
        for &ch in &channels {
            let msg = vec![ch ^ round; usize::from(round) * 100 + usize::from(ch)];
            let d = seal(&mut p.client, ch, &msg);
            assert_eq!(d.len(), msg.len() + TRANSPORT_OVERHEAD);
            assert_eq!(
                classify(&d),
                Ok(Packet::Transport {
                    receiver_index: p.server.local_index(),
                    channel: ch,
                    counter: u64::from(round),
                    key_phase: 0
                })
            );
            sent.push((ch, msg, d));
        }
    }
    for &ch in &channels {
        assert_eq!(p.client.next_counter(ch), 5);
    }
    assert_eq!(p.client.next_counter(3), 0);
    // Deliver interleaved across channels in a scrambled order.
    sent.shuffle(&mut rng(13));
    for (ch, msg, d) in &sent {
        assert_eq!(open(&mut p.server, d), Ok((*ch, msg.clone())));
    }
    // Same channel and counter in the other direction is a different key: no interference.
    let d = seal(&mut p.server, 0, b"back");
    assert_eq!(open(&mut p.client, &d), Ok((0, b"back".to_vec())));
    assert_eq!(p.server.drop_counters().total(), 0);
}

#[test]
fn empty_plaintext_is_a_valid_datagram() {
    let mut p = established(14);
    let d = seal(&mut p.client, 4, b"");
    assert_eq!(d.len(), TRANSPORT_OVERHEAD);
    assert_eq!(open(&mut p.server, &d), Ok((4, Vec::new())));
}

#[test]
fn replay_is_rejected() {
    let mut p = established(15);
    let d = seal(&mut p.client, 1, b"once");
    assert!(open(&mut p.server, &d).is_ok());
    assert_eq!(open(&mut p.server, &d), Err(DropReason::Replayed));
    assert_eq!(open(&mut p.server, &d), Err(DropReason::Replayed));
    assert_eq!(p.server.drop_counters().get(DropReason::Replayed), 2);
}

#[test]
fn out_of_order_within_window_accepted_once() {
    let mut p = established(16);
    let mut ds: Vec<_> = (0..300u32)
        .map(|i| seal(&mut p.client, 9, &i.to_le_bytes()))
        .collect();
    ds.reverse();
    ds[..150].shuffle(&mut rng(17));
    for d in &ds {
        let (ch, pt) = open(&mut p.server, d).unwrap();
        assert_eq!(ch, 9);
        assert_eq!(pt.len(), 4);
    }
    for d in &ds {
        assert_eq!(open(&mut p.server, d), Err(DropReason::Replayed));
    }
}

#[test]
fn too_old_is_rejected_before_decrypting() {
    let mut p = established(18);
    let oldest = seal(&mut p.client, 5, b"0");
    let second = seal(&mut p.client, 5, b"1");
    p.client.set_next_counter(5, REPLAY_WINDOW + 1);
    let newest = seal(&mut p.client, 5, b"new");
    assert!(open(&mut p.server, &newest).is_ok());
    // Counter 0 is exactly REPLAY_WINDOW + 1 behind; counter 1 exactly REPLAY_WINDOW.
    assert_eq!(open(&mut p.server, &oldest), Err(DropReason::TooOld));
    assert_eq!(open(&mut p.server, &second), Err(DropReason::TooOld));
    // Counter 2 is the oldest still in the window.
    p.client.set_next_counter(5, 2);
    let in_window = seal(&mut p.client, 5, b"2");
    assert!(open(&mut p.server, &in_window).is_ok());

    // A forgery with a too-old counter is rejected as such, without being decrypted.
    let mut forged = in_window.clone();
    forged[TRANSPORT_HEADER_LEN..].fill(0xAA);
    forged[5..13].copy_from_slice(&nonce(5, 0).to_le_bytes());
    assert_eq!(open(&mut p.server, &forged), Err(DropReason::TooOld));
    // Other channels are unaffected by channel 5's window.
    let other = seal(&mut p.client, 6, b"fresh");
    assert!(open(&mut p.server, &other).is_ok());
    assert_eq!(p.server.drop_counters().get(DropReason::TooOld), 3);
}

#[test]
fn tampered_datagrams_are_rejected_and_change_nothing() {
    let mut p = established(19);
    let first = seal(&mut p.client, 2, b"first");
    assert!(open(&mut p.server, &first).is_ok());
    let genuine = seal(&mut p.client, 2, b"the quick brown fox");
    let top_before = p.server.window_top(2);

    let mut bad_tags = 0;
    for i in 0..genuine.len() {
        for flip in [0x01u8, 0x80] {
            let mut bad = genuine.clone();
            bad[i] ^= flip;
            let got = open(&mut p.server, &bad);
            let expected = match (i, flip) {
                // Type 3 becomes 2, a response, and 48 bytes are too short for one.
                (0, 0x01) => DropReason::Truncated,
                // The key phase bit: neither the previous nor the next key verifies it.
                (0, _) => DropReason::BadTag,
                (1..=4, _) => DropReason::WrongIndex,
                // Counter 1 becomes counter 0, which was already accepted: caught by the
                // replay check before decryption.
                (5, 0x01) => DropReason::Replayed,
                _ => DropReason::BadTag,
            };
            assert_eq!(got, Err(expected), "byte {i} flip {flip:#x}");
            bad_tags += u64::from(expected == DropReason::BadTag);
        }
    }
    // A forged counter far ahead must not slide the window.
    let mut ahead = genuine.clone();
    ahead[5..13].copy_from_slice(&nonce(2, 1 << 40).to_le_bytes());
    assert_eq!(open(&mut p.server, &ahead), Err(DropReason::BadTag));
    bad_tags += 1;

    assert_eq!(p.server.window_top(2), top_before);
    assert_eq!(
        p.server.window_top(0),
        None,
        "no window allocated by forgeries"
    );
    assert_eq!(p.server.drop_counters().get(DropReason::BadTag), bad_tags);
    assert_eq!(
        open(&mut p.server, &genuine),
        Ok((2, b"the quick brown fox".to_vec()))
    );
    assert!(open(&mut p.server, &first).is_err());
}

/// `seal_append` and `open_in_place` (the runtime's copy-free paths) produce and accept
/// exactly what `seal` and `open` do, drop the same forgeries for the same reasons, and
/// change the session the same way: checked on two sessions from the same seed.
#[test]
fn copy_free_paths_match_seal_and_open() {
    let (mut a, mut b) = (established(21), established(21));
    let mut appended = b"earlier datagrams".to_vec();
    for (channel, text) in [(2u8, &b"first"[..]), (2, b""), (5, b"the quick brown fox")] {
        let sealed = seal(&mut a.client, channel, text);
        let start = appended.len();
        b.client.seal_append(channel, text, &mut appended).unwrap();
        assert_eq!(&appended[..17], b"earlier datagrams");
        assert_eq!(&appended[start..], &sealed[..]);
        assert_eq!(open(&mut a.server, &sealed), Ok((channel, text.to_vec())));
        let mut d = sealed.clone();
        let (c, at) = b.server.open_in_place(&mut d).unwrap();
        assert_eq!((c, &d[at]), (channel, text));
    }
    let genuine = seal(&mut a.client, 2, b"jumps over the lazy dog");
    assert_eq!(genuine, {
        let mut v = Vec::new();
        b.client
            .seal_append(2, b"jumps over the lazy dog", &mut v)
            .unwrap();
        v
    });
    // Every one-bit forgery, a replay and a truncation: same verdicts on both paths.
    let mut forgeries: Vec<Vec<u8>> = (0..genuine.len() * 8)
        .map(|bit| {
            let mut d = genuine.clone();
            d[bit / 8] ^= 1 << (bit % 8);
            d
        })
        .collect();
    forgeries.push(genuine[..genuine.len() - 1].to_vec());
    for d in &forgeries {
        let mut copy = d.clone();
        let in_place = b
            .server
            .open_in_place(&mut copy)
            .map(|(c, at)| (c, copy[at].to_vec()));
        assert_eq!(in_place, open(&mut a.server, d));
        assert!(in_place.is_err());
    }
    assert_eq!(a.server.window_top(2), b.server.window_top(2));
    let mut copy = genuine.clone();
    let (_, at) = b.server.open_in_place(&mut copy).unwrap();
    assert_eq!(&copy[at], b"jumps over the lazy dog");
    assert!(open(&mut a.server, &genuine).is_ok());
    let mut again = genuine.clone();
    assert_eq!(
        b.server.open_in_place(&mut again),
        Err(DropReason::Replayed)
    );
    for reason in [
        DropReason::BadTag,
        DropReason::Truncated,
        DropReason::WrongIndex,
        DropReason::Replayed,
        DropReason::UnknownType,
    ] {
        assert_eq!(
            a.server.drop_counters().get(reason) + u64::from(reason == DropReason::Replayed),
            b.server.drop_counters().get(reason),
            "{reason:?}"
        );
    }
}

#[test]
fn open_leaves_output_empty_on_drop() {
    let mut p = established(20);
    let mut d = seal(&mut p.client, 0, b"secret");
    let last = d.len() - 1;
    d[last] ^= 1;
    let mut out = b"stale".to_vec();
    assert_eq!(p.server.open(&d, &mut out), Err(DropReason::BadTag));
    assert!(out.is_empty());
}

#[test]
fn every_truncation_and_extension_has_the_right_reason() {
    let mut rng = rng(21);
    let (c, s) = keys(&mut rng);
    let mut responder = Responder::new(s, [*c.public()]);
    let mut init = Initiator::new(&c, responder.public(), 1, 1, &mut rng);
    let initiation = init.initiation().to_vec();
    let reply = responder.respond(&initiation, 2, &mut rng).unwrap();
    let response = reply.response().to_vec();
    let Reply::NewSession {
        session: mut server,
        ..
    } = reply
    else {
        panic!()
    };

    // Truncated initiations.
    for len in 0..INITIATION_LEN {
        assert_eq!(
            responder
                .respond(&initiation[..len], 3, &mut rng)
                .unwrap_err(),
            DropReason::Truncated,
            "len {len}"
        );
    }
    // The same bytes under the type byte of handshake versions 1 and 2, at either's length.
    let mut old = initiation.clone();
    old[0] = TYPE_LEGACY_INITIATION;
    for len in [LEGACY_INITIATION_LEN, INITIATION_LEN] {
        assert_eq!(
            responder.respond(&old[..len], 3, &mut rng).unwrap_err(),
            DropReason::LegacyHandshake,
            "len {len}"
        );
    }
    let mut long = initiation.clone();
    long.push(0);
    assert_eq!(
        responder.respond(&long, 3, &mut rng).unwrap_err(),
        DropReason::Oversized
    );
    assert_eq!(
        responder.drop_counters().get(DropReason::Truncated),
        INITIATION_LEN as u64
    );

    // Truncated responses.
    for len in 0..RESPONSE_LEN {
        assert_eq!(
            init.read_response(&response[..len]).unwrap_err(),
            DropReason::Truncated
        );
    }
    let mut long = response.clone();
    long.push(0);
    assert_eq!(
        init.read_response(&long).unwrap_err(),
        DropReason::Oversized
    );
    let mut client = init.read_response(&response).unwrap();

    // Truncated transport datagrams: too short for a header and tag, or a tag that no longer
    // verifies.
    let d = seal(&mut client, 0, &[7u8; 64]);
    for len in 0..d.len() {
        let expected = if len < TRANSPORT_OVERHEAD {
            DropReason::Truncated
        } else {
            DropReason::BadTag
        };
        assert_eq!(open(&mut server, &d[..len]), Err(expected), "len {len}");
    }
    let mut extended = d.clone();
    extended.push(0);
    assert_eq!(open(&mut server, &extended), Err(DropReason::BadTag));
    let mut huge = d.clone();
    huge.resize(TRANSPORT_HEADER_LEN + MAX_NOISE_MESSAGE + 1, 0);
    assert_eq!(open(&mut server, &huge), Err(DropReason::Oversized));
    assert!(open(&mut server, &d).is_ok());
}

#[test]
fn each_receiver_rejects_the_other_types() {
    let mut rng = rng(22);
    let (c, s) = keys(&mut rng);
    let mut responder = Responder::new(s, [*c.public()]);
    let mut init = Initiator::new(&c, responder.public(), 1, 1, &mut rng);
    let initiation = init.initiation().to_vec();
    let reply = responder.respond(&initiation, 2, &mut rng).unwrap();
    let response = reply.response().to_vec();
    let Reply::NewSession {
        session: mut server,
        ..
    } = reply
    else {
        panic!()
    };
    let mut client = init.read_response(&response).unwrap();
    let transport = seal(&mut client, 0, b"data");

    assert_eq!(
        open(&mut server, &initiation),
        Err(DropReason::UnexpectedType)
    );
    assert_eq!(
        open(&mut server, &response),
        Err(DropReason::UnexpectedType)
    );
    assert_eq!(
        responder.respond(&response, 3, &mut rng).unwrap_err(),
        DropReason::UnexpectedType
    );
    assert_eq!(
        responder.respond(&transport, 3, &mut rng).unwrap_err(),
        DropReason::UnexpectedType
    );
    assert_eq!(
        init.read_response(&initiation).unwrap_err(),
        DropReason::UnexpectedType
    );
    assert_eq!(
        init.read_response(&transport).unwrap_err(),
        DropReason::UnexpectedType
    );
    for t in (0..=255u8).filter(|t| !(1..=5).contains(t) && *t != 0x83) {
        let mut d = transport.clone();
        d[0] = t;
        assert_eq!(open(&mut server, &d), Err(DropReason::UnknownType));
    }
    assert_eq!(server.drop_counters().get(DropReason::UnknownType), 250);
    assert_eq!(server.drop_counters().get(DropReason::UnexpectedType), 2);
    assert_eq!(open(&mut server, &transport), Ok((0, b"data".to_vec())));
}

#[test]
fn wrong_index_is_rejected() {
    let mut p = established(23);
    let mut d = seal(&mut p.client, 0, b"x");
    d[1..5].copy_from_slice(&(p.server.local_index() ^ 1).to_le_bytes());
    assert_eq!(open(&mut p.server, &d), Err(DropReason::WrongIndex));
    assert_eq!(p.server.drop_counters().get(DropReason::WrongIndex), 1);
}

#[test]
fn seal_limits() {
    let mut p = established(24);
    let mut out = vec![1, 2, 3];
    let big = vec![0u8; MAX_PLAINTEXT + 1];
    assert_eq!(
        p.client.seal(0, &big, &mut out),
        Err(SealError::TooLarge {
            len: MAX_PLAINTEXT + 1,
            max: MAX_PLAINTEXT
        })
    );
    assert!(out.is_empty());
    assert_eq!(p.client.next_counter(0), 0);

    let max = vec![0u8; MAX_PLAINTEXT];
    let d = seal(&mut p.client, 0, &max);
    assert_eq!(open(&mut p.server, &d).unwrap().1.len(), MAX_PLAINTEXT);

    // The last usable counter on the top channel gives nonce 2^64 - 2 and still works.
    p.client.set_next_counter(255, COUNTER_LIMIT - 1);
    let d = seal(&mut p.client, 255, b"last");
    assert_eq!(open(&mut p.server, &d), Ok((255, b"last".to_vec())));
    assert_eq!(
        p.client.seal(255, b"one more", &mut out),
        Err(SealError::CounterExhausted { channel: 255 })
    );
    assert!(out.is_empty());
    // A datagram claiming the reserved nonce 2^64 - 1 is refused.
    let mut reserved = d.clone();
    reserved[5..13].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(open(&mut p.server, &reserved), Err(DropReason::BadTag));
    // Other channels keep going.
    let d = seal(&mut p.client, 254, b"fine");
    assert!(open(&mut p.server, &d).is_ok());
}

#[test]
fn random_index_avoids_used_values() {
    let mut rng = rng(25);
    let first = random_index(&mut rng, |_| false);
    let mut rng = self::rng(25);
    let second = random_index(&mut rng, |i| i == first);
    assert_ne!(first, second);
}

/// Parts of a live handshake and session, for feeding garbage to every receiver.
struct Receivers {
    rng: StdRng,
    responder: Responder,
    initiator: Initiator,
    server: Session,
}

fn receivers() -> Receivers {
    let mut rng = rng(26);
    let (c, s) = keys(&mut rng);
    let mut responder = Responder::new(s, [*c.public()]);
    let mut first = Initiator::new(&c, responder.public(), 1, 1, &mut rng);
    let reply = responder
        .respond(first.initiation(), 0xABCD, &mut rng)
        .unwrap();
    first.read_response(reply.response()).unwrap();
    let Reply::NewSession { session, .. } = reply else {
        panic!()
    };
    // A second initiator still waiting for its response.
    let initiator = Initiator::new(&c, responder.public(), 0x1234, 2, &mut rng);
    Receivers {
        rng,
        responder,
        initiator,
        server: *session,
    }
}

/// Feeds `bytes` to every receiver; checks the reasons agree with `classify` and nothing is
/// accepted.
fn feed(r: &mut Receivers, bytes: &[u8]) -> Result<(), TestCaseError> {
    let class = classify(bytes);
    let mut out = Vec::new();
    let opened = r.server.open(bytes, &mut out).map(|(c, p)| (c, p.to_vec()));
    let mut copy = bytes.to_vec();
    let in_place = r
        .server
        .open_in_place(&mut copy)
        .map(|(c, at)| (c, copy[at].to_vec()));
    prop_assert_eq!(&in_place, &opened);
    let responded = r.responder.respond(bytes, 5, &mut r.rng).map(|_| ());
    let read = r.initiator.read_response(bytes).map(|_| ());
    match class {
        Err(reason) => {
            prop_assert_eq!(opened, Err(reason));
            prop_assert_eq!(responded, Err(reason));
            prop_assert_eq!(read, Err(reason));
        }
        Ok(packet) => {
            prop_assert!(opened.is_err(), "garbage opened: {:?}", opened);
            prop_assert!(responded.is_err());
            prop_assert!(read.is_err());
            if !matches!(packet, Packet::Transport { .. }) {
                prop_assert_eq!(opened, Err(DropReason::UnexpectedType));
            }
            if !matches!(packet, Packet::Initiation { .. }) {
                prop_assert_eq!(responded, Err(DropReason::UnexpectedType));
            }
            if !matches!(packet, Packet::Response { .. }) {
                prop_assert_eq!(read, Err(DropReason::UnexpectedType));
            }
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut r = receivers();
        feed(&mut r, &bytes)?;
    }

    /// Garbage shaped to pass the header checks, so it reaches decryption.
    #[test]
    fn well_formed_garbage_fails_authentication(
        kind in prop::sample::select(vec![TYPE_INITIATION, TYPE_RESPONSE, TYPE_TRANSPORT]),
        body in proptest::collection::vec(any::<u8>(), INITIATION_LEN..INITIATION_LEN + 1),
        transport_len in TRANSPORT_OVERHEAD..200usize,
        channel in any::<u8>(),
        counter in 0u64..1000,
    ) {
        let mut r = receivers();
        let mut bytes = body;
        bytes[0] = kind;
        match kind {
            TYPE_INITIATION => {}
            TYPE_RESPONSE => {
                bytes.truncate(RESPONSE_LEN);
                bytes[1..5].copy_from_slice(&r.initiator.local_index().to_le_bytes());
            }
            _ => {
                bytes.resize(transport_len, 0x5A);
                bytes[1..5].copy_from_slice(&r.server.local_index().to_le_bytes());
                bytes[5..13].copy_from_slice(&nonce(channel, counter).to_le_bytes());
            }
        }
        let mut out = Vec::new();
        let opened = r.server.open(&bytes, &mut out).map(|_| ());
        let responded = r.responder.respond(&bytes, 5, &mut r.rng).map(|_| ());
        let read = r.initiator.read_response(&bytes).map(|_| ());
        match kind {
            TYPE_INITIATION => prop_assert_eq!(responded, Err(DropReason::BadMac)),
            TYPE_RESPONSE => prop_assert_eq!(read, Err(DropReason::BadTag)),
            _ => prop_assert_eq!(opened, Err(DropReason::BadTag)),
        }
        feed(&mut r, &bytes)?;
    }
}
