//! The responder's side of handshakes. An initiation meets the cheap checks here, in
//! order: the header, `mac1` (one keyed hash), the responder's memory of initiations it
//! decrypted before (a lookup: a replay is refused, or answered from memory, taking no
//! token), then the gate's cookies and per-flow and per-address token buckets under the
//! host's load state. Only what passes becomes a [`HandshakeJob`]: the Diffie-Hellman
//! work, which the driver runs wherever it likes and hands back as a
//! [`HandshakeOutcome`] ([`Host::handle_handshake_done`]).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use horde_crypto::{
    random_index, Admission, DropReason, HandshakeGate, Keypair, PublicKey, RateLimit, RespondJob,
    RespondWork, Responder, ServerId,
};
use rand::rngs::StdRng;
use rand::{CryptoRng, RngCore, SeedableRng};

use crate::refusal::{InitiationLog, RejectLog};
use crate::{HandshakeTransmit, Host};

/// How long the host stays under load after the condition last held (as WireGuard).
pub const LOAD_HOLD: Duration = Duration::from_secs(1);

/// How the host answers initiations.
#[derive(Debug, Clone)]
pub struct ResponderSettings {
    /// The peers' static keys that may connect.
    pub allowed: Vec<PublicKey>,
    /// Jobs made and not yet answered, at most; more initiations are dropped
    /// (`queue_full`).
    pub queue: usize,
    /// Per-source limits on initiations that become jobs (and on cookie replies and
    /// responses resent from memory).
    pub rate_limit: RateLimit,
    /// The host is *under load* (and asks for cookies) while at least `queue / 8` jobs
    /// wait, or more than this many initiations arrived with a valid `mac1` in the last
    /// second; it stays so for [`LOAD_HOLD`] after the last such moment.
    pub load_rate: u32,
    /// This server's id behind a load balancer: the sessions it accepts get indices that
    /// carry it (`docs/load-balancing.md`). `None`: indices are wholly random.
    pub server_id: Option<ServerId>,
}

impl Default for ResponderSettings {
    fn default() -> Self {
        Self {
            allowed: Vec::new(),
            queue: 256,
            rate_limit: RateLimit::default(),
            load_rate: 100,
            server_id: None,
        }
    }
}

/// The Diffie-Hellman work for one admitted initiation: owned data, `Send`. Run it
/// anywhere and give the outcome to [`Host::handle_handshake_done`].
#[derive(Debug)]
pub struct HandshakeJob {
    iface: usize,
    src: SocketAddr,
    server_id: Option<ServerId>,
    job: RespondJob,
}

impl HandshakeJob {
    /// Draws the new session's local index, then reads the initiation and writes the
    /// response (up to five X25519 operations). `rng` supplies the index and the
    /// ephemeral key. The host checks the index against its own when the outcome comes
    /// back (a clash loses the handshake; the initiator retries).
    pub fn run<R: RngCore + CryptoRng + ?Sized>(self, rng: &mut R) -> HandshakeOutcome {
        let index = match self.server_id {
            Some(id) => id.draw_index(rng, |_| false),
            None => random_index(rng, |_| false),
        };
        HandshakeOutcome {
            iface: self.iface,
            src: self.src,
            work: self.job.run(index, rng),
        }
    }

    /// The interface the initiation arrived on.
    pub fn iface(&self) -> usize {
        self.iface
    }

    /// Where it came from.
    pub fn source(&self) -> SocketAddr {
        self.src
    }
}

/// What a [`HandshakeJob`] found, for [`Host::handle_handshake_done`].
#[derive(Debug)]
pub struct HandshakeOutcome {
    iface: usize,
    src: SocketAddr,
    work: RespondWork,
}

/// Decides "under load" from the jobs waiting and the rate of `mac1`-valid initiations.
#[derive(Debug, Default)]
struct LoadMeter {
    window_start: Duration,
    in_window: u32,
    last_loaded: Option<Duration>,
}

