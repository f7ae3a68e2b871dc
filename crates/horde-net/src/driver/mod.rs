//! The host's driver task: sockets in, the sans-IO [`horde_host::Host`] in the middle,
//! sockets out.
//!
//! One task owns every socket and the host. Each turn it drains the sockets (`receive`:
//! `recvmmsg`, GRO) into the host, passes the handshake worker's answers and the
//! application's commands (`commands`) to it, runs its due timers, forwards its events
//! to the applications (`events`), and sends its datagrams through the AEAD layer in
//! per-socket batches (`transmit`: `sendmmsg`, GSO); then it sleeps until a socket is
//! readable, a command arrives or the next deadline.
//!
//! It also runs the interface monitor (`interfaces`): every poll interval it asks
//! [`pool::Monitor`] which interfaces went away or came back, closes or binds their
//! sockets, and tells the host, which removes or re-adds the channels over them.

mod commands;
mod events;
mod interfaces;
mod receive;
mod sealer;
mod transmit;

use std::collections::{BTreeMap, HashMap};
use std::future::poll_fn;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use horde_host::{HostSettings, Inbound, ResponderSettings};
use horde_proto::{ChannelId, EndpointConfig};
use quinn_udp::RecvMeta;
use tokio::sync::{mpsc, Notify};

use crate::batch::{self, Owner, TxQueue};
use crate::command::{Command, Reply as Answer};
use crate::config::{HostConfig, InterfaceConfig};
use crate::connection::Connection;
use crate::error::NetError;
use crate::event_queue::EventSender;
use crate::handshake::{FromWorker, Handshakes};
use crate::messages::HostBandwidth;
use crate::pool::{self, Change, DownReason, Iface, IfaceState};
use crate::read_progress::{ReadLog, ReadProgress};
use crate::socket::{self, ChannelSocket};
use crate::stats::HostStats;

/// Datagrams read from one socket per turn before others get a chance.
const RECV_BATCH: usize = 64;
/// Receive buffers per `recvmmsg`, each large enough for the largest datagram or a GRO
/// train of them.
const RECV_SLOTS: usize = 16;
/// Extra time the shutdown waits beyond the sessions' close timeout.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(50);
const MAX_DATAGRAM: usize = 65_535;

/// The application's end of one connection, as the driver feeds it.
struct App {
    events: EventSender,
    /// Payload bytes the application has read (counted by its `EventReceiver`).
    read: Arc<ReadProgress>,
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
    /// The handshake worker: it reads the handshake sockets and runs the host's
    /// Diffie-Hellman jobs.
    handshakes: Handshakes,
    /// Every connection's state and decisions.
    host: horde_host::Host,
    /// How long a closing session waits for its peer (for the shutdown).
    close_timeout: Duration,
    /// The application's side of each connection the host has handed out.
    /// (Looked up for every event: keys are small and issued in order, so an ordered
    /// map finds them faster than hashing would.)
    apps: BTreeMap<u64, App>,
    /// Connections being opened, with the caller waiting for each.
    dialing: HashMap<u64, Answer<Connection>>,
    listeners: HashMap<u32, mpsc::Sender<Connection>>,
    cmd_tx: mpsc::UnboundedSender<Command>,
    /// The host's bandwidth estimate, handed to each connection for its message endpoint.
    bandwidth: HostBandwidth,
    stats: HostStats,
    /// `RECV_SLOTS` receive buffers of `MAX_DATAGRAM` bytes, end to end.
    recv_bufs: Vec<u8>,
    /// Channels whose sends were refused in the last flush.
    refusals: Vec<(u64, ChannelId)>,
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
    /// The connections whose applications have read since the last flush.
    read_log: Arc<ReadLog>,
    /// Connections to tell the host of their reading (kept between flushes).
    to_tell: Vec<u64>,
    /// Scratch for the connections told at a flush (empty between flushes).
    tell_keys: Vec<u64>,
    /// The indices the data sockets' kernel filters let through (sorted); `None`: a socket
    /// has no filter yet.
    filtered_indices: Option<Vec<u32>>,
    /// The host's index generation `filtered_indices` was made at.
    filtered_generation: u64,
    /// What the kernel dropped at data sockets since closed.
    kernel_dropped_closed: u64,
}

pub(crate) type Spawned = (
    mpsc::UnboundedSender<Command>,
    Vec<SocketAddr>,
    tokio::task::JoinHandle<()>,
);

