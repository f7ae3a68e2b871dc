//! The host's driver task: sockets in, sessions in the middle, sockets out.
//!
//! One task owns every socket, the handshake responder and every connection's crypto and
//! protocol state. Each turn it drains the sockets, applies commands, fires due timers,
//! flushes every session's transmits through the AEAD layer, and forwards events; then
//! it sleeps until a socket is readable, a command arrives or the next deadline.
//!
//! It is also the channel pool manager: every poll interval it asks [`pool::Monitor`]
//! which interfaces went away or came back, closes or binds their sockets, and removes or
//! re-adds the channels over them in every connection.

use std::collections::{BTreeMap, HashMap};
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use horde_crypto::{
    classify, random_index, DropCounters, DropReason, Initiator, Keypair, Packet, PublicKey,
    RekeyPolicy, Reply,
};
use horde_proto::{
    AcceptError, ChannelConfig, ChannelId, ChannelSpec, CloseReason, ConnectOptions,
    ConnectionHandle, Endpoint, EndpointConfig, Event, ServerConfig, Session, SessionConfig,
};
use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use crate::api::{
    ChannelStatus, Command, ConnOp, Connection, EventReceiver, NetError, Reconnect, Reply as Answer,
};
use crate::config::{ChannelTarget, ConnectConfig, HostConfig, InterfaceConfig};
use crate::handshake::{Done, Gate, Handshakes};
use crate::pool::{self, Change, DownReason, Iface, IfaceState};
use crate::socket;

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
}

/// Datagrams read from one socket per turn before others get a chance.
const RECV_BATCH: usize = 64;
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
    old: Option<Session>,
    reason: Option<CloseReason>,
    give_up_at: Duration,
}

struct Conn {
    crypto: Option<Box<horde_crypto::Session>>,
    handshake: Option<PendingHandshake>,
    proto: Option<Session>,
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
    read: Arc<AtomicU64>,
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
            read: Arc::new(AtomicU64::new(0)),
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
        while let Some(e) = self.proto.as_mut().and_then(Session::poll_event) {
            self.deliver(e);
        }
    }
}

struct Driver {
    start: Instant,
    sockets: Vec<Option<UdpSocket>>,
    /// Per interface, parallel to `sockets`.
    ifaces: Vec<Iface>,
    monitor: pool::Monitor,
    keypair: Keypair,
    /// Initiations: cheap checks here, Diffie-Hellman on the handshake worker.
    handshakes: Handshakes,
    rekey: RekeyPolicy,
    session: SessionConfig,
    accepted_channel: ChannelConfig,
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
    /// Handshake datagrams waiting for the next flush.
    raw_out: Vec<(usize, SocketAddr, Vec<u8>)>,
    recv_buf: Vec<u8>,
    plain: Vec<u8>,
    sealed: Vec<u8>,
    tx_buf: Vec<u8>,
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
        let s = socket::bind(iface)?;
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
    let handshakes = Handshakes::spawn(
        config.keypair.clone(),
        config.allowed_peers.iter().copied(),
        config.handshakes.clone(),
    )?;
    let driver = Driver {
        start: Instant::now(),
        sockets,
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
        accepted_channel: config.accepted_channel,
        conns: BTreeMap::new(),
        by_index: HashMap::new(),
        listeners: HashMap::new(),
        cmd_tx: cmd_tx.clone(),
        next_key: 1,
        rng: StdRng::from_entropy(),
        stats: HostStats::default(),
        raw_out: Vec::new(),
        recv_buf: vec![0; MAX_DATAGRAM],
        plain: Vec::with_capacity(MAX_DATAGRAM),
        sealed: Vec::with_capacity(MAX_DATAGRAM),
        tx_buf: Vec::with_capacity(MAX_DATAGRAM),
    };
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

    // ----- receive ----------------------------------------------------------------

