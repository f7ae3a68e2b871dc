//! Horde's host without I/O: the connection lifecycle of one host, driven by datagrams,
//! commands, handshake results and time, and polled for datagrams, events and deadlines.
//!
//! A [`Host`] owns every connection's secure session and protocol session and makes each
//! decision about them: routing datagrams by crypto index, the initiator's handshake and
//! its retries, the responder's admission of initiations, accepting a peer's hello for a
//! served service, replacing a peer's old session when it restarts, reconnecting a
//! persistent connection with the old session's unacknowledged ADUs, closing, and taking
//! channels out and back with their interfaces. It opens sessions through a
//! [`horde_proto::Endpoint`].
//!
//! As responder it checks each initiation cheaply, in this order: the header, `mac1`,
//! its memory of initiations it decrypted before (a replay is refused, or a lost response
//! resent, before any token is taken), then cookies and per-flow and per-address token
//! buckets under its load state (see `docs/crypto.md`). What passes becomes a
//! [`HandshakeJob`]: the Diffie-Hellman work, owned and `Send`, which the driver takes
//! with [`Host::poll_handshake_job`], runs where it likes ([`HandshakeJob::run`]: on a
//! worker thread, or inline in a simulation) and hands back with
//! [`Host::handle_handshake_done`]. The allow-list, the timestamps and the new session
//! are decided then, here. The initiator's own Diffie-Hellman (an initiation when it
//! dials, a response when it arrives) runs inline: it costs this host only for the
//! handshakes it opens itself.
//!
//! It has no sockets, threads or clock. A driver feeds it:
//! - [`Host::handle_datagram`] for each received datagram;
//! - [`Host::handle_handshake_done`] with the outcome of each job from
//!   [`Host::poll_handshake_job`];
//! - [`Host::connect`], [`Host::listen`], [`Host::allow_peer`] and
//!   [`Host::handle_command`] for the application;
//! - [`Host::handle_timeout`] once [`Host::poll_timeout`] has passed;
//!
//! and drains [`Host::poll_handshake_transmit`] (handshake datagrams: initiations,
//! responses, cookie replies, sent as they are), [`Host::poll_transmit`] (protocol
//! datagrams, sealed with [`Host::crypto_mut`] of their connection; or
//! [`Host::poll_datagram`], the same without the ADUs each carries) and
//! [`Host::poll_event`].

mod config;
mod conn;
mod dial;
mod error;
mod interfaces;
mod ops;
mod plaintext;
mod receive;
mod refusal;
mod respond;
mod run_op;
mod timers;
mod touched;
mod transmit;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod walk_tests;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use horde_crypto::{DropCounters, Keypair, PublicKey, RekeyPolicy};
use horde_proto::{
    ChannelConfig, ChannelConfigFn, ChannelId, Endpoint, EndpointConfig, Event, ServerConfig,
};
use rand::rngs::StdRng;
use rand::SeedableRng;

pub use config::{ChannelTarget, ConfigError, ConnectConfig, Reconnect, SessionIdentity};
pub use error::{HandshakeSeen, HostError};
pub use ops::{Answer, ChannelStatus, ConnOp, Reply};
pub use plaintext::PlaintextChunks;
pub use refusal::{InitiationLog, REJECT_LOG_EVERY};
pub use respond::{HandshakeJob, HandshakeOutcome, ResponderSettings, LOAD_HOLD};
pub use transmit::{HostDatagram, HostTransmit};

pub use conn::ConnEvents;
use conn::{Conn, ConnState};
use timers::{Timer, TimerTable};
use touched::Touched;

/// Interval between a new connection's handshake initiations.
const INITIATION_RETRY: Duration = Duration::from_millis(500);
/// Consecutive sends refused by ICMP port unreachable on every channel after which a
/// session's peer counts as gone (its process is not there; a link that is down is the
/// interface monitor's business).
const REFUSED_SENDS: u32 = 3;
/// How long a secure session the responder set up may wait for its first protocol
/// datagram, the hello, before it is forgotten: far past any hello's retries, short enough
/// that completed handshakes alone cannot pile up.
const HELLO_WAIT: Duration = Duration::from_secs(10);
/// Decrypted payloads are cut from chunks of this size: one allocation per chunk, not
/// per datagram.
const PLAINTEXT_CHUNK: usize = 256 << 10;

