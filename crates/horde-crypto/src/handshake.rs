//! The two-message Noise IK handshake.
//!
//! ```text
//! initiator                                             responder
//!   Initiator::new ──── initiation (type 1, sender index i) ───▶ Responder::respond
//!                                                                 (allow-list, timestamp)
//!   Initiator::read_response ◀── response (type 2, receiver index i) ──┘
//!        │                                                        │
//!     Session (local i, remote r)                       Session (local r, remote i)
//! ```
//!
//! The initiator knows the responder's static key in advance (IK), so the first message
//! already carries the initiator's encrypted static key and a payload; the responder learns
//! who is calling, checks the allow-list, and answers. Randomness (ephemeral keys) comes from
//! the caller's RNG, so a seeded RNG reproduces a run bit for bit.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{CryptoRng, RngCore, SeedableRng};
use snow::params::{CipherChoice, DHChoice, HashChoice, NoiseParams};
use snow::resolvers::{CryptoResolver, DefaultResolver};
use snow::types::{Cipher, Dh, Hash, Random};
use snow::{Builder, HandshakeState};

use crate::cookie::MacKeys;
use crate::drop::counted;
use crate::packet::{
    classify, Packet, COOKIE_LEN, INITIATION_LEN, INITIATION_PAYLOAD_LEN, MAC1_OFFSET, MAC2_OFFSET,
    PREFIX_LEN, RESPONSE_LEN, RESPONSE_PAYLOAD_LEN, TYPE_INITIATION, TYPE_RESPONSE,
};
use crate::session::SessionKeys;
use crate::{DropCounters, DropReason, Keypair, PublicKey, Session};

/// The Noise protocol name; it is hashed into every handshake.
pub const NOISE_PATTERN: &str = "Noise_IK_25519_ChaChaPoly_BLAKE2s";

/// Prefix of the Noise prologue. The prologue is this label followed by the initiation's
/// first five bytes (type and sender index), so the cleartext header is authenticated.
/// The label carries the handshake version (v2 added `mac1`/`mac2`, v3 moved the transport to
/// AES-256-GCM), so that no handshake between two versions can ever complete.
const PROLOGUE_LABEL: &[u8] = b"horde-crypto v3";

/// Draws a random 32-bit index for which `in_use` is false. The caller owns the table that
/// routes datagrams to sessions by index, so it chooses the index and passes it to
/// [`Initiator::new`] and [`Responder::respond`].
pub fn random_index<R: RngCore + ?Sized>(rng: &mut R, in_use: impl Fn(u32) -> bool) -> u32 {
    loop {
        let index = rng.next_u32();
        if !in_use(index) {
            return index;
        }
    }
}

fn params() -> NoiseParams {
    NOISE_PATTERN
        .parse()
        .expect("the Noise protocol name is valid")
}

fn prologue(prefix: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(PROLOGUE_LABEL.len() + PREFIX_LEN);
    p.extend_from_slice(PROLOGUE_LABEL);
    p.extend_from_slice(prefix);
    p
}

/// A handshake in progress on the initiating side.
///
/// Create it, send [`Initiator::initiation`], and resend the same bytes on the caller's retry
/// timer until a response arrives (the responder answers a retransmission with the same
/// response). To start over, for example after a long silence, create a new `Initiator` with
/// a newer timestamp.
pub struct Initiator {
    state: Option<HandshakeState>,
    local_index: u32,
    responder: PublicKey,
    initiation: Vec<u8>,
    mac_keys: MacKeys,
    cookie: Option<[u8; COOKIE_LEN]>,
    drops: DropCounters,
}