pub(crate) fn spawn(config: HostConfig, bandwidth: HostBandwidth) -> Result<Spawned, NetError> {
    // The monitor's probes are opened here, next to the sockets, so that they see the
    // same network namespace.
    let mut monitor = pool::Monitor::new(config.interface_poll);
    let mut sockets = Vec::new();
    let mut addrs = Vec::new();
    let mut ifaces = Vec::new();
    for iface in &config.interfaces {
        let s = match socket::bind(iface, config.udp_offload, config.handshakes.separate_socket) {
            Ok(s) => s,
            Err(e) if waits_for_device(iface, &e) => {
                // A modem not there yet (or without its address yet): the interface
                // starts down, and the monitor brings it up when the device is usable.
                tracing::warn!(
                    device = iface.device.as_deref().unwrap_or(""),
                    bind = %iface.bind,
                    error = %e,
                    "device not usable yet: its channels wait for it"
                );
                addrs.push(iface.bind);
                sockets.push(None);
                ifaces.push(Iface {
                    config: iface.clone(),
                    bound: iface.bind,
                    ifindex: None,
                    state: IfaceState::Down,
                });
                continue;
            }
            Err(e) => return Err(e.into()),
        };
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
    if !sockets.is_empty() && sockets.iter().all(Option::is_none) {
        let devices: Vec<&str> = config
            .interfaces
            .iter()
            .filter_map(|i| i.device.as_deref())
            .collect();
        return Err(NetError::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "none of the interfaces' devices is usable yet ({}): nothing to send from",
                devices.join(", ")
            ),
        )));
    }
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let split_handshakes = config.handshakes.separate_socket;
    let mut handshakes = Handshakes::spawn(config.keypair.public())?;
    for (i, s) in sockets.iter().enumerate() {
        let hs = s
            .as_ref()
            .and_then(ChannelSocket::handshake_socket)
            .cloned();
        handshakes.set_socket(i, hs);
    }
    let mut host = horde_host::Host::new(HostSettings {
        keypair: config.keypair,
        rekey: config.rekey,
        endpoint: EndpointConfig {
            session: config.session.clone(),
            seed: rand::random(),
            local_aliases: addrs.clone(),
            scheduler: config.scheduler,
            receive_buffer: Some(config.recv_buffer_bytes),
            // The application's accept queue is the listener's channel.
            accept_backlog: usize::MAX,
        },
        accepted_channel: {
            let (all, by_id) = (config.accepted_channel, config.accepted_channel_by_id);
            Arc::new(move |id: ChannelId| by_id.get(usize::from(id)).unwrap_or(&all).clone())
        },
        interfaces: sockets.len(),
        seed: rand::random(),
        unix_micros_at_start: unix_micros(),
        responder: ResponderSettings {
            allowed: config.allowed_peers.clone(),
            queue: config.handshakes.queue,
            rate_limit: config.handshakes.rate_limit,
            load_rate: config.handshakes.load_rate,
            server_id: config.handshakes.server_id,
        },
    });
    for (i, iface) in ifaces.iter().enumerate() {
        if iface.state == IfaceState::Down {
            host.interface_down(Duration::ZERO, i);
        }
    }
    let sealer = if config.seal_worker {
        Some(sealer::Sealer::spawn()?)
    } else {
        None
    };
    let sealer_done = match &sealer {
        Some(s) => s.done.clone(),
        None => Arc::new(Notify::new()),
    };
    let driver = Driver {
        start: Instant::now(),
        reader_woke: Arc::new(Notify::new()),
        read_log: Arc::default(),
        to_tell: Vec::new(),
        tell_keys: Vec::new(),
        filtered_indices: None,
        filtered_generation: 0,
        kernel_dropped_closed: 0,
        tx: sockets.iter().map(|_| TxQueue::default()).collect(),
        sockets,
        offload: config.udp_offload,
        split_handshakes,
        ifaces,
        monitor,
        handshakes,
        host,
        close_timeout: Duration::from_secs_f64(config.session.close_timeout_ms.max(0.0) / 1e3),
        apps: BTreeMap::new(),
        dialing: HashMap::new(),
        listeners: HashMap::new(),
        cmd_tx: cmd_tx.clone(),
        bandwidth,
        stats: HostStats::default(),
        recv_bufs: vec![0; RECV_SLOTS * MAX_DATAGRAM],
        refusals: Vec::new(),
        tx_buf: Vec::with_capacity(MAX_DATAGRAM),
        sealer,
        sealed: Vec::with_capacity(sealer::BATCHES),
        sealing_wait: false,
        sealer_done,
    };
    let task = tokio::spawn(driver.run(cmd_rx));
    Ok((cmd_tx, addrs, task))
}

/// Whether binding `iface` failed only because its device is not there yet (`ENODEV`) or
/// lacks the address to bind (`EADDRNOTAVAIL`): a modem that comes later.
fn waits_for_device(iface: &InterfaceConfig, e: &std::io::Error) -> bool {
    iface.device.is_some() && matches!(e.raw_os_error(), Some(libc::ENODEV | libc::EADDRNOTAVAIL))
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
            let mut budget = crate::handshake::INITIATIONS_PER_TURN;
            while let Some(m) = self.handshakes.try_next(&mut budget) {
                self.on_worker(m);
            }
            loop {
                match cmd_rx.try_recv() {
                    Ok(Command::Shutdown) => return self.last_flush().await,
                    Ok(cmd) => self.command(cmd),
                    Err(_) => break,
                }
            }
            self.hand_out_jobs();
            self.forward_events();
            let now = self.now();
            self.watch_interfaces(now);
            self.host.handle_timeout(now);
            self.forward_events();
            self.flush(now).await;
            self.forward_events();
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
                m = self.handshakes.next() => {
                    if let Some(m) = m {
                        self.on_worker(m);
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
        self.host.close_all(now);
        self.forward_events();
        let give_up = now + self.close_timeout + SHUTDOWN_GRACE;
        loop {
            self.receive_all();
            self.forward_events();
            let now = self.now();
            self.host.handle_timeout(now);
            self.forward_events();
            self.flush(now).await;
            self.forward_events();
            if !self.host.is_closing() || now >= give_up {
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
        if let Some(x) = self.host.poll_timeout(now) {
            t = t.min(x);
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
        self.host.set_local_aliases(aliases);
    }

    /// Initiations the handshake worker read, or a job's outcome: for the host.
    fn on_worker(&mut self, m: FromWorker) {
        let now = self.now();
        match m {
            FromWorker::Initiations(batch) => {
                for f in batch {
                    self.on_datagram(f.iface, f.src, &f.datagram, now);
                }
            }
            FromWorker::Done(outcome) => self.host.handle_handshake_done(now, outcome),
        }
    }

    /// The host's Diffie-Hellman jobs go to the handshake worker.
    fn hand_out_jobs(&mut self) {
        while let Some(job) = self.host.poll_handshake_job() {
            self.handshakes.submit(job);
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
