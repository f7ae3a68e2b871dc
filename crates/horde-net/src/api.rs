//! The application API: hosts, listeners and connections.
//!
//! A [`Host`] owns its sockets and runs one driver task on the current tokio runtime.
//! Handles talk to it over a command channel; events come back on a per-connection
//! channel, readable as an async stream ([`Connection::next_event`]) or through a
//! callback ([`Connection::on_event`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_crypto::PublicKey;
use horde_policy::{Fields, Objective, ObjectiveId, Value};
use horde_proto::{
    AduHandle, ChannelId, ChannelStats, ChannelView, Event, LatencyMode, SessionStats, StreamConfig,
};
use thiserror::Error;
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, oneshot};

use crate::config::{ChannelTarget, ConnectConfig, HostConfig, InterfaceConfig};
use crate::driver::{self, HostStats};
use crate::read_progress::ReadProgress;

#[derive(Debug, Error)]
/// Why a runtime call failed.
pub enum NetError {
    #[error("i/o: {0}")]
    /// A socket operation failed.
    Io(#[from] std::io::Error),
    #[error("the host has shut down")]
    /// The host's driver task has stopped (shut down, or the runtime ended).
    HostGone,
    #[error("handshake with the peer timed out")]
    /// The peer did not answer the handshake within `handshake_timeout`.
    HandshakeTimeout,
    #[error("no interface {0}")]
    /// The host has no open interface with that index (removed, or down just now).
    NoInterface(usize),
    #[error("{0}")]
    /// The session refused the call (unknown stream, ADU too large, closed...).
    Session(#[from] horde_proto::SessionError),
    #[error("configuration: {0}")]
    /// The host or connection configuration cannot work.
    Config(#[from] crate::config::ConfigError),
}

pub(crate) type Reply<T> = oneshot::Sender<Result<T, NetError>>;

pub(crate) enum Command {
    Connect(ConnectConfig, Option<Reconnect>, Reply<Connection>),
    Listen(u32, mpsc::Sender<Connection>),
    AddInterface(InterfaceConfig, Reply<(usize, SocketAddr)>),
    RemoveInterface(usize),
    Stats(oneshot::Sender<HostStats>),
    Conn(u64, ConnOp),
    Shutdown,
}

pub(crate) enum ConnOp {
    OpenStream(u32, StreamConfig, Reply<()>),
    Send {
        stream: u32,
        payload: Bytes,
        fields: Fields,
        reply: Option<Reply<AduHandle>>,
    },
    SetField(AduHandle, String, Value),
    Remove(AduHandle, oneshot::Sender<bool>),
    SetMaxRate(u32, Option<f64>, Reply<()>),
    Writable(u32, Reply<()>),
    Inject(Arc<dyn Objective>, oneshot::Sender<ObjectiveId>),
    RemoveObjective(ObjectiveId),
    LatencyModes(oneshot::Sender<Vec<LatencyMode>>),
    Stats(oneshot::Sender<SessionStats>),
    Channels(oneshot::Sender<Vec<ChannelStatus>>),
    Keys(oneshot::Sender<Option<horde_crypto::KeyStatus>>),
    AddChannel(ChannelTarget, Reply<ChannelId>),
    RemoveChannel(ChannelId),
    Close,
}

/// How a connection opened with [`Host::connect_persistent`] comes back after its
/// session dies (the peer restarted, timed out or became unreachable, or every channel
/// died): handshakes are
/// tried with exponential backoff from `initial` to `max` between attempts, for at most
/// `give_up_after`. The application hears [`Event::Reconnecting`], then
/// [`Event::Connected`] when the new session is up; its streams, objectives and queued
/// ADUs carry over (in-flight ones per [`StreamConfig::on_reconnect`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reconnect {
    /// Wait before the first attempt, doubled after each failed one.
    pub initial: Duration,
    /// The longest wait between attempts.
    pub max: Duration,
    /// Give up (and report the connection closed) after this long without a session.
    pub give_up_after: Duration,
}

impl Default for Reconnect {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            give_up_after: Duration::from_secs(60),
        }
    }
}

/// A running Horde host.
pub struct Host {
    cmd: mpsc::UnboundedSender<Command>,
    local_addrs: Vec<SocketAddr>,
    public: PublicKey,
    backlog: usize,
    task: tokio::task::JoinHandle<()>,
}