impl LoadMeter {
    /// Whether the host is under load now, with `depth` jobs waiting.
    fn is_loaded(&mut self, now: Duration, depth: usize, settings: &ResponderSettings) -> bool {
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

/// The responder's state: its records, the gate, the load, the jobs.
pub(crate) struct Responding {
    responder: Responder,
    gate: HandshakeGate,
    settings: ResponderSettings,
    load: LoadMeter,
    jobs: VecDeque<HandshakeJob>,
    /// Jobs handed out whose outcome has not come back.
    in_flight: usize,
    refusals: InitiationLog,
    rejects: RejectLog,
}

impl Responding {
    /// The gate's cookie secrets come from their own generator, seeded from `seed`, so
    /// that the host's other draws stay as they are.
    pub(crate) fn new(keypair: Keypair, settings: ResponderSettings, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x6761_7465);
        let gate = HandshakeGate::new(keypair.public(), settings.rate_limit, &mut rng);
        Self {
            responder: Responder::new(keypair, settings.allowed.iter().copied()),
            gate,
            settings,
            load: LoadMeter::default(),
            jobs: VecDeque::new(),
            in_flight: 0,
            refusals: InitiationLog::default(),
            rejects: RejectLog::default(),
        }
    }
}

impl Host {
    /// An initiation (its header already checked) from `src` on `iface`: the cheap
    /// checks, then a job, a cookie reply, a response from memory, or a counted drop.
    pub(crate) fn on_initiation(
        &mut self,
        now: Duration,
        iface: usize,
        src: SocketAddr,
        data: &[u8],
    ) {
        let r = &mut self.responding;
        if !r.gate.mac1_ok(data) {
            return self.refuse_initiation(now, DropReason::BadMac, src);
        }
        match r.responder.recognise(data) {
            None => {}
            Some(Err(reason)) => return self.refuse_initiation(now, reason, src),
            Some(Ok(reply)) => {
                // A copy of a peer's current initiation (its response was lost, or it is
                // replayed): the same response again, as often as the flow's bucket allows.
                if r.gate.allow_flow(src, now) {
                    self.handshake_tx.push_back(HandshakeTransmit {
                        iface,
                        dst: src,
                        datagram: reply.response().to_vec(),
                    });
                } else {
                    self.refuse_initiation(now, DropReason::RateLimited, src);
                }
                return;
            }
        }
        let depth = r.jobs.len() + r.in_flight;
        let under_load = r.load.is_loaded(now, depth, &r.settings);
        match r.gate.check(data, src, now, under_load) {
            Err(reason) => {
                if reason == DropReason::RateLimited {
                    // It passed mac1, so it counts towards the load.
                    r.load.count(now);
                }
                self.refuse_initiation(now, reason, src);
            }
            Ok(Admission::Cookie(reply)) => {
                r.load.count(now);
                self.handshake_tx.push_back(HandshakeTransmit {
                    iface,
                    dst: src,
                    datagram: reply,
                });
                self.refuse_initiation(now, DropReason::NeedCookie, src);
            }
            Ok(Admission::Admit) => {
                r.load.count(now);
                if depth >= r.settings.queue.max(1) {
                    return self.refuse_initiation(now, DropReason::QueueFull, src);
                }
                match r.responder.job(data) {
                    Ok(job) => r.jobs.push_back(HandshakeJob {
                        iface,
                        src,
                        server_id: r.settings.server_id,
                        job,
                    }),
                    Err(reason) => self.refuse_initiation(now, reason, src),
                }
            }
        }
    }

    /// The next Diffie-Hellman job: run it ([`HandshakeJob::run`]) and hand its outcome
    /// back with [`Host::handle_handshake_done`]. Until then it counts towards the load.
    pub fn poll_handshake_job(&mut self) -> Option<HandshakeJob> {
        let job = self.responding.jobs.pop_front()?;
        self.responding.in_flight += 1;
        Some(job)
    }

    /// A job's outcome: the responder's records decide (allow-list, timestamp), its
    /// response goes out, and a new secure session waits for the peer's hello.
    pub fn handle_handshake_done(&mut self, now: Duration, outcome: HandshakeOutcome) {
        let r = &mut self.responding;
        r.in_flight = r.in_flight.saturating_sub(1);
        let HandshakeOutcome { iface, src, work } = outcome;
        let result = r.responder.finish(work);
        match &result {
            Err(DropReason::NotAllowed) => {
                if let Some(key) = r.responder.take_rejected_key() {
                    r.rejects.note(key, src, now);
                }
            }
            Err(reason) => {
                r.refusals.note(*reason, src, now);
            }
            Ok(_) => {}
        }
        self.install_reply(now, iface, src, result);
    }

    /// Allow `peer` to connect from now on (`allowed`), or no longer. Sessions already
    /// established with a key taken off the list are the driver's to close.
    pub fn allow_peer(&mut self, peer: PublicKey, allowed: bool) {
        if allowed {
            self.responding.responder.allow(peer);
        } else {
            self.responding.responder.revoke(&peer);
        }
    }

    /// Handshake jobs made and not yet answered (waiting, or handed out).
    pub fn handshake_jobs_pending(&self) -> usize {
        self.responding.jobs.len() + self.responding.in_flight
    }

