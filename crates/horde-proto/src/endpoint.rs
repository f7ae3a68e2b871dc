//! One host's side of the wire, sans-IO, in the quinn-proto style: the [`Endpoint`]
//! routes each arriving plaintext datagram to its session by connection id, opens a
//! session when a hello for a served service arrives (with an accept backlog), issues
//! connection ids for the sessions this host opens, and seeds every new session's
//! configuration, scheduler and receive buffer.
//!
//! The driver owns the [`Session`]s it is handed (as quinn's driver owns its
//! `Connection`s) and keeps them by [`SessionHandle`]. Crypto stays outside: the
//! endpoint takes and gives plaintext, exactly what a session takes.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::ChannelId;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

use crate::channel::ChannelConfig;
use crate::session::{ChannelSpec, Hello, Session, SessionConfig, SessionError};
use crate::wire::{self, WireError};

pub use horde_policy::SchedulerFactory;

/// The settings of each channel the peer of an accepted session opens, by channel id.
pub type ChannelConfigFn = Arc<dyn Fn(ChannelId) -> ChannelConfig + Send + Sync>;

/// Names one session of an endpoint. Never reused by the endpoint that issued it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionHandle(u64);

impl SessionHandle {
    /// A number unique among the handles of one endpoint (for logs and maps).
    pub fn index(self) -> u64 {
        self.0
    }
}

/// What every session of an endpoint starts from.
#[derive(Clone)]
pub struct EndpointConfig {
    /// The session settings; each session gets its own `seed` (see [`ConnectOptions`]
    /// and [`ServerConfig`]).
    pub session: SessionConfig,
    /// Seed of the endpoint's RNG, which draws connection ids and session seeds.
    pub seed: u64,
    /// The addresses this host's sessions advertise to their peers.
    pub local_aliases: Vec<SocketAddr>,
    /// The scheduler of every new session; `None` keeps the session's default.
    pub scheduler: Option<SchedulerFactory>,
    /// Every new session's receive buffer ([`Session::set_receive_buffer`]).
    pub receive_buffer: Option<usize>,
    /// Accepted sessions the application may leave waiting ([`Endpoint::accept`]);
    /// a hello beyond them is refused with a `Close`.
    pub accept_backlog: usize,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        Self {
            session: SessionConfig::default(),
            seed: 0,
            local_aliases: Vec::new(),
            scheduler: None,
            receive_buffer: None,
            accept_backlog: 64,
        }
    }
}

impl std::fmt::Debug for EndpointConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointConfig")
            .field("session", &self.session)
            .field("seed", &self.seed)
            .field("local_aliases", &self.local_aliases)
            .field("scheduler", &self.scheduler.is_some())
            .field("receive_buffer", &self.receive_buffer)
            .field("accept_backlog", &self.accept_backlog)
            .finish()
    }
}

/// How the endpoint sets up the sessions it accepts for one service.
#[derive(Clone)]
pub struct ServerConfig {
    /// Settings of the channels the peer opens.
    pub channel_config: ChannelConfigFn,
    /// The accepted session's seed; `None` draws one from the endpoint's RNG.
    /// Reproductions fix it so that a session's randomness does not depend on the
    /// order in which sessions arrive.
    pub seed: Option<u64>,
    /// Advertise these addresses instead of the endpoint's.
    pub aliases: Option<Vec<SocketAddr>>,
}

impl ServerConfig {
    /// Every channel the peer opens gets `config`; seed drawn, endpoint's aliases.
    pub fn uniform(config: ChannelConfig) -> Self {
        Self {
            channel_config: Arc::new(move |_| config.clone()),
            seed: None,
            aliases: None,
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("seed", &self.seed)
            .field("aliases", &self.aliases)
            .finish_non_exhaustive()
    }
}

/// A session this host opens.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// The service asked for at the peer.
    pub service: u32,
    /// The channels, numbered 0.. in this order.
    pub channels: Vec<ChannelSpec>,
    /// The connection id; `None` issues a fresh one.
    pub conn_id: Option<u64>,
    /// The session's seed; `None` draws one.
    pub seed: Option<u64>,
    /// Advertise these addresses instead of the endpoint's.
    pub aliases: Option<Vec<SocketAddr>>,
}

/// Why a datagram for no known session opened none.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AcceptError {
    /// Too short to carry a connection id, or of an unknown version and not a hello.
    #[error("malformed datagram: {0}")]
    Malformed(WireError),
    /// A well-formed packet of a session this endpoint does not have.
    #[error("not a hello, and for no known session")]
    NotAHello,
    /// A hello of a wire version this end does not speak.
    #[error("peer speaks wire version {peer}; this end speaks version {ours} only")]
    UnsupportedVersion {
        /// The peer's version.
        peer: u8,
        /// This end's version.
        ours: u8,
    },
    /// A hello for a service nobody here listens on.
    #[error("no listener for service {0}")]
    UnknownService(u32),
}