impl Host {
    /// Bind every interface and start the driver on the current tokio runtime.
    pub async fn bind(config: HostConfig) -> Result<Host, NetError> {
        config.validate()?;
        let public = *config.keypair.public();
        let backlog = config.accept_backlog.max(1);
        let (cmd, local_addrs, task) = driver::spawn(config)?;
        Ok(Host {
            cmd,
            local_addrs,
            public,
            backlog,
            task,
        })
    }

    /// The bound address of each interface, in configuration order.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// This host's static public key, the one peers must allow.
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }

    /// Open a connection to a peer (active open). Returns once the secure handshake is
    /// done; ADUs sent before the Horde handshake completes are queued.
    pub async fn connect(&self, config: ConnectConfig) -> Result<Connection, NetError> {
        self.open(config, None).await
    }

    /// As [`Host::connect`], and when the session dies later the host opens a new one
    /// to the same peer by itself, as `reconnect` says. The first handshake must succeed
    /// within `config.handshake_timeout`, as with `connect`.
    pub async fn connect_persistent(
        &self,
        config: ConnectConfig,
        reconnect: Reconnect,
    ) -> Result<Connection, NetError> {
        self.open(config, Some(reconnect)).await
    }

    async fn open(
        &self,
        config: ConnectConfig,
        reconnect: Option<Reconnect>,
    ) -> Result<Connection, NetError> {
        config.validate()?;
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(Command::Connect(config, reconnect, tx))
            .map_err(|_| NetError::HostGone)?;
        rx.await.map_err(|_| NetError::HostGone)?
    }

    /// Accept connections for `service` (passive open). At most
    /// [`HostConfig::accept_backlog`] accepted connections wait for [`Listener::accept`];
    /// the host closes any more at once.
    pub fn listen(&self, service: u32) -> Listener {
        let (tx, rx) = mpsc::channel(self.backlog);
        let _ = self.cmd.send(Command::Listen(service, tx));
        Listener { rx }
    }

    /// Bring up another interface at run time; returns its index and bound address.
    pub async fn add_interface(
        &self,
        iface: InterfaceConfig,
    ) -> Result<(usize, SocketAddr), NetError> {
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(Command::AddInterface(iface, tx))
            .map_err(|_| NetError::HostGone)?;
        rx.await.map_err(|_| NetError::HostGone)?
    }

    /// Take an interface out for good: its socket closes and the channels over it are
    /// removed (and, unlike when the pool manager sees its device go down, never re-added).
    pub fn remove_interface(&self, index: usize) {
        let _ = self.cmd.send(Command::RemoveInterface(index));
    }

    /// Host-wide counters (datagrams, drops, interfaces coming and going, sessions).
    pub async fn stats(&self) -> Result<HostStats, NetError> {
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(Command::Stats(tx))
            .map_err(|_| NetError::HostGone)?;
        rx.await.map_err(|_| NetError::HostGone)
    }

    /// Close every connection (waiting, at most its `close_timeout_ms`, for the peers to
    /// acknowledge), then stop the driver and close every socket.
    pub async fn shutdown(self) {
        let _ = self.cmd.send(Command::Shutdown);
        let _ = self.task.await;
    }
}

/// Incoming connections for one service.
pub struct Listener {
    rx: mpsc::Receiver<Connection>,
}

impl Listener {
    /// The next connection a peer opened to this service; `None` once the host is gone.
    pub async fn accept(&mut self) -> Option<Connection> {
        self.rx.recv().await
    }
}

/// A connection's events as the application reads them. Reading a
/// [`Event::Received`] frees its payload's room in the connection's receive buffer
/// ([`HostConfig::recv_buffer_bytes`]): a peer is held back while its ADUs lie unread.
///
/// [`HostConfig::recv_buffer_bytes`]: crate::HostConfig::recv_buffer_bytes
pub struct EventReceiver {
    rx: mpsc::UnboundedReceiver<Event>,
    read: Arc<ReadProgress>,
}

impl EventReceiver {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<Event>, read: Arc<ReadProgress>) -> Self {
        Self { rx, read }
    }

    fn count(&self, e: &Event) {
        if let Event::Received { payload, .. } = e {
            self.read.add(payload.len() as u64);
        }
    }

    /// The next event; `None` once the connection and its host are gone.
    pub async fn recv(&mut self) -> Option<Event> {
        let e = self.rx.recv().await;
        if let Some(e) = &e {
            self.count(e);
        }
        e
    }

    /// How many events wait unread. Reading them may let more in: a shut receive
    /// window reopens as the application reads.
    pub fn len(&self) -> usize {
        self.rx.len()
    }

    /// Whether no event waits.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// An event if one is waiting.
    pub fn try_recv(&mut self) -> Result<Event, TryRecvError> {
        let e = self.rx.try_recv();
        if let Ok(e) = &e {
            self.count(e);
        }
        e
    }
}