    fn receive_all(&mut self) {
        for i in 0..self.sockets.len() {
            for _ in 0..RECV_BATCH {
                let Some(s) = &self.sockets[i] else { break };
                match s.try_recv_from(&mut self.recv_buf) {
                    Ok((n, src)) => {
                        self.stats.datagrams_in += 1;
                        self.stats.bytes_in += n as u64;
                        self.on_datagram(i, src, n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => break, // e.g. ICMP port unreachable surfaced on a later read
                }
            }
        }
    }

    fn on_datagram(&mut self, iface: usize, src: SocketAddr, len: usize) {
        let now = self.now();
        let data = &self.recv_buf[..len];
        match classify(data) {
            Err(DropReason::LegacyHandshake) => {
                self.handshakes.on_legacy(src, &mut self.stats.dropped)
            }
            Err(reason) => self.stats.dropped.record(reason),
            Ok(Packet::Initiation { .. }) => self.on_initiation(iface, src, len),
            Ok(Packet::Response {
                receiver_index: receiver,
            }) => self.on_response(receiver, len, now),
            Ok(Packet::CookieReply {
                receiver_index: receiver,
            }) => self.on_cookie_reply(receiver, len, now),
            Ok(Packet::Transport {
                receiver_index: receiver,
                ..
            }) => {
                let Some(&key) = self.by_index.get(&receiver) else {
                    self.stats.dropped.record(DropReason::WrongIndex);
                    return;
                };
                let conn = self.conns.get_mut(&key).expect("indexed connection exists");
                let Some(crypto) = conn.crypto.as_mut() else {
                    return;
                };
                conn.refused.clear();
                crypto.tick(now);
                let plain = match crypto.open(&self.recv_buf[..len], &mut self.plain) {
                    Ok((_, p)) => Bytes::copy_from_slice(p),
                    Err(reason) => {
                        self.stats.dropped.record(reason);
                        return;
                    }
                };
                match conn.proto.as_mut() {
                    Some(p) => p.handle_datagram(now, iface as u16, src, plain),
                    None => self.accept_session(key, iface, src, plain, now),
                }
            }
        }
    }

    /// Only the cheap checks here; the handshake worker answers later
    /// ([`Driver::on_handshake_done`]).
    fn on_initiation(&mut self, iface: usize, src: SocketAddr, len: usize) {
        let now = self.now();
        let by_index = &self.by_index;
        let gate = self.handshakes.on_initiation(
            &self.recv_buf[..len],
            iface,
            src,
            now,
            |i| by_index.contains_key(&i),
            &mut self.stats.dropped,
        );
        if let Gate::Send(cookie_reply) = gate {
            self.send_raw(iface, src, cookie_reply);
        }
    }

    /// A cookie reply: our initiation is wanted again with `mac2`; resend it now.
    fn on_cookie_reply(&mut self, receiver: u32, len: usize, now: Duration) {
        let Some(&key) = self.by_index.get(&receiver) else {
            self.stats.dropped.record(DropReason::WrongIndex);
            return;
        };
        let conn = self.conns.get_mut(&key).expect("indexed connection exists");
        let Some(hs) = conn.handshake.as_mut() else {
            self.stats.dropped.record(DropReason::UnexpectedType);
            return;
        };
        match hs.initiator.read_cookie_reply(&self.recv_buf[..len]) {
            Ok(()) => hs.next_send = now,
            Err(reason) => self.stats.dropped.record(reason),
        }
    }

    /// The handshake worker's answer to an initiation.
    fn on_handshake_done(&mut self, done: Done) {
        let Done {
            iface, src, result, ..
        } = done;
        let reply = match result {
            Ok(r) => r,
            Err(reason) => {
                self.stats.dropped.record(reason);
                return;
            }
        };
        self.send_raw(iface, src, reply.response().to_vec());
        if let Reply::NewSession { mut session, .. } = reply {
            session.set_rekey_policy(self.rekey);
            // Key ages count from the host's clock: unticked, a session's first key
            // would be stamped as used at 0 and expire once the host is older than
            // the reject-after time.
            session.tick(self.now());
            let key = self.next_key;
            self.next_key += 1;
            let (tx, rx) = mpsc::unbounded_channel();
            self.by_index.insert(session.local_index(), key);
            self.conns
                .insert(key, Conn::new(Some(session), None, tx, Some(rx)));
        }
    }

    /// A new session from `peer` for `service` (connection `new`) replaces the sessions
    /// the peer opened to that service before (it restarted, or reconnected): their
    /// applications hear [`CloseReason::Replaced`], what they had in flight is
    /// abandoned, and their state is freed. Its sessions to other services stay.
    fn replace_sessions_of(&mut self, peer: &PublicKey, service: u32, new: u64) {
        let now = self.now();
        let old: Vec<u64> = self
            .conns
            .iter()
            .filter(|(&k, c)| {
                k != new
                    && c.proto.as_ref().is_some_and(|p| p.service() == service)
                    && c.crypto
                        .as_ref()
                        .is_some_and(|k| !k.is_initiator() && k.remote_static() == peer)
            })
            .map(|(&k, _)| k)
            .collect();
        for key in old {
            let Some(mut c) = self.conns.remove(&key) else {
                continue;
            };
            self.forget(&c);
            if let Some(p) = c.proto.as_mut() {
                p.replaced(now);
                c.forward_events();
            }
            c.fail_waiters();
            self.by_index.retain(|_, k| *k != key);
            self.stats.sessions_replaced += 1;
            tracing::info!(peer = %peer, "new handshake from the peer replaces its old session");
        }
    }

    fn on_response(&mut self, receiver: u32, len: usize, now: Duration) {
        let Some(&key) = self.by_index.get(&receiver) else {
            self.stats.dropped.record(DropReason::WrongIndex);
            return;
        };
        let pending = &mut self
            .conns
            .get_mut(&key)
            .expect("indexed connection exists")
            .handshake;
        let Some(mut hs) = pending.take() else {
            self.stats.dropped.record(DropReason::UnexpectedType);
            return;
        };
        let crypto = match hs.initiator.read_response(&self.recv_buf[..len]) {
            Ok(s) => s,
            Err(reason) => {
                *pending = Some(hs);
                self.stats.dropped.record(reason);
                return;
            }
        };
        let mut crypto = crypto;
        crypto.set_rekey_policy(self.rekey);
        crypto.tick(now);
        // Channels over an interface that is down now wait for it to come back.
        let sockets = &self.sockets;
        let (live, parked): (Vec<ChannelTarget>, Vec<ChannelTarget>) = hs
            .config
            .channels
            .iter()
            .cloned()
            .partition(|c| matches!(sockets.get(c.interface), Some(Some(_))));
        let specs = live
            .iter()
            .map(|c| ChannelSpec {
                local: c.interface as u16,
                remote: c.remote,
                config: c.config.clone(),
            })
            .collect();
        self.refresh_aliases();
        let options = ConnectOptions {
            service: hs.config.service,
            channels: specs,
            ..ConnectOptions::default()
        };
        match self.endpoint.connect(now, options) {
            Ok((handle, mut p)) => {
                let conn = self.conns.get_mut(&key).expect("indexed connection exists");
                if let Some(old) = conn.handle.replace(handle) {
                    self.endpoint.forget(old);
                }
                conn.crypto = Some(Box::new(crypto));
                p.set_successor_expected(conn.reconnect.is_some());
                if let Some(mut r) = conn.redial.take() {
                    // A reconnection: the new session carries on the old one's streams,
                    // and the application keeps its handle and event channel.
                    if let Some(old) = r.old.as_mut() {
                        p.inherit(old, now);
                        while let Some(e) = old.poll_event() {
                            conn.deliver(e);
                        }
                    }
                    conn.proto = Some(p);
                    conn.targets = ChannelId::all().zip(live).collect();
                    conn.parked = parked;
                    self.stats.reconnects += 1;
                    tracing::info!("reconnected to the peer");
                    return;
                }
                conn.proto = Some(p);
                // `Session::connect` numbers the channels 0.. in order.
                conn.targets = ChannelId::all().zip(live).collect();
                conn.parked = parked;
                let (tx, rx) = mpsc::unbounded_channel();
                conn.events = tx;
                let events = conn.receiver(rx);
                let peer = conn.peer();
                let reply = std::mem::replace(&mut hs.reply, tokio::sync::oneshot::channel().0);
                let _ = reply.send(Ok(Connection::new(key, self.cmd_tx.clone(), events, peer)));
            }
            Err(e) => {
                let _ = hs.reply.send(Err(e.into()));
                self.remove_conn(key);
            }
        }
    }

    /// The first protocol datagram on a new secure session must be a hello for a service
    /// somebody listens on.
    fn accept_session(
        &mut self,
        key: u64,
        iface: usize,
        src: SocketAddr,
        plain: Bytes,
        now: Duration,
    ) {
        self.refresh_aliases();
        let new = match self.endpoint.accept_hello(now, iface as u16, src, &plain) {
            Ok(new) => new,
            Err(AcceptError::UnsupportedVersion { peer, ours }) => {
                tracing::warn!(
                    peer = %src,
                    "refused a peer speaking wire version {peer}: this host speaks version {ours} only"
                );
                self.stats.unroutable += 1;
                return;
            }
            Err(_) => {
                self.stats.unroutable += 1;
                return;
            }
        };
        // Taken from the endpoint's queue at once: the listener's channel is the backlog.
        self.endpoint.accept();
        let service = new.session.service();
        let Some(listener) = self.listeners.get(&service).cloned() else {
            self.endpoint.forget(new.handle);
            self.stats.unroutable += 1;
            return;
        };
        if let Some(peer) = self.conns.get(&key).and_then(Conn::peer) {
            self.replace_sessions_of(&peer, service, key);
        }
        let conn = self.conns.get_mut(&key).expect("connection exists");
        conn.proto = Some(*new.session);
        conn.handle = Some(new.handle);
        if let Some(rx) = conn.events_rx.take() {
            let events = conn.receiver(rx);
            let c = Connection::new(key, self.cmd_tx.clone(), events, conn.peer());
            if listener.try_send(c).is_err() {
                // The application is not accepting: refuse rather than queue.
                self.stats.backlog_refused += 1;
                tracing::warn!(service, "accept backlog full: connection closed");
                if let Some(p) = conn.proto.as_mut() {
                    p.close(now);
                }
            }
        }
    }

    // ----- commands ---------------------------------------------------------------

    fn command(&mut self, cmd: Command) {
        let now = self.now();
        match cmd {
            Command::Connect(config, reconnect, reply) => {
                self.start_connect(config, reconnect, reply, now)
            }
            Command::Listen(service, tx) => {
                self.listeners.insert(service, tx);
                let server = ServerConfig::uniform(self.accepted_channel.clone());
                self.endpoint.listen(service, server);
            }
            Command::AddInterface(iface, reply) => {
                let r = self.add_interface(&iface);
                let _ = reply.send(r);
            }
            Command::RemoveInterface(i) => self.remove_interface(i, now),
            Command::Stats(reply) => {
                let mut stats = self.stats.clone();
                stats.interfaces_open = self.sockets.iter().map(Option::is_some).collect();
                let _ = reply.send(stats);
            }
            Command::Conn(key, op) => self.conn_op(key, op, now),
            Command::Shutdown => {}
        }
    }

    fn add_interface(&mut self, iface: &InterfaceConfig) -> Result<(usize, SocketAddr), NetError> {
        let s = socket::bind(iface)?;
        let addr = s.local_addr()?;
        self.sockets.push(Some(s));
        self.ifaces.push(Iface {
            config: iface.clone(),
            bound: addr,
            ifindex: iface
                .device
                .as_deref()
                .and_then(|d| self.monitor.index_of(d)),
            state: IfaceState::Open,
        });
        Ok((self.sockets.len() - 1, addr))
    }

    /// The application removes an interface for good: nothing over it comes back.
    fn remove_interface(&mut self, index: usize, now: Duration) {
        let Some(iface) = self.ifaces.get_mut(index) else {
            return;
        };
        iface.state = IfaceState::Removed;
        self.sockets[index] = None;
        self.drop_channels_on(index, now, false);
    }

    // ----- the channel pool manager -----------------------------------------------

    fn watch_interfaces(&mut self, now: Duration) {
        for change in self.monitor.poll(now, &self.ifaces) {
            match change {
                Change::Down(i, reason) => self.interface_down(i, reason, now),
                Change::Up(i) => self.interface_up(i, now),
            }
        }
    }

    fn interface_down(&mut self, i: usize, reason: DownReason, now: Duration) {
        let iface = &mut self.ifaces[i];
        iface.state = IfaceState::Down;
        self.sockets[i] = None;
        self.stats.interfaces_down += 1;
        tracing::info!(
            interface = i,
            device = iface.config.device.as_deref().unwrap_or(""),
            reason = reason.as_str(),
            "interface down: socket closed, its channels removed"
        );
        self.drop_channels_on(i, now, true);
    }

    /// Remove every channel over interface `i` from every connection. With `park`, the
    /// channels this end opened are remembered to be added again when `i` comes back;
    /// without, they are forgotten.
    fn drop_channels_on(&mut self, i: usize, now: Duration, park: bool) {
        for c in self.conns.values_mut() {
            if !park {
                c.parked.retain(|t| t.interface != i);
            }
            let Some(p) = c.proto.as_ref() else { continue };
            let gone: Vec<ChannelId> = p
                .channels()
                .iter()
                .filter(|ch| usize::from(ch.local()) == i)
                .map(|ch| ch.id())
                .collect();
            for id in gone {
                // The session announces `ChannelDown` itself, before the nacks of what
                // was in flight on the channel.
                let p = c.proto.as_mut().expect("checked above");
                let _ = p.remove_channel(now, id);
                self.stats.channels_removed += 1;
                match c.targets.remove(&id) {
                    Some(t) if park => c.parked.push(t),
                    _ => {}
                }
            }
        }
    }

    fn interface_up(&mut self, i: usize, now: Duration) {
        let iface = &self.ifaces[i];
        // The same address and port as before, so peers' channels still reach us; the
        // configured address if that port has been taken meanwhile.
        let again = InterfaceConfig {
            bind: iface.bound,
            device: iface.config.device.clone(),
        };
        let bound = socket::bind(&again).or_else(|e| {
            if iface.bound == iface.config.bind {
                Err(e)
            } else {
                socket::bind(&iface.config)
            }
        });
        let s = match bound.and_then(|s| Ok((s.local_addr()?, s))) {
            Ok((addr, s)) => {
                if addr != iface.bound {
                    tracing::warn!(
                        interface = i,
                        was = %iface.bound,
                        now = %addr,
                        "interface bound again on another port; peers must follow"
                    );
                }
                (addr, s)
            }
            Err(e) => {
                tracing::debug!(interface = i, error = %e, "interface back but cannot bind yet");
                return; // the next poll tries again
            }
        };
        let device = iface.config.device.clone();
        let iface = &mut self.ifaces[i];
        iface.bound = s.0;
        iface.ifindex = device.as_deref().and_then(|d| self.monitor.index_of(d));
        iface.state = IfaceState::Open;
        self.sockets[i] = Some(s.1);
        self.stats.interfaces_up += 1;
        tracing::info!(
            interface = i,
            device = device.as_deref().unwrap_or(""),
            "interface up: socket bound again, its channels re-added"
        );
        for c in self.conns.values_mut() {
            if c.proto.is_none() || !c.parked.iter().any(|t| t.interface == i) {
                continue;
            }
            let (back, rest): (Vec<_>, Vec<_>) = c.parked.drain(..).partition(|t| t.interface == i);
            c.parked = rest;
            let p = c.proto.as_mut().expect("checked above");
            for t in back {
                let spec = ChannelSpec {
                    local: t.interface as u16,
                    remote: t.remote,
                    config: t.config.clone(),
                };
                match p.add_channel(now, spec) {
                    Ok(id) => {
                        c.targets.insert(id, t);
                        self.stats.channels_restored += 1;
                    }
                    Err(e) => tracing::warn!(interface = i, error = %e, "cannot re-add channel"),
                }
            }
        }
    }

    fn start_connect(
        &mut self,
        config: ConnectConfig,
        reconnect: Option<Reconnect>,
        reply: Answer<Connection>,
        now: Duration,
    ) {
        // An interface that is only down for now is fine: its channels wait for it.
        if let Some(bad) = config.channels.iter().find(|c| {
            self.ifaces
                .get(c.interface)
                .is_none_or(|i| i.state == IfaceState::Removed)
        }) {
            let _ = reply.send(Err(NetError::NoInterface(bad.interface)));
            return;
        }
        let (by_index, handshakes) = (&self.by_index, &self.handshakes);
        let index = random_index(&mut self.rng, |i| {
            by_index.contains_key(&i) || handshakes.is_reserved(i)
        });
        let initiator = Initiator::new(
            &self.keypair,
            &config.peer,
            index,
            unix_micros(),
            &mut self.rng,
        );
        let key = self.next_key;
        self.next_key += 1;
        self.by_index.insert(index, key);
        let deadline = now + config.handshake_timeout;
        let (tx, _) = mpsc::unbounded_channel();
        let mut conn = Conn::new(None, None, tx, None);
        conn.reconnect = reconnect;
        conn.connect = Some(config.clone());
        conn.handshake = Some(PendingHandshake {
            initiator,
            config,
            next_send: now,
            deadline,
            retry: INITIATION_RETRY,
            reply,
        });
        self.conns.insert(key, conn);
    }

    /// A persistent connection's session has ended for `reason`: keep it for its
    /// streams and start handshaking again, with backoff.
    fn start_redial(&mut self, key: u64, reason: CloseReason, now: Duration) {
        let Some(conn) = self.conns.get_mut(&key) else {
            return;
        };
        let (Some(policy), Some(config)) = (conn.reconnect, conn.connect.clone()) else {
            return;
        };
        let old = conn.proto.take();
        conn.crypto = None;
        conn.refused.clear();
        self.by_index.retain(|_, k| *k != key);
        let by_index = &self.by_index;
        let index = random_index(&mut self.rng, |i| by_index.contains_key(&i));
        let initiator = Initiator::new(
            &self.keypair,
            &config.peer,
            index,
            unix_micros(),
            &mut self.rng,
        );
        self.by_index.insert(index, key);
        tracing::info!(reason = reason.as_str(), "session ended; reconnecting");
        let conn = self.conns.get_mut(&key).expect("checked above");
        conn.handshake = Some(PendingHandshake {
            initiator,
            config,
            next_send: now,
            deadline: now + policy.give_up_after,
            retry: policy.initial,
            reply: tokio::sync::oneshot::channel().0,
        });
        conn.redial = Some(Redial {
            policy,
            old,
            reason: Some(reason),
            give_up_at: now + policy.give_up_after,
        });
    }

    fn conn_op(&mut self, key: u64, op: ConnOp, now: Duration) {
        let Some(conn) = self.conns.get_mut(&key) else {
            return; // dropping the reply sender tells the caller the host is gone
        };
        if conn.redial.is_some() && matches!(op, ConnOp::Close) {
            self.cancel_redial(key, CloseReason::LocalClose);
            return;
        }
        // While reconnecting, the ended session holds the streams for its successor.
        let redialing = conn.proto.is_none();
        let taken = if redialing {
            conn.redial.as_mut().and_then(|r| r.old.take())
        } else {
            conn.proto.take()
        };
        let Some(mut session) = taken else {
            return;
        };
        self.apply_op(key, &mut session, op, now);
        let Some(conn) = self.conns.get_mut(&key) else {
            return;
        };
        if redialing {
            // Its nacks (a queue overflowing while the peer is away) go out now.
            while let Some(e) = session.poll_event() {
                conn.deliver(e);
            }
        }
        match conn.redial.as_mut() {
            Some(r) if redialing => r.old = Some(session),
            _ => conn.proto = Some(session),
        }
    }

    /// Give up reconnecting: what the ended session kept for a successor is nacked, the
    /// application hears the end, and the connection is forgotten.
    fn cancel_redial(&mut self, key: u64, reason: CloseReason) {
        let Some(mut c) = self.conns.remove(&key) else {
            return;
        };
        self.forget(&c);
        self.by_index.retain(|_, k| *k != key);
        c.reconnect = None;
        if let Some(mut r) = c.redial.take() {
            if let Some(mut old) = r.old.take() {
                old.release();
                while let Some(e) = old.poll_event() {
                    c.deliver(e);
                }
            }
        }
        c.deliver(Event::Closed { reason });
        c.fail_waiters();
        self.stats.sessions_removed += 1;
    }

    fn apply_op(&mut self, key: u64, p: &mut Session, op: ConnOp, now: Duration) {
        let conn = self.conns.get_mut(&key).expect("caller checked");
        match op {
            ConnOp::OpenStream(id, cfg, r) => {
                let _ = r.send(p.open_stream(id, cfg).map_err(Into::into));
            }
            ConnOp::Send {
                stream,
                payload,
                fields,
                reply,
            } => {
                let res = p.send_adu(now, stream, payload, fields);
                match reply {
                    Some(r) => {
                        let _ = r.send(res.map_err(Into::into));
                    }
                    None => {
                        if let Err(e) = res {
                            tracing::warn!(stream, error = %e, "ADU rejected");
                        }
                    }
                }
            }
            ConnOp::SetField(adu, name, value) => {
                // Fire and forget: an ADU that has left the queue keeps its fields.
                let _ = p.set_adu_field(adu, &name, value);
            }
            ConnOp::Remove(adu, r) => {
                let _ = r.send(p.remove_adu(adu).is_ok());
            }
            ConnOp::SetMaxRate(stream, kbps, r) => {
                let _ = r.send(p.set_max_rate(stream, kbps).map_err(Into::into));
            }
            ConnOp::Writable(stream, r) => match p.writable(stream) {
                _ if p.is_closed() && !p.successor_expected() => {
                    let _ = r.send(Err(horde_proto::SessionError::Closed.into()));
                }
                Ok(true) => {
                    let _ = r.send(Ok(()));
                }
                Ok(false) => conn.writable_waiters.push((stream, r)),
                Err(e) => {
                    let _ = r.send(Err(e.into()));
                }
            },
            ConnOp::Inject(o, r) => {
                let _ = r.send(p.inject_objective(o));
            }
            ConnOp::RemoveObjective(id) => {
                let _ = p.remove_objective(id);
            }
            ConnOp::LatencyModes(r) => {
                let _ = r.send(p.latency_modes());
            }
            ConnOp::Stats(r) => {
                let _ = r.send(p.stats());
            }
            ConnOp::Channels(r) => {
                let _ = r.send(p.channels().iter().map(ChannelStatus::of).collect());
            }
            ConnOp::AddChannel(target, r) => {
                let ok = self
                    .sockets
                    .get(target.interface)
                    .is_some_and(|s| s.is_some());
                let res = if ok {
                    p.add_channel(
                        now,
                        ChannelSpec {
                            local: target.interface as u16,
                            remote: target.remote,
                            config: target.config.clone(),
                        },
                    )
                    .map_err(Into::into)
                } else {
                    Err(NetError::NoInterface(target.interface))
                };
                if let Ok(id) = res {
                    conn.targets.insert(id, target);
                }
                let _ = r.send(res);
            }
            ConnOp::RemoveChannel(id) => {
                let _ = p.remove_channel(now, id);
                conn.targets.remove(&id);
            }
            ConnOp::Close => p.close(now),
        }
    }

    // ----- timers and transmit ----------------------------------------------------

    fn timers(&mut self, now: Duration) {
        let mut failed = Vec::new();
        let mut resend = Vec::new();
        for (&key, c) in self.conns.iter_mut() {
            if let Some(p) = c.proto.as_mut() {
                if p.poll_timeout(now).is_some_and(|t| t <= now) {
                    p.handle_timeout(now);
                }
            }
            if let Some(h) = c.handshake.as_mut() {
                if now >= h.deadline {
                    failed.push(key);
                } else if now >= h.next_send {
                    h.next_send = now + h.retry;
                    if let Some(r) = &c.redial {
                        h.retry = (h.retry * 2).min(r.policy.max); // backoff
                    }
                    for ch in &h.config.channels {
                        resend.push((ch.interface, ch.remote, h.initiator.initiation().to_vec()));
                    }
                }
            }
        }
        for (iface, dst, bytes) in resend {
            self.send_raw(iface, dst, bytes);
        }
        for key in failed {
            if let Some(reason) = self
                .conns
                .get(&key)
                .and_then(|c| c.redial.as_ref())
                .and_then(|r| r.reason)
            {
                tracing::warn!("gave up reconnecting to the peer");
                self.cancel_redial(key, reason);
                continue;
            }
            if let Some(mut c) = self.conns.remove(&key) {
                self.forget(&c);
                if let Some(h) = c.handshake.take() {
                    let _ = h.reply.send(Err(NetError::HandshakeTimeout));
                }
            }
            self.by_index.retain(|_, k| *k != key);
        }
    }

    fn send_raw(&mut self, iface: usize, dst: SocketAddr, bytes: Vec<u8>) {
        self.raw_out.push((iface, dst, bytes));
    }

    /// Send one datagram, waiting for the socket if it is not writable yet (a fresh
    /// socket is not known to be writable until the reactor has seen it once). Returns
    /// whether the send was refused by an ICMP port unreachable.
    async fn send_on(
        socket: &UdpSocket,
        bytes: &[u8],
        dst: SocketAddr,
        stats: &mut HostStats,
    ) -> bool {
        loop {
            match socket.try_send_to(bytes, dst) {
                Ok(n) => {
                    stats.datagrams_out += 1;
                    stats.bytes_out += n as u64;
                    return false;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if socket.writable().await.is_err() {
                        stats.send_errors += 1;
                        return false;
                    }
                }
                Err(e) => {
                    // A dead route or a refused port: the channel manager sees the loss
                    // and its dead-man timer takes the channel out of service; repeated
                    // refusals end the session (see `REFUSED_SENDS`).
                    stats.send_errors += 1;
                    return e.kind() == io::ErrorKind::ConnectionRefused;
                }
            }
        }
    }

    async fn flush(&mut self, now: Duration) {
        for (iface, dst, bytes) in std::mem::take(&mut self.raw_out) {
            if let Some(Some(s)) = self.sockets.get(iface) {
                Self::send_on(s, &bytes, dst, &mut self.stats).await;
            }
        }
        let keys: Vec<u64> = self.conns.keys().copied().collect();
        let mut closed = Vec::new();
        let mut ended = Vec::new();
        for key in keys {
            let conn = self.conns.get_mut(&key).expect("key just listed");
            let (Some(p), Some(crypto)) = (conn.proto.as_mut(), conn.crypto.as_mut()) else {
                continue;
            };
            let read = conn.read.load(Ordering::Relaxed);
            if read > conn.read_told {
                p.consumed(now, (read - conn.read_told) as usize);
                conn.read_told = read;
            }
            crypto.tick(now);
            while let Some(t) = p.poll_transmit(now, &mut self.tx_buf) {
                self.sealed.clear();
                if crypto
                    .seal(u8::from(t.channel), &self.tx_buf, &mut self.sealed)
                    .is_err()
                {
                    self.stats.send_errors += 1;
                    continue;
                }
                if let Some(Some(s)) = self.sockets.get(t.local as usize) {
                    if Self::send_on(s, &self.sealed, t.dst, &mut self.stats).await {
                        *conn.refused.entry(t.channel).or_default() += 1;
                    }
                }
            }
            let everywhere = !p.channels().is_empty()
                && p.channels().iter().all(|c| {
                    conn.refused
                        .get(&c.id())
                        .is_some_and(|&n| n >= REFUSED_SENDS)
                });
            // A persistent connection whose every channel is dead (nothing acked for
            // three probe timeouts, at least a second, keepalives included) handshakes
            // again rather than wait out the idle timeout: a restarted peer answers the
            // handshake at once, and one behind an outage as soon as it is back.
            let all_dead = conn.reconnect.is_some()
                && p.is_connected()
                && !p.channels().is_empty()
                && p.channels().iter().all(|c| !c.is_alive());
            if (everywhere || all_dead) && !p.is_closed() {
                p.unreachable(now);
            }
            let reason = p.close_reason();
            conn.forward_events();
            if conn.reconnect.is_some() {
                if let Some(reason) = reason.filter(|r| *r != CloseReason::LocalClose) {
                    ended.push((key, reason));
                    continue;
                }
            }
            if conn.proto.as_ref().is_some_and(Session::is_closed) {
                conn.fail_waiters();
            }
            let p = conn.proto.as_ref().expect("checked above");
            if p.is_closed() && p.poll_timeout(now).is_none() {
                closed.push(key);
            }
        }
        for key in closed {
            self.remove_conn(key);
            self.stats.sessions_removed += 1;
        }
        for (key, reason) in ended {
            self.start_redial(key, reason, now);
        }
    }

    fn remove_conn(&mut self, key: u64) {
        if let Some(c) = self.conns.remove(&key) {
            self.forget(&c);
        }
        self.by_index.retain(|_, k| *k != key);
    }
}

/// Ready once any open socket has a datagram to read. Borrows only the sockets, so the
/// driver's other fields stay free for the `select!` arms.
fn any_readable(sockets: &[Option<UdpSocket>]) -> impl std::future::Future<Output = ()> + '_ {
    poll_fn(move |cx| {
        for s in sockets.iter().flatten() {
            if s.poll_recv_ready(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    })
}