impl Initiator {
    /// Starts a handshake with the responder whose static key is `responder`.
    ///
    /// `local_index` is this session's receiver index (see [`random_index`]). `timestamp` must
    /// grow with every new `Initiator` this host creates for the same responder, across
    /// restarts: the responder refuses an initiation that is not newer than the last one it
    /// accepted from this host, which stops replays of old initiations. Nanoseconds since the
    /// UNIX epoch serve well. `rng` supplies the ephemeral key.
    pub fn new<R: RngCore + CryptoRng + ?Sized>(
        local: &Keypair,
        responder: &PublicKey,
        local_index: u32,
        timestamp: u64,
        rng: &mut R,
    ) -> Self {
        let mut initiation = vec![0u8; INITIATION_LEN];
        initiation[0] = TYPE_INITIATION;
        initiation[1..PREFIX_LEN].copy_from_slice(&local_index.to_le_bytes());
        let prologue = prologue(&initiation[..PREFIX_LEN]);
        let mut state = Builder::with_resolver(params(), SeededResolver::boxed(rng))
            .local_private_key(local.private_bytes())
            .remote_public_key(responder.as_bytes())
            .prologue(&prologue)
            .build_initiator()
            .expect("IK initiator has its local and remote keys");
        let written = state
            .write_message(
                &timestamp.to_le_bytes(),
                &mut initiation[PREFIX_LEN..MAC1_OFFSET],
            )
            .expect("the first IK message fits its buffer");
        debug_assert_eq!(PREFIX_LEN + written, MAC1_OFFSET);
        let mac_keys = MacKeys::for_responder(responder);
        mac_keys.stamp(&mut initiation, None);
        Self {
            state: Some(state),
            local_index,
            responder: *responder,
            initiation,
            mac_keys,
            cookie: None,
            drops: DropCounters::new(),
        }
    }

    /// Processes a cookie reply: the responder is under load and wants this initiation again
    /// with `mac2` made from the cookie. On success [`Initiator::initiation`] carries `mac2`
    /// from now on; resend it at once.
    ///
    /// Errors: the header and length reasons, [`DropReason::UnexpectedType`],
    /// [`DropReason::WrongIndex`], [`DropReason::BadTag`] (not from the responder, or not for
    /// this initiation), [`DropReason::Replayed`] after the handshake completed.
    pub fn read_cookie_reply(&mut self, datagram: &[u8]) -> Result<(), DropReason> {
        let result = self.read_cookie_reply_inner(datagram);
        counted(&mut self.drops, result)
    }

    fn read_cookie_reply_inner(&mut self, datagram: &[u8]) -> Result<(), DropReason> {
        match classify(datagram)? {
            Packet::CookieReply { receiver_index } if receiver_index == self.local_index => {}
            Packet::CookieReply { .. } => return Err(DropReason::WrongIndex),
            _ => return Err(DropReason::UnexpectedType),
        }
        if self.state.is_none() {
            return Err(DropReason::Replayed);
        }
        let cookie = self
            .mac_keys
            .open_cookie_reply(datagram, &self.initiation[MAC1_OFFSET..MAC2_OFFSET])?;
        self.cookie = Some(cookie);
        self.mac_keys
            .stamp(&mut self.initiation, self.cookie.as_ref());
        Ok(())
    }

    /// Whether a cookie reply was accepted (the initiation carries `mac2`).
    pub fn has_cookie(&self) -> bool {
        self.cookie.is_some()
    }

    /// The initiation datagram. Send it, and send it again (unchanged) to retransmit.
    pub fn initiation(&self) -> &[u8] {
        &self.initiation
    }

    /// The index responses must carry.
    pub fn local_index(&self) -> u32 {
        self.local_index
    }

    /// The responder's static key this handshake is addressed to.
    pub fn responder(&self) -> &PublicKey {
        &self.responder
    }

    /// Whether a response was accepted (after which the handshake is spent).
    pub fn is_finished(&self) -> bool {
        self.state.is_none()
    }

    /// Processes a response datagram and, if it is authentic, returns the session.
    ///
    /// Errors: the header and length reasons, [`DropReason::UnexpectedType`] for any other
    /// type, [`DropReason::WrongIndex`], [`DropReason::BadTag`] (not from the expected
    /// responder, or altered), and [`DropReason::Replayed`] for a response after the handshake
    /// already completed. A rejected datagram leaves the handshake as it was, so a forged or
    /// corrupted response cannot stop a genuine one from being accepted later. Drops are
    /// counted in [`Initiator::drop_counters`].
    pub fn read_response(&mut self, datagram: &[u8]) -> Result<Session, DropReason> {
        let result = self.read_response_inner(datagram);
        counted(&mut self.drops, result)
    }

