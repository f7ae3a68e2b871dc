//! Arbitrary bytes into the handshake gate (`mac1`, `mac2`, cookie replies, rate limits), as
//! an initiation from a source address and time the input also chooses. Nothing may panic;
//! garbage must never be admitted, and the rate-limit table must stay bounded.

#![no_main]

use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use horde_crypto::{
    classify, Admission, DropReason, HandshakeGate, Initiator, Keypair, Packet, RateLimit,
    COOKIE_REPLY_LEN, MAC2_OFFSET,
};
use libfuzzer_sys::fuzz_target;
use rand::rngs::StdRng;
use rand::SeedableRng;

const MAX_SOURCES: usize = 64;

struct State {
    gate: HandshakeGate,
    /// A genuine initiation, so the fuzzer can also splice valid MACs.
    genuine: Vec<u8>,
}

fn state() -> &'static Mutex<State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(|| {
        let mut rng = StdRng::seed_from_u64(0);
        let client = Keypair::generate_with(&mut rng);
        let server = Keypair::generate_with(&mut rng);
        let limit = RateLimit {
            max_sources: MAX_SOURCES,
            ..RateLimit::default()
        };
        let gate = HandshakeGate::new(server.public(), limit, &mut rng);
        let genuine = Initiator::new(&client, server.public(), 7, 1, &mut rng)
            .initiation()
            .to_vec();
        Mutex::new(State { gate, genuine })
    })
}

fuzz_target!(|data: &[u8]| {
    // Header: flags, source (4 + 2 bytes), time in ms (4 bytes); the rest is the datagram.
    if data.len() < 11 {
        return;
    }
    let (head, body) = data.split_at(11);
    let mut guard = state().lock().unwrap_or_else(|e| e.into_inner());
    let st = &mut *guard;
    let source = SocketAddr::from((
        [head[1], head[2], head[3], head[4]],
        u16::from_le_bytes([head[5], head[6]]),
    ));
    let now = Duration::from_millis(u64::from(u32::from_le_bytes([
        head[7], head[8], head[9], head[10],
    ])));
    let under_load = head[0] & 1 == 1;
    // Optionally overlay the input on the genuine initiation, so mutations near valid
    // datagrams are explored too.
    let datagram: Vec<u8> = if head[0] & 2 == 2 {
        let mut g = st.genuine.clone();
        for (dst, src) in g.iter_mut().zip(body) {
            *dst ^= src;
        }
        g
    } else {
        body.to_vec()
    };
    let result = st.gate.check(&datagram, source, now, under_load);
    match (&result, classify(&datagram)) {
        (_, Err(reason)) => assert_eq!(result, Err(reason)),
        // Only the genuine bytes carry a valid mac1 (mac2 is not covered by it).
        (Ok(_), Ok(Packet::Initiation { .. })) => assert_eq!(
            &datagram[..MAC2_OFFSET],
            &st.genuine[..MAC2_OFFSET],
            "forged mac1 admitted"
        ),
        (Ok(_), Ok(_)) => panic!("a non-initiation passed the gate"),
        (Err(r), Ok(_)) => assert_ne!(*r, DropReason::NeedCookie),
    }
    if let Ok(Admission::Cookie(reply)) = &result {
        assert_eq!(reply.len(), COOKIE_REPLY_LEN);
    }
    // Two tables (addresses, flows), each bounded.
    assert!(st.gate.tracked_sources() <= 2 * MAX_SOURCES);
});
