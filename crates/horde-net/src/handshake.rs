//! Handshakes off the data path.
//!
//! Where the kernel steers initiations to a socket of their own (see [`crate::socket`]),
//! the handshake worker thread reads them there and does everything: `mac1`, the
//! responder's memory of initiations it decrypted before (a replay is refused there, before
//! any rate limit), the [`HandshakeGate`] (`mac2` and cookie replies, which it sends itself,
//! rate limits per flow and per address), a bounded queue of admitted initiations (full:
//! dropped and counted), and the [`Responder`] (the X25519 work). The driver sees only the outcome of
//! the Diffie-Hellman, which is rate-limited, and a flood never wakes it.
//!
//! Initiations that still reach the driver (the kernel cannot steer, or a socket is being
//! rebound) get the same gate there, and the admitted ones go to the worker through a
//! bounded queue. Either way established sessions keep flowing on the driver while the
//! worker is busy, and the worker uses another core.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use horde_crypto::{
    classify, random_index, Admission, DropCounters, DropReason, HandshakeGate, Keypair, Packet,
    PublicKey, Reply, Responder, ServerId,
};
use quinn_udp::{RecvMeta, UdpSocketState};
use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::sync::mpsc;

use crate::config::HandshakeSettings;
use crate::refusals::RefusalLog;

/// How long the host stays under load after the condition last held (as WireGuard).
pub const LOAD_HOLD: Duration = Duration::from_secs(1);

/// One admitted initiation for the worker.
struct Job {
    iface: usize,
    src: SocketAddr,
    /// The local index the new session will use, reserved by the driver.
    index: u32,
    datagram: Vec<u8>,
}

/// The worker's answer to one job.
pub(crate) struct Done {
    pub iface: usize,
    pub src: SocketAddr,
    pub index: u32,
    pub result: Result<Reply, DropReason>,
}

/// What the driver must do after [`Handshakes::on_initiation`].
pub(crate) enum Gate {
    /// Nothing to send (queued for the worker, or dropped and counted).
    Nothing,
    /// Send this cookie reply to the source.
    Send(Vec<u8>),
}

/// Decides "under load" from the queue depth and the rate of `mac1`-valid initiations.
struct LoadMeter {
    window_start: Duration,
    in_window: u32,
    last_loaded: Option<Duration>,
}

impl LoadMeter {
    fn new() -> Self {
        Self {
            window_start: Duration::ZERO,
            in_window: 0,
            last_loaded: None,
        }
    }

    /// Whether the host is under load now, given the worker's queue depth.
    fn is_loaded(&mut self, now: Duration, depth: usize, settings: &HandshakeSettings) -> bool {
        if depth >= (settings.queue / 8).max(1) || self.in_window > settings.load_rate {
            self.last_loaded = Some(now);
        }
        self.last_loaded
            .is_some_and(|t| now.saturating_sub(t) < LOAD_HOLD)
    }

    /// Counts one initiation with a valid `mac1` (garbage does not count: it is cheap).
    fn count(&mut self, now: Duration) {
        if now.saturating_sub(self.window_start) >= Duration::from_secs(1) {
            self.window_start = now;
            self.in_window = 0;
        }
        self.in_window = self.in_window.saturating_add(1);
    }
}

/// At most one line per `every`, counting what it held back.
struct LogLimit {
    every: Duration,
    last: Option<Instant>,
    held: u64,
}

impl LogLimit {
    fn new(every: Duration) -> Self {
        Self {
            every,
            last: None,
            held: 0,
        }
    }

    /// `Some(lines held back since the last one)` if a line may be written now.
    fn allow(&mut self, now: Instant) -> Option<u64> {
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < self.every)
        {
            self.held += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.held))
    }
}

/// One warning per refused key per [`REJECT_LOG_EVERY`], and at most ten a second in all;
/// keys remembered are bounded.
struct RejectLog {
    per_key: HashMap<PublicKey, Instant>,
    overall: LogLimit,
    lines_this_second: (Instant, u32),
}

/// How often the same refused key is logged again.
pub const REJECT_LOG_EVERY: Duration = Duration::from_secs(10);
const REJECT_LOG_KEYS: usize = 1024;
const REJECT_LOG_PER_SECOND: u32 = 10;

