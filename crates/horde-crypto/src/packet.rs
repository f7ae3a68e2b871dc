//! Datagram layout and cheap classification (no cryptography).
//!
//! Every datagram starts with a type byte and a 32-bit little-endian index:
//!
//! | type     | name         | layout                                                                           | size   |
//! |----------|--------------|----------------------------------------------------------------------------------|--------|
//! | 5        | initiation   | type, sender index, Noise message 1 (e 32, s 32+16, payload 8+16), mac1, mac2     | 141    |
//! | 2        | response     | type, receiver index, Noise message 2 (e 32, payload 4+16)                       | 57     |
//! | 3 / 0x83 | transport    | type (bit 7: key phase), receiver index, nonce (u64 LE), ciphertext, GCM tag (16)| 29 + n |
//! | 4        | cookie reply | type, receiver index, nonce 24, encrypted cookie 16+16                           | 61     |
//!
//! Handshake version 3 moved the transport AEAD from ChaCha20-Poly1305 to AES-256-GCM and the
//! initiation's type byte from 1 to 5. Initiations of the older versions (type 1: v1 had no
//! MACs and was 109 bytes, v2 was 141) are recognised by that byte and refused with
//! [`DropReason::LegacyHandshake`], so that the operator learns why.

use crate::DropReason;

/// Type byte of a handshake initiation (handshake version 3).
pub const TYPE_INITIATION: u8 = 5;
/// Type byte of an initiation in handshake versions 1 and 2, refused as
/// [`DropReason::LegacyHandshake`].
pub const TYPE_LEGACY_INITIATION: u8 = 1;
/// Type byte of a handshake response.
pub const TYPE_RESPONSE: u8 = 2;
/// Type byte of a transport datagram sealed under an even key phase. The odd phase sets
/// [`KEY_PHASE_BIT`].
pub const TYPE_TRANSPORT: u8 = 3;
/// Type byte of a cookie reply (the responder is under load and wants proof of address).
pub const TYPE_COOKIE_REPLY: u8 = 4;
/// Bit of a transport datagram's type byte that carries the sender's key phase (see
/// `Session`'s rekeying).
pub const KEY_PHASE_BIT: u8 = 0x80;

/// Length of the AEAD tag.
pub const TAG_LEN: usize = 16;
/// Length of an X25519 public key on the wire.
const DH_LEN: usize = 32;
/// Type byte plus 32-bit index.
pub(crate) const PREFIX_LEN: usize = 5;
/// Plaintext payload of the initiation: the initiator's 64-bit timestamp.
pub(crate) const INITIATION_PAYLOAD_LEN: usize = 8;
/// Plaintext payload of the response: the responder's 32-bit sender index.
pub(crate) const RESPONSE_PAYLOAD_LEN: usize = 4;

/// Noise IK message 1: `e, es, s, ss` + encrypted payload.
pub(crate) const NOISE_MSG1_LEN: usize =
    DH_LEN + (DH_LEN + TAG_LEN) + (INITIATION_PAYLOAD_LEN + TAG_LEN);
/// Noise IK message 2: `e, ee, se` + encrypted payload.
pub(crate) const NOISE_MSG2_LEN: usize = DH_LEN + (RESPONSE_PAYLOAD_LEN + TAG_LEN);

/// Length of `mac1` and `mac2` (keyed BLAKE2s-128).
pub const MAC_LEN: usize = 16;
/// Offset of `mac1` in an initiation: it covers everything before it.
pub const MAC1_OFFSET: usize = PREFIX_LEN + NOISE_MSG1_LEN;
/// Offset of `mac2` in an initiation: it covers everything before it, `mac1` included.
pub const MAC2_OFFSET: usize = MAC1_OFFSET + MAC_LEN;
/// Size of an initiation datagram.
pub const INITIATION_LEN: usize = MAC2_OFFSET + MAC_LEN;
/// Size of an initiation in the first handshake format, which had no MACs.
pub const LEGACY_INITIATION_LEN: usize = PREFIX_LEN + NOISE_MSG1_LEN;
/// Length of the cookie a cookie reply carries.
pub const COOKIE_LEN: usize = 16;
/// Length of the XChaCha20-Poly1305 nonce in a cookie reply.
pub const COOKIE_NONCE_LEN: usize = 24;
/// Size of a cookie reply datagram.
pub const COOKIE_REPLY_LEN: usize = PREFIX_LEN + COOKIE_NONCE_LEN + COOKIE_LEN + TAG_LEN;
/// Size of a response datagram.
pub const RESPONSE_LEN: usize = PREFIX_LEN + NOISE_MSG2_LEN;
/// Header of a transport datagram: type, receiver index, nonce.
pub const TRANSPORT_HEADER_LEN: usize = PREFIX_LEN + 8;
/// Bytes a transport datagram adds to its plaintext (header and tag).
pub const TRANSPORT_OVERHEAD: usize = TRANSPORT_HEADER_LEN + TAG_LEN;
/// Largest Noise message (ciphertext and tag) a transport datagram may carry.
pub const MAX_NOISE_MESSAGE: usize = 65535;
/// Largest plaintext [`Session::seal`](crate::Session::seal) accepts.
pub const MAX_PLAINTEXT: usize = MAX_NOISE_MESSAGE - TAG_LEN;

