//! Cheap admission of handshake initiations, before any Diffie-Hellman: `mac1`, `mac2` and
//! cookie replies, as in WireGuard.
//!
//! - `mac1` = BLAKE2s-128 keyed by `BLAKE2s-256(LABEL_MAC1 ‖ responder public key)` over the
//!   initiation up to `mac1`. Only a sender that knows the responder's public key can make
//!   it, so random floods are dropped after one hash.
//! - Under load, or once the source address has used up its bucket, the responder wants
//!   `mac2` = BLAKE2s-128 keyed by a *cookie* over the initiation up to `mac2`. The cookie
//!   is BLAKE2s-128 of the source address and port keyed by a secret that changes every
//!   [`COOKIE_SECRET_LIFETIME`], so it proves the sender receives datagrams at that address
//!   and port. An initiation without a valid `mac2` gets a cookie reply: the cookie
//!   encrypted with XChaCha20-Poly1305 under `BLAKE2s-256(LABEL_COOKIE ‖ responder public
//!   key)`, with the initiation's `mac1` as associated data (so only the sender of that
//!   initiation can use it).
//!
//! Rate limits are per flow once the flow is proven, so that one flow cannot starve another
//! behind the same address (a carrier-grade NAT): an initiation with a valid `mac2` draws on
//! the bucket of its address and port; an unproven one draws on its address's bucket, and
//! when that is empty (or under load) it gets a cookie reply, paid from the flow's bucket,
//! so that a neighbour who empties the address's bucket costs a newcomer one round trip.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use blake2::digest::consts::U16;
use blake2::digest::{Digest, KeyInit, Mac};
use blake2::{Blake2s256, Blake2sMac};
use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{Key, Tag, XChaCha20Poly1305, XNonce};
use rand::rngs::StdRng;
use rand::{CryptoRng, RngCore, SeedableRng};
use zeroize::Zeroizing;

use crate::drop::counted;
use crate::packet::{
    classify, Packet, COOKIE_LEN, COOKIE_NONCE_LEN, COOKIE_REPLY_LEN, MAC1_OFFSET, MAC2_OFFSET,
    MAC_LEN, PREFIX_LEN, TAG_LEN, TYPE_COOKIE_REPLY,
};
use crate::ratelimit::{RateLimit, RateLimiter};
use crate::{DropCounters, DropReason, PublicKey};

const LABEL_MAC1: &[u8] = b"horde mac1 v3";
const LABEL_COOKIE: &[u8] = b"horde cookie v3";

/// How long one cookie secret is used; cookies made under it stop verifying after that.
pub const COOKIE_SECRET_LIFETIME: Duration = Duration::from_secs(120);

type Mac128 = Blake2sMac<U16>;

fn hash_key(label: &[u8], public: &PublicKey) -> [u8; 32] {
    let mut h = Blake2s256::new();
    h.update(label);
    h.update(public.as_bytes());
    h.finalize().into()
}

fn keyed(key: &[u8]) -> Mac128 {
    <Mac128 as KeyInit>::new_from_slice(key).expect("BLAKE2s takes keys of up to 32 bytes")
}

fn mac(key: &[u8], data: &[u8]) -> [u8; MAC_LEN] {
    let mut m = keyed(key);
    m.update(data);
    m.finalize().into_bytes().into()
}

fn mac_ok(key: &[u8], data: &[u8], tag: &[u8]) -> bool {
    let mut m = keyed(key);
    m.update(data);
    m.verify_slice(tag).is_ok()
}

/// The keys every `mac1` and cookie reply addressed to one responder use.
#[derive(Clone)]
pub(crate) struct MacKeys {
    mac1: Zeroizing<[u8; 32]>,
    cookie: Zeroizing<[u8; 32]>,
}

impl MacKeys {
    pub(crate) fn for_responder(public: &PublicKey) -> Self {
        Self {
            mac1: Zeroizing::new(hash_key(LABEL_MAC1, public)),
            cookie: Zeroizing::new(hash_key(LABEL_COOKIE, public)),
        }
    }

    /// Writes `mac1`, and `mac2` under `cookie` (zeros without one), into an initiation.
    pub(crate) fn stamp(&self, initiation: &mut [u8], cookie: Option<&[u8; COOKIE_LEN]>) {
        let m1 = mac(&self.mac1[..], &initiation[..MAC1_OFFSET]);
        initiation[MAC1_OFFSET..MAC2_OFFSET].copy_from_slice(&m1);
        let m2 = cookie.map_or([0; MAC_LEN], |c| mac(c, &initiation[..MAC2_OFFSET]));
        initiation[MAC2_OFFSET..MAC2_OFFSET + MAC_LEN].copy_from_slice(&m2);
    }

