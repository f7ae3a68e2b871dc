//! The host's driver task: sockets in, sessions in the middle, sockets out.
//!
//! One task owns every socket, the handshake responder and every connection's crypto and
//! protocol state. Each turn it drains the sockets (`receive`: `recvmmsg`, GRO), applies
//! commands (`commands`), fires due timers (`timers`), flushes every session's transmits
//! through the AEAD layer in per-socket batches (`transmit`: `sendmmsg`, GSO), and
//! forwards events; then it sleeps until a socket is readable, a command arrives or the
//! next deadline.
//!
//! It is also the channel pool manager (`interfaces`): every poll interval it asks [`pool::Monitor`]
//! which interfaces went away or came back, closes or binds their sockets, and removes or
//! re-adds the channels over them in every connection.

mod commands;
mod interfaces;
mod plaintext;
mod receive;
mod sealer;
mod timers;
mod transmit;

use std::collections::{BTreeMap, HashMap};
use std::future::poll_fn;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use horde_crypto::{
    classify, random_index, DropCounters, DropReason, Initiator, Keypair, Packet, PublicKey,
    RekeyPolicy, Reply,
};
use horde_proto::{
    AcceptError, ChannelConfig, ChannelConfigFn, ChannelId, ChannelSpec, CloseReason,
    ConnectOptions, ConnectionHandle, Endpoint, EndpointConfig, Event, ServerConfig, Session,
    SessionConfig,
};
use quinn_udp::RecvMeta;
use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::sync::{mpsc, Notify};

use crate::api::{
    ChannelStatus, Command, ConnOp, Connection, EventReceiver, NetError, Reconnect, Reply as Answer,
};
use crate::batch::{self, Owner, TxQueue};
use crate::config::{ChannelTarget, ConnectConfig, HostConfig, InterfaceConfig};
use crate::handshake::{Done, Gate, Handshakes};
use crate::pool::{self, Change, DownReason, Iface, IfaceState};
use crate::read_progress::ReadProgress;
use crate::socket::{self, ChannelSocket};
use plaintext::PlaintextChunks;

/// Host-wide counters.
#[derive(Debug, Clone, Default)]
pub struct HostStats {
    /// Datagrams received on every interface.
    pub datagrams_in: u64,
    /// Datagrams sent.
    pub datagrams_out: u64,
    /// Bytes received (whole UDP payloads).
    pub bytes_in: u64,
    /// Bytes sent (whole UDP payloads).
    pub bytes_out: u64,
    /// Datagrams dropped by the secure layer, by reason (garbage, replay, bad key...).
    pub dropped: DropCounters,
    /// Authenticated datagrams for a session that no longer exists or a service nobody
    /// listens on.
    pub unroutable: u64,
    /// Sends the operating system refused (no route, ICMP errors, full buffers).
    pub send_errors: u64,
    /// Times the channel pool manager took an interface out of service (device gone,
    /// down, without carrier or without its address) and closed its socket.
    pub interfaces_down: u64,
    /// Times it bound such an interface's socket again.
    pub interfaces_up: u64,
    /// Channels removed because their interface went down or was removed.
    pub channels_removed: u64,
    /// Channels added again when their interface came back.
    pub channels_restored: u64,
    /// Whether each interface's socket is open now, in interface order.
    pub interfaces_open: Vec<bool>,
    /// Sessions ended because a new session from the same peer key to the same service
    /// replaced them.
    pub sessions_replaced: u64,
    /// Accepted connections closed at once because the listener's backlog was full.
    pub backlog_refused: u64,
    /// Sessions a persistent connection opened again after its old one died.
    pub reconnects: u64,
    /// Sessions removed after they ended (closed, replaced, timed out).
    pub sessions_removed: u64,
    /// `sendmmsg` calls that sent something.
    pub send_calls: u64,
    /// Messages among what they sent that carried several datagrams with UDP GSO.
    pub gso_messages: u64,
    /// `recvmmsg` calls that returned datagrams.
    pub recv_calls: u64,
    /// Reads that returned a GRO train of several datagrams.
    pub gro_reads: u64,
    /// Datagrams the handshake worker read from the handshake sockets (initiations that
    /// the kernel steered away from the data path); also counted in `datagrams_in`.
    pub handshake_datagrams_in: u64,
    /// Datagrams sealed on the sealing worker thread ([`HostConfig::seal_worker`]).
    pub sealed_off_thread: u64,
    /// Datagrams the driver sealed itself while a sealing worker runs: batches too small
    /// to be worth a hand-off, and batches sealed while the worker was behind.
    pub sealed_on_driver: u64,
    /// Chunks allocated for decrypted payloads.
    pub plaintext_chunks: u64,
    /// Used-up chunks used again because nothing held their payloads any more.
    pub plaintext_chunks_reused: u64,
}