    fn read_response_inner(&mut self, datagram: &[u8]) -> Result<Session, DropReason> {
        match classify(datagram)? {
            Packet::Response { receiver_index } if receiver_index == self.local_index => {}
            Packet::Response { .. } => return Err(DropReason::WrongIndex),
            _ => return Err(DropReason::UnexpectedType),
        }
        let state = self.state.as_mut().ok_or(DropReason::Replayed)?;
        let mut payload = [0u8; RESPONSE_PAYLOAD_LEN];
        // On failure snow restores its symmetric state, and the only other field it touched
        // (the remote ephemeral key) is overwritten by the next read, so the handshake can
        // still accept the genuine response.
        state
            .read_message(&datagram[PREFIX_LEN..], &mut payload)
            .map_err(|_| DropReason::BadTag)?;
        let remote_index = u32::from_le_bytes(payload);
        let mut state = self.state.take().expect("checked above");
        let (to_responder, to_initiator) = state.dangerously_get_raw_split();
        Ok(Session::new(
            SessionKeys::new(to_responder, to_initiator),
            self.local_index,
            remote_index,
            self.responder,
            true,
        ))
    }

    /// Responses dropped by [`Initiator::read_response`], per reason.
    pub fn drop_counters(&self) -> &DropCounters {
        &self.drops
    }
}

impl fmt::Debug for Initiator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Initiator")
            .field("local_index", &self.local_index)
            .field("responder", &self.responder)
            .field("finished", &self.is_finished())
            .field("drops", &self.drops)
            .finish()
    }
}

/// What the responder does with an acceptable initiation.
#[derive(Debug)]
pub enum Reply {
    /// A new handshake from `peer`: send `response` to the address the initiation came from,
    /// and install `session` (routed by its local index), replacing any older session with
    /// `peer`.
    NewSession {
        /// The initiator's authenticated static key.
        peer: PublicKey,
        /// The response datagram.
        response: Vec<u8>,
        /// The new session.
        session: Box<Session>,
    },
    /// A retransmission of the initiation last accepted from `peer` (its response was
    /// probably lost): send `response`, the same bytes as before, again. The session was
    /// already returned; nothing changes.
    Resend {
        /// The initiator's static key.
        peer: PublicKey,
        /// The response datagram, identical to the first one.
        response: Vec<u8>,
    },
}

impl Reply {
    /// The response datagram to send.
    pub fn response(&self) -> &[u8] {
        match self {
            Reply::NewSession { response, .. } | Reply::Resend { response, .. } => response,
        }
    }

    /// The initiator's static key.
    pub fn peer(&self) -> &PublicKey {
        match self {
            Reply::NewSession { peer, .. } | Reply::Resend { peer, .. } => peer,
        }
    }
}

/// The last initiation accepted from one peer.
struct PeerRecord {
    timestamp: u64,
    ephemeral: [u8; 32],
    initiation: Vec<u8>,
    response: Vec<u8>,
}

/// What the responder learnt about an initiation it once decrypted.
#[derive(Debug, Clone, Copy)]
enum Known {
    /// Authentic, from `peer`, with this timestamp.
    Authentic { peer: PublicKey, timestamp: u64 },
    /// From a key that was not on the allow-list.
    NotAllowed(PublicKey),
}

/// How many decrypted initiations the responder remembers, so that a replay of any of them
/// is refused without Diffie-Hellman ([`Responder::recognise`]).
pub const KNOWN_INITIATIONS: usize = 1024;

/// Initiations already decrypted, by their Noise part (everything before `mac1`), in a
/// bounded table that forgets the oldest first. Only initiations that cost a
/// Diffie-Hellman enter it, so its churn is bounded by the gate's rate limits.
#[derive(Default)]
struct KnownInitiations {
    by_noise: HashMap<[u8; MAC1_OFFSET], Known>,
    order: VecDeque<[u8; MAC1_OFFSET]>,
}