/// One session with a peer: a command handle plus the stream of events.
pub struct Connection {
    handle: ConnectionHandle,
    events: EventReceiver,
    peer: Option<PublicKey>,
}

impl Connection {
    pub(crate) fn new(
        key: u64,
        cmd: mpsc::UnboundedSender<Command>,
        events: EventReceiver,
        peer: Option<PublicKey>,
    ) -> Self {
        Self {
            handle: ConnectionHandle { key, cmd },
            events,
            peer,
        }
    }

    /// The peer's static public key.
    pub fn peer(&self) -> Option<&PublicKey> {
        self.peer.as_ref()
    }

    /// The next event; `None` once the connection and its host are gone.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// An event if one is waiting.
    pub fn try_event(&mut self) -> Option<Event> {
        self.events.try_recv().ok()
    }

    /// Deliver every event to `callback` on a task of its own; returns the command handle.
    pub fn on_event(self, mut callback: impl FnMut(Event) + Send + 'static) -> ConnectionHandle {
        let Connection {
            handle, mut events, ..
        } = self;
        tokio::spawn(async move {
            while let Some(e) = events.recv().await {
                callback(e);
            }
        });
        handle
    }

    /// A handle for commands that can be cloned and shared between tasks.
    pub fn handle(&self) -> &ConnectionHandle {
        &self.handle
    }

    /// Split into the command handle and the event receiver.
    pub fn split(self) -> (ConnectionHandle, EventReceiver) {
        (self.handle, self.events)
    }
}

impl std::ops::Deref for Connection {
    type Target = ConnectionHandle;
    fn deref(&self) -> &ConnectionHandle {
        &self.handle
    }
}

/// One channel of a connection, as [`ConnectionHandle::channels`] reports it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChannelStatus {
    /// The channel's id, the same at both ends.
    pub id: ChannelId,
    /// Index of the host interface the channel sends from.
    pub interface: u16,
    /// The peer's address on this channel, as last seen.
    pub remote: SocketAddr,
    /// Whether the channel's packets are being acknowledged; a dead channel gets no
    /// traffic until a probe is answered.
    pub alive: bool,
    /// Smoothed round trip, once measured.
    pub srtt_ms: Option<f64>,
    /// The rate the congestion controller expects the channel to carry, bytes/s.
    pub rate_bytes_per_s: f64,
    /// Estimated link loss probability, in [0, 1].
    pub loss: f64,
    /// The congestion controller's name.
    pub congestion: &'static str,
    /// Packet and byte counters.
    pub stats: ChannelStats,
}

impl ChannelStatus {
    pub(crate) fn of(c: ChannelView<'_>) -> Self {
        Self {
            id: c.id(),
            interface: c.local(),
            remote: c.remote(),
            alive: c.is_alive(),
            srtt_ms: c.srtt().map(|d| d.as_secs_f64() * 1e3),
            rate_bytes_per_s: c.rate(),
            loss: c.loss_rate(),
            congestion: c.congestion_control(),
            stats: c.stats(),
        }
    }
}

/// Commands for one connection; cheap to clone and share between tasks.
#[derive(Clone)]
pub struct ConnectionHandle {
    key: u64,
    cmd: mpsc::UnboundedSender<Command>,
}