/// Datagrams read from one socket per turn before others get a chance.
const RECV_BATCH: usize = 64;
/// Receive buffers per `recvmmsg`, each large enough for the largest datagram or a GRO
/// train of them.
const RECV_SLOTS: usize = 16;
/// Decrypted payloads are cut from chunks of this size: one allocation per chunk, not
/// per datagram.
const PLAINTEXT_CHUNK: usize = 256 << 10;
const INITIATION_RETRY: Duration = Duration::from_millis(500);
/// Consecutive sends refused by ICMP port unreachable on every channel after which a
/// session's peer counts as gone (its process is not there; a link that is down is the
/// channel pool manager's business).
const REFUSED_SENDS: u32 = 3;
/// Extra time the shutdown waits beyond the sessions' close timeout.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(50);
const MAX_DATAGRAM: usize = 65_535;

struct PendingHandshake {
    initiator: Initiator,
    config: ConnectConfig,
    next_send: Duration,
    deadline: Duration,
    /// Interval until the next initiation is sent (doubling when reconnecting).
    retry: Duration,
    reply: Answer<Connection>,
}

/// A persistent connection's state while it opens a new session after the old one died.
struct Redial {
    policy: Reconnect,
    /// The ended session, kept until the new one takes over its streams.
    old: Option<Box<Session>>,
    reason: Option<CloseReason>,
    give_up_at: Duration,
}

struct Conn {
    crypto: Option<Box<horde_crypto::Session>>,
    handshake: Option<PendingHandshake>,
    /// Boxed: commands take the session out of the connection and put it back, which
    /// would otherwise copy the whole session twice per command (per ADU sent).
    proto: Option<Box<Session>>,
    /// `proto`'s handle in the host's endpoint.
    handle: Option<ConnectionHandle>,
    events: mpsc::UnboundedSender<Event>,
    /// The receiver half, until a session is accepted and handed to a listener.
    events_rx: Option<mpsc::UnboundedReceiver<Event>>,
    /// Channels this end opened, by id, with the target that made them.
    targets: BTreeMap<ChannelId, ChannelTarget>,
    /// Targets whose interface is down, added again when it comes back.
    parked: Vec<ChannelTarget>,
    /// Callers of `ConnectionHandle::writable` waiting for their stream to drain.
    writable_waiters: Vec<(u32, Answer<()>)>,
    /// Payload bytes the application has read (counted by its [`EventReceiver`]), and
    /// how much of that the session has been told.
    read: Arc<ReadProgress>,
    read_told: u64,
    /// Persistent connections: how to reconnect, and the redial in progress.
    reconnect: Option<Reconnect>,
    redial: Option<Redial>,
    /// The connection config a client connection was opened with.
    connect: Option<ConnectConfig>,
    /// Per channel: sends refused by ICMP port unreachable since the last datagram
    /// from the peer.
    refused: BTreeMap<ChannelId, u32>,
}

impl Conn {
    fn new(
        crypto: Option<Box<horde_crypto::Session>>,
        handshake: Option<PendingHandshake>,
        events: mpsc::UnboundedSender<Event>,
        events_rx: Option<mpsc::UnboundedReceiver<Event>>,
        reader_woke: Arc<Notify>,
    ) -> Self {
        Conn {
            crypto,
            handshake,
            proto: None,
            handle: None,
            events,
            events_rx,
            targets: BTreeMap::new(),
            parked: Vec::new(),
            writable_waiters: Vec::new(),
            read: Arc::new(ReadProgress::new(reader_woke)),
            read_told: 0,
            reconnect: None,
            redial: None,
            connect: None,
            refused: BTreeMap::new(),
        }
    }

