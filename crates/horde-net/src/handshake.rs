//! Handshakes off the data path: the I/O around the host's responder.
//!
//! The host ([`horde_host::Host`]) decides about every initiation (the responder's memory,
//! cookies, rate limits, load) and hands out the Diffie-Hellman work as
//! [`HandshakeJob`]s. Here a thread of their own runs those jobs, at the process's
//! priority, so that established sessions keep flowing on the driver while it is busy,
//! and it uses another core.
//!
//! Where the kernel steers initiations to a socket of their own (see [`crate::socket`]),
//! a worker thread, at a lower priority, reads them there and drops what needs no state
//! to refuse: a bad
//! header, an old handshake format, or a `mac1` that does not verify (one keyed hash). So
//! a flood of random bytes never wakes the driver. What passes goes to the driver in
//! batches, which hands it to the host; a batch finds the way full when the driver has
//! not taken [`FORWARD_LIMIT`] datagrams yet, and is dropped and counted (`queue_full`).

use std::collections::VecDeque;
use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use horde_crypto::{
    classify, DropCounters, DropReason, HandshakeGate, Packet, PublicKey, RateLimit,
};
use horde_host::{HandshakeJob, HandshakeOutcome, InitiationLog};
use quinn_udp::{RecvMeta, UdpSocketState};
use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::sync::mpsc;

/// Initiations read by the worker and not yet taken by the driver, at most.
pub const FORWARD_LIMIT: usize = 4096;

/// Initiations the driver hands the host per turn, at most: under a flood of initiations
/// whose `mac1` verifies, the sessions' datagrams wait for no more than this many checks
/// (a few microseconds each) before the turn reads their sockets again.
pub const INITIATIONS_PER_TURN: usize = 64;

/// How much the worker's nice value is above the process's. What arrives on the handshake
/// sockets is anyone's, and the datagrams of the sessions that exist must not wait for
/// it when the cores are contended: at nice 10 the scheduler gives the worker about a
/// tenth of a busy core against a thread at 0, and all of an idle one. The host's jobs
/// run on a thread of their own at the process's priority: a job is an initiation the
/// host admitted (past its memory of initiations, its cookies and its rate limits), and
/// after a server restart thousands of them are the fleet coming back.
pub const WORKER_NICE: libc::c_int = 10;

/// The name of the thread that runs the host's jobs.
const JOBS_THREAD: &str = "horde-hs-jobs";

/// An initiation the worker read on a handshake socket, whose `mac1` verifies.
pub(crate) struct Forwarded {
    pub iface: usize,
    pub src: SocketAddr,
    pub datagram: Vec<u8>,
}

/// What the worker hands the driver.
pub(crate) enum FromWorker {
    /// Initiations for the host.
    Initiations(Vec<Forwarded>),
    /// A job's outcome, for [`horde_host::Host::handle_handshake_done`].
    Done(HandshakeOutcome),
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

/// Handshake sockets shared between the driver (which binds and closes them) and the
/// worker (which reads them), with what the worker counted there.
struct Intake {
    sockets: Mutex<Vec<(usize, Arc<UdpSocket>)>>,
    /// Set when `sockets` changed; the worker takes a fresh copy.
    changed: AtomicBool,
    /// An eventfd that wakes the worker from `poll`.
    wake: OwnedFd,
    /// Drops decided on the worker, per reason.
    drops: Mutex<DropCounters>,
    /// Datagrams the worker read from the handshake sockets, and their bytes.
    datagrams: AtomicU64,
    bytes: AtomicU64,
    /// Initiations forwarded to the driver and not yet taken.
    forwarded: AtomicUsize,
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
            // SAFETY: `fd` is open and nobody else owns it.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
            drops: Mutex::new(DropCounters::new()),
            datagrams: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            forwarded: AtomicUsize::new(0),
        })
    }

    fn wake(&self) {
        // SAFETY: an 8-byte write to our eventfd; a full counter only means it is awake.
        unsafe { libc::eventfd_write(self.wake.as_raw_fd(), 1) };
    }
}