impl KnownInitiations {
    fn get(&self, noise: &[u8]) -> Option<Known> {
        let key: &[u8; MAC1_OFFSET] = noise.try_into().ok()?;
        self.by_noise.get(key).copied()
    }

    fn insert(&mut self, noise: &[u8], known: Known) {
        let Ok(key) = <[u8; MAC1_OFFSET]>::try_from(noise) else {
            return;
        };
        if self.by_noise.insert(key, known).is_none() {
            self.order.push_back(key);
            while self.order.len() > KNOWN_INITIATIONS {
                if let Some(old) = self.order.pop_front() {
                    self.by_noise.remove(&old);
                }
            }
        }
    }
}

/// Answers handshake initiations from allowed peers.
///
/// State is kept only for allowed peers (one record each: the last accepted initiation, its
/// timestamp and the response sent), plus a bounded memory of initiations already
/// decrypted ([`KNOWN_INITIATIONS`]), so unauthenticated traffic cannot grow it.
pub struct Responder {
    local: Keypair,
    /// Shared with the jobs in flight; changed by copy-on-write.
    allowed: Arc<HashSet<PublicKey>>,
    peers: HashMap<PublicKey, PeerRecord>,
    /// Ephemeral key of each peer's last accepted initiation, to recognise retransmissions
    /// without any Diffie-Hellman work.
    by_ephemeral: HashMap<[u8; 32], PublicKey>,
    mac_keys: MacKeys,
    /// Initiations decrypted before: a replay of one is refused without Diffie-Hellman.
    known: KnownInitiations,
    /// The static key of the last initiation refused as not allowed, for the caller's log.
    rejected: Option<PublicKey>,
    drops: DropCounters,
}

impl Responder {
    /// A responder with static key `local` that accepts the initiators in `allowed`.
    pub fn new(local: Keypair, allowed: impl IntoIterator<Item = PublicKey>) -> Self {
        let mac_keys = MacKeys::for_responder(local.public());
        Self {
            local,
            allowed: Arc::new(allowed.into_iter().collect()),
            peers: HashMap::new(),
            by_ephemeral: HashMap::new(),
            mac_keys,
            known: KnownInitiations::default(),
            rejected: None,
            drops: DropCounters::new(),
        }
    }

    /// This responder's static public key (what initiators must know).
    pub fn public(&self) -> &PublicKey {
        self.local.public()
    }

    /// Adds a peer to the allow-list. Returns false if it was already there.
    pub fn allow(&mut self, peer: PublicKey) -> bool {
        Arc::make_mut(&mut self.allowed).insert(peer)
    }

    /// Removes a peer from the allow-list and forgets its handshake record. Returns false if
    /// it was not allowed. Sessions already established with it are the caller's to close.
    pub fn revoke(&mut self, peer: &PublicKey) -> bool {
        if let Some(record) = self.peers.remove(peer) {
            self.by_ephemeral.remove(&record.ephemeral);
        }
        Arc::make_mut(&mut self.allowed).remove(peer)
    }

    /// Whether `peer` is on the allow-list.
    pub fn is_allowed(&self, peer: &PublicKey) -> bool {
        self.allowed.contains(peer)
    }

    /// Answers an initiation this responder has decrypted before, without any
    /// Diffie-Hellman: `Some(Ok(Reply::Resend))` for a copy of a peer's current initiation,
    /// `Some(Err(StaleInitiation))` for an older one of an allowed peer, and
    /// `Some(Err(NotAllowed))` for one from a key still not allowed. `None`: not known (or
    /// no longer conclusive, e.g. the key was allowed since); use the gate and
    /// [`Responder::respond`].
    ///
    /// Costs a hash-map lookup, so a caller can run it before any rate limit: a replayed
    /// old initiation then takes no token from the address it comes from. It does not
    /// check `mac1`. Refusals are counted in [`Responder::drop_counters`].
    pub fn recognise(&mut self, datagram: &[u8]) -> Option<Result<Reply, DropReason>> {
        let result = self.recognise_inner(datagram)?;
        Some(counted(&mut self.drops, result))
    }