/// What a host starts from.
pub struct HostSettings {
    /// This host's static key pair.
    pub keypair: Keypair,
    /// When session keys rotate.
    pub rekey: RekeyPolicy,
    /// What every session starts from (session config, scheduler, receive buffer).
    pub endpoint: EndpointConfig,
    /// The settings of each channel a peer opens to this host, by channel id.
    pub accepted_channel: ChannelConfigFn,
    /// The interfaces open at the start (0..n).
    pub interfaces: usize,
    /// Seeds the host's choices (crypto indices, ephemeral handshake keys).
    pub seed: u64,
    /// Wall-clock time at `now == 0`, in microseconds since the UNIX epoch: initiations
    /// carry `unix_micros_at_start + now`, which must grow across restarts.
    pub unix_micros_at_start: u64,
    /// Who may connect, and how initiations are admitted.
    pub responder: ResponderSettings,
}

/// Whether an interface can carry channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterfaceState {
    /// Its socket is open.
    Open,
    /// Down for now: channels over it wait for it.
    Down,
    /// Removed for good.
    Removed,
}

/// What the host tells its driver, in order.
#[derive(Debug)]
pub enum HostEvent {
    /// A connection this end opened is up.
    Connected {
        /// The connection.
        key: u64,
        /// The peer's static key.
        peer: PublicKey,
    },
    /// A connection this end opened failed; it is gone.
    ConnectFailed {
        /// The connection.
        key: u64,
        /// Why.
        error: HostError,
    },
    /// A peer opened a connection to a served service. The driver hands it to the
    /// application, or [`Host::refuse`]s it.
    Accepted {
        /// The connection.
        key: u64,
        /// The service.
        service: u32,
        /// The peer's static key.
        peer: PublicKey,
    },
    /// An event of a connection's session, for its application.
    Conn {
        /// The connection.
        key: u64,
        /// The event.
        event: Event,
    },
    /// The connection is gone (closed, replaced, given up); nothing more comes from it.
    Removed {
        /// The connection.
        key: u64,
    },
}

/// What [`Host::poll_events`] hands the driver next.
pub enum Polled<'a> {
    /// One of the host's own events, or a session event it queued among them (the
    /// last words of a connection it removed).
    Host(HostEvent),
    /// Every event one connection's session has queued, in order.
    Conn(ConnEvents<'a>),
}

/// What [`Host::handle_datagram`] left to the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inbound {
    /// Handled (or dropped and counted).
    Handled,
    /// An initiation in an older handshake format.
    LegacyHandshake,
}

/// The host's counters.
#[derive(Debug, Clone, Default)]
pub struct HostCounters {
    /// Datagrams dropped by the secure layer, by reason.
    pub dropped: DropCounters,
    /// Authenticated datagrams for a session that no longer exists or a service nobody
    /// listens on.
    pub unroutable: u64,
    /// Channels removed because their interface went down or was removed.
    pub channels_removed: u64,
    /// Channels added again when their interface came back.
    pub channels_restored: u64,
    /// Sessions a new session from the same peer key to the same service replaced.
    pub sessions_replaced: u64,
    /// Accepted connections closed at once because the application's backlog was full.
    pub backlog_refused: u64,
    /// Sessions a persistent connection opened again after its old one died.
    pub reconnects: u64,
    /// Sessions removed after they ended (closed, replaced, timed out).
    pub sessions_removed: u64,
    /// Secure sessions forgotten because no hello came within their wait.
    pub hello_never_came: u64,
    /// Hellos refused because this host does not serve the service they asked for.
    pub services_refused: u64,
}