    fn peer(&self) -> Option<PublicKey> {
        self.crypto.as_ref().map(|c| *c.remote_static())
    }

    /// The application's end of this connection's events.
    fn receiver(&self, rx: mpsc::UnboundedReceiver<Event>) -> EventReceiver {
        EventReceiver::new(rx, self.read.clone())
    }

    /// Pass one session event to the application, waking `writable` waiters first.
    fn deliver(&mut self, e: Event) {
        // A persistent connection's session that died is followed by a new one: the
        // application hears that instead of the end.
        let e = match e {
            Event::Closed { reason }
                if reason != CloseReason::LocalClose && self.reconnect.is_some() =>
            {
                Event::Reconnecting { reason, attempt: 1 }
            }
            e => e,
        };
        if let Event::Writable { stream } = e {
            let waiters = std::mem::take(&mut self.writable_waiters);
            for (s, reply) in waiters {
                if s == stream {
                    let _ = reply.send(Ok(()));
                } else {
                    self.writable_waiters.push((s, reply));
                }
            }
        }
        let _ = self.events.send(e);
    }

    /// A closed session will never drain: its waiters get an error.
    fn fail_waiters(&mut self) {
        for (_, reply) in self.writable_waiters.drain(..) {
            let _ = reply.send(Err(horde_proto::SessionError::Closed.into()));
        }
    }

    /// Hand the session's queued events to the application, so that what the pool
    /// manager reports next comes after them.
    fn forward_events(&mut self) {
        while let Some(e) = self.proto.as_deref_mut().and_then(Session::poll_event) {
            self.deliver(e);
        }
    }
}

struct Driver {
    start: Instant,
    sockets: Vec<Option<ChannelSocket>>,
    /// Per interface, parallel to `sockets`: datagrams waiting for the next send.
    tx: Vec<TxQueue>,
    /// GSO and GRO wanted ([`HostConfig::udp_offload`]).
    offload: bool,
    /// Initiations wanted on sockets of their own ([`HandshakeSettings::separate_socket`](crate::HandshakeSettings)).
    split_handshakes: bool,
    /// Per interface, parallel to `sockets`.
    ifaces: Vec<Iface>,
    monitor: pool::Monitor,
    keypair: Keypair,
    /// Initiations: cheap checks here, Diffie-Hellman on the handshake worker.
    handshakes: Handshakes,
    rekey: RekeyPolicy,
    session: SessionConfig,
    accepted_channel: ChannelConfigFn,
    /// Opens and accepts sessions: connection ids, seeds, scheduler, receive buffer.
    endpoint: Endpoint,
    conns: BTreeMap<u64, Conn>,
    /// Local crypto index -> connection key.
    by_index: HashMap<u32, u64>,
    listeners: HashMap<u32, mpsc::Sender<Connection>>,
    cmd_tx: mpsc::UnboundedSender<Command>,
    next_key: u64,
    rng: StdRng,
    stats: HostStats,
    /// `RECV_SLOTS` receive buffers of `MAX_DATAGRAM` bytes, end to end.
    recv_bufs: Vec<u8>,
    /// Where decrypted payloads are handed out from (see `PLAINTEXT_CHUNK`).
    plaintext: PlaintextChunks,
    /// Channels whose sends were refused in the last flush.
    refusals: Vec<(u64, ChannelId)>,
    /// The connection keys a flush walks, kept for the next one.
    flush_keys: Vec<u64>,
    tx_buf: Vec<u8>,
    /// AES-GCM on a second thread ([`HostConfig::seal_worker`]); `None`: on this one.
    sealer: Option<sealer::Sealer>,
    /// Batches back from the sealer, waiting to be sent (kept between flushes).
    sealed: Vec<sealer::SealBatch>,
    /// Flushes wait for the sealer's last batches (while shutting down).
    sealing_wait: bool,
    /// The sealer's hand-back signal, or one that never fires.
    sealer_done: Arc<Notify>,
    /// Set by an application whose reading lets a shut receive window reopen.
    reader_woke: Arc<Notify>,
}