/// Where [`Endpoint::handle`] sent a datagram.
#[derive(Debug)]
pub enum DatagramEvent {
    /// For this existing session: the driver feeds it there
    /// ([`Session::handle_datagram`]).
    Connection(SessionHandle),
    /// A hello opened a new session, which has taken the hello already.
    NewConnection(NewConnection),
    /// Neither: counted in [`EndpointStats`] and dropped.
    Dropped(AcceptError),
}

/// A session an arriving hello opened.
#[derive(Debug)]
pub struct NewConnection {
    /// Its handle.
    pub handle: SessionHandle,
    /// The session; the driver owns it from now on.
    pub session: Box<Session>,
    /// The accept backlog was full: the session is closed already and only sends its
    /// `Close`. The driver keeps it until it ends, so that the peer hears a refusal
    /// instead of a timeout. It is not offered by [`Endpoint::accept`].
    pub refused: bool,
}

/// Counters of an endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Sessions opened by hellos (refused ones included).
    pub accepted: u64,
    /// Sessions opened by this host.
    pub connected: u64,
    /// Sessions closed at once because the accept backlog was full.
    pub backlog_refused: u64,
    /// Hellos of another wire version.
    pub version_refused: u64,
    /// Hellos for services nobody listens on.
    pub unknown_service: u64,
    /// Other datagrams for no known session (and malformed ones).
    pub unroutable: u64,
}

