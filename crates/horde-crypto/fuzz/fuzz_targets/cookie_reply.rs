//! Arbitrary bytes into `Initiator::read_cookie_reply`, tried as they are and with the
//! initiator's own index, so decryption is reached. Nothing may panic or be accepted, and a
//! rejected reply leaves the initiation unchanged.

#![no_main]

use std::sync::{Mutex, OnceLock};

use horde_crypto::{classify, Initiator, Keypair};
use libfuzzer_sys::fuzz_target;
use rand::rngs::StdRng;
use rand::SeedableRng;

fn state() -> &'static Mutex<Initiator> {
    static STATE: OnceLock<Mutex<Initiator>> = OnceLock::new();
    STATE.get_or_init(|| {
        let mut rng = StdRng::seed_from_u64(0);
        let client = Keypair::generate_with(&mut rng);
        let server = Keypair::generate_with(&mut rng);
        Mutex::new(Initiator::new(&client, server.public(), 7, 1, &mut rng))
    })
}

fuzz_target!(|data: &[u8]| {
    let mut init = state().lock().unwrap_or_else(|e| e.into_inner());
    let before = init.initiation().to_vec();
    let mut tries = vec![data.to_vec()];
    if data.len() >= 5 {
        let mut aimed = data.to_vec();
        aimed[1..5].copy_from_slice(&init.local_index().to_le_bytes());
        tries.push(aimed);
    }
    for bytes in tries {
        let result = init.read_cookie_reply(&bytes);
        assert!(result.is_err(), "forged cookie reply accepted");
        if let Err(reason) = classify(&bytes) {
            assert_eq!(result, Err(reason));
        }
        assert!(!init.has_cookie());
        assert_eq!(init.initiation(), &before[..]);
    }
});