/// A handshake datagram to send as it is (no sealing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeTransmit {
    /// The interface to send from.
    pub iface: usize,
    /// Where to.
    pub dst: SocketAddr,
    /// The datagram.
    pub datagram: Vec<u8>,
}

/// One host's connections: see the crate documentation.
pub struct Host {
    keypair: Keypair,
    rekey: RekeyPolicy,
    unix_micros_at_start: u64,
    accepted_channel: ChannelConfigFn,
    /// Opens and accepts sessions: connection ids, seeds, services, scheduler.
    endpoint: Endpoint,
    conns: BTreeMap<u64, Conn>,
    /// Local crypto index -> connection key.
    by_index: HashMap<u32, u64>,
    /// Bumped whenever `by_index` changes, so that a driver mirroring the indices (a
    /// kernel filter) rebuilds its copy only then.
    indices_generation: u64,
    /// The responder's live sessions by peer key and service: the ones a new session
    /// from the same peer replaces.
    by_peer: HashMap<(PublicKey, u32), Vec<u64>>,
    /// Connections to walk for datagrams, or to drain of events.
    touched: Touched,
    /// Reference mode: every connection is walked and polled on every call, as if each
    /// had been touched (tests compare the two).
    #[cfg(test)]
    full_walk: bool,
    /// Whether `poll_event` is inside a drain (between its first call and its `None`).
    #[cfg(test)]
    draining: bool,
    interfaces: Vec<InterfaceState>,
    next_key: u64,
    rng: StdRng,
    timers: TimerTable,
    handshake_tx: VecDeque<HandshakeTransmit>,
    events: VecDeque<HostEvent>,
    /// The connection `poll_event` drains sessions from next.
    event_cursor: u64,
    walk: transmit::Walk,
    plaintext: PlaintextChunks,
    counters: HostCounters,
    refusals: refusal::RefusalLog,
    /// Initiations from peers: their checks, their jobs.
    responding: respond::Responding,
    /// A deliberate bug, for checking that the fault simulator catches it.
    #[cfg(feature = "planted-bugs")]
    planted: PlantedBug,
}

/// Deliberate bugs a test can plant in a host, to check that its harness catches them.
#[cfg(feature = "planted-bugs")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PlantedBug {
    /// No bug.
    #[default]
    None,
    /// A reconnection releases the ended session's ADUs (nacked as closed, or never
    /// accounted) instead of carrying them over to the new session.
    ReleaseOnRedial,
}

impl Host {
    /// A host with no connection yet.
    pub fn new(settings: HostSettings) -> Self {
        let responding =
            respond::Responding::new(settings.keypair.clone(), settings.responder, settings.seed);
        Host {
            responding,
            keypair: settings.keypair,
            rekey: settings.rekey,
            unix_micros_at_start: settings.unix_micros_at_start,
            accepted_channel: settings.accepted_channel,
            endpoint: Endpoint::new(settings.endpoint),
            conns: BTreeMap::new(),
            by_index: HashMap::new(),
            indices_generation: 0,
            by_peer: HashMap::new(),
            touched: Touched::default(),
            #[cfg(test)]
            full_walk: false,
            #[cfg(test)]
            draining: false,
            interfaces: vec![InterfaceState::Open; settings.interfaces],
            next_key: 1,
            rng: StdRng::seed_from_u64(settings.seed),
            timers: TimerTable::default(),
            handshake_tx: VecDeque::new(),
            events: VecDeque::new(),
            event_cursor: 0,
            walk: transmit::Walk::default(),
            plaintext: PlaintextChunks::new(PLAINTEXT_CHUNK),
            counters: HostCounters::default(),
            refusals: refusal::RefusalLog::default(),
            #[cfg(feature = "planted-bugs")]
            planted: PlantedBug::None,
        }
    }

    /// Plant a deliberate bug (tests of a harness only).
    #[cfg(feature = "planted-bugs")]
    pub fn plant(&mut self, bug: PlantedBug) {
        self.planted = bug;
    }