/// Bits of the nonce that hold the per-channel counter; the channel is in the top 8 bits.
pub const COUNTER_BITS: u32 = 56;
/// Mask selecting the counter from a nonce.
pub const COUNTER_MASK: u64 = (1 << COUNTER_BITS) - 1;
/// Counters are `0..COUNTER_LIMIT`. The all-ones counter is never used, so that no channel
/// can produce the nonce 2^64 - 1, which Noise reserves.
pub const COUNTER_LIMIT: u64 = COUNTER_MASK;

/// The 64-bit AEAD nonce of packet `counter` on `channel`.
pub const fn nonce(channel: u8, counter: u64) -> u64 {
    ((channel as u64) << COUNTER_BITS) | (counter & COUNTER_MASK)
}

/// Splits a nonce into `(channel, counter)`.
pub const fn split_nonce(nonce: u64) -> (u8, u64) {
    ((nonce >> COUNTER_BITS) as u8, nonce & COUNTER_MASK)
}

/// What a datagram claims to be, read from its cleartext header only. Nothing here is
/// authenticated yet; use it to route a datagram to the object that can check it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packet {
    /// A handshake initiation, for the [`Responder`](crate::Responder).
    Initiation {
        /// The initiator's index (the responder sends to it).
        sender_index: u32,
    },
    /// A handshake response, for the [`Initiator`](crate::Initiator) with this local index.
    Response {
        /// The initiator's index.
        receiver_index: u32,
    },
    /// A cookie reply, for the [`Initiator`](crate::Initiator) with this local index.
    CookieReply {
        /// The initiator's index.
        receiver_index: u32,
    },
    /// Session traffic, for the [`Session`](crate::Session) with this local index.
    Transport {
        /// The receiving session's local index.
        receiver_index: u32,
        /// Channel id (top 8 bits of the nonce).
        channel: u8,
        /// Per-channel packet counter (low 56 bits of the nonce).
        counter: u64,
        /// The sender's key phase (0 or 1).
        key_phase: u8,
    },
}

/// Reads the cleartext header and checks the length for the type.
///
/// Errors: [`DropReason::Truncated`] (empty, or shorter than the type requires),
/// [`DropReason::UnknownType`], [`DropReason::Oversized`], and
/// [`DropReason::LegacyHandshake`] for an initiation of handshake version 1 or 2 (type
/// byte 1, any length).
pub fn classify(datagram: &[u8]) -> Result<Packet, DropReason> {
    let (&raw_kind, _) = datagram.split_first().ok_or(DropReason::Truncated)?;
    let (kind, key_phase) = match raw_kind & !KEY_PHASE_BIT {
        TYPE_TRANSPORT => (TYPE_TRANSPORT, raw_kind >> 7),
        _ => (raw_kind, 0),
    };
    let (min, max) = match kind {
        TYPE_LEGACY_INITIATION => return Err(DropReason::LegacyHandshake),
        TYPE_INITIATION => (INITIATION_LEN, INITIATION_LEN),
        TYPE_RESPONSE => (RESPONSE_LEN, RESPONSE_LEN),
        TYPE_COOKIE_REPLY => (COOKIE_REPLY_LEN, COOKIE_REPLY_LEN),
        TYPE_TRANSPORT => (TRANSPORT_OVERHEAD, TRANSPORT_HEADER_LEN + MAX_NOISE_MESSAGE),
        _ => return Err(DropReason::UnknownType),
    };
    if datagram.len() < min {
        return Err(DropReason::Truncated);
    }
    if datagram.len() > max {
        return Err(DropReason::Oversized);
    }
    let index = read_u32(datagram, 1);
    Ok(match kind {
        TYPE_INITIATION => Packet::Initiation {
            sender_index: index,
        },
        TYPE_RESPONSE => Packet::Response {
            receiver_index: index,
        },
        TYPE_COOKIE_REPLY => Packet::CookieReply {
            receiver_index: index,
        },
        _ => {
            let (channel, counter) = split_nonce(read_u64(datagram, PREFIX_LEN));
            Packet::Transport {
                receiver_index: index,
                channel,
                counter,
                key_phase,
            }
        }
    })
}