impl RejectLog {
    fn new() -> Self {
        Self {
            per_key: HashMap::new(),
            overall: LogLimit::new(Duration::from_secs(1)),
            lines_this_second: (Instant::now(), 0),
        }
    }

    fn note(&mut self, key: PublicKey, src: SocketAddr) {
        let now = Instant::now();
        if self
            .per_key
            .get(&key)
            .is_some_and(|t| now.duration_since(*t) < REJECT_LOG_EVERY)
        {
            return;
        }
        if now.duration_since(self.lines_this_second.0) >= Duration::from_secs(1) {
            self.lines_this_second = (now, 0);
        }
        if self.lines_this_second.1 >= REJECT_LOG_PER_SECOND {
            if let Some(held) = self.overall.allow(now) {
                tracing::warn!(
                    held_back = held,
                    "many handshakes from keys not on the allow-list; some not logged"
                );
            }
            return;
        }
        if self.per_key.len() >= REJECT_LOG_KEYS {
            self.per_key
                .retain(|_, t| now.duration_since(*t) < REJECT_LOG_EVERY);
            if self.per_key.len() >= REJECT_LOG_KEYS {
                return;
            }
        }
        self.per_key.insert(key, now);
        self.lines_this_second.1 += 1;
        tracing::warn!(
            key = %key,
            source = %src,
            "handshake refused: key not on the allow-list (logged at most every 10 s per key)"
        );
    }
}

/// Handshake sockets shared between the driver (which binds and closes them) and the
/// worker (which reads them), with what the worker counted there.
struct Intake {
    sockets: Mutex<Vec<(usize, Arc<UdpSocket>)>>,
    /// Set when `sockets` changed; the worker takes a fresh copy.
    changed: AtomicBool,
    /// Keys to allow (`true`) or no longer allow (`false`), in the order asked; the
    /// worker applies them before it answers anything else.
    allow_list: Mutex<Vec<(PublicKey, bool)>>,
    /// An eventfd that wakes the worker from `poll`.
    wake: OwnedFd,
    /// Drops decided on the worker by the gate, per reason.
    drops: Mutex<DropCounters>,
    /// Datagrams the worker read from the handshake sockets, and their bytes.
    datagrams: AtomicU64,
    bytes: AtomicU64,
}

impl Intake {
    fn new() -> std::io::Result<Self> {
        // SAFETY: eventfd returns a new descriptor we own, or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self {
            sockets: Mutex::new(Vec::new()),
            changed: AtomicBool::new(false),
            allow_list: Mutex::new(Vec::new()),
            // SAFETY: `fd` is open and nobody else owns it.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
            drops: Mutex::new(DropCounters::new()),
            datagrams: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        })
    }

    fn wake(&self) {
        // SAFETY: an 8-byte write to our eventfd; a full counter only means it is awake.
        unsafe { libc::eventfd_write(self.wake.as_raw_fd(), 1) };
    }
}

/// The driver's side of the handshake path: the gate for initiations that reach the
/// data sockets, the queue to the worker, the worker's sockets, and its answers.
pub(crate) struct Handshakes {
    gate: HandshakeGate,
    settings: HandshakeSettings,
    jobs: Option<std_mpsc::SyncSender<Job>>,
    depth: Arc<AtomicUsize>,
    done: mpsc::UnboundedReceiver<Done>,
    /// Indices handed to queued jobs, so the driver does not give them out meanwhile.
    reserved: HashSet<u32>,
    load: LoadMeter,
    legacy_log: LogLimit,
    refusals: RefusalLog,
    rng: StdRng,
    intake: Arc<Intake>,
    /// Handshake sockets taken from the worker that it may still hold.
    retired: Vec<Weak<UdpSocket>>,
    worker: Option<JoinHandle<()>>,
}

