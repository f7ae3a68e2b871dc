//! Handshakes off the data path.
//!
//! The driver task only does the cheap part of an initiation: classify it and pass it
//! through the [`HandshakeGate`] (`mac1`, under load `mac2` and cookie replies, per-source
//! rate limits), all without Diffie-Hellman. Admitted initiations go to a worker thread
//! through a bounded queue (full queue: dropped and counted); the worker runs the
//! [`Responder`] (the X25519 work) and hands the outcome back. Established sessions keep
//! flowing on the driver while the worker is busy, and the worker uses another core.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc as std_mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use horde_crypto::{
    Admission, DropCounters, DropReason, HandshakeGate, Keypair, PublicKey, RateLimit, Reply,
    Responder,
};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use tokio::sync::mpsc;

/// How the host defends its handshake path.
#[derive(Debug, Clone, PartialEq)]
pub struct HandshakeSettings {
    /// Initiations waiting for the worker; more are dropped (`queue_full`).
    pub queue: usize,
    /// Per-source-address limit on initiations that reach the worker.
    pub rate_limit: RateLimit,
    /// The host is *under load* (and asks for cookies) while at least `queue / 8`
    /// initiations wait, or more than this many arrived with a valid `mac1` in the last
    /// second; it stays so for [`LOAD_HOLD`] after the last such moment.
    pub load_rate: u32,
}

impl Default for HandshakeSettings {
    fn default() -> Self {
        Self {
            queue: 256,
            rate_limit: RateLimit::default(),
            load_rate: 100,
        }
    }
}

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

/// The driver's side of the handshake path: the gate, the queue to the worker, and the
/// worker's answers.
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
    rng: StdRng,
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
        let responder = Responder::new(keypair, allowed);
        let (jobs, job_rx) = std_mpsc::sync_channel(settings.queue.max(1));
        let (done_tx, done) = mpsc::unbounded_channel();
        let depth = Arc::new(AtomicUsize::new(0));
        let worker_depth = Arc::clone(&depth);
        let worker = std::thread::Builder::new()
            .name("horde-handshake".into())
            .spawn(move || work(responder, job_rx, done_tx, worker_depth))?;
        Ok(Self {
            gate,
            settings,
            jobs: Some(jobs),
            depth,
            done,
            reserved: HashSet::new(),
            load: LoadMeter {
                window_start: Duration::ZERO,
                in_window: 0,
                last_loaded: None,
            },
            legacy_log: LogLimit::new(Duration::from_secs(10)),
            rng,
            worker: Some(worker),
        })
    }

    /// The cheap part of an initiation, on the driver. Drops are counted in `dropped`.
    /// `in_use` says whether a local index is taken by the driver.
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
                if reason == DropReason::RateLimited {
                    // It passed mac1, so it counts towards the load.
                    self.load.count(now);
                }
                Gate::Nothing
            }
            Ok(Admission::Cookie(reply)) => {
                self.load.count(now);
                dropped.record(DropReason::NeedCookie);
                Gate::Send(reply)
            }
            Ok(Admission::Admit) => {
                self.load.count(now);
                let reserved = &self.reserved;
                let index = loop {
                    let i = self.rng.next_u32();
                    if !in_use(i) && !reserved.contains(&i) {
                        break i;
                    }
                };
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
                    }
                    Err(_) => dropped.record(DropReason::QueueFull),
                }
                Gate::Nothing
            }
        }
    }

    /// An initiation in an older handshake version: counted, and logged at most every 10 s
    /// so that the operator learns the peer must be upgraded.
    pub(crate) fn on_legacy(&mut self, src: SocketAddr, dropped: &mut DropCounters) {
        dropped.record(DropReason::LegacyHandshake);
        if let Some(held) = self.legacy_log.allow(Instant::now()) {
            tracing::warn!(
                source = %src,
                held_back = held,
                "initiation in an old handshake format (version 1 or 2): the peer runs \
                 an older Horde and must be upgraded"
            );
        }
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

impl Drop for Handshakes {
    fn drop(&mut self) {
        // Closing the queue and the answer channel ends the worker at its next job; it is
        // not joined, so that shutdown never waits for Diffie-Hellman work.
        self.jobs = None;
        self.done.close();
        drop(self.worker.take());
    }
}

/// The worker thread: Diffie-Hellman for admitted initiations, one at a time.
fn work(
    mut responder: Responder,
    jobs: std_mpsc::Receiver<Job>,
    done: mpsc::UnboundedSender<Done>,
    depth: Arc<AtomicUsize>,
) {
    let mut rng = StdRng::from_entropy();
    let mut rejects = RejectLog::new();
    while let Ok(job) = jobs.recv() {
        depth.fetch_sub(1, Ordering::Relaxed);
        let result = responder.respond(&job.datagram, job.index, &mut rng);
        if result.as_ref().err() == Some(&DropReason::NotAllowed) {
            if let Some(key) = responder.take_rejected_key() {
                rejects.note(key, job.src);
            }
        }
        let answer = Done {
            iface: job.iface,
            src: job.src,
            index: job.index,
            result,
        };
        if done.send(answer).is_err() {
            return; // the driver is gone
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_crypto::Initiator;

    fn settings(queue: usize, load_rate: u32) -> HandshakeSettings {
        HandshakeSettings {
            queue,
            rate_limit: RateLimit {
                per_second: 1e6,
                burst: 1e6,
                max_sources: 16,
            },
            load_rate,
        }
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