pub(crate) type Spawned = (
    mpsc::UnboundedSender<Command>,
    Vec<SocketAddr>,
    tokio::task::JoinHandle<()>,
);

pub(crate) fn spawn(config: HostConfig) -> Result<Spawned, NetError> {
    // The monitor's probes are opened here, next to the sockets, so that they see the
    // same network namespace.
    let mut monitor = pool::Monitor::new(config.interface_poll);
    let mut sockets = Vec::new();
    let mut addrs = Vec::new();
    let mut ifaces = Vec::new();
    for iface in &config.interfaces {
        let s = socket::bind(iface, config.udp_offload, config.handshakes.separate_socket)?;
        let bound = s.local_addr()?;
        addrs.push(bound);
        sockets.push(Some(s));
        ifaces.push(Iface {
            config: iface.clone(),
            bound,
            ifindex: iface.device.as_deref().and_then(|d| monitor.index_of(d)),
            state: IfaceState::Open,
        });
    }
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let split_handshakes = config.handshakes.separate_socket;
    let mut handshakes = Handshakes::spawn(
        config.keypair.clone(),
        config.allowed_peers.iter().copied(),
        config.handshakes.clone(),
    )?;
    for (i, s) in sockets.iter().enumerate() {
        let hs = s
            .as_ref()
            .and_then(ChannelSocket::handshake_socket)
            .cloned();
        handshakes.set_socket(i, hs);
    }
    let driver = Driver {
        start: Instant::now(),
        reader_woke: Arc::new(Notify::new()),
        tx: sockets.iter().map(|_| TxQueue::default()).collect(),
        sockets,
        offload: config.udp_offload,
        split_handshakes,
        ifaces,
        monitor,
        keypair: config.keypair,
        handshakes,
        rekey: config.rekey,
        endpoint: Endpoint::new(EndpointConfig {
            session: config.session.clone(),
            seed: rand::random(),
            local_aliases: addrs.clone(),
            scheduler: config.scheduler,
            receive_buffer: Some(config.recv_buffer_bytes),
            // The application's accept queue is the listener's channel.
            accept_backlog: usize::MAX,
        }),
        session: config.session,
        accepted_channel: {
            let (all, by_id) = (config.accepted_channel, config.accepted_channel_by_id);
            Arc::new(move |id: ChannelId| by_id.get(usize::from(id)).unwrap_or(&all).clone())
        },
        conns: BTreeMap::new(),
        by_index: HashMap::new(),
        listeners: HashMap::new(),
        cmd_tx: cmd_tx.clone(),
        next_key: 1,
        rng: StdRng::from_entropy(),
        stats: HostStats::default(),
        recv_bufs: vec![0; RECV_SLOTS * MAX_DATAGRAM],
        plaintext: PlaintextChunks::new(PLAINTEXT_CHUNK),
        refusals: Vec::new(),
        flush_keys: Vec::new(),
        tx_buf: Vec::with_capacity(MAX_DATAGRAM),
        sealer: if config.seal_worker {
            Some(sealer::Sealer::spawn()?)
        } else {
            None
        },
        sealed: Vec::with_capacity(sealer::BATCHES),
        sealing_wait: false,
        sealer_done: Arc::new(Notify::new()),
    };
    let mut driver = driver;
    if let Some(s) = &driver.sealer {
        driver.sealer_done = s.done.clone();
    }
    let task = tokio::spawn(driver.run(cmd_rx));
    Ok((cmd_tx, addrs, task))
}

fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

