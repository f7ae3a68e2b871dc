//! Arbitrary bytes into `Responder::respond`. Nothing may panic, and nothing may be accepted.

#![no_main]

use std::sync::{Mutex, OnceLock};

use horde_crypto::{classify, Keypair, Responder};
use libfuzzer_sys::fuzz_target;
use rand::rngs::StdRng;
use rand::SeedableRng;

fn state() -> &'static Mutex<(Responder, StdRng)> {
    static STATE: OnceLock<Mutex<(Responder, StdRng)>> = OnceLock::new();
    STATE.get_or_init(|| {
        let mut rng = StdRng::seed_from_u64(0);
        let client = Keypair::generate_with(&mut rng);
        let server = Keypair::generate_with(&mut rng);
        Mutex::new((Responder::new(server, [*client.public()]), rng))
    })
}

fuzz_target!(|data: &[u8]| {
    let mut guard = state().lock().unwrap_or_else(|e| e.into_inner());
    let (responder, rng) = &mut *guard;
    let result = responder.respond(data, 1, rng).map(|_| ());
    assert!(result.is_err(), "garbage accepted as an initiation");
    if let Err(reason) = classify(data) {
        assert_eq!(result, Err(reason));
    }
});