/// Little-endian u32 at `at`; the caller has checked the length.
fn read_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

/// Little-endian u64 at `at`; the caller has checked the length.
fn read_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(INITIATION_LEN, 141);
        assert_eq!(LEGACY_INITIATION_LEN, 109);
        assert_eq!(COOKIE_REPLY_LEN, 61);
        assert_eq!(RESPONSE_LEN, 57);
        assert_eq!(TRANSPORT_HEADER_LEN, 13);
        assert_eq!(TRANSPORT_OVERHEAD, 29);
    }

    #[test]
    fn nonce_layout() {
        assert_eq!(nonce(0, 0), 0);
        assert_eq!(nonce(1, 0), 1 << 56);
        assert_eq!(nonce(0xff, COUNTER_LIMIT - 1), u64::MAX - 1);
        assert_eq!(split_nonce(nonce(7, 123_456)), (7, 123_456));
        assert_eq!(split_nonce(u64::MAX), (0xff, COUNTER_MASK));
        // Distinct channels never share a nonce.
        assert_ne!(nonce(1, 5), nonce(2, 5));
    }

    #[test]
    fn classify_by_length() {
        assert_eq!(classify(&[]), Err(DropReason::Truncated));
        for t in [0u8, 6, 0x80, 0x81, 0x85, 0xff] {
            assert_eq!(classify(&[t; 200]), Err(DropReason::UnknownType));
        }
        let mut init = vec![0u8; INITIATION_LEN];
        init[0] = TYPE_INITIATION;
        init[1..5].copy_from_slice(&0xdead_beef_u32.to_le_bytes());
        assert_eq!(
            classify(&init),
            Ok(Packet::Initiation {
                sender_index: 0xdead_beef
            })
        );
        assert_eq!(
            classify(&init[..INITIATION_LEN - 1]),
            Err(DropReason::Truncated)
        );
        assert_eq!(
            classify(&init[..LEGACY_INITIATION_LEN]),
            Err(DropReason::Truncated)
        );
        // Versions 1 (109 bytes) and 2 (141 bytes) are named as older versions.
        let mut old = init.clone();
        old[0] = TYPE_LEGACY_INITIATION;
        assert_eq!(classify(&old), Err(DropReason::LegacyHandshake));
        assert_eq!(
            classify(&old[..LEGACY_INITIATION_LEN]),
            Err(DropReason::LegacyHandshake)
        );
        init.push(0);
        assert_eq!(classify(&init), Err(DropReason::Oversized));

        let mut t = vec![0u8; TRANSPORT_OVERHEAD];
        t[0] = TYPE_TRANSPORT;
        t[1..5].copy_from_slice(&9u32.to_le_bytes());
        t[5..13].copy_from_slice(&nonce(3, 77).to_le_bytes());
        assert_eq!(
            classify(&t),
            Ok(Packet::Transport {
                receiver_index: 9,
                channel: 3,
                counter: 77,
                key_phase: 0
            })
        );
        t[0] = TYPE_TRANSPORT | KEY_PHASE_BIT;
        assert!(matches!(
            classify(&t),
            Ok(Packet::Transport { key_phase: 1, .. })
        ));
        t[0] = TYPE_TRANSPORT;
        assert_eq!(
            classify(&t[..TRANSPORT_OVERHEAD - 1]),
            Err(DropReason::Truncated)
        );
        t.resize(TRANSPORT_HEADER_LEN + MAX_NOISE_MESSAGE, 0);
        assert!(classify(&t).is_ok());
        t.push(0);
        assert_eq!(classify(&t), Err(DropReason::Oversized));
    }
}