    /// Whether an initiation's `mac1` verifies (constant time).
    pub(crate) fn mac1_ok(&self, initiation: &[u8]) -> bool {
        mac_ok(
            &self.mac1[..],
            &initiation[..MAC1_OFFSET],
            &initiation[MAC1_OFFSET..MAC2_OFFSET],
        )
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(Key::from_slice(&self.cookie[..]))
    }

    /// Decrypts a cookie reply to the initiation whose `mac1` is `mac1`.
    pub(crate) fn open_cookie_reply(
        &self,
        reply: &[u8],
        mac1: &[u8],
    ) -> Result<[u8; COOKIE_LEN], DropReason> {
        let nonce = XNonce::from_slice(&reply[PREFIX_LEN..PREFIX_LEN + COOKIE_NONCE_LEN]);
        let body = PREFIX_LEN + COOKIE_NONCE_LEN;
        let mut cookie = [0u8; COOKIE_LEN];
        cookie.copy_from_slice(&reply[body..body + COOKIE_LEN]);
        let tag = Tag::from_slice(&reply[body + COOKIE_LEN..body + COOKIE_LEN + TAG_LEN]);
        self.cipher()
            .decrypt_in_place_detached(nonce, mac1, &mut cookie, tag)
            .map_err(|_| DropReason::BadTag)?;
        Ok(cookie)
    }
}

/// What the responder should do with an initiation that passed [`HandshakeGate::check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Hand it to the [`Responder`](crate::Responder) (the expensive part).
    Admit,
    /// Do not process it; send this cookie reply back to its source.
    Cookie(Vec<u8>),
}

/// The responder's cheap front door: checks `mac1` and `mac2` (answering with cookie
/// replies) and limits initiations per flow or per address. No Diffie-Hellman, no
/// allocation except for a cookie reply. Sans-IO: the caller passes time, the source address
/// and whether it is under load.
///
/// The order, for an initiation with a valid `mac1`:
/// 1. A valid `mac2` (a cookie for this address and port) proves the flow: it is admitted
///    if the flow's bucket has a token, else [`DropReason::RateLimited`].
/// 2. Unproven and not under load: admitted if the address's bucket has a token.
/// 3. Otherwise (under load, or the address's bucket is empty): a cookie reply, if the
///    flow's bucket has a token, else [`DropReason::RateLimited`].
///
/// Replays of initiations the responder already knows should be recognised before this
/// ([`Responder::recognise`](crate::Responder::recognise)), so that they take no token.
pub struct HandshakeGate {
    keys: MacKeys,
    secret: Zeroizing<[u8; 32]>,
    secret_born: Option<Duration>,
    rng: StdRng,
    /// Unproven initiations, per source address.
    per_address: RateLimiter<IpAddr>,
    /// Proven initiations and cookie replies, per source address and port.
    per_flow: RateLimiter<SocketAddr>,
    drops: DropCounters,
}

impl HandshakeGate {
    /// A gate for the responder whose static public key is `local`.
    pub fn new<R: RngCore + CryptoRng + ?Sized>(
        local: &PublicKey,
        limit: RateLimit,
        rng: &mut R,
    ) -> Self {
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        Self {
            keys: MacKeys::for_responder(local),
            secret: Zeroizing::new([0; 32]),
            secret_born: None,
            rng: StdRng::from_seed(seed),
            per_address: RateLimiter::new(limit),
            per_flow: RateLimiter::new(limit),
            drops: DropCounters::new(),
        }
    }

    /// Decides about an initiation from `source` at time `now`.
    ///
    /// Errors: the header and length reasons (including [`DropReason::LegacyHandshake`]),
    /// [`DropReason::UnexpectedType`], [`DropReason::BadMac`], [`DropReason::RateLimited`]
    /// (the flow's token bucket is empty: it pays for proven admissions and cookie replies
    /// alike).
    /// A cookie reply is counted as [`DropReason::NeedCookie`]. Every outcome but `Admit` is
    /// counted in [`HandshakeGate::drop_counters`].
    pub fn check(
        &mut self,
        datagram: &[u8],
        source: SocketAddr,
        now: Duration,
        under_load: bool,
    ) -> Result<Admission, DropReason> {
        let result = self.check_inner(datagram, source, now, under_load);
        if let Ok(Admission::Cookie(_)) = result {
            self.drops.record(DropReason::NeedCookie);
        }
        counted(&mut self.drops, result)
    }