impl Handshakes {
    /// Starts the worker thread with its own responder.
    pub(crate) fn spawn(
        keypair: Keypair,
        allowed: impl IntoIterator<Item = PublicKey>,
        settings: HandshakeSettings,
    ) -> std::io::Result<Self> {
        let mut rng = StdRng::from_entropy();
        let gate = HandshakeGate::new(keypair.public(), settings.rate_limit, &mut rng);
        let worker_gate = HandshakeGate::new(keypair.public(), settings.rate_limit, &mut rng);
        let responder = Responder::new(keypair, allowed);
        let (jobs, job_rx) = std_mpsc::sync_channel(settings.queue.max(1));
        let (done_tx, done) = mpsc::unbounded_channel();
        let depth = Arc::new(AtomicUsize::new(0));
        let intake = Arc::new(Intake::new()?);
        let worker = Worker {
            responder,
            gate: worker_gate,
            settings: settings.clone(),
            jobs: job_rx,
            done: done_tx,
            depth: Arc::clone(&depth),
            intake: Arc::clone(&intake),
            rng: StdRng::from_entropy(),
            rejects: RejectLog::new(),
            legacy_log: LogLimit::new(Duration::from_secs(10)),
            refusals: RefusalLog::default(),
            load: LoadMeter::new(),
            admitted: VecDeque::new(),
            drops: DropCounters::new(),
            epoch: Instant::now(),
        };
        let worker = std::thread::Builder::new()
            .name("horde-handshake".into())
            .spawn(move || worker.run())?;
        Ok(Self {
            gate,
            settings,
            jobs: Some(jobs),
            depth,
            done,
            reserved: HashSet::new(),
            load: LoadMeter::new(),
            legacy_log: LogLimit::new(Duration::from_secs(10)),
            refusals: RefusalLog::default(),
            rng,
            intake,
            retired: Vec::new(),
            worker: Some(worker),
        })
    }

    /// Interface `iface`'s handshake socket is now `socket` (`None`: closed, or none).
    pub(crate) fn set_socket(&mut self, iface: usize, socket: Option<Arc<UdpSocket>>) {
        {
            let mut sockets = self.intake.sockets.lock().expect("intake lock");
            sockets.retain(|(i, old)| {
                if *i == iface {
                    self.retired.push(Arc::downgrade(old));
                }
                *i != iface
            });
            if let Some(s) = socket {
                sockets.push((iface, s));
            }
        }
        self.intake.changed.store(true, Ordering::Release);
        self.intake.wake();
    }

    /// Allow `peer` to connect from now on (`allowed`), or no longer. Sessions already
    /// established with a key taken off the list are the caller's to close.
    pub(crate) fn set_allowed(&mut self, peer: PublicKey, allowed: bool) {
        self.intake
            .allow_list
            .lock()
            .expect("intake lock")
            .push((peer, allowed));
        self.intake.wake();
    }

    /// Whether every handshake socket taken away is closed. A port is bound again only
    /// then: a stale member of its `SO_REUSEPORT` group would shift the steering.
    pub(crate) fn retired_closed(&mut self) -> bool {
        self.retired.retain(|w| w.strong_count() > 0);
        self.retired.is_empty()
    }

    /// What the worker counted on the handshake sockets: drops per reason, datagrams, bytes.
    pub(crate) fn worker_counts(&self) -> (DropCounters, u64, u64) {
        let drops = self.intake.drops.lock().expect("intake lock").clone();
        (
            drops,
            self.intake.datagrams.load(Ordering::Relaxed),
            self.intake.bytes.load(Ordering::Relaxed),
        )
    }

