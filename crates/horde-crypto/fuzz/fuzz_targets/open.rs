//! Arbitrary bytes into `Session::open` and `Initiator::read_response`.
//!
//! Each input is tried as is, and again with its receiver index replaced by the receiver's
//! own, so that the fuzzer reaches the replay check and decryption instead of stopping at
//! `WrongIndex`. Nothing may panic, and nothing may be accepted.

#![no_main]

use std::sync::{Mutex, OnceLock};

use horde_crypto::{classify, Initiator, Keypair, Reply, Responder, Session};
use libfuzzer_sys::fuzz_target;
use rand::rngs::StdRng;
use rand::SeedableRng;

struct State {
    session: Session,
    initiator: Initiator,
    out: Vec<u8>,
}

fn state() -> &'static Mutex<State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(|| {
        let mut rng = StdRng::seed_from_u64(0);
        let client = Keypair::generate_with(&mut rng);
        let server = Keypair::generate_with(&mut rng);
        let mut responder = Responder::new(server, [*client.public()]);
        let init = Initiator::new(&client, responder.public(), 7, 1, &mut rng);
        let Ok(Reply::NewSession { session, .. }) =
            responder.respond(init.initiation(), 9, &mut rng)
        else {
            panic!("handshake setup failed")
        };
        // `init` never sees its response, so it stays open for garbage responses.
        Mutex::new(State {
            session: *session,
            initiator: init,
            out: Vec::new(),
        })
    })
}

fn check(state: &mut State, data: &[u8]) {
    let class = classify(data);
    let State {
        session,
        initiator,
        out,
    } = state;
    let opened = session.open(data, out).map(|_| ());
    assert!(opened.is_err(), "garbage accepted by open");
    if let Err(reason) = class {
        assert_eq!(opened, Err(reason));
    }
    assert!(
        initiator.read_response(data).is_err(),
        "garbage accepted as a response"
    );
}

fuzz_target!(|data: &[u8]| {
    let mut guard = state().lock().unwrap_or_else(|e| e.into_inner());
    let state = &mut *guard;
    check(state, data);
    if data.len() >= 5 {
        let mut patched = data.to_vec();
        let index = if data[0] == horde_crypto::TYPE_RESPONSE {
            state.initiator.local_index()
        } else {
            state.session.local_index()
        };
        patched[1..5].copy_from_slice(&index.to_le_bytes());
        check(state, &patched);
    }
});