    /// Accept connections for `service`: the peer's hellos for it open sessions.
    pub fn listen(&mut self, service: u32) {
        let server = ServerConfig {
            channel_config: self.accepted_channel.clone(),
            ..ServerConfig::uniform(ChannelConfig::default())
        };
        self.listen_with(service, server);
    }

    /// Accept connections for `service` with sessions set up as `server` says (channel
    /// settings, seed, advertised addresses), instead of the host's defaults.
    pub fn listen_with(&mut self, service: u32, server: ServerConfig) {
        self.endpoint.listen(service, server);
    }

    /// The host's own events only, not its sessions': a driver that must act on a
    /// new connection before the sessions' events are drained (a simulator opening the
    /// accepting side's streams as the hello lands) takes them here.
    pub fn poll_host_event(&mut self) -> Option<HostEvent> {
        self.events.pop_front()
    }

    /// New sessions advertise these addresses (the sockets open now).
    pub fn set_local_aliases(&mut self, aliases: Vec<SocketAddr>) {
        self.endpoint.set_local_aliases(aliases);
    }

    /// The host's counters.
    pub fn counters(&self) -> &HostCounters {
        &self.counters
    }

    /// Plaintext chunks allocated, and used again, since the start.
    pub fn plaintext_chunks(&self) -> (u64, u64) {
        (self.plaintext.allocated(), self.plaintext.reused())
    }

    /// Whether a local crypto index is taken by a connection.
    pub fn index_in_use(&self, index: u32) -> bool {
        self.by_index.contains_key(&index)
    }

