//! Vehicle keys drawn from a seed, so that the server's allowed list and the vehicles
//! agree without passing keys around, and a run can be repeated.

use horde_crypto::Keypair;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// Vehicle `index`'s key pair in the fleet of `seed`.
pub fn vehicle_keypair(seed: u64, index: u32) -> Keypair {
    let mut s = [0u8; 32];
    s[..8].copy_from_slice(&seed.to_le_bytes());
    s[8..12].copy_from_slice(&index.to_le_bytes());
    // A tag so that vehicle keys never equal the server's (drawn with a different tag).
    s[12] = 0x76;
    Keypair::generate_with(&mut ChaCha20Rng::from_seed(s))
}

/// The server's key pair in the fleet of `seed`.
pub fn server_keypair(seed: u64) -> Keypair {
    let mut s = [0u8; 32];
    s[..8].copy_from_slice(&seed.to_le_bytes());
    s[12] = 0x73;
    Keypair::generate_with(&mut ChaCha20Rng::from_seed(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_repeatable_and_distinct() {
        assert_eq!(
            vehicle_keypair(1, 5).public(),
            vehicle_keypair(1, 5).public()
        );
        assert_ne!(
            vehicle_keypair(1, 5).public(),
            vehicle_keypair(1, 6).public()
        );
        assert_ne!(
            vehicle_keypair(1, 5).public(),
            vehicle_keypair(2, 5).public()
        );
        assert_ne!(server_keypair(1).public(), vehicle_keypair(1, 0).public());
    }
}