    /// The cheap part of an initiation that reached a data socket, on the driver. Drops
    /// are counted in `dropped`. `in_use` says whether a local index is taken by the driver.
    pub(crate) fn on_initiation(
        &mut self,
        datagram: &[u8],
        iface: usize,
        src: SocketAddr,
        now: Duration,
        in_use: impl Fn(u32) -> bool,
        dropped: &mut DropCounters,
    ) -> Gate {
        let depth = self.depth.load(Ordering::Relaxed);
        let under_load = self.load.is_loaded(now, depth, &self.settings);
        match self.gate.check(datagram, src, now, under_load) {
            Err(DropReason::LegacyHandshake) => {
                self.on_legacy(src, dropped);
                Gate::Nothing
            }
            Err(reason) => {
                dropped.record(reason);
                self.refusals.note(reason, src, Instant::now());
                if reason == DropReason::RateLimited {
                    // It passed mac1, so it counts towards the load.
                    self.load.count(now);
                }
                Gate::Nothing
            }
            Ok(Admission::Cookie(reply)) => {
                self.load.count(now);
                dropped.record(DropReason::NeedCookie);
                self.refusals
                    .note(DropReason::NeedCookie, src, Instant::now());
                Gate::Send(reply)
            }
            Ok(Admission::Admit) => {
                self.load.count(now);
                let reserved = &self.reserved;
                let index = draw_index(self.settings.server_id, &mut self.rng, |i| {
                    in_use(i) || reserved.contains(&i)
                });
                let job = Job {
                    iface,
                    src,
                    index,
                    datagram: datagram.to_vec(),
                };
                let Some(jobs) = &self.jobs else {
                    return Gate::Nothing;
                };
                match jobs.try_send(job) {
                    Ok(()) => {
                        self.depth.fetch_add(1, Ordering::Relaxed);
                        self.reserved.insert(index);
                        self.intake.wake();
                    }
                    Err(_) => {
                        dropped.record(DropReason::QueueFull);
                        self.refusals
                            .note(DropReason::QueueFull, src, Instant::now());
                    }
                }
                Gate::Nothing
            }
        }
    }

    /// An initiation in an older handshake version: counted, and logged at most every 10 s
    /// so that the operator learns the peer must be upgraded.
    pub(crate) fn on_legacy(&mut self, src: SocketAddr, dropped: &mut DropCounters) {
        dropped.record(DropReason::LegacyHandshake);
        log_legacy(&mut self.legacy_log, src);
    }

    /// The next answer from the worker, waiting for it.
    pub(crate) async fn next_done(&mut self) -> Option<Done> {
        let d = self.done.recv().await;
        if let Some(d) = &d {
            self.reserved.remove(&d.index);
        }
        d
    }

    /// An answer from the worker if one is ready.
    pub(crate) fn try_done(&mut self) -> Option<Done> {
        let d = self.done.try_recv().ok();
        if let Some(d) = &d {
            self.reserved.remove(&d.index);
        }
        d
    }

    /// Whether an index is promised to a queued job.
    pub(crate) fn is_reserved(&self, index: u32) -> bool {
        self.reserved.contains(&index)
    }
}

fn log_legacy(log: &mut LogLimit, src: SocketAddr) {
    if let Some(held) = log.allow(Instant::now()) {
        tracing::warn!(
            source = %src,
            held_back = held,
            "initiation in an old handshake format (version 1 or 2): the peer runs \
             an older Horde and must be upgraded"
        );
    }
}

/// How long a host's shutdown waits for the worker to close its handshake sockets.
const SOCKET_CLOSE_WAIT: Duration = Duration::from_millis(200);

