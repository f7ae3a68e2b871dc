//! Secure datagram layer for Horde: a Noise IK handshake, per-packet AEAD with one nonce space
//! per channel, and per-channel anti-replay windows. Sans-IO: no sockets, threads or clock
//! reads; callers pass datagrams in and get datagrams out, and supply randomness and
//! timestamps themselves.
//!
//! The design follows WireGuard: static X25519 keys, `Noise_IK_25519_ChaChaPoly_BLAKE2s`, random
//! 32-bit indices that route datagrams to sessions, and explicit nonces so datagrams may
//! arrive out of order. Transport datagrams are sealed with AES-256-GCM under the keys the
//! handshake splits. Initiations carry WireGuard's `mac1`/`mac2`, so a [`HandshakeGate`]
//! can refuse floods before any Diffie-Hellman (cookie replies under load, per-source rate
//! limits), and sessions rotate their keys in place ([`rekey`]). `docs/crypto.md` has the
//! threat model, the byte layouts and the known limits.
//!
//! ```
//! use horde_crypto::{random_index, Initiator, Keypair, Reply, Responder};
//! use rand::{rngs::StdRng, SeedableRng};
//!
//! let mut rng = StdRng::seed_from_u64(7);
//! let client = Keypair::generate_with(&mut rng);
//! let server = Keypair::generate_with(&mut rng);
//! let server_public = *server.public();
//! let mut responder = Responder::new(server, [*client.public()]);
//!
//! // Initiator: send `initiation()`, resend it on a timer until a response arrives.
//! let index = random_index(&mut rng, |_| false);
//! let mut initiator = Initiator::new(&client, &server_public, index, 1, &mut rng);
//!
//! // Responder: answer, and install the new session.
//! let reply = responder.respond(initiator.initiation(), random_index(&mut rng, |_| false), &mut rng)?;
//! let Reply::NewSession { response, session: mut server_session, .. } = reply else {
//!     unreachable!("first initiation")
//! };
//!
//! // Initiator: the response completes the handshake.
//! let mut client_session = initiator.read_response(&response)?;
//!
//! // Transport on channel 2.
//! let (mut datagram, mut plaintext) = (Vec::new(), Vec::new());
//! client_session.seal(2, b"hello", &mut datagram).unwrap();
//! let (channel, data) = server_session.open(&datagram, &mut plaintext)?;
//! assert_eq!((channel, data), (2, &b"hello"[..]));
//! # Ok::<(), horde_crypto::DropReason>(())
//! ```

#![warn(missing_docs)]

mod by_channel;
mod cookie;
mod drop;
mod handshake;
mod keys;
mod packet;
mod ratelimit;
pub mod rekey;
mod replay;
mod server_id;
mod session;

pub use cookie::{Admission, HandshakeGate, COOKIE_SECRET_LIFETIME};
pub use drop::{DropCounters, DropReason};
pub use handshake::{
    random_index, Initiator, Reply, RespondJob, RespondWork, Responder, KNOWN_INITIATIONS,
    NOISE_PATTERN,
};
pub use keys::{KeyError, Keypair, PublicKey, KEY_LEN, KEY_TEXT_LEN};
pub use packet::{
    classify, nonce, split_nonce, Packet, COOKIE_REPLY_LEN, COUNTER_BITS, COUNTER_LIMIT,
    COUNTER_MASK, INITIATION_LEN, KEY_PHASE_BIT, LEGACY_INITIATION_LEN, MAC1_OFFSET, MAC2_OFFSET,
    MAC_LEN, MAX_NOISE_MESSAGE, MAX_PLAINTEXT, RESPONSE_LEN, TAG_LEN, TRANSPORT_HEADER_LEN,
    TRANSPORT_OVERHEAD, TYPE_COOKIE_REPLY, TYPE_INITIATION, TYPE_LEGACY_INITIATION, TYPE_RESPONSE,
    TYPE_TRANSPORT,
};
pub use ratelimit::{RateLimit, RateLimiter};
pub use rekey::{KeyStatus, RekeyPolicy};
pub use replay::{ReplayWindow, REPLAY_WINDOW};
pub use server_id::{id_of_index, redial_index, routed_id, ServerId, ServerIdError, INDEX_OFFSET};
pub use session::{SealError, SealKey, Session};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_admission;
#[cfg(test)]
mod tests_rekey;