impl ConnectionHandle {
    fn op(&self, op: ConnOp) -> Result<(), NetError> {
        self.cmd
            .send(Command::Conn(self.key, op))
            .map_err(|_| NetError::HostGone)
    }

    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> ConnOp) -> Result<T, NetError> {
        let (tx, rx) = oneshot::channel();
        self.op(make(tx))?;
        rx.await.map_err(|_| NetError::HostGone)?
    }

    async fn query<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> ConnOp,
    ) -> Result<T, NetError> {
        let (tx, rx) = oneshot::channel();
        self.op(make(tx))?;
        rx.await.map_err(|_| NetError::HostGone)
    }

    /// Open stream `id` for sending, with its rate limit, queue limits, ordering and loss
    /// recovery.
    pub async fn open_stream(&self, id: u32, config: StreamConfig) -> Result<(), NetError> {
        self.ask(|r| ConnOp::OpenStream(id, config, r)).await
    }

    /// Cap a stream at `max_kbps`, or make it elastic with `None`.
    pub async fn set_max_rate(&self, stream: u32, max_kbps: Option<f64>) -> Result<(), NetError> {
        self.ask(|r| ConnOp::SetMaxRate(stream, max_kbps, r)).await
    }

    /// Queue an ADU and get its handle (for changing fields or withdrawing it).
    pub async fn send_adu(
        &self,
        stream: u32,
        payload: Bytes,
        fields: Fields,
    ) -> Result<AduHandle, NetError> {
        self.ask(|r| ConnOp::Send {
            stream,
            payload,
            fields,
            reply: Some(r),
        })
        .await
    }

    /// Queue an ADU without waiting for its handle (the fast path). Errors such as an
    /// oversized ADU are logged by the host.
    pub fn send_adu_nowait(
        &self,
        stream: u32,
        payload: Bytes,
        fields: Fields,
    ) -> Result<(), NetError> {
        self.op(ConnOp::Send {
            stream,
            payload,
            fields,
            reply: None,
        })
    }

    /// Wait until `stream` may take more ADUs: at once if its queue is under the
    /// high-water mark, otherwise until it has drained to the low-water mark
    /// ([`Event::Writable`]; marks in [`StreamConfig`]). A bulk sender keeps every
    /// channel busy, without a fixed window, by alternating this with `send_adu_nowait`
    /// until the queue reaches the high mark. Fails if the stream is unknown or the
    /// session closes meanwhile.
    pub async fn writable(&self, stream: u32) -> Result<(), NetError> {
        self.ask(|r| ConnOp::Writable(stream, r)).await
    }

    /// Change a header field of a queued ADU, for objectives to see; ignored if it has left
    /// the queue.
    pub fn set_adu_field(&self, adu: AduHandle, name: &str, value: Value) -> Result<(), NetError> {
        self.op(ConnOp::SetField(adu, name.to_string(), value))
    }

    /// Withdraw a queued ADU; `false` if it was already sent.
    pub async fn remove_adu(&self, adu: AduHandle) -> Result<bool, NetError> {
        self.query(|r| ConnOp::Remove(adu, r)).await
    }

    /// Give the scheduler an objective (a compiled hose program); the id withdraws it.
    pub async fn inject_objective(
        &self,
        objective: Arc<dyn Objective>,
    ) -> Result<ObjectiveId, NetError> {
        self.query(|r| ConnOp::Inject(objective, r)).await
    }

    /// Withdraw an objective given earlier.
    pub fn remove_objective(&self, id: ObjectiveId) -> Result<(), NetError> {
        self.op(ConnOp::RemoveObjective(id))
    }

    /// (mean, variance) of the RTT seen on each live channel.
    pub async fn latency_modes(&self) -> Result<Vec<LatencyMode>, NetError> {
        self.query(ConnOp::LatencyModes).await
    }

    /// The session's counters.
    pub async fn stats(&self) -> Result<SessionStats, NetError> {
        self.query(ConnOp::Stats).await
    }

    /// Each channel of the connection's session as it stands now (empty while a
    /// persistent connection is between sessions): for status displays.
    pub async fn channels(&self) -> Result<Vec<ChannelStatus>, NetError> {
        self.query(ConnOp::Channels).await
    }

    /// Where the session's keys stand in their rotation (`None` while a persistent
    /// connection is between sessions): for status displays.
    pub async fn key_status(&self) -> Result<Option<horde_crypto::KeyStatus>, NetError> {
        self.query(ConnOp::Keys).await
    }

    /// Add a channel over one of the host's interfaces. Fails with
    /// [`NetError::NoInterface`] if the interface was removed or is down just now; once
    /// added, the channel is removed and re-added with its interface by the pool manager.
    pub async fn add_channel(&self, target: ChannelTarget) -> Result<ChannelId, NetError> {
        self.ask(|r| ConnOp::AddChannel(target, r)).await
    }

    /// Remove a channel; what it had in flight is nacked.
    pub fn remove_channel(&self, id: ChannelId) -> Result<(), NetError> {
        self.op(ConnOp::RemoveChannel(id))
    }

    /// Close the connection: queued ADUs are nacked, and `Close` is repeated until the peer
    /// acknowledges it.
    pub fn close(&self) -> Result<(), NetError> {
        self.op(ConnOp::Close)
    }
}
