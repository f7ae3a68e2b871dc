//! Key rotation for established sessions.
//!
//! *When* follows WireGuard: a sending key is replaced after [`REKEY_AFTER_TIME`] or
//! [`REKEY_AFTER_MESSAGES`], and a receiving key is refused after [`REJECT_AFTER_TIME`] or
//! [`REJECT_AFTER_MESSAGES`]. *How* follows QUIC's key update: each side ratchets its own
//! sending key with Noise's `REKEY` function (`k' = first 32 bytes of ENCRYPT(k, 2^64 - 1, "",
//! zeros)`, ENCRYPT being the transport's AES-256-GCM) and flips the key phase bit in the type byte; the receiver derives the next key
//! when it sees the other phase, and keeps the previous key for datagrams still in flight.
//! No message exchange is needed, so delivery never pauses, and the session's index stays the
//! same. Old keys are erased, so a key stolen later does not decrypt earlier generations.

use std::sync::Arc;
use std::time::Duration;

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use zeroize::Zeroizing;

/// Replace a sending key after this long (WireGuard's `REKEY_AFTER_TIME`).
pub const REKEY_AFTER_TIME: Duration = Duration::from_secs(120);
/// Refuse datagrams under a receiving key first used this long ago (`REJECT_AFTER_TIME`).
pub const REJECT_AFTER_TIME: Duration = Duration::from_secs(180);
/// Replace a sending key after this many datagrams (`REKEY_AFTER_MESSAGES`).
pub const REKEY_AFTER_MESSAGES: u64 = 1 << 60;
/// Refuse datagrams under a receiving key after this many (`REJECT_AFTER_MESSAGES`).
pub const REJECT_AFTER_MESSAGES: u64 = u64::MAX - (1 << 13);

/// When a [`Session`](crate::Session) rotates and refuses keys. Time thresholds apply only to
/// sessions the caller ticks ([`Session::tick`](crate::Session::tick)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RekeyPolicy {
    /// Rotate the sending key once it has been in use this long.
    pub rekey_after_time: Duration,
    /// Refuse a receiving key first used longer ago than this.
    pub reject_after_time: Duration,
    /// Rotate the sending key after this many datagrams under it.
    pub rekey_after_messages: u64,
    /// Refuse a receiving key after this many datagrams under it.
    pub reject_after_messages: u64,
}

impl Default for RekeyPolicy {
    /// WireGuard's constants.
    fn default() -> Self {
        Self {
            rekey_after_time: REKEY_AFTER_TIME,
            reject_after_time: REJECT_AFTER_TIME,
            rekey_after_messages: REKEY_AFTER_MESSAGES,
            reject_after_messages: REJECT_AFTER_MESSAGES,
        }
    }
}

impl RekeyPolicy {
    /// Rotation every `interval` (for tests and short-lived experiments); refusal after 1.5
    /// intervals, the same ratio as WireGuard's 120 s / 180 s.
    pub fn every(interval: Duration) -> Self {
        Self {
            rekey_after_time: interval,
            reject_after_time: interval + interval / 2,
            ..Self::default()
        }
    }

    /// Whether the sending key `k` should be replaced before the next datagram. A key is
    /// rotated only after it sealed at least one datagram, so the receiver never has to skip
    /// a generation it has not seen.
    pub(crate) fn send_due(&self, k: &KeyGeneration, now: Duration) -> bool {
        k.messages >= self.rekey_after_messages
            || k.first_used
                .is_some_and(|t| now.saturating_sub(t) >= self.rekey_after_time)
    }

    /// Whether the receiving key `k` must no longer be accepted.
    pub(crate) fn expired(&self, k: &KeyGeneration, now: Duration) -> bool {
        k.messages >= self.reject_after_messages
            || k.first_used
                .is_some_and(|t| now.saturating_sub(t) > self.reject_after_time)
    }
}

/// Where a session's sending key stands in its rotation, for status displays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyStatus {
    /// Rotations of our sending key since the handshake: 0 for the handshake's key.
    pub send_generation: u64,
    /// Rotations of the peer's sending key seen so far.
    pub recv_generation: u64,
    /// Time since the sending key first sealed a datagram (`None` before it has).
    pub send_key_age: Option<Duration>,
    /// Datagrams sealed under the sending key.
    pub send_key_messages: u64,
    /// Time left until the sending key rotates on age (`None` before it is first used:
    /// the clock starts then). It rotates at the first datagram sealed after this.
    pub rotate_in: Option<Duration>,
    /// Datagrams left until the sending key rotates on count.
    pub rotate_after_messages: u64,
}

/// The 96-bit AES-GCM nonce of Noise's `AESGCM` cipher: 32 zero bits, then the 64-bit
/// counter, big-endian.
fn aead_nonce(n: u64) -> Nonce {
    let mut bytes = [0u8; 12];
    bytes[4..].copy_from_slice(&n.to_be_bytes());
    Nonce::assume_unique_for_key(bytes)
}

/// A transport key: AES-256-GCM with Noise's `AESGCM` nonce layout, tag kept apart. AES-GCM
/// because every CPU Horde targets has AES and carry-less multiply instructions, where it
/// costs about a third of ChaCha20-Poly1305 per datagram (docs/crypto.md, "Transport AEAD").
pub(crate) struct TransportCipher(LessSafeKey);

impl TransportCipher {
    fn new(key: &[u8; 32]) -> Self {
        let key = UnboundKey::new(&AES_256_GCM, key).expect("32-byte AES-256 key");
        Self(LessSafeKey::new(key))
    }