/// One host's sessions as seen from the wire: see the module documentation.
pub struct Endpoint {
    config: EndpointConfig,
    rng: ChaCha8Rng,
    services: BTreeMap<u32, ServerConfig>,
    by_conn: HashMap<u64, SessionHandle>,
    conn_of: HashMap<SessionHandle, u64>,
    next_handle: u64,
    /// Accepted sessions not yet taken by the application, oldest first.
    backlog: VecDeque<SessionHandle>,
    stats: EndpointStats,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("sessions", &self.conn_of.len())
            .field("services", &self.services.keys().collect::<Vec<_>>())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint serving no service yet.
    pub fn new(config: EndpointConfig) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            config,
            services: BTreeMap::new(),
            by_conn: HashMap::new(),
            conn_of: HashMap::new(),
            next_handle: 0,
            backlog: VecDeque::new(),
            stats: EndpointStats::default(),
        }
    }

    /// Accept hellos for `service`, setting their sessions up with `server`.
    pub fn listen(&mut self, service: u32, server: ServerConfig) {
        self.services.insert(service, server);
    }

    /// The services listened on, in order.
    pub fn services(&self) -> impl Iterator<Item = u32> + '_ {
        self.services.keys().copied()
    }

    /// Stop accepting hellos for `service`; its sessions carry on.
    pub fn unlisten(&mut self, service: u32) {
        self.services.remove(&service);
    }

    /// Replace the addresses new sessions advertise (interfaces came or went).
    pub fn set_local_aliases(&mut self, aliases: Vec<SocketAddr>) {
        self.config.local_aliases = aliases;
    }

    /// The endpoint's counters.
    pub fn stats(&self) -> EndpointStats {
        self.stats
    }

    /// Sessions the endpoint routes to (issued and not forgotten).
    pub fn len(&self) -> usize {
        self.conn_of.len()
    }

    /// Whether the endpoint has no session.
    pub fn is_empty(&self) -> bool {
        self.conn_of.is_empty()
    }

    /// The connection id of a session.
    pub fn conn_id(&self, handle: SessionHandle) -> Option<u64> {
        self.conn_of.get(&handle).copied()
    }

    /// Open a session: it sends its hellos on every channel at the next poll.
    pub fn connect(
        &mut self,
        now: Duration,
        options: ConnectOptions,
    ) -> Result<(SessionHandle, Session), SessionError> {
        let conn = match options.conn_id {
            Some(c) => c,
            None => self.issue_conn_id(),
        };
        let config = self.session_config(options.seed);
        let aliases = options
            .aliases
            .unwrap_or_else(|| self.config.local_aliases.clone());
        let mut session = Session::connect(
            config,
            conn,
            options.service,
            options.channels,
            aliases,
            now,
        )?;
        self.seed_session(&mut session);
        let handle = self.register(conn);
        self.stats.connected += 1;
        Ok((handle, session))
    }

    /// Route one plaintext datagram: to its session by connection id, or, when it is a
    /// hello for a served service, to a new session.
    pub fn handle(
        &mut self,
        now: Duration,
        local: u16,
        src: SocketAddr,
        datagram: &Bytes,
    ) -> DatagramEvent {
        if let Some(h) = wire::peek_conn(datagram).and_then(|c| self.by_conn.get(&c)) {
            return DatagramEvent::Connection(*h);
        }
        match self.accept_hello(now, local, src, datagram) {
            Ok(new) => DatagramEvent::NewConnection(new),
            Err(e) => DatagramEvent::Dropped(e),
        }
    }

    /// Open a session from a hello without looking its connection id up: for drivers
    /// whose secure layer has already told a new peer's first datagram from the
    /// traffic of known sessions (and where two peers may pick the same id).
    pub fn accept_hello(
        &mut self,
        now: Duration,
        local: u16,
        src: SocketAddr,
        datagram: &Bytes,
    ) -> Result<NewConnection, AcceptError> {
        let hello = match self.served_hello(datagram) {
            Ok(h) => h,
            Err(e) => {
                match e {
                    AcceptError::UnsupportedVersion { .. } => self.stats.version_refused += 1,
                    AcceptError::UnknownService(_) => self.stats.unknown_service += 1,
                    _ => self.stats.unroutable += 1,
                }
                return Err(e);
            }
        };
        let server = self.services[&hello.service].clone();
        let config = self.session_config(server.seed);
        let aliases = server
            .aliases
            .unwrap_or_else(|| self.config.local_aliases.clone());
        let mut session = Session::accept_hello(
            config,
            now,
            local,
            src,
            hello,
            aliases,
            server.channel_config,
        );
        self.seed_session(&mut session);
        let handle = self.register(session.conn_id());
        self.stats.accepted += 1;
        let refused = self.backlog.len() >= self.config.accept_backlog;
        if refused {
            self.stats.backlog_refused += 1;
            session.close(now);
        } else {
            self.backlog.push_back(handle);
        }
        Ok(NewConnection {
            handle,
            session: Box::new(session),
            refused,
        })
    }

    /// The oldest accepted session the application has not taken yet.
    pub fn accept(&mut self) -> Option<SessionHandle> {
        self.backlog.pop_front()
    }

    /// The session is gone: its connection id no longer routes, and may be issued again.
    pub fn forget(&mut self, handle: SessionHandle) {
        if let Some(conn) = self.conn_of.remove(&handle) {
            if self.by_conn.get(&conn) == Some(&handle) {
                self.by_conn.remove(&conn);
            }
        }
        self.backlog.retain(|h| *h != handle);
    }

    /// A datagram's hello, decoded, if it asks for a service this endpoint serves.
    fn served_hello(&self, datagram: &Bytes) -> Result<Hello, AcceptError> {
        if let Some(peer) = wire::foreign_hello_version(datagram) {
            return Err(AcceptError::UnsupportedVersion {
                peer,
                ours: wire::VERSION,
            });
        }
        if !wire::is_hello(datagram) {
            return match wire::peek_conn(datagram) {
                Some(_) => Err(AcceptError::NotAHello),
                None => Err(AcceptError::Malformed(WireError::Truncated)),
            };
        }
        let packet = wire::decode(datagram).map_err(AcceptError::Malformed)?;
        match Hello::of(packet) {
            Ok(hello) if self.services.contains_key(&hello.service) => Ok(hello),
            Ok(hello) => Err(AcceptError::UnknownService(hello.service)),
            Err(_) => Err(AcceptError::NotAHello),
        }
    }

    /// A connection id no session of this endpoint uses (and never 0).
    fn issue_conn_id(&mut self) -> u64 {
        loop {
            let c = self.rng.next_u64();
            if c != 0 && !self.by_conn.contains_key(&c) {
                return c;
            }
        }
    }

    fn session_config(&mut self, seed: Option<u64>) -> SessionConfig {
        let seed = seed.unwrap_or_else(|| self.rng.next_u64());
        SessionConfig {
            seed,
            ..self.config.session.clone()
        }
    }

    fn seed_session(&self, session: &mut Session) {
        if let Some(f) = &self.config.scheduler {
            session.set_scheduler(f());
        }
        session.set_receive_buffer(self.config.receive_buffer);
    }

    fn register(&mut self, conn: u64) -> SessionHandle {
        let handle = SessionHandle(self.next_handle);
        self.next_handle += 1;
        self.by_conn.entry(conn).or_insert(handle);
        self.conn_of.insert(handle, conn);
        handle
    }
}

#[cfg(test)]
mod tests;