    fn refuse_initiation(&mut self, now: Duration, reason: DropReason, src: SocketAddr) {
        self.counters.dropped.record(reason);
        self.responding.refusals.note(reason, src, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(queue: usize, load_rate: u32) -> ResponderSettings {
        ResponderSettings {
            queue,
            load_rate,
            ..ResponderSettings::default()
        }
    }

    #[test]
    fn load_comes_from_jobs_waiting_or_rate_and_holds_for_a_second() {
        let s = settings(64, 10);
        let mut m = LoadMeter::default();
        let t = Duration::from_secs(5);
        assert!(!m.is_loaded(t, 7, &s), "7 waiting of 64 is below 1/8");
        assert!(m.is_loaded(t, 8, &s), "8 waiting is 1/8");
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
        let later = t + Duration::from_secs(3);
        m.count(later);
        assert!(!m.is_loaded(later, 0, &s));
    }

    fn server(allowed: &Keypair, rate_limit: RateLimit) -> Host {
        Host::new(crate::HostSettings {
            keypair: Keypair::generate_with(&mut StdRng::seed_from_u64(2)),
            rekey: horde_crypto::RekeyPolicy::default(),
            endpoint: horde_proto::EndpointConfig::default(),
            accepted_channel: std::sync::Arc::new(|_| horde_proto::ChannelConfig::default()),
            interfaces: 1,
            seed: 3,
            unix_micros_at_start: 0,
            responder: ResponderSettings {
                allowed: vec![*allowed.public()],
                rate_limit,
                ..ResponderSettings::default()
            },
        })
    }

    /// Runs the host's jobs as a driver would, each on a thread of its own; how many
    /// there were.
    fn run_jobs(host: &mut Host, now: Duration, rng: &mut StdRng) -> usize {
        let mut n = 0;
        while let Some(job) = host.poll_handshake_job() {
            let mut job_rng = StdRng::seed_from_u64(rng.next_u64());
            let outcome = std::thread::spawn(move || job.run(&mut job_rng))
                .join()
                .expect("the job ran");
            host.handle_handshake_done(now, outcome);
            n += 1;
        }
        n
    }

    /// Copies of an old initiation are refused by the responder's memory before the
    /// gate: they take no token from their address, so a fresh initiation from the same
    /// address still gets in, and they cost no job.
    #[test]
    fn replays_are_refused_before_they_take_a_token() {
        use horde_crypto::Initiator;
        let mut rng = StdRng::seed_from_u64(1);
        let client = Keypair::generate_with(&mut rng);
        // Three initiations from an address, back to back, and hardly any refill.
        let limit = RateLimit {
            per_second: 0.001,
            burst: 3.0,
            max_sources: 16,
        };
        let mut host = server(&client, limit);
        let server_key = *Keypair::generate_with(&mut StdRng::seed_from_u64(2)).public();
        let src: SocketAddr = "192.0.2.1:4000".parse().unwrap();
        let now = Duration::from_secs(1);
        let old = Initiator::new(&client, &server_key, 1, 100, &mut rng);
        let newer = Initiator::new(&client, &server_key, 2, 200, &mut rng);
        for init in [&old, &newer] {
            host.handle_datagram(now, 0, src, init.initiation());
            assert_eq!(run_jobs(&mut host, now, &mut rng), 1);
            assert!(host.poll_handshake_transmit().is_some(), "a response");
        }

        // The old one, captured and replayed from the same address (other ports too).
        for i in 0..100 {
            let from = SocketAddr::new(src.ip(), 5000 + i);
            host.handle_datagram(now, 0, from, old.initiation());
        }
        assert_eq!(
            host.handshake_jobs_pending(),
            0,
            "no Diffie-Hellman for replays"
        );
        let d = &host.counters().dropped;
        assert_eq!(d.get(DropReason::StaleInitiation), 100, "{d:?}");
        assert_eq!(d.get(DropReason::RateLimited), 0, "{d:?}");
        assert_eq!(d.get(DropReason::NeedCookie), 0, "{d:?}");
        assert!(host.poll_handshake_transmit().is_none());

        // The address's last token is still there for a fresh initiation.
        let fresh = Initiator::new(&client, &server_key, 3, 300, &mut rng);
        host.handle_datagram(now, 0, src, fresh.initiation());
        assert_eq!(run_jobs(&mut host, now, &mut rng), 1, "admitted");
        // And that was the last: the next fresh one from the address is not admitted.
        let more = Initiator::new(&client, &server_key, 4, 400, &mut rng);
        host.handle_datagram(now, 0, src, more.initiation());
        assert_eq!(host.handshake_jobs_pending(), 0);
        assert_eq!(host.counters().dropped.get(DropReason::NeedCookie), 1);
    }
}