impl Driver {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    async fn run(mut self, mut cmd_rx: mpsc::UnboundedReceiver<Command>) {
        loop {
            self.receive_all();
            while let Some(done) = self.handshakes.try_done() {
                self.on_handshake_done(done);
            }
            loop {
                match cmd_rx.try_recv() {
                    Ok(Command::Shutdown) => return self.last_flush().await,
                    Ok(cmd) => self.command(cmd),
                    Err(_) => break,
                }
            }
            let now = self.now();
            self.watch_interfaces(now);
            self.timers(now);
            self.flush(now).await;
            let deadline = self.next_deadline(now);
            let sleep =
                tokio::time::sleep_until(tokio::time::Instant::from_std(self.start + deadline));
            let readable = any_readable(&self.sockets);
            tokio::select! {
                biased;
                cmd = cmd_rx.recv() => match cmd {
                    None | Some(Command::Shutdown) => return self.last_flush().await,
                    Some(cmd) => self.command(cmd),
                },
                _ = readable => {}
                _ = self.reader_woke.notified() => {}
                _ = self.sealer_done.notified() => {}
                done = self.handshakes.next_done() => {
                    if let Some(done) = done {
                        self.on_handshake_done(done);
                    }
                }
                _ = sleep => {}
            }
        }
    }

    /// Before the sockets close, close every session and wait until each peer has
    /// acknowledged its `Close` (or the close timeout has passed), so that peers end at
    /// once instead of waiting for an idle timeout, and every ADU in flight is resolved.
    async fn last_flush(&mut self) {
        self.sealing_wait = true;
        let now = self.now();
        for c in self.conns.values_mut() {
            c.reconnect = None;
            if let Some(mut r) = c.redial.take() {
                c.handshake = None;
                // Reconnecting: what the old session kept for its successor is nacked.
                if let Some(mut old) = r.old.take() {
                    old.release();
                    while let Some(e) = old.poll_event() {
                        c.deliver(e);
                    }
                }
                c.deliver(Event::Closed {
                    reason: CloseReason::LocalClose,
                });
                c.fail_waiters();
            }
            if let Some(p) = c.proto.as_mut() {
                p.close(now);
            }
        }
        let give_up = now
            + Duration::from_secs_f64(self.session.close_timeout_ms.max(0.0) / 1e3)
            + SHUTDOWN_GRACE;
        loop {
            self.receive_all();
            let now = self.now();
            self.timers(now);
            self.flush(now).await;
            let closing = self
                .conns
                .values()
                .any(|c| c.proto.as_ref().is_some_and(|p| p.close_reason().is_none()));
            if !closing || now >= give_up {
                return;
            }
            let wake = self.next_deadline(now).min(give_up);
            let sleep = tokio::time::sleep_until(tokio::time::Instant::from_std(self.start + wake));
            let readable = any_readable(&self.sockets);
            tokio::select! {
                _ = readable => {}
                _ = sleep => {}
            }
        }
    }

    fn next_deadline(&self, now: Duration) -> Duration {
        let mut t = now + Duration::from_secs(1);
        if let Some(poll) = self.monitor.deadline(&self.ifaces) {
            t = t.min(poll);
        }
        for c in self.conns.values() {
            if let Some(p) = &c.proto {
                if let Some(x) = p.poll_timeout(now) {
                    t = t.min(x);
                }
            }
            if let Some(h) = &c.handshake {
                t = t.min(h.next_send).min(h.deadline);
            }
            if let Some(r) = &c.redial {
                t = t.min(r.give_up_at);
            }
        }
        t.max(now)
    }

    /// New sessions advertise the addresses of the sockets open now.
    fn refresh_aliases(&mut self) {
        let aliases = self
            .sockets
            .iter()
            .flatten()
            .filter_map(|s| s.local_addr().ok())
            .collect();
        self.endpoint.set_local_aliases(aliases);
    }

    /// The connection is gone: its session no longer routes in the endpoint.
    fn forget(&mut self, conn: &Conn) {
        if let Some(h) = conn.handle {
            self.endpoint.forget(h);
        }
    }
}

/// Ready once any open socket has a datagram to read. Borrows only the sockets, so the
/// driver's other fields stay free for the `select!` arms.
fn any_readable(sockets: &[Option<ChannelSocket>]) -> impl std::future::Future<Output = ()> + '_ {
    poll_fn(move |cx| {
        for s in sockets.iter().flatten() {
            if s.poll_recv_ready(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    })
}