impl Drop for Handshakes {
    fn drop(&mut self) {
        // Closing the queue and the answer channel ends the worker at its next wake-up; it
        // is not joined, so that shutdown never waits for Diffie-Hellman work.
        self.jobs = None;
        self.done.close();
        {
            let mut sockets = self.intake.sockets.lock().expect("intake lock");
            self.retired
                .extend(sockets.drain(..).map(|(_, s)| Arc::downgrade(&s)));
        }
        self.intake.changed.store(true, Ordering::Release);
        self.intake.wake();
        drop(self.worker.take());
        // But its sockets must be closed when the host is gone: a new host binding the
        // same port meanwhile would fail (EADDRINUSE). The worker lets go at once unless
        // it is in the middle of one Diffie-Hellman or waiting for a core.
        let end = Instant::now() + SOCKET_CLOSE_WAIT;
        while !self.retired_closed() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Datagrams read from one handshake socket per `recvmmsg`, and per socket before the
/// worker turns to Diffie-Hellman work again.
const WORKER_SLOTS: usize = 16;
const WORKER_BATCH: usize = 256;
/// Room for one datagram: initiations are far smaller; anything longer is cut and then
/// dropped as oversized.
const WORKER_SLOT_BYTES: usize = 2048;

/// The worker thread's state.
struct Worker {
    responder: Responder,
    /// The gate for initiations read from the handshake sockets.
    gate: HandshakeGate,
    settings: HandshakeSettings,
    /// Initiations the driver admitted.
    jobs: std_mpsc::Receiver<Job>,
    done: mpsc::UnboundedSender<Done>,
    /// Jobs queued by the driver and not yet taken.
    depth: Arc<AtomicUsize>,
    intake: Arc<Intake>,
    rng: StdRng,
    rejects: RejectLog,
    legacy_log: LogLimit,
    refusals: RefusalLog,
    load: LoadMeter,
    /// Initiations admitted here, waiting for Diffie-Hellman (at most `settings.queue`).
    admitted: VecDeque<Job>,
    /// Drops decided since they were last published to `intake`.
    drops: DropCounters,
    /// The gate's clock.
    epoch: Instant,
}

/// What one pass of the worker found.
enum Pass {
    /// There may be more to do at once.
    Busy,
    /// Nothing to do until a socket is readable or the driver wakes it.
    Idle,
    /// The driver is gone.
    Stop,
}

impl Worker {
    fn run(mut self) {
        let mut sockets: Vec<(usize, Arc<UdpSocket>, UdpSocketState)> = Vec::new();
        let mut bufs = vec![0u8; WORKER_SLOTS * WORKER_SLOT_BYTES];
        loop {
            if self.intake.changed.swap(false, Ordering::AcqRel) {
                let fresh = self.intake.sockets.lock().expect("intake lock").clone();
                sockets = fresh
                    .into_iter()
                    .filter_map(|(i, s)| {
                        let state = UdpSocketState::new((&*s).into()).ok()?;
                        // The helper turns GRO on; one datagram per buffer here.
                        crate::socket::set_gro(&socket2::SockRef::from(&*s), false);
                        Some((i, s, state))
                    })
                    .collect();
            }
            match self.pass(&sockets, &mut bufs) {
                Pass::Busy => continue,
                Pass::Stop => return,
                Pass::Idle => wait(&self.intake, &sockets),
            }
        }
    }

    /// Takes the driver's jobs, reads every handshake socket through the gate, then does
    /// one Diffie-Hellman.
    fn pass(
        &mut self,
        sockets: &[(usize, Arc<UdpSocket>, UdpSocketState)],
        bufs: &mut [u8],
    ) -> Pass {
        let changes = std::mem::take(&mut *self.intake.allow_list.lock().expect("intake lock"));
        for (peer, allowed) in changes {
            if allowed {
                self.responder.allow(peer);
            } else {
                self.responder.revoke(&peer);
            }
        }
        loop {
            match self.jobs.try_recv() {
                Ok(job) => {
                    self.depth.fetch_sub(1, Ordering::Relaxed);
                    if !self.respond(job) {
                        return Pass::Stop;
                    }
                }
                Err(std_mpsc::TryRecvError::Empty) => break,
                Err(std_mpsc::TryRecvError::Disconnected) => return Pass::Stop,
            }
        }
        let mut read = 0;
        for (iface, socket, state) in sockets {
            read += self.read_socket(*iface, socket, state, bufs);
        }
        if read > 0 {
            self.publish();
        }
        match self.admitted.pop_front() {
            Some(job) => {
                if self.respond(job) {
                    Pass::Busy
                } else {
                    Pass::Stop
                }
            }
            None if read > 0 => Pass::Busy,
            None => Pass::Idle,
        }
    }

    /// Reads up to [`WORKER_BATCH`] datagrams from one handshake socket and gates each.
    fn read_socket(
        &mut self,
        iface: usize,
        socket: &UdpSocket,
        state: &UdpSocketState,
        bufs: &mut [u8],
    ) -> usize {
        let mut read = 0;
        while read < WORKER_BATCH {
            let mut chunks = bufs.chunks_mut(WORKER_SLOT_BYTES);
            let mut slices: [IoSliceMut<'_>; WORKER_SLOTS] = std::array::from_fn(|_| {
                IoSliceMut::new(chunks.next().expect("WORKER_SLOTS chunks"))
            });
            let mut meta = [RecvMeta::default(); WORKER_SLOTS];
            let Ok(n) = state.recv(socket.into(), &mut slices, &mut meta) else {
                break;
            };
            let now = self.epoch.elapsed();
            for (slot, m) in meta[..n].iter().enumerate() {
                let data = &bufs[slot * WORKER_SLOT_BYTES..slot * WORKER_SLOT_BYTES + m.len];
                // Should GRO still join datagrams, they are cut apart at the segment size.
                for d in data.chunks(m.stride.max(1)) {
                    read += 1;
                    self.intake.datagrams.fetch_add(1, Ordering::Relaxed);
                    self.intake
                        .bytes
                        .fetch_add(d.len() as u64, Ordering::Relaxed);
                    self.gate_one(iface, socket, m.addr, d, now);
                }
            }
            if n == 0 {
                break;
            }
        }
        read
    }

    /// The gate for one datagram from a handshake socket: cookie replies go out from the
    /// same socket (the host's address and port), admitted initiations join the queue.
    ///
    /// The order keeps a neighbour on the same address from starving a newcomer: the
    /// header, `mac1` (one hash), then the responder's memory of initiations it decrypted
    /// before (a lookup: an old replay is refused there, taking no token and not counting
    /// towards the load), and only then the gate's cookies and rate limits.
    fn gate_one(
        &mut self,
        iface: usize,
        socket: &UdpSocket,
        src: SocketAddr,
        data: &[u8],
        now: Duration,
    ) {
        // The kernel steers by the first byte only; the rest of the header is checked here.
        match classify(data) {
            Ok(Packet::Initiation { .. }) => {}
            Err(DropReason::LegacyHandshake) => {
                self.drops.record(DropReason::LegacyHandshake);
                log_legacy(&mut self.legacy_log, src);
                return;
            }
            Ok(_) => return self.refuse(DropReason::UnexpectedType, src),
            Err(reason) => return self.refuse(reason, src),
        }
        if !self.gate.mac1_ok(data) {
            return self.refuse(DropReason::BadMac, src);
        }
        match self.responder.recognise(data) {
            None => {}
            Some(Err(reason)) => return self.refuse(reason, src),
            Some(Ok(reply)) => {
                // A copy of a peer's current initiation (its response was lost, or it is
                // replayed): the same response again, as often as the flow's bucket allows.
                if self.gate.allow_flow(src, now) {
                    let _ = socket.send_to(reply.response(), src);
                } else {
                    self.refuse(DropReason::RateLimited, src);
                }
                return;
            }
        }
        let depth = self.admitted.len() + self.depth.load(Ordering::Relaxed);
        let under_load = self.load.is_loaded(now, depth, &self.settings);
        match self.gate.check(data, src, now, under_load) {
            Err(reason) => {
                self.refuse(reason, src);
                if reason == DropReason::RateLimited {
                    self.load.count(now);
                }
            }
            Ok(Admission::Cookie(reply)) => {
                self.load.count(now);
                self.refuse(DropReason::NeedCookie, src);
                let _ = socket.send_to(&reply, src);
            }
            Ok(Admission::Admit) => {
                self.load.count(now);
                if self.admitted.len() >= self.settings.queue.max(1) {
                    self.refuse(DropReason::QueueFull, src);
                    return;
                }
                // The driver checks the index against its own when the answer arrives.
                let index = draw_index(self.settings.server_id, &mut self.rng, |_| false);
                self.admitted.push_back(Job {
                    iface,
                    src,
                    index,
                    datagram: data.to_vec(),
                });
            }
        }
    }

    /// Counts a refused initiation, and logs its kind at most once a second.
    fn refuse(&mut self, reason: DropReason, src: SocketAddr) {
        self.drops.record(reason);
        self.refusals.note(reason, src, Instant::now());
    }

    /// Adds what the gate dropped to the counters the driver reports.
    fn publish(&mut self) {
        if self.drops.total() == 0 {
            return;
        }
        self.intake
            .drops
            .lock()
            .expect("intake lock")
            .merge(&self.drops);
        self.drops = DropCounters::new();
    }

    /// Diffie-Hellman for one admitted initiation; false once the driver is gone.
    fn respond(&mut self, job: Job) -> bool {
        let result = self
            .responder
            .respond(&job.datagram, job.index, &mut self.rng);
        match result.as_ref().err() {
            Some(&DropReason::NotAllowed) => {
                if let Some(key) = self.responder.take_rejected_key() {
                    self.rejects.note(key, job.src);
                }
            }
            // The driver counts these when the answer arrives; logged here, per kind.
            Some(&reason) => {
                self.refusals.note(reason, job.src, Instant::now());
            }
            None => {}
        }
        let answer = Done {
            iface: job.iface,
            src: job.src,
            index: job.index,
            result,
        };
        self.done.send(answer).is_ok()
    }
}

/// Sleeps until a handshake socket is readable or the driver writes the eventfd.
fn wait(intake: &Intake, sockets: &[(usize, Arc<UdpSocket>, UdpSocketState)]) {
    let mut fds: Vec<libc::pollfd> = std::iter::once(intake.wake.as_raw_fd())
        .chain(sockets.iter().map(|(_, s, _)| s.as_raw_fd()))
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `fds` is a valid array of pollfd for the call. A timeout bounds the sleep
    // should a wake-up ever be missed.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 1000) };
    if fds[0].revents & libc::POLLIN != 0 {
        let mut v: libc::eventfd_t = 0;
        // SAFETY: reads and resets our eventfd's counter.
        unsafe { libc::eventfd_read(intake.wake.as_raw_fd(), &mut v) };
    }
}

/// A fresh index for a session this end accepts: carrying this server's id when it has
/// one, wholly random otherwise.
fn draw_index(server_id: Option<ServerId>, rng: &mut StdRng, in_use: impl Fn(u32) -> bool) -> u32 {
    match server_id {
        Some(id) => id.draw_index(rng, in_use),
        None => random_index(rng, in_use),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_crypto::{Initiator, RateLimit};

    fn settings(queue: usize, load_rate: u32) -> HandshakeSettings {
        HandshakeSettings {
            queue,
            rate_limit: RateLimit {
                per_second: 1e6,
                burst: 1e6,
                max_sources: 16,
            },
            load_rate,
            separate_socket: true,
            server_id: None,
        }
    }

    /// The worker reads its socket, gates what it reads, answers cookie replies from the
    /// host's port itself, and hands only Diffie-Hellman outcomes to the driver.
    #[tokio::test]
    async fn the_worker_reads_gates_and_answers_on_its_own_socket() {
        let mut rng = StdRng::seed_from_u64(2);
        let client = Keypair::generate_with(&mut rng);
        let server = Keypair::generate_with(&mut rng);
        let server_public = *server.public();
        // Under load once one initiation a second has come: cookies are wanted.
        let mut hs = Handshakes::spawn(server, [*client.public()], settings(64, 0)).unwrap();
        let iface = crate::config::InterfaceConfig::new("127.0.0.1:0".parse().unwrap());
        let data = crate::socket::bind(&iface, false, true).unwrap();
        hs.set_socket(0, data.handshake_socket().cloned());
        let port = data.local_addr().unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();

        // Random bytes: dropped on the worker, never reach the driver.
        let mut junk = [7u8; horde_crypto::INITIATION_LEN];
        junk[0] = horde_crypto::TYPE_INITIATION;
        for _ in 0..5 {
            peer.send_to(&junk, port).unwrap();
        }
        // A real initiation: admitted, answered with a new session.
        let init = Initiator::new(&client, &server_public, 5, 1, &mut rng);
        peer.send_to(init.initiation(), port).unwrap();
        let done = tokio::time::timeout(Duration::from_secs(5), hs.next_done())
            .await
            .expect("the worker answers")
            .unwrap();
        assert_eq!(done.src, peer.local_addr().unwrap());
        assert!(matches!(done.result, Ok(Reply::NewSession { .. })));

        // Now under load: a fresh initiation without mac2 gets a cookie reply, sent by the
        // worker from the host's own port.
        let mut again = Initiator::new(&client, &server_public, 6, 2, &mut rng);
        peer.send_to(again.initiation(), port).unwrap();
        let mut buf = [0u8; 256];
        let (n, from) = peer.recv_from(&mut buf).expect("a cookie reply");
        assert_eq!(from, port);
        again.read_cookie_reply(&buf[..n]).unwrap();
        assert!(again.has_cookie());

        // Published after each read pass, just after the reply went out.
        let end = Instant::now() + Duration::from_secs(5);
        while hs.worker_counts().0.get(DropReason::NeedCookie) == 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
        let (drops, datagrams, _) = hs.worker_counts();
        assert_eq!(drops.get(DropReason::BadMac), 5, "{drops:?}");
        assert_eq!(drops.get(DropReason::NeedCookie), 1, "{drops:?}");
        assert_eq!(datagrams, 7);
        assert!(
            hs.try_done().is_none(),
            "only Diffie-Hellman outcomes reach the driver"
        );

        // Taken away, the socket is let go by the worker.
        drop(data);
        hs.set_socket(0, None);
        let end = Instant::now() + Duration::from_secs(5);
        while !hs.retired_closed() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(hs.retired_closed());
    }

    #[test]
    fn load_comes_from_queue_depth_or_rate_and_holds_for_a_second() {
        let s = settings(64, 10);
        let mut m = LoadMeter {
            window_start: Duration::ZERO,
            in_window: 0,
            last_loaded: None,
        };
        let t = Duration::from_secs(5);
        assert!(!m.is_loaded(t, 7, &s), "7 queued of 64 is below 1/8");
        assert!(m.is_loaded(t, 8, &s), "8 queued is 1/8");
        assert!(m.is_loaded(t + Duration::from_millis(999), 0, &s), "held");
        assert!(
            !m.is_loaded(t + LOAD_HOLD, 0, &s),
            "released after the hold"
        );
        let t = Duration::from_secs(10);
        for _ in 0..10 {
            m.count(t);
        }
        assert!(!m.is_loaded(t, 0, &s), "10 a second is allowed");
        m.count(t);
        assert!(m.is_loaded(t, 0, &s), "11 within a second is load");
        // A new one-second window starts from zero.
        let later = t + Duration::from_secs(3);
        m.count(later);
        assert!(!m.is_loaded(later, 0, &s));
    }

    #[test]
    fn admitted_initiations_reach_the_worker_and_a_full_queue_drops() {
        let mut rng = StdRng::seed_from_u64(1);
        let client = Keypair::generate_with(&mut rng);
        let server = Keypair::generate_with(&mut rng);
        let server_public = *server.public();
        let mut hs = Handshakes::spawn(server, [*client.public()], settings(4, 1000)).unwrap();
        let src: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        let now = Duration::from_secs(1);
        let mut dropped = DropCounters::new();

        // One initiation: admitted, answered by the worker with a new session.
        let init = Initiator::new(&client, &server_public, 5, 1, &mut rng);
        let gate = hs.on_initiation(init.initiation(), 0, src, now, |_| false, &mut dropped);
        assert!(matches!(gate, Gate::Nothing));
        let done = loop {
            if let Some(d) = hs.try_done() {
                break d;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(done.src, src);
        assert!(matches!(done.result, Ok(Reply::NewSession { .. })));
        assert!(!hs.is_reserved(done.index), "released with the answer");
        assert_eq!(dropped.total(), 0);

        // A burst of fresh initiations: the queue of 4 fills (the host goes under load
        // once 1/8 of it waits, so the burst carries the cookie it was given).
        let mut burst = Initiator::new(&client, &server_public, 6, 2, &mut rng);
        let mut sent = 0;
        while sent < 200 && dropped.get(DropReason::QueueFull) == 0 {
            match hs.on_initiation(burst.initiation(), 0, src, now, |_| false, &mut dropped) {
                Gate::Send(cookie_reply) => burst.read_cookie_reply(&cookie_reply).unwrap(),
                Gate::Nothing => {}
            }
            sent += 1;
        }
        assert!(
            dropped.get(DropReason::QueueFull) >= 1,
            "queue never filled: {dropped:?}"
        );
        assert!(burst.has_cookie());
        assert!(dropped.get(DropReason::NeedCookie) >= 1);
    }
}