    fn recognise_inner(&self, datagram: &[u8]) -> Option<Result<Reply, DropReason>> {
        if !matches!(classify(datagram), Ok(Packet::Initiation { .. })) {
            return None;
        }
        let noise = &datagram[..MAC1_OFFSET];
        // A peer's current initiation, even once the bounded memory has let it go.
        let ephemeral = &noise[PREFIX_LEN..PREFIX_LEN + 32];
        if let Some(peer) = self.by_ephemeral.get(ephemeral) {
            if let Some(record) = self.peers.get(peer) {
                if record.initiation == noise {
                    return Some(Ok(Reply::Resend {
                        peer: *peer,
                        response: record.response.clone(),
                    }));
                }
            }
        }
        let result = match self.known.get(noise)? {
            Known::Authentic { peer, timestamp } => {
                let record = self.peers.get(&peer)?;
                if record.initiation == noise {
                    Ok(Reply::Resend {
                        peer,
                        response: record.response.clone(),
                    })
                } else if timestamp <= record.timestamp {
                    Err(DropReason::StaleInitiation)
                } else {
                    return None;
                }
            }
            Known::NotAllowed(peer) if !self.allowed.contains(&peer) => Err(DropReason::NotAllowed),
            Known::NotAllowed(_) => return None,
        };
        Some(result)
    }

    /// Processes an initiation datagram.
    ///
    /// `local_index` is the index the new session will use (see [`random_index`]); it is
    /// ignored when the result is [`Reply::Resend`]. `rng` supplies the responder's ephemeral
    /// key.
    ///
    /// `mac1` is checked again here (it is cheap); `mac2` and rate limits are the
    /// [`HandshakeGate`](crate::HandshakeGate)'s job, before this is called.
    ///
    /// Errors: the header and length reasons, [`DropReason::UnexpectedType`] for any other
    /// type, [`DropReason::BadMac`], [`DropReason::BadTag`] (not addressed to this responder's key, or altered),
    /// [`DropReason::NotAllowed`], and [`DropReason::StaleInitiation`] (an authentic but old
    /// initiation: a replay, or the initiator's clock went backwards). Rejections change
    /// nothing but [`Responder::drop_counters`].
    ///
    /// Cost: a retransmitted initiation, and any initiation decrypted before (see
    /// [`Responder::recognise`]), is answered from memory; any other well-sized initiation
    /// costs two X25519 operations before it can be rejected, and an accepted one three
    /// more.
    pub fn respond<R: RngCore + CryptoRng + ?Sized>(
        &mut self,
        datagram: &[u8],
        local_index: u32,
        rng: &mut R,
    ) -> Result<Reply, DropReason> {
        let result = self.respond_inner(datagram, local_index, rng);
        counted(&mut self.drops, result)
    }

    fn respond_inner<R: RngCore + CryptoRng + ?Sized>(
        &mut self,
        datagram: &[u8],
        local_index: u32,
        rng: &mut R,
    ) -> Result<Reply, DropReason> {
        if !matches!(classify(datagram)?, Packet::Initiation { .. }) {
            return Err(DropReason::UnexpectedType);
        }
        if !self.mac_keys.mac1_ok(datagram) {
            return Err(DropReason::BadMac);
        }
        if let Some(known) = self.recognise_inner(datagram) {
            return known;
        }
        let work = self.job(datagram)?.run(local_index, rng);
        self.finish_inner(work)
    }

    /// The Diffie-Hellman part of answering `datagram`, as a job that owns everything it
    /// needs, so that it can run on another thread; [`Responder::finish`] takes its
    /// result. The caller checks the datagram first (`mac1`, [`Responder::recognise`],
    /// the [`HandshakeGate`](crate::HandshakeGate)): the job checks only its length and
    /// type. The job carries a copy of this responder's static key and allow-list.
    pub fn job(&self, datagram: &[u8]) -> Result<RespondJob, DropReason> {
        let sender_index = match classify(datagram)? {
            Packet::Initiation { sender_index } => sender_index,
            _ => return Err(DropReason::UnexpectedType),
        };
        Ok(RespondJob {
            local: self.local.clone(),
            allowed: Arc::clone(&self.allowed),
            sender_index,
            initiation: datagram[..MAC1_OFFSET].to_vec(),
        })
    }