    /// Encrypts a prepared datagram in place (`Session::prepare_append`): the nonce is
    /// read from its header, the tag written into the room left at its end.
    pub(crate) fn seal_prepared(&self, datagram: &mut [u8]) {
        use crate::packet::{TAG_LEN, TRANSPORT_HEADER_LEN};
        debug_assert!(datagram.len() >= TRANSPORT_HEADER_LEN + TAG_LEN);
        let mut n = [0u8; 8];
        n.copy_from_slice(&datagram[TRANSPORT_HEADER_LEN - 8..TRANSPORT_HEADER_LEN]);
        let nonce = u64::from_le_bytes(n);
        let body_end = datagram.len() - TAG_LEN;
        let tag =
            self.encrypt_in_place_detached(nonce, &mut datagram[TRANSPORT_HEADER_LEN..body_end]);
        datagram[body_end..].copy_from_slice(&tag);
    }

    /// Encrypts `buf` in place under `nonce`; returns the tag.
    pub(crate) fn encrypt_in_place_detached(&self, nonce: u64, buf: &mut [u8]) -> [u8; 16] {
        let tag = self
            .0
            .seal_in_place_separate_tag(aead_nonce(nonce), Aad::empty(), buf)
            // Invariant: fails only on a payload beyond GCM's 64 GiB limit.
            .expect("datagrams are far below AES-GCM's limit");
        let mut out = [0u8; 16];
        out.copy_from_slice(tag.as_ref());
        out
    }

    /// Decrypts `buf` in place if `tag` verifies. On failure `buf` holds garbage.
    pub(crate) fn decrypt_in_place_detached(
        &self,
        nonce: u64,
        buf: &mut [u8],
        tag: &[u8],
    ) -> Result<(), ()> {
        let tag = ring::aead::Tag::try_from(tag).map_err(|_| ())?;
        self.0
            .open_in_place_separate_tag(aead_nonce(nonce), Aad::empty(), tag, buf, 0..)
            .map(|_| ())
            .map_err(|_| ())
    }
}

/// One generation of a directional key.
pub(crate) struct KeyGeneration {
    /// Shared with sealing threads that finish datagrams prepared under this key
    /// ([`SealKey`](crate::SealKey)); it is dropped when the last of them is done.
    cipher: Arc<TransportCipher>,
    phase: u8,
    first_used: Option<Duration>,
    messages: u64,
}

impl KeyGeneration {
    /// The key a handshake produced: phase 0.
    pub(crate) fn first(key: [u8; 32]) -> Self {
        Self::with_phase(Zeroizing::new(key), 0)
    }

    fn with_phase(key: Zeroizing<[u8; 32]>, phase: u8) -> Self {
        // The raw key is wiped when `key` drops; the cipher keeps its own expanded copy.
        let cipher = Arc::new(TransportCipher::new(&key));
        Self {
            cipher,
            phase,
            first_used: None,
            messages: 0,
        }
    }

    /// The following generation (Noise `REKEY`), with the other phase bit. `now` stamps it as
    /// in use from then on.
    pub(crate) fn next(&self, now: Duration) -> Self {
        let mut block = Zeroizing::new([0u8; 32]);
        self.cipher
            .encrypt_in_place_detached(u64::MAX, &mut block[..]);
        let mut next = Self::with_phase(block, self.phase ^ 1);
        next.first_used = Some(now);
        next
    }

    pub(crate) fn cipher(&self) -> &TransportCipher {
        &self.cipher
    }

    /// The cipher, shared.
    pub(crate) fn shared_cipher(&self) -> &Arc<TransportCipher> {
        &self.cipher
    }

    /// 0 or 1.
    pub(crate) fn phase(&self) -> u8 {
        self.phase
    }

    /// When this key first protected a datagram, on the session's clock.
    pub(crate) fn first_used(&self) -> Option<Duration> {
        self.first_used
    }

    /// Datagrams protected under this key so far.
    pub(crate) fn messages(&self) -> u64 {
        self.messages
    }

    /// Records one datagram under this key at `now`.
    pub(crate) fn used(&mut self, now: Duration) {
        self.first_used.get_or_insert(now);
        self.messages = self.messages.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The transport cipher is AES-256-GCM with Noise's `AESGCM` nonce (four zero bytes, then
    /// the counter big-endian): checked against an independent implementation (Python's
    /// `cryptography` package, `AESGCM(key).encrypt(nonce, plaintext, None)`).
    #[test]
    fn transport_cipher_is_aes_256_gcm_with_noise_nonces() {
        let key: [u8; 32] = std::array::from_fn(|i| i as u8);
        let cipher = TransportCipher::new(&key);
        let mut buf = *b"horde transport";
        let tag = cipher.encrypt_in_place_detached(0x0102_0304_0506_0708, &mut buf);
        let mut sealed = buf.to_vec();
        sealed.extend_from_slice(&tag);
        let expected = "6c3e176ab8c17dec62f18e9f71154d3bcd4869570cca47f2cbfc6277f4cb4f";
        let hex: String = sealed.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, expected);
        assert!(cipher
            .decrypt_in_place_detached(0x0102_0304_0506_0708, &mut buf, &tag)
            .is_ok());
        assert_eq!(&buf, b"horde transport");
        // Another nonce does not open it.
        let mut again = sealed[..15].to_vec();
        assert!(cipher
            .decrypt_in_place_detached(0x0807_0605_0403_0201, &mut again, &tag)
            .is_err());
    }
}