/// The driver's side of the handshake path: the queue of jobs to the jobs thread, the
/// worker's sockets, and what both hand back.
pub(crate) struct Handshakes {
    jobs: Option<std_mpsc::Sender<HandshakeJob>>,
    from_worker: mpsc::UnboundedReceiver<FromWorker>,
    /// Initiations taken from the worker and not yet handed to the driver.
    held: VecDeque<Forwarded>,
    /// A job's outcome taken from the worker, for the next call.
    done: Option<HandshakeOutcome>,
    legacy_log: LogLimit,
    intake: Arc<Intake>,
    /// Handshake sockets taken from the worker that it may still hold.
    retired: Vec<Weak<UdpSocket>>,
    worker: Option<JoinHandle<()>>,
}

impl Handshakes {
    /// Starts the worker and the jobs thread for the host whose static public key is
    /// `local`.
    pub(crate) fn spawn(local: &PublicKey) -> std::io::Result<Self> {
        let mut rng = StdRng::from_entropy();
        // Only its mac1 check is used: the key is all it needs.
        let mac1 = HandshakeGate::new(local, RateLimit::default(), &mut rng);
        let (jobs, job_rx) = std_mpsc::channel();
        let (to_driver, from_worker) = mpsc::unbounded_channel();
        let intake = Arc::new(Intake::new()?);
        let worker = Worker {
            mac1,
            to_driver: to_driver.clone(),
            intake: Arc::clone(&intake),
            legacy_log: LogLimit::new(Duration::from_secs(10)),
            refusals: InitiationLog::default(),
            started: Instant::now(),
            batch: Vec::new(),
            drops: DropCounters::new(),
        };
        std::thread::Builder::new()
            .name(JOBS_THREAD.into())
            .spawn(move || run_jobs(job_rx, rng, to_driver))?;
        let worker = std::thread::Builder::new()
            .name("horde-handshake".into())
            .spawn(move || worker.run())?;
        Ok(Self {
            jobs: Some(jobs),
            from_worker,
            held: VecDeque::new(),
            done: None,
            legacy_log: LogLimit::new(Duration::from_secs(10)),
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

    /// Runs a job from the host on the jobs thread; its outcome comes back as
    /// [`FromWorker::Done`].
    pub(crate) fn submit(&mut self, job: HandshakeJob) {
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(job);
        }
    }

    /// An initiation in an older handshake version: counted, and logged at most every 10 s
    /// so that the operator learns the peer must be upgraded.
    pub(crate) fn on_legacy(&mut self, src: SocketAddr, dropped: &mut DropCounters) {
        dropped.record(DropReason::LegacyHandshake);
        log_legacy(&mut self.legacy_log, src);
    }

    /// The next thing from the worker for this driver turn, waiting for it: a job's
    /// outcome, or at most [`INITIATIONS_PER_TURN`] initiations (a longer batch is held,
    /// and its rest is ready at once on the next call).
    pub(crate) async fn next(&mut self) -> Option<FromWorker> {
        if self.held.is_empty() {
            let m = self.from_worker.recv().await?;
            self.hold(m);
        }
        let mut budget = INITIATIONS_PER_TURN;
        self.take(&mut budget)
    }

    /// Something from the worker if it is ready, within what is left of the turn's
    /// `budget` of initiations (reduced by what is returned). Job outcomes take none.
    pub(crate) fn try_next(&mut self, budget: &mut usize) -> Option<FromWorker> {
        if self.held.is_empty() {
            let m = self.from_worker.try_recv().ok()?;
            self.hold(m);
        }
        self.take(budget)
    }

    /// Outcomes pass through; initiations join the held ones.
    fn hold(&mut self, m: FromWorker) {
        match m {
            FromWorker::Done(outcome) => self.done = Some(outcome),
            FromWorker::Initiations(batch) => self.held.extend(batch),
        }
    }

    fn take(&mut self, budget: &mut usize) -> Option<FromWorker> {
        if let Some(outcome) = self.done.take() {
            return Some(FromWorker::Done(outcome));
        }
        let n = self.held.len().min(*budget);
        if n == 0 {
            return None;
        }
        *budget -= n;
        self.intake.forwarded.fetch_sub(n, Ordering::Relaxed);
        Some(FromWorker::Initiations(self.held.drain(..n).collect()))
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
        // Closing the queue and the answer channel ends the jobs thread after its job and
        // the worker at its next wake-up; neither is joined, so that shutdown never waits
        // for Diffie-Hellman work.
        self.jobs = None;
        self.from_worker.close();
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
        // it is waiting for a core.
        let end = Instant::now() + SOCKET_CLOSE_WAIT;
        while !self.retired_closed() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Datagrams read from one handshake socket per `recvmmsg`, and per socket before the
/// worker hands what passed to the driver.
const WORKER_SLOTS: usize = 16;
const WORKER_BATCH: usize = 256;
/// Room for one datagram: initiations are far smaller; anything longer is cut and then
/// dropped as oversized.
const WORKER_SLOT_BYTES: usize = 2048;

/// The worker thread's state.
struct Worker {
    /// Checks `mac1` (the gate's other parts are the host's).
    mac1: HandshakeGate,
    to_driver: mpsc::UnboundedSender<FromWorker>,
    intake: Arc<Intake>,
    legacy_log: LogLimit,
    refusals: InitiationLog,
    /// The refusal log's clock starts here.
    started: Instant,
    /// Initiations read in this pass, for the driver.
    batch: Vec<Forwarded>,
    /// Drops decided since they were last published to `intake`.
    drops: DropCounters,
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
        lower_priority();
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

    /// Reads every handshake socket and hands what passed to the driver.
    fn pass(
        &mut self,
        sockets: &[(usize, Arc<UdpSocket>, UdpSocketState)],
        bufs: &mut [u8],
    ) -> Pass {
        let mut read = 0;
        for (iface, socket, state) in sockets {
            read += self.read_socket(*iface, socket, state, bufs);
        }
        if read > 0 {
            self.publish();
        }
        if !self.batch.is_empty() {
            let batch = std::mem::take(&mut self.batch);
            self.intake
                .forwarded
                .fetch_add(batch.len(), Ordering::Relaxed);
            if self.to_driver.send(FromWorker::Initiations(batch)).is_err() {
                return Pass::Stop;
            }
        }
        if self.to_driver.is_closed() {
            Pass::Stop
        } else if read > 0 {
            Pass::Busy
        } else {
            Pass::Idle
        }
    }

    /// Reads up to [`WORKER_BATCH`] datagrams from one handshake socket and checks each.
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
            for (slot, m) in meta[..n].iter().enumerate() {
                let data = &bufs[slot * WORKER_SLOT_BYTES..slot * WORKER_SLOT_BYTES + m.len];
                // Should GRO still join datagrams, they are cut apart at the segment size.
                for d in data.chunks(m.stride.max(1)) {
                    read += 1;
                    self.intake.datagrams.fetch_add(1, Ordering::Relaxed);
                    self.intake
                        .bytes
                        .fetch_add(d.len() as u64, Ordering::Relaxed);
                    self.check_one(iface, m.addr, d);
                }
            }
            if n == 0 {
                break;
            }
        }
        read
    }

    /// The stateless checks for one datagram from a handshake socket: the header and
    /// `mac1`. What passes joins the batch for the host, which decides the rest.
    fn check_one(&mut self, iface: usize, src: SocketAddr, data: &[u8]) {
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
        if !self.mac1.mac1_ok(data) {
            return self.refuse(DropReason::BadMac, src);
        }
        let waiting = self.intake.forwarded.load(Ordering::Relaxed) + self.batch.len();
        if waiting >= FORWARD_LIMIT {
            return self.refuse(DropReason::QueueFull, src);
        }
        self.batch.push(Forwarded {
            iface,
            src,
            datagram: data.to_vec(),
        });
    }

    /// Counts a refused initiation, and logs its kind at most once a second.
    fn refuse(&mut self, reason: DropReason, src: SocketAddr) {
        self.drops.record(reason);
        self.refusals.note(reason, src, self.started.elapsed());
    }

    /// Adds what the worker dropped to the counters the driver reports.
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
}

/// Runs the host's jobs as they come, at the process's priority, until the host or the
/// driver is gone.
fn run_jobs(
    jobs: std_mpsc::Receiver<HandshakeJob>,
    mut rng: StdRng,
    to_driver: mpsc::UnboundedSender<FromWorker>,
) {
    for job in jobs {
        let outcome = job.run(&mut rng);
        if to_driver.send(FromWorker::Done(outcome)).is_err() {
            return;
        }
    }
}

/// The calling thread's nice value.
fn current_nice() -> libc::c_int {
    // SAFETY: plain system calls on the calling thread. getpriority returns the nice
    // value itself (-20..=19), and -1 with errno set on an error, which cannot happen for
    // the calling thread.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::getpriority(libc::PRIO_PROCESS, tid)
    }
}

/// Gives the calling thread a nice value [`WORKER_NICE`] above its own (on Linux, nice
/// is per thread). Failing that, the worker runs at the process's priority; that is
/// logged.
fn lower_priority() {
    let nice = (current_nice() + WORKER_NICE).min(19);
    // SAFETY: plain system calls on the calling thread.
    let result = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice)
    };
    if result != 0 {
        tracing::debug!(
            error = %std::io::Error::last_os_error(),
            "the handshake worker keeps the process's priority"
        );
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

#[cfg(test)]
mod tests {
    use super::*;
    use horde_crypto::{Initiator, Keypair};
    use horde_host::{HostSettings, ResponderSettings};

    /// A sans-IO host answering initiations as `server`, from the `allowed` keys.
    fn responder(server: &Keypair, allowed: Vec<PublicKey>) -> horde_host::Host {
        horde_host::Host::new(HostSettings {
            keypair: server.clone(),
            rekey: horde_crypto::RekeyPolicy::default(),
            endpoint: horde_proto::EndpointConfig::default(),
            accepted_channel: Arc::new(|_| horde_proto::ChannelConfig::default()),
            interfaces: 1,
            seed: 1,
            unix_micros_at_start: 0,
            responder: ResponderSettings {
                allowed,
                ..ResponderSettings::default()
            },
        })
    }

    /// The worker reads its socket, drops what fails the stateless checks there, hands
    /// the rest to the driver in batches, and runs the host's jobs.
    #[tokio::test]
    async fn the_worker_checks_forwards_and_runs_jobs() {
        let mut rng = StdRng::seed_from_u64(2);
        let client = Keypair::generate_with(&mut rng);
        let server = Keypair::generate_with(&mut rng);
        let server_public = *server.public();
        let mut hs = Handshakes::spawn(&server_public).unwrap();
        let iface = crate::config::InterfaceConfig::new("127.0.0.1:0".parse().unwrap());
        let data = crate::socket::bind(&iface, false, true).unwrap();
        hs.set_socket(0, data.handshake_socket().cloned());
        let port = data.local_addr().unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();

        // Random bytes: dropped on the worker, never reach the driver.
        let mut junk = [7u8; horde_crypto::INITIATION_LEN];
        junk[0] = horde_crypto::TYPE_INITIATION;
        for _ in 0..5 {
            peer.send_to(&junk, port).unwrap();
        }
        // A real initiation: forwarded as it is.
        let init = Initiator::new(&client, &server_public, 5, 1, &mut rng);
        peer.send_to(init.initiation(), port).unwrap();
        let batch = match tokio::time::timeout(Duration::from_secs(5), hs.next()).await {
            Ok(Some(FromWorker::Initiations(b))) => b,
            _ => panic!("the worker forwards the initiation"),
        };
        assert_eq!(batch.len(), 1);
        assert_eq!(batch[0].src, peer.local_addr().unwrap());
        assert_eq!(batch[0].datagram, init.initiation());
        let (drops, datagrams, _) = hs.worker_counts();
        assert_eq!(drops.get(DropReason::BadMac), 5, "{drops:?}");
        assert_eq!(datagrams, 6);

        // A host's job for it runs on the jobs thread; the outcome makes a session.
        let mut host = responder(&server, vec![*client.public()]);
        let now = Duration::from_secs(1);
        host.handle_datagram(now, 0, batch[0].src, &batch[0].datagram);
        hs.submit(host.poll_handshake_job().expect("a job"));
        let outcome = match tokio::time::timeout(Duration::from_secs(5), hs.next()).await {
            Ok(Some(FromWorker::Done(o))) => o,
            _ => panic!("the worker runs the job"),
        };
        host.handle_handshake_done(now, outcome);
        let response = host.poll_handshake_transmit().expect("a response");
        let mut init = init;
        assert!(init.read_response(&response.datagram).is_ok());
        assert_eq!(host.len(), 1, "a secure session waits for the hello");

        // Taken away, the socket is let go by the worker.
        drop(data);
        hs.set_socket(0, None);
        let end = Instant::now() + Duration::from_secs(5);
        while !hs.retired_closed() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(hs.retired_closed());
    }

    /// A flood of initiations whose `mac1` verifies reaches the driver at most
    /// [`INITIATIONS_PER_TURN`] per turn; none is lost on the way.
    #[tokio::test]
    async fn a_turn_takes_at_most_its_share_of_initiations() {
        let mut rng = StdRng::seed_from_u64(3);
        let client = Keypair::generate_with(&mut rng);
        let server = *Keypair::generate_with(&mut rng).public();
        let mut hs = Handshakes::spawn(&server).unwrap();
        let iface = crate::config::InterfaceConfig::new("127.0.0.1:0".parse().unwrap());
        let data = crate::socket::bind(&iface, false, true).unwrap();
        hs.set_socket(0, data.handshake_socket().cloned());
        let port = data.local_addr().unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        const SENT: usize = 3 * INITIATIONS_PER_TURN + 5;
        let init = Initiator::new(&client, &server, 5, 1, &mut rng);
        for _ in 0..SENT {
            peer.send_to(init.initiation(), port).unwrap();
        }
        // Wait until the worker has forwarded them all, so that turns are full.
        let end = Instant::now() + Duration::from_secs(5);
        while hs.worker_counts().1 < SENT as u64 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(50));
        let (mut taken, mut turns) = (0, 0);
        while taken < SENT && turns < 100 {
            turns += 1;
            let mut budget = INITIATIONS_PER_TURN;
            let mut this_turn = 0;
            while let Some(m) = hs.try_next(&mut budget) {
                if let FromWorker::Initiations(batch) = m {
                    this_turn += batch.len();
                }
            }
            assert!(
                this_turn <= INITIATIONS_PER_TURN,
                "turn {turns}: {this_turn}"
            );
            taken += this_turn;
        }
        assert_eq!(taken, SENT);
        assert_eq!(turns, SENT.div_ceil(INITIATIONS_PER_TURN));
        assert_eq!(hs.intake.forwarded.load(Ordering::Relaxed), 0);
    }

    /// The nice values of this process's threads named `name`.
    fn nices_of(name: &str) -> Vec<i64> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name)
            })
            .filter_map(|t| {
                let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
                // Field 19 is the nice value; fields start after the ")" of the name.
                let after = &stat[stat.rfind(')')? + 2..];
                after.split(' ').nth(16)?.parse().ok()
            })
            .collect()
    }

    /// The worker thread yields the cores to the driver: it runs [`WORKER_NICE`] above the
    /// process's nice value. The host's jobs, initiations it admitted, run on a thread at
    /// the process's own.
    #[test]
    fn the_worker_runs_at_a_lower_priority_and_the_jobs_at_the_processs() {
        let server = *Keypair::generate_with(&mut StdRng::seed_from_u64(4)).public();
        let _hs = Handshakes::spawn(&server).unwrap();
        let own = i64::from(current_nice());
        let reading = i64::from((current_nice() + WORKER_NICE).min(19));
        let end = Instant::now() + Duration::from_secs(5);
        while !nices_of("horde-handshake").contains(&reading) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            nices_of("horde-handshake").contains(&reading),
            "handshake workers' nice values: {:?}",
            nices_of("horde-handshake")
        );
        let jobs = nices_of(JOBS_THREAD);
        assert!(
            !jobs.is_empty() && jobs.iter().all(|n| *n == own),
            "{jobs:?}"
        );
    }
}