    /// Takes the result of a [`RespondJob`]: checks the peer against the allow-list and
    /// the timestamp of its last accepted initiation, remembers the initiation, and returns
    /// the reply. A job for a copy of the initiation just accepted from the same peer (two
    /// copies were in flight at once) gives [`Reply::Resend`]. Errors as
    /// [`Responder::respond`]; they are counted in [`Responder::drop_counters`].
    pub fn finish(&mut self, work: RespondWork) -> Result<Reply, DropReason> {
        let result = self.finish_inner(work);
        counted(&mut self.drops, result)
    }

    fn finish_inner(&mut self, work: RespondWork) -> Result<Reply, DropReason> {
        let RespondWork { initiation, result } = work;
        let noise = &initiation[..];
        let done = match result {
            Err(reason) => return Err(reason),
            Ok(JobResult::NotAllowed(peer)) => return self.refuse_key(noise, peer),
            Ok(JobResult::Done(done)) => done,
        };
        let Done {
            peer,
            timestamp,
            response,
            session,
        } = *done;
        if !self.allowed.contains(&peer) {
            // Revoked while the job ran.
            return self.refuse_key(noise, peer);
        }
        if let Some(record) = self.peers.get(&peer) {
            if record.initiation == noise {
                return Ok(Reply::Resend {
                    peer,
                    response: record.response.clone(),
                });
            }
        }
        self.known
            .insert(noise, Known::Authentic { peer, timestamp });
        if let Some(record) = self.peers.get(&peer) {
            if timestamp <= record.timestamp {
                return Err(DropReason::StaleInitiation);
            }
        }
        let mut ephemeral = [0u8; 32];
        ephemeral.copy_from_slice(&noise[PREFIX_LEN..PREFIX_LEN + 32]);
        let record = PeerRecord {
            timestamp,
            ephemeral,
            initiation: noise.to_vec(),
            response: response.clone(),
        };
        if let Some(old) = self.peers.insert(peer, record) {
            self.by_ephemeral.remove(&old.ephemeral);
        }
        self.by_ephemeral.insert(ephemeral, peer);
        Ok(Reply::NewSession {
            peer,
            response,
            session,
        })
    }

    fn refuse_key(&mut self, noise: &[u8], peer: PublicKey) -> Result<Reply, DropReason> {
        self.rejected = Some(peer);
        self.known.insert(noise, Known::NotAllowed(peer));
        Err(DropReason::NotAllowed)
    }

    /// The static key of the most recent initiation refused with [`DropReason::NotAllowed`],
    /// taken (so each refusal is reported once).
    pub fn take_rejected_key(&mut self) -> Option<PublicKey> {
        self.rejected.take()
    }

    /// Initiations dropped by [`Responder::respond`], per reason.
    pub fn drop_counters(&self) -> &DropCounters {
        &self.drops
    }
}

/// The Diffie-Hellman work of answering one initiation ([`Responder::job`]): owned data,
/// `Send`, run wherever the caller likes.
pub struct RespondJob {
    local: Keypair,
    allowed: Arc<HashSet<PublicKey>>,
    sender_index: u32,
    /// The initiation up to `mac1` (its Noise part).
    initiation: Vec<u8>,
}

/// What a [`RespondJob`] found, for [`Responder::finish`].
pub struct RespondWork {
    initiation: Vec<u8>,
    result: Result<JobResult, DropReason>,
}

enum JobResult {
    /// Authentic, but from a key not on the allow-list (no response was written).
    NotAllowed(PublicKey),
    Done(Box<Done>),
}

/// An accepted initiation's response and session, not yet checked against the
/// responder's records.
struct Done {
    peer: PublicKey,
    timestamp: u64,
    response: Vec<u8>,
    session: Box<Session>,
}