    fn check_inner(
        &mut self,
        datagram: &[u8],
        source: SocketAddr,
        now: Duration,
        under_load: bool,
    ) -> Result<Admission, DropReason> {
        let sender_index = match classify(datagram)? {
            Packet::Initiation { sender_index } => sender_index,
            _ => return Err(DropReason::UnexpectedType),
        };
        if !self.keys.mac1_ok(datagram) {
            return Err(DropReason::BadMac);
        }
        let mac2 = &datagram[MAC2_OFFSET..MAC2_OFFSET + MAC_LEN];
        if mac2 != [0; MAC_LEN] {
            let cookie = self.cookie_for(source, now);
            if mac_ok(&cookie, &datagram[..MAC2_OFFSET], mac2) {
                return if self.per_flow.allow(source, now) {
                    Ok(Admission::Admit)
                } else {
                    Err(DropReason::RateLimited)
                };
            }
        }
        if !under_load && self.per_address.allow(source.ip(), now) {
            return Ok(Admission::Admit);
        }
        // Cookie replies draw on the flow's bucket: a source flooding without mac2 would
        // otherwise cost an encryption and a send per datagram.
        if !self.per_flow.allow(source, now) {
            return Err(DropReason::RateLimited);
        }
        let cookie = self.cookie_for(source, now);
        let mac1 = &datagram[MAC1_OFFSET..MAC2_OFFSET];
        Ok(Admission::Cookie(self.cookie_reply(
            sender_index,
            &cookie,
            mac1,
        )))
    }

    /// Takes a token from the bucket of `source` (address and port), for an answer sent
    /// without the gate, such as a response resent from the responder's memory; false if
    /// the bucket is empty.
    pub fn allow_flow(&mut self, source: SocketAddr, now: Duration) -> bool {
        self.per_flow.allow(source, now)
    }

    /// Whether an initiation's `mac1` verifies: one keyed hash, so that a caller can look
    /// it up among known initiations before [`HandshakeGate::check`]. Not counted.
    pub fn mac1_ok(&self, datagram: &[u8]) -> bool {
        datagram.len() >= MAC2_OFFSET && self.keys.mac1_ok(datagram)
    }

    /// The cookie for `source` under the current secret, renewing the secret when it is
    /// older than [`COOKIE_SECRET_LIFETIME`].
    fn cookie_for(&mut self, source: SocketAddr, now: Duration) -> [u8; COOKIE_LEN] {
        let stale = self
            .secret_born
            .is_none_or(|born| now.saturating_sub(born) >= COOKIE_SECRET_LIFETIME);
        if stale {
            self.rng.fill_bytes(&mut self.secret[..]);
            self.secret_born = Some(now);
        }
        let mut m = keyed(&self.secret[..]);
        match source {
            SocketAddr::V4(a) => m.update(&a.ip().octets()),
            SocketAddr::V6(a) => m.update(&a.ip().octets()),
        }
        m.update(&source.port().to_le_bytes());
        m.finalize().into_bytes().into()
    }

    fn cookie_reply(&mut self, receiver_index: u32, cookie: &[u8], mac1: &[u8]) -> Vec<u8> {
        let mut reply = vec![0u8; COOKIE_REPLY_LEN];
        reply[0] = TYPE_COOKIE_REPLY;
        reply[1..PREFIX_LEN].copy_from_slice(&receiver_index.to_le_bytes());
        let (nonce, body) = reply[PREFIX_LEN..].split_at_mut(COOKIE_NONCE_LEN);
        self.rng.fill_bytes(nonce);
        let (sealed, tag_out) = body.split_at_mut(COOKIE_LEN);
        sealed.copy_from_slice(cookie);
        let tag = self
            .keys
            .cipher()
            .encrypt_in_place_detached(XNonce::from_slice(nonce), mac1, sealed)
            .expect("a 16-byte cookie is far below XChaCha20-Poly1305's length limit");
        tag_out.copy_from_slice(&tag);
        reply
    }

    /// Initiations this gate did not admit, per reason.
    pub fn drop_counters(&self) -> &DropCounters {
        &self.drops
    }

    /// Sources the rate limiters track now: addresses plus flows (each bounded by
    /// [`RateLimit::max_sources`]).
    pub fn tracked_sources(&self) -> usize {
        self.per_address.len() + self.per_flow.len()
    }
}

impl std::fmt::Debug for HandshakeGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandshakeGate")
            .field("tracked_sources", &self.tracked_sources())
            .field("drops", &self.drops)
            .finish_non_exhaustive()
    }
}