    /// The local crypto indices in use (sessions and this end's pending handshakes): a
    /// datagram addressed to any other index belongs to nothing here.
    pub fn local_indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.by_index.keys().copied()
    }

    /// Changes whenever a local crypto index is taken or freed: a copy of
    /// [`Host::local_indices`] made at the same generation is current.
    pub fn local_indices_generation(&self) -> u64 {
        self.indices_generation
    }

    /// The connections the next [`Host::poll_transmit`] walk visits: those something
    /// happened to since the last one. The others' sessions have not changed since.
    pub fn touched_connections(&self) -> impl Iterator<Item = u64> + '_ {
        self.touched.transmit().iter().copied()
    }

    /// The connections there are now.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// Whether there is no connection.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// The protocol session holding a connection's streams: the live one, or while a
    /// persistent connection reconnects the ended one that keeps them.
    pub fn session(&self, key: u64) -> Option<&horde_proto::Session> {
        match &self.conns.get(&key)?.state {
            ConnState::Established { session, .. } => Some(session),
            ConnState::Redialing { old, .. } => Some(old),
            _ => None,
        }
    }

    /// Every connection's protocol session that is up, by connection key.
    pub fn sessions(&self) -> impl Iterator<Item = (u64, &horde_proto::Session)> {
        self.conns
            .iter()
            .filter_map(|(&k, c)| Some((k, c.session()?)))
    }

    /// The secure session a connection's datagrams are sealed with.
    pub fn crypto_mut(&mut self, key: u64) -> Option<&mut horde_crypto::Session> {
        match &mut self.conns.get_mut(&key)?.state {
            ConnState::Established { crypto, .. } | ConnState::AwaitingHello { crypto } => {
                Some(crypto)
            }
            _ => None,
        }
    }

    /// The next deadline: a session's timer or a handshake's resend or give-up. The
    /// deadline of each session the host has walked is kept in its timer table; only
    /// sessions touched since are asked.
    pub fn poll_timeout(&self, now: Duration) -> Option<Duration> {
        #[cfg(test)]
        if self.full_walk {
            let sessions = self
                .conns
                .values()
                .filter_map(|c| c.session()?.poll_timeout(now));
            return sessions.chain(self.timers.next()).min();
        }
        let touched = self
            .touched
            .transmit()
            .iter()
            .filter_map(|k| self.conns.get(k)?.session()?.poll_timeout(now));
        touched.chain(self.timers.next()).min()
    }

    /// Run the sessions' due timers and the handshakes' resends and give-ups.
    pub fn handle_timeout(&mut self, now: Duration) {
        #[cfg(test)]
        if self.full_walk {
            self.touch_all();
        }
        let mut due = Vec::new();
        self.timers.expired(now, &mut due);
        for &(key, timer) in &due {
            if timer == Timer::Session {
                self.touched.touch(key);
            }
        }
        // A session's deadline read at its last walk and passed, or one touched since
        // (its kept deadline may be stale): each runs what is due.
        for key in self.touched.transmit() {
            if let Some(p) = self.conns.get_mut(key).and_then(Conn::session_mut) {
                if p.poll_timeout(now).is_some_and(|t| t <= now) {
                    p.handle_timeout(now);
                }
            }
        }
        due.retain(|&(_, timer)| timer != Timer::Session);
        self.handshake_timers(now, due);
    }

    /// The next handshake datagram to send.
    pub fn poll_handshake_transmit(&mut self) -> Option<HandshakeTransmit> {
        self.handshake_tx.pop_front()
    }

    /// The next thing the driver must pass on: the host's own events first, then each
    /// touched connection's session events in connection order.
    pub fn poll_event(&mut self) -> Option<HostEvent> {
        loop {
            if let Some(e) = self.events.pop_front() {
                return Some(e);
            }
            let key = self.next_to_drain()?;
            // All of a connection's events at once: one lookup for the lot, not one
            // per event (an ack is an event, so this runs for every packet).
            if let Some(conn) = self.conns.get_mut(&key) {
                conn.drain_events(key, &mut self.events);
            }
        }
    }

    /// What [`Host::poll_event`] gives, a connection's session events at a time: the
    /// host's own events one by one, then each touched connection's events as one
    /// [`ConnEvents`], which the driver hands on in one go without moving each event
    /// through a queue of the host's. In the same order as [`Host::poll_event`].
    pub fn poll_events(&mut self) -> Option<Polled<'_>> {
        if let Some(e) = self.events.pop_front() {
            return Some(Polled::Host(e));
        }
        let key = loop {
            let key = self.next_to_drain()?;
            if self.conns.contains_key(&key) {
                break key;
            }
        };
        let conn = self.conns.get_mut(&key).expect("key just checked");
        Some(Polled::Conn(ConnEvents::new(key, conn, &mut self.touched)))
    }

    /// The next touched connection to drain of events, after the one drained last; `None`
    /// ends a drain.
    fn next_to_drain(&mut self) -> Option<u64> {
        #[cfg(test)]
        if self.full_walk && !self.draining {
            self.draining = true;
            for &key in self.conns.keys() {
                self.touched.touch_events(key);
            }
        }
        let Some(key) = self.touched.take_event_from(self.event_cursor) else {
            self.event_cursor = 0;
            #[cfg(test)]
            {
                self.draining = false;
            }
            return None;
        };
        self.event_cursor = key + 1;
        Some(key)
    }

    /// Tell a connection how many payload bytes its application has read in all. Returns
    /// the total at which a shut receive window reopens, when the driver should say again.
    pub fn bytes_read(&mut self, now: Duration, key: u64, total: u64) -> Option<u64> {
        let conn = self.conns.get_mut(&key)?;
        let told = conn.read_told;
        let p = conn.session_mut()?;
        if total > told {
            p.consumed(now, (total - told) as usize);
            conn.read_told = total;
            self.touched.touch(key);
        }
        p_reopen(conn, total)
    }

    /// A send on `channel` of connection `key` was refused by an ICMP port unreachable.
    pub fn handle_refused(&mut self, key: u64, channel: ChannelId) {
        if let Some(c) = self.conns.get_mut(&key) {
            *c.refused.entry(channel).or_default() += 1;
            self.touched.touch(key);
        }
    }

    /// The application did not take an accepted connection: it is closed at once.
    pub fn refuse(&mut self, now: Duration, key: u64) {
        if let Some(p) = self.conns.get_mut(&key).and_then(Conn::session_mut) {
            self.counters.backlog_refused += 1;
            tracing::warn!(
                service = p.service(),
                "accept backlog full: connection closed"
            );
            p.close(now);
            self.touched.touch(key);
        }
    }

    /// The host shuts down: persistent connections stop reconnecting (what an ended
    /// session kept for its successor is nacked), and every session closes.
    pub fn close_all(&mut self, now: Duration) {
        let keys: Vec<u64> = self.conns.keys().copied().collect();
        for key in keys {
            let conn = self.conns.get_mut(&key).expect("key just listed");
            conn.reconnect = None;
            self.touched.touch(key);
            match &mut conn.state {
                ConnState::Redialing { .. } => {
                    self.end_redial(key, horde_proto::CloseReason::LocalClose);
                }
                ConnState::Established { session, .. } => session.close(now),
                _ => {}
            }
        }
    }

    /// Whether a session is still closing (its peer has not acknowledged yet).
    pub fn is_closing(&self) -> bool {
        self.conns
            .values()
            .any(|c| c.session().is_some_and(|p| p.close_reason().is_none()))
    }

    /// Connection `key`'s session may have changed: walk it and drain its events.
    fn touch(&mut self, key: u64) {
        self.touched.touch(key);
    }

    /// Mark every connection touched: the next [`Host::handle_timeout`] and
    /// [`Host::poll_transmit`] visit them all. A reference for checking that the touched
    /// walk misses nothing (the simulator's tests run whole scenarios both ways).
    pub fn touch_all(&mut self) {
        for &key in self.conns.keys() {
            self.touched.touch(key);
        }
    }

    /// Walk and poll every connection on every call, touched or not: the reference
    /// the tests compare the host with.
    #[cfg(test)]
    pub(crate) fn set_full_walk(&mut self, on: bool) {
        self.full_walk = on;
    }

    /// Local crypto index `index` now routes to connection `key`.
    fn index_insert(&mut self, index: u32, key: u64) {
        self.by_index.insert(index, key);
        self.indices_generation += 1;
    }

    /// Local crypto index `index` routes nowhere any more.
    fn index_remove(&mut self, index: u32) {
        if self.by_index.remove(&index).is_some() {
            self.indices_generation += 1;
        }
    }

    /// A new connection key.
    fn issue_key(&mut self) -> u64 {
        let key = self.next_key;
        self.next_key += 1;
        key
    }

    /// Forget a connection: its session's last events are passed on, then
    /// [`HostEvent::Removed`].
    fn remove(&mut self, key: u64) -> Option<Conn> {
        let c = self.detach(key)?;
        self.events.push_back(HostEvent::Removed { key });
        Some(c)
    }

    /// [`Host::remove`] without the final [`HostEvent::Removed`], for a caller with a
    /// last word of its own: its crypto index and session handle stop routing and its
    /// timers stop.
    fn detach(&mut self, key: u64) -> Option<Conn> {
        let mut c = self.conns.remove(&key)?;
        if let Some(h) = c.endpoint_handle() {
            self.endpoint.forget(h);
        }
        if self.by_index.get(&c.index) == Some(&key) {
            self.index_remove(c.index);
        }
        self.unlist_peer(key, &c);
        self.timers.stop_all(key);
        self.touched.forget(key);
        c.drain_events(key, &mut self.events);
        Some(c)
    }

    fn unix_micros(&self, now: Duration) -> u64 {
        self.unix_micros_at_start + now.as_micros() as u64
    }
}

/// A shut window reopens when the application has read this much more: the driver must
/// hear of it then, not at its next unrelated wake-up.
fn p_reopen(conn: &mut Conn, read: u64) -> Option<u64> {
    conn.session()?
        .reopens_after_reading()
        .map(|b| read + b as u64)
}