impl RespondJob {
    /// Reads the initiation (two X25519 operations) and, for a peer on the allow-list,
    /// writes the response (three more), for a new session under `local_index`. `rng`
    /// supplies the responder's ephemeral key.
    pub fn run<R: RngCore + CryptoRng + ?Sized>(
        self,
        local_index: u32,
        rng: &mut R,
    ) -> RespondWork {
        let result = self.run_inner(local_index, rng);
        RespondWork {
            initiation: self.initiation,
            result,
        }
    }

    fn run_inner<R: RngCore + CryptoRng + ?Sized>(
        &self,
        local_index: u32,
        rng: &mut R,
    ) -> Result<JobResult, DropReason> {
        let datagram = &self.initiation;
        let prologue = prologue(&datagram[..PREFIX_LEN]);
        let mut state = Builder::with_resolver(params(), SeededResolver::boxed(rng))
            .local_private_key(self.local.private_bytes())
            .prologue(&prologue)
            .build_responder()
            .expect("IK responder has its local key");
        let mut payload = [0u8; INITIATION_PAYLOAD_LEN];
        state
            .read_message(&datagram[PREFIX_LEN..MAC1_OFFSET], &mut payload)
            .map_err(|_| DropReason::BadTag)?;
        let peer = {
            let raw = state
                .get_remote_static()
                .expect("IK message 1 carries the static key");
            let mut key = [0u8; 32];
            key.copy_from_slice(raw);
            PublicKey::from_bytes(key)
        };
        if !self.allowed.contains(&peer) {
            return Ok(JobResult::NotAllowed(peer));
        }
        let timestamp = u64::from_le_bytes(payload);
        let mut response = vec![0u8; RESPONSE_LEN];
        response[0] = TYPE_RESPONSE;
        response[1..PREFIX_LEN].copy_from_slice(&self.sender_index.to_le_bytes());
        let written = state
            .write_message(&local_index.to_le_bytes(), &mut response[PREFIX_LEN..])
            .expect("the second IK message fits its buffer");
        debug_assert_eq!(PREFIX_LEN + written, RESPONSE_LEN);
        let (to_responder, to_initiator) = state.dangerously_get_raw_split();
        let session = Session::new(
            SessionKeys::new(to_initiator, to_responder),
            local_index,
            self.sender_index,
            peer,
            false,
        );
        Ok(JobResult::Done(Box::new(Done {
            peer,
            timestamp,
            response,
            session: Box::new(session),
        })))
    }
}

impl fmt::Debug for RespondJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RespondJob")
            .field("sender_index", &self.sender_index)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for RespondWork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let result = match &self.result {
            Err(r) => r.as_str(),
            Ok(JobResult::NotAllowed(_)) => "not allowed",
            Ok(JobResult::Done(_)) => "done",
        };
        f.debug_struct("RespondWork")
            .field("result", &result)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for Responder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Responder")
            .field("public", self.local.public())
            .field("allowed", &self.allowed.len())
            .field("drops", &self.drops)
            .finish_non_exhaustive()
    }
}

/// snow's default primitives, with the RNG replaced by one seeded from the caller's RNG.
struct SeededResolver {
    seed: [u8; 32],
}

impl SeededResolver {
    fn boxed<R: RngCore + CryptoRng + ?Sized>(rng: &mut R) -> Box<Self> {
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        Box::new(Self { seed })
    }
}

impl CryptoResolver for SeededResolver {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        Some(Box::new(NoiseRng(StdRng::from_seed(self.seed))))
    }

    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        DefaultResolver.resolve_dh(choice)
    }

    fn resolve_hash(&self, choice: &HashChoice) -> Option<Box<dyn Hash>> {
        DefaultResolver.resolve_hash(choice)
    }

    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        DefaultResolver.resolve_cipher(choice)
    }
}

/// A ChaCha-based CSPRNG (rand's `StdRng`), seeded with 32 bytes from the caller's CSPRNG.
struct NoiseRng(StdRng);

impl RngCore for NoiseRng {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }

    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.fill_bytes(dest)
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.0.try_fill_bytes(dest)
    }
}

impl CryptoRng for NoiseRng {}
impl Random for NoiseRng {}
