//! The two hosts of a fault run and the clock that drives them. Each is a
//! `horde_host::Host`, the host that ships, on seeded keys: the client keeps one
//! persistent connection (the host redials it and carries the unacknowledged ADUs over),
//! the server listens, runs its host's handshake jobs inline as they come,
//! lets a restarted peer's new session replace its old one, and reads what it is handed
//! unless its application is paused. Every datagram is a real handshake message or an
//! AEAD-sealed packet. Both hosts can crash (the `Host` is dropped) and restart (a new
//! one on the same static key); each has its own clock, which a fault can make jump
//! forward.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use horde_crypto::{DropReason, Keypair, RekeyPolicy};
use horde_host::{
    ChannelTarget, ConnOp, ConnectConfig, Host, HostError, HostEvent, HostSettings, Reconnect,
    ResponderSettings,
};
use horde_policy::Fields;
use horde_proto::{AduHandle, ChannelConfig, EndpointConfig, Event, InFlightPolicy, Session};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::allocation::{shortfalls, StreamWindow};
use super::ledger::{AduKey, Ledger, TAG_LEN};
use super::net::{Datagram, Net, DOWN, UP};
use super::plan::{FaultKind, Feed, RunPlan};
use super::report::{Digest, Lifecycle, WindowFigures};
use super::violation::Violation;
use super::{HostHook, SimFailure};

/// The persistent connection's reconnection: the first attempt at once, then 100 ms
/// doubling to 1 s between attempts, never given up within a run.
const RECONNECT: Reconnect = Reconnect {
    initial: Duration::from_millis(100),
    max: Duration::from_secs(1),
    give_up_after: Duration::from_secs(3_600),
};
/// A first connection (or one after a client restart) keeps handshaking for this long.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3_600);
/// The service the server listens on.
const SERVICE: u32 = 1;
/// Wall-clock time at the run's start, in microseconds since the UNIX epoch. Every host
/// is handed the run's time (plus its clock's jumps), not time since its own start, so a
/// restarted host's initiations are newer than its last ones.
const UNIX_MICROS_AT_START: u64 = 1_700_000_000_000_000;
/// Sessions the server may hold at once: the live one, one still draining after its
/// peer's `Close`, and one more while a replacement is under way.
pub const MAX_SERVER_SESSIONS: usize = 3;
/// How long after the last fault delivery must have resumed: a dead session is noticed
/// within the idle timeout (3 s), redialled within the backoff cap (1 s), and then needs
/// a handshake (the initiation is retried every 0.5 s on a first connection), the hello
/// and a round trip over links of at most ~300 ms with queues.
pub const CONVERGENCE_BOUND: Duration = Duration::from_secs(7);
/// The window before the close over which allocations are checked, and in which every
/// stream must have delivered something.
pub const STABLE_WINDOW: Duration = Duration::from_secs(4);
/// Share of its expected rate (below) a stream must be sent in the stable window; also
/// the share of the window a sender may leave open slots unused while it has data and
/// credit. Losses and slot rounding sit below this.
pub const ALLOCATION_TOLERANCE: f64 = 0.3;
/// Steps one instant may take before the run is declared stuck.
const MAX_STEPS_AT_ONE_INSTANT: u32 = 100_000;

fn client_addr(link: usize, epoch: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::new(127, 20, 0, link as u8), 40_000 + epoch))
}

fn server_addr(link: usize) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::new(127, 21, 0, link as u8), 5_000))
}

/// A host's static key, the same across its restarts.
fn keypair(seed: u64) -> Keypair {
    Keypair::generate_with(&mut ChaCha8Rng::seed_from_u64(seed))
}

struct FeedState {
    stream: u32,
    feed: Feed,
    resend: bool,
    next_at: Duration,
    next_seq: u64,
}

struct Client {
    keypair: Keypair,
    /// The running process; `None` while it is down.
    host: Option<Host>,
    /// The persistent connection's key in `host`.
    conn: u64,
    /// Whether the connection's streams are open (since its first session came up).
    streams_open: bool,
    incarnation: u32,
    clock: Duration,
    nat_epoch: u16,
    feeds: Vec<FeedState>,
    closing: bool,
}

struct Server {
    keypair: Keypair,
    /// The running process; `None` while it is down.
    host: Option<Host>,
    incarnation: u32,
    clock: Duration,
    /// Payload bytes each connection has handed the application; told to the host as
    /// read unless the application is paused.
    received: BTreeMap<u64, u64>,
    paused: bool,
}

/// Allocation bookkeeping of one stream over the stable window.
#[derive(Default, Clone, Copy)]
struct AllocMeter {
    rate: f64,
    since: Duration,
    integral: f64,
    seen: bool,
    sent_bytes: u64,
}

pub struct World {
    /// The network's clock as of this step (the network's world owns the clock).
    pub now: Duration,
    end: Duration,
    plan: RunPlan,
    pub net: Net,
    client: Client,
    server: Server,
    pub ledger: Ledger,
    rng: ChaCha8Rng,
    pub digest: Digest,
    scratch: Vec<u8>,
    sealed: Vec<u8>,
    arrivals: Vec<Datagram>,
    /// Fault boundaries: (time, fault index, starts).
    schedule: BTreeSet<(Duration, usize, bool)>,
    active: Vec<bool>,
    pub lifecycle: Lifecycle,
    pub violations: Vec<Violation>,
    pub resumed_after: Option<Duration>,
    /// The stable window's figures, once [`World::finish`] has run.
    pub window: WindowFigures,
    alloc: BTreeMap<u32, AllocMeter>,
    window_from: Duration,
    /// The client's session is held back by the server's receive buffer now, and was at
    /// some point of the stable window: then the buffer, not the channels, bounded what
    /// the streams could send (at most a buffer per round trip), and their allocations
    /// are not checked.
    flow_blocked_now: bool,
    flow_limited_in_window: bool,
    /// Since when the client's sender has left open slots unused with data and credit
    /// (as of the last step), and how long it did so within the stable window.
    idle_from: Option<Duration>,
    idle_in_window: Duration,
    /// The client's session is not polled for datagrams: a sender that stops sending,
    /// for the tests of the idle check.
    client_muted: bool,
    /// Every host built is passed to it first.
    hook: Option<HostHook>,
}

impl World {
    pub fn new(plan: RunPlan) -> Result<Self, SimFailure> {
        Self::new_with(plan, None)
    }

    /// A world whose hosts are each passed to `hook` when built.
    pub fn new_with(plan: RunPlan, hook: Option<HostHook>) -> Result<Self, SimFailure> {
        let net = Net::new(&plan.links, plan.seed)?;
        let mut schedule = BTreeSet::new();
        for (i, f) in plan.faults.iter().enumerate() {
            schedule.insert((f.at, i, true));
            if f.length > Duration::ZERO {
                schedule.insert((f.end(), i, false));
            }
        }
        let feeds = plan
            .streams
            .iter()
            .map(|s| FeedState {
                stream: s.id,
                feed: s.feed,
                resend: s.config.on_reconnect == InFlightPolicy::Resend,
                next_at: Duration::ZERO,
                next_seq: 0,
            })
            .collect();
        let window_from = plan.close_at.saturating_sub(STABLE_WINDOW);
        let end = plan.close_at
            + Duration::from_secs_f64(plan.session.close_timeout_ms / 1e3)
            + Duration::from_secs(2);
        let mut ledger = Ledger::default();
        ledger.watch_from = plan.quiet_from;
        let mut w = Self {
            now: Duration::ZERO,
            end,
            net,
            client: Client {
                keypair: keypair(plan.seed ^ 0xC11E_0001),
                host: None,
                conn: 0,
                streams_open: false,
                incarnation: 0,
                clock: Duration::ZERO,
                nat_epoch: 0,
                feeds,
                closing: false,
            },
            server: Server {
                keypair: keypair(plan.seed ^ 0x5E4E_0002),
                host: None,
                incarnation: 0,
                clock: Duration::ZERO,
                received: BTreeMap::new(),
                paused: false,
            },
            ledger,
            rng: ChaCha8Rng::seed_from_u64(plan.seed ^ 0x000C_0FFE),
            digest: Digest::default(),
            scratch: Vec::with_capacity(2048),
            sealed: Vec::with_capacity(2048),
            arrivals: Vec::new(),
            schedule,
            active: vec![false; plan.faults.len()],
            lifecycle: Lifecycle::default(),
            violations: Vec::new(),
            resumed_after: None,
            window: WindowFigures::default(),
            alloc: BTreeMap::new(),
            window_from,
            flow_blocked_now: false,
            flow_limited_in_window: false,
            idle_from: None,
            idle_in_window: Duration::ZERO,
            client_muted: false,
            hook,
            plan,
        };
        w.server_start();
        w.client_start(true);
        Ok(w)
    }

    pub fn end(&self) -> Duration {
        self.end
    }

    pub fn plan(&self) -> &RunPlan {
        &self.plan
    }

    // ----- the clock ------------------------------------------------------------------

    /// Run to the end (or to `until`, if earlier).
    pub fn run_until(&mut self, until: Duration) {
        let until = until.min(self.end);
        let mut last = self.now;
        let mut same = 0u32;
        self.flush();
        while let Some(t) = self.next_event() {
            if t > until {
                break;
            }
            if t == last {
                same += 1;
                if same > MAX_STEPS_AT_ONE_INSTANT {
                    self.violations.push(Violation::new(
                        "stuck",
                        format!("no progress past {:.3} s", t.as_secs_f64()),
                    ));
                    self.net.advance_to(self.end);
                    self.now = self.end;
                    return;
                }
            } else {
                same = 0;
                last = t;
            }
            self.net.advance_to(t);
            self.now = t;
            self.step();
        }
        self.net.advance_to(until);
        self.now = until;
    }

    /// The next event: the network's next delivery or the hosts', feeds' or faults'.
    fn next_event(&self) -> Option<Duration> {
        let now = self.now;
        let mut t: Option<Duration> = None;
        let mut consider = |x: Option<Duration>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t: Duration| t.min(x)));
            }
        };
        consider(self.schedule.first().map(|s| s.0));
        if !self.client.closing {
            consider(Some(self.plan.close_at));
        }
        let c = self.client.clock;
        if let Some(h) = self.client.host.as_ref().filter(|_| !self.client_muted) {
            consider(h.poll_timeout(now + c).map(|x| x.saturating_sub(c)));
        }
        if self.client.host.is_some() && self.client.streams_open && !self.client.closing {
            for f in &self.client.feeds {
                if let Feed::Cbr { .. } = f.feed {
                    consider(Some(f.next_at));
                }
            }
        }
        let sc = self.server.clock;
        if let Some(h) = self.server.host.as_ref() {
            consider(h.poll_timeout(now + sc).map(|x| x.saturating_sub(sc)));
        }
        self.net.next_event(t)
    }

    fn step(&mut self) {
        let now = self.now;
        while let Some(&(at, i, starts)) = self.schedule.first() {
            if at > now {
                break;
            }
            self.schedule.pop_first();
            self.fault_boundary(i, starts);
        }
        if !self.client.closing && now >= self.plan.close_at {
            self.close_client();
        }
        let mut arrivals = std::mem::take(&mut self.arrivals);
        arrivals.clear();
        self.net.deliver(&mut arrivals);
        for d in arrivals.drain(..) {
            self.arrive(d);
        }
        self.arrivals = arrivals;
        self.feed();
        if !self.client_muted {
            let c = now + self.client.clock;
            if let Some(h) = self.client.host.as_mut() {
                h.handle_timeout(c);
            }
        }
        let sc = now + self.server.clock;
        if let Some(h) = self.server.host.as_mut() {
            h.handle_timeout(sc);
        }
        self.flush();
        self.check_bounds();
        self.meter_idle();
    }

    // ----- faults ---------------------------------------------------------------------

    fn fault_boundary(&mut self, i: usize, starts: bool) {
        let f = self.plan.faults[i];
        self.active[i] = starts && f.length > Duration::ZERO;
        // Link faults: recompute from every fault holding now, so overlaps compose.
        for g in &self.plan.faults {
            self.net.set_fault(&g.kind, false);
        }
        for (g, &on) in self.plan.faults.iter().zip(&self.active) {
            if on {
                self.net.set_fault(&g.kind, true);
            }
        }
        let holding = |w: &World, pred: fn(&FaultKind) -> bool| {
            w.plan
                .faults
                .iter()
                .zip(&w.active)
                .any(|(g, &a)| a && pred(&g.kind))
        };
        match f.kind {
            FaultKind::ClientCrash if starts => self.client_kill(),
            FaultKind::ClientCrash
                if !holding(self, |k| matches!(k, FaultKind::ClientCrash))
                    && self.client.host.is_none() =>
            {
                self.client_start(false)
            }
            FaultKind::ServerCrash if starts => self.server_kill(),
            FaultKind::ServerCrash
                if !holding(self, |k| matches!(k, FaultKind::ServerCrash))
                    && self.server.host.is_none() =>
            {
                self.server_start()
            }
            FaultKind::NatRebind => {
                self.client.nat_epoch += 1;
                let aliases = self.client_aliases();
                if let Some(h) = self.client.host.as_mut() {
                    h.set_local_aliases(aliases);
                }
            }
            FaultKind::ClockJump { host, jump_ms } if starts => {
                let by = Duration::from_millis(jump_ms);
                if host == 0 {
                    self.client.clock += by;
                } else {
                    self.server.clock += by;
                }
            }
            FaultKind::AppPause => {
                self.server.paused = holding(self, |k| matches!(k, FaultKind::AppPause));
            }
            _ => {}
        }
        self.flush();
    }

    fn client_kill(&mut self) {
        let Some(h) = self.client.host.take() else {
            return;
        };
        self.retire(&h);
        self.client.streams_open = false;
        self.ledger
            .client_crashed(self.now, self.client.incarnation);
    }

    fn server_kill(&mut self) {
        let Some(h) = self.server.host.take() else {
            return;
        };
        self.retire(&h);
        self.server.received.clear();
        self.ledger.server_crashed(self.now);
    }

    /// A host process ends: its counters go into the run's.
    fn retire(&mut self, h: &Host) {
        let c = h.counters();
        self.lifecycle.reconnects += c.reconnects as u32;
        self.lifecycle.replaced += c.sessions_replaced as u32;
        self.net.stats.replay_drops += c.dropped.get(DropReason::Replayed);
        self.net.stats.integrity_drops += c.dropped.total() - c.dropped.get(DropReason::Replayed);
    }

    /// A new host process: its own choices seeded from the run's.
    fn build_host(&mut self, keypair: &Keypair, server: bool) -> Host {
        let configs: Vec<ChannelConfig> = self
            .plan
            .links
            .iter()
            .map(|l| ChannelConfig {
                congestion: l.congestion.clone(),
                ..ChannelConfig::default()
            })
            .collect();
        let aliases = if server {
            (0..self.plan.links.len()).map(server_addr).collect()
        } else {
            self.client_aliases()
        };
        let mut host = Host::new(HostSettings {
            keypair: keypair.clone(),
            rekey: RekeyPolicy::default(),
            endpoint: EndpointConfig {
                session: self.plan.session.clone(),
                seed: self.rng.gen(),
                local_aliases: aliases,
                receive_buffer: server.then_some(self.plan.recv_buffer),
                ..EndpointConfig::default()
            },
            accepted_channel: Arc::new(move |id| {
                configs.get(usize::from(id)).cloned().unwrap_or_default()
            }),
            interfaces: self.plan.links.len(),
            seed: self.rng.gen(),
            unix_micros_at_start: UNIX_MICROS_AT_START,
            responder: ResponderSettings {
                allowed: server
                    .then(|| *self.client.keypair.public())
                    .into_iter()
                    .collect(),
                ..ResponderSettings::default()
            },
        });
        if let Some(hook) = self.hook {
            hook(&mut host);
        }
        host
    }

    fn client_aliases(&self) -> Vec<SocketAddr> {
        (0..self.plan.links.len())
            .map(|i| client_addr(i, self.client.nat_epoch))
            .collect()
    }

    // ----- the client -----------------------------------------------------------------

    /// Start the client process: a new incarnation, which opens the connection.
    fn client_start(&mut self, first: bool) {
        if !first {
            self.client.incarnation += 1;
        }
        let key = self.client.keypair.clone();
        let host = self.build_host(&key, false);
        self.client.host = Some(host);
        self.client.streams_open = false;
        self.client_connect();
    }

    /// Open the persistent connection to the server.
    fn client_connect(&mut self) {
        let now = self.now + self.client.clock;
        let config = ConnectConfig {
            peer: *self.server.keypair.public(),
            service: SERVICE,
            channels: self
                .plan
                .links
                .iter()
                .enumerate()
                .map(|(i, l)| ChannelTarget {
                    interface: i,
                    remote: server_addr(i),
                    config: ChannelConfig {
                        congestion: l.congestion.clone(),
                        ..ChannelConfig::default()
                    },
                })
                .collect(),
            handshake_timeout: HANDSHAKE_TIMEOUT,
        };
        let Some(h) = self.client.host.as_mut() else {
            return;
        };
        match h.connect(now, config, Some(RECONNECT), |_| false) {
            Ok(k) => self.client.conn = k,
            Err(e) => self
                .violations
                .push(Violation::new("connect_failed", e.to_string())),
        }
    }

    /// The connection's first session is up: its streams open and the feeds start.
    fn open_streams(&mut self) {
        let now = self.now + self.client.clock;
        let key = self.client.conn;
        let Some(h) = self.client.host.as_mut() else {
            return;
        };
        for st in &self.plan.streams {
            let (cell, reply) = answer_cell();
            h.handle_command(
                now,
                key,
                ConnOp::OpenStream(st.id, st.config.clone(), reply),
            );
            let answer = cell.lock().expect("not poisoned").take();
            if let Some(Err(e)) = answer {
                self.violations
                    .push(Violation::new("open_stream_failed", e.to_string()));
            }
        }
        for f in &mut self.client.feeds {
            f.next_seq = 0;
            f.next_at = self.now;
        }
        self.client.streams_open = true;
    }

    fn close_client(&mut self) {
        self.client.closing = true;
        self.ledger.client_closed = true;
        let now = self.now + self.client.clock;
        let key = self.client.conn;
        if let Some(h) = self.client.host.as_mut() {
            h.handle_command(now, key, ConnOp::Close);
        }
        self.flush();
    }

    fn feed(&mut self) {
        if self.client.host.is_none() || !self.client.streams_open || self.client.closing {
            return;
        }
        let now = self.now + self.client.clock;
        let inc = self.client.incarnation;
        let conn = self.client.conn;
        for k in 0..self.client.feeds.len() {
            let f = &self.client.feeds[k];
            let (stream, resend) = (f.stream, f.resend);
            let (size, count) = match f.feed {
                Feed::Cbr { size, interval_ms } => {
                    if f.next_at > self.now {
                        continue;
                    }
                    let mut n = 0;
                    let fk = &mut self.client.feeds[k];
                    while fk.next_at <= self.now {
                        fk.next_at += Duration::from_millis(interval_ms.max(1));
                        n += 1;
                    }
                    (size, n)
                }
                Feed::Bulk { size, depth } => {
                    match self.client.host.as_ref().and_then(|h| h.session(conn)) {
                        Some(s) if s.is_connected() => {
                            (size, depth.saturating_sub(s.queued(stream)))
                        }
                        _ => continue,
                    }
                }
            };
            for _ in 0..count {
                let Some(h) = self.client.host.as_mut() else {
                    break;
                };
                let fk = &mut self.client.feeds[k];
                let key = AduKey {
                    incarnation: inc,
                    stream,
                    seq: fk.next_seq,
                };
                let mut payload = vec![0u8; (size as usize).max(TAG_LEN)];
                key.write_tag(&mut payload);
                let len = payload.len() as u32;
                let (cell, reply) = answer_cell::<AduHandle>();
                h.handle_command(
                    now,
                    conn,
                    ConnOp::Send {
                        stream,
                        payload: Bytes::from(payload),
                        fields: Fields::default(),
                        reply: Some(reply),
                    },
                );
                let answer = cell.lock().expect("not poisoned").take();
                match answer {
                    Some(Ok(h)) => {
                        if h.seq != key.seq {
                            self.violations.push(Violation::new(
                                "sequence",
                                format!("{key:?} got stream sequence {}", h.seq),
                            ));
                        }
                        fk.next_seq += 1;
                        self.ledger.queued(key, len, resend);
                    }
                    Some(Err(e)) => {
                        self.violations
                            .push(Violation::new("send_refused", format!("{key:?}: {e}")));
                        break;
                    }
                    // The connection has no session to take it (it is gone).
                    None => break,
                }
            }
        }
        // Nacks of a queue overflowing while the peer is away go out now.
        self.drain_client_events();
    }

    fn client_event(&mut self, inc: u32, e: &Event) {
        self.ledger.client_event(self.now, inc, e);
        digest_event(&mut self.digest, e);
        match *e {
            Event::Throttle { stream, rate } => {
                let now = self.now;
                let w0 = self.window_from;
                let m = self.alloc.entry(stream).or_default();
                integrate(m, now, w0);
                m.rate = rate;
                m.seen = true;
            }
            Event::FlowBlocked => {
                self.lifecycle.flow_blocked += 1;
                self.flow_blocked_now = true;
                self.flow_limited_in_window |= self.now >= self.window_from;
            }
            Event::FlowResumed => {
                self.flow_limited_in_window |= self.now >= self.window_from;
                self.flow_blocked_now = false;
            }
            Event::Connected => {
                self.lifecycle.client_sessions += 1;
                self.flow_blocked_now = false;
            }
            _ => {}
        }
    }

    /// The client host's events: the connection's life and its session's events.
    fn drain_client_events(&mut self) {
        let inc = self.client.incarnation;
        loop {
            let Some(e) = self.client.host.as_mut().and_then(Host::poll_event) else {
                break;
            };
            match e {
                HostEvent::Connected { key, .. }
                    if key == self.client.conn && !self.client.streams_open =>
                {
                    self.open_streams();
                }
                HostEvent::ConnectFailed { key, error } if key == self.client.conn => {
                    self.violations
                        .push(Violation::new("connect_failed", error.to_string()));
                }
                HostEvent::Conn { key, event } if key == self.client.conn => {
                    self.client_event(inc, &event);
                }
                HostEvent::Removed { key } if key == self.client.conn => {
                    self.client.streams_open = false;
                    if !self.client.closing {
                        self.violations.push(Violation::new(
                            "connection_gone",
                            "the persistent connection ended before the close".into(),
                        ));
                    }
                }
                _ => {}
            }
        }
    }

    // ----- the server -----------------------------------------------------------------

    /// Start the server process: a new host on the same static key, listening.
    fn server_start(&mut self) {
        let key = self.server.keypair.clone();
        let mut host = self.build_host(&key, true);
        host.listen(SERVICE);
        self.server.incarnation += 1;
        self.server.received.clear();
        self.server.host = Some(host);
    }

    /// The server host's events: accepted sessions, and what the application is handed.
    fn drain_server_events(&mut self) {
        loop {
            let Some(e) = self.server.host.as_mut().and_then(Host::poll_event) else {
                break;
            };
            match e {
                HostEvent::Accepted { .. } => self.lifecycle.server_sessions += 1,
                HostEvent::Conn { key, event } => {
                    digest_event(&mut self.digest, &event);
                    if let Event::Received {
                        stream,
                        stream_seq,
                        payload,
                        ..
                    } = &event
                    {
                        if self.resumed_after.is_none() && self.now >= self.plan.quiet_from {
                            self.resumed_after = Some(self.now - self.plan.quiet_from);
                        }
                        *self.server.received.entry(key).or_default() += payload.len() as u64;
                        // Sessions are named by process and connection: a restarted
                        // server numbers its connections from 1 again.
                        let session = u64::from(self.server.incarnation) << 32 | key;
                        self.ledger.server_received(
                            self.now,
                            session,
                            *stream,
                            *stream_seq,
                            payload,
                        );
                    }
                }
                HostEvent::Removed { key } => {
                    self.server.received.remove(&key);
                }
                _ => {}
            }
        }
    }

    // ----- packets --------------------------------------------------------------------

    fn arrive(&mut self, d: Datagram) {
        if d.dir == UP {
            let now = self.now + self.server.clock;
            let Some(host) = self.server.host.as_mut() else {
                return;
            };
            host.handle_datagram(now, d.link, d.from, &d.bytes);
            // The handshake worker's jobs, done inline and at once.
            while let Some(job) = host.poll_handshake_job() {
                let outcome = job.run(&mut self.rng);
                host.handle_handshake_done(now, outcome);
            }
        } else {
            if d.dst != client_addr(d.link, self.client.nat_epoch) {
                return; // a NAT binding that no longer exists
            }
            let now = self.now + self.client.clock;
            if let Some(h) = self.client.host.as_mut() {
                h.handle_datagram(now, d.link, d.from, &d.bytes);
            }
        }
    }

    /// Drain both hosts' datagrams into the network and their events into the books.
    fn flush(&mut self) {
        let now = self.now;
        // The client.
        let inc = self.client.incarnation;
        let cnow = now + self.client.clock;
        let epoch = self.client.nat_epoch;
        while let Some(t) = self
            .client
            .host
            .as_mut()
            .and_then(Host::poll_handshake_transmit)
        {
            self.send(t.iface, UP, client_addr(t.iface, epoch), t.dst, &t.datagram);
        }
        while !self.client_muted {
            let Some(h) = self.client.host.as_mut() else {
                break;
            };
            let Some(t) = h.poll_sealed(cnow, &mut self.scratch, &mut self.sealed) else {
                break;
            };
            if now >= self.window_from && now < self.plan.close_at {
                for a in t.adus.iter() {
                    let key = AduKey {
                        incarnation: inc,
                        stream: a.stream,
                        seq: a.seq,
                    };
                    if let Some(size) = self.ledger.size_of(key) {
                        self.alloc.entry(a.stream).or_default().sent_bytes += u64::from(size);
                    }
                }
            }
            let sealed = std::mem::take(&mut self.sealed);
            self.send(t.iface, UP, client_addr(t.iface, epoch), t.dst, &sealed);
            self.sealed = sealed;
        }
        self.drain_client_events();
        // The server: what it sends, what its application is handed and reads, and the
        // window updates that reading queues.
        let snow = now + self.server.clock;
        for _ in 0..2 {
            self.flush_server(snow);
            self.drain_server_events();
            if self.server.paused {
                break;
            }
            let Some(h) = self.server.host.as_mut() else {
                break;
            };
            for (&key, &total) in &self.server.received {
                h.bytes_read(snow, key, total);
            }
        }
    }

    /// Sends every datagram the server host has queued.
    fn flush_server(&mut self, snow: Duration) {
        while let Some(t) = self
            .server
            .host
            .as_mut()
            .and_then(Host::poll_handshake_transmit)
        {
            self.send(t.iface, DOWN, server_addr(t.iface), t.dst, &t.datagram);
        }
        while let Some(h) = self.server.host.as_mut() {
            let Some(t) = h.poll_sealed(snow, &mut self.scratch, &mut self.sealed) else {
                break;
            };
            let sealed = std::mem::take(&mut self.sealed);
            self.send(t.iface, DOWN, server_addr(t.iface), t.dst, &sealed);
            self.sealed = sealed;
        }
    }

    fn send(&mut self, link: usize, dir: usize, from: SocketAddr, dst: SocketAddr, bytes: &[u8]) {
        self.digest.add_u64(self.now.as_nanos() as u64);
        self.digest.add_u64((link * 2 + dir) as u64);
        self.digest.add(bytes);
        if link < self.net.link_count() {
            let d = Datagram {
                link,
                dir,
                from,
                dst,
                bytes: Bytes::copy_from_slice(bytes),
            };
            self.net.send(d);
        } else {
            self.violations.push(Violation::new(
                "bad_interface",
                format!("a host sent on interface {link}"),
            ));
        }
    }

    // ----- invariants checked as the run goes ------------------------------------------

    /// Whether the client's sender, after this step, leaves a channel's open slot unused
    /// though it is connected, has ADUs queued and the peer's credit is not holding it
    /// back. Sessions schedule as soon as a slot and an ADU meet, so this is a sender
    /// that could send and does not; a channel without open slots is the limit instead.
    fn sender_idle(&self) -> bool {
        let Some(s) = self.client_session() else {
            return false;
        };
        if !s.is_connected() || s.flow_blocked() || self.client.closing {
            return false;
        }
        let backlog = self.plan.streams.iter().any(|st| s.queued(st.id) > 0);
        let now = self.now + self.client.clock;
        backlog && s.channels().iter().any(|c| c.open_slots(now) > 0)
    }

    /// Add the time since the last step the sender spent idle to the window's total.
    fn meter_idle(&mut self) {
        let (w0, w1) = (self.window_from, self.plan.close_at);
        if let Some(from) = self.idle_from.take() {
            let (a, b) = (from.max(w0), self.now.min(w1));
            if b > a {
                self.idle_in_window += b - a;
            }
        }
        if self.sender_idle() {
            self.idle_from = Some(self.now);
        }
    }

    /// The client connection's session holding its streams.
    fn client_session(&self) -> Option<&Session> {
        self.client.host.as_ref()?.session(self.client.conn)
    }

    fn check_bounds(&mut self) {
        let mut found = None;
        if let Some(s) = self.client_session() {
            for st in &self.plan.streams {
                let q = s.queued_bytes(st.id);
                if q > st.config.max_queue_bytes {
                    found = Some(format!(
                        "stream {} queues {q} bytes, limit {}",
                        st.id, st.config.max_queue_bytes
                    ));
                }
            }
        }
        let server = self.server.host.as_ref();
        let held = server.map_or(0, Host::len);
        if held > MAX_SERVER_SESSIONS {
            found = Some(format!(
                "server holds {held} connections, bound {MAX_SERVER_SESSIONS}"
            ));
        }
        for (_, s) in server.into_iter().flat_map(Host::sessions) {
            if s.unread_bytes() > self.plan.recv_buffer {
                found = Some(format!(
                    "receiver holds {} unread bytes, buffer {}",
                    s.unread_bytes(),
                    self.plan.recv_buffer
                ));
            }
        }
        if let Some(detail) = found {
            self.bound_violation(detail);
        }
    }

    fn bound_violation(&mut self, detail: String) {
        // One report per kind of bound is enough to replay it.
        if !self.violations.iter().any(|v| v.kind == "memory_bound") {
            self.violations.push(Violation::new(
                "memory_bound",
                format!("at {:.3} s: {detail}", self.now.as_secs_f64()),
            ));
        }
    }

    /// The checks made once the run is over.
    pub fn finish(&mut self) {
        if let Some(h) = self.client.host.take() {
            self.retire(&h);
        }
        if let Some(h) = self.server.host.take() {
            self.retire(&h);
        }
        self.ledger.check_final();
        let quiet = self.plan.quiet_from;
        match self.resumed_after {
            Some(d) if d <= CONVERGENCE_BOUND => {}
            Some(d) => self.violations.push(Violation::new(
                "no_convergence",
                format!(
                    "delivery resumed {:.3} s after the last fault (bound {} s)",
                    d.as_secs_f64(),
                    CONVERGENCE_BOUND.as_secs()
                ),
            )),
            None => self.violations.push(Violation::new(
                "no_convergence",
                format!(
                    "nothing delivered after the last fault ({:.3} s)",
                    quiet.as_secs_f64()
                ),
            )),
        }
        let (w0, w1) = (self.window_from, self.plan.close_at);
        let secs = (w1 - w0).as_secs_f64();
        let flow_limited = self.flow_limited_in_window || self.flow_blocked_now;
        let mut window = Vec::new();
        for st in &self.plan.streams {
            let delivered = self
                .ledger
                .deliveries_after
                .get(&st.id)
                .is_some_and(|v| v.iter().any(|&(t, _)| t >= w0 && t < w1));
            if !delivered {
                self.violations.push(Violation::new(
                    "stalled",
                    format!(
                        "stream {} delivered nothing in the {secs} s before the close",
                        st.id
                    ),
                ));
            }
            let m = self.alloc.entry(st.id).or_default();
            let allocation = m.seen.then(|| {
                integrate(m, w1, w0);
                m.integral / secs
            });
            window.push(StreamWindow {
                id: st.id,
                sent: m.sent_bytes as f64 / secs,
                allocation: allocation.filter(|_| delivered),
                offered: offered_rate(st.feed),
                demand: st.config.demand(),
            });
        }
        if !flow_limited {
            for f in shortfalls(&window, ALLOCATION_TOLERANCE) {
                self.violations.push(Violation::new(
                    "allocation",
                    format!(
                        "stream {} sent {:.0} B/s in the stable window; allocated {:.0}, offered {:.0}, fair share of the {:.0} sent {:.0}",
                        f.id, f.sent, f.allocation, f.offered, f.carried, f.fair
                    ),
                ));
            }
        }
        let idle = self.idle_in_window.as_secs_f64();
        self.window = WindowFigures {
            sent: window.iter().map(|s| s.sent).sum(),
            allocated: window.iter().filter_map(|s| s.allocation).sum(),
            links: self.plan.links.iter().map(|l| l.up_kbps * 125.0).sum(),
            idle_s: idle,
        };
        if idle > ALLOCATION_TOLERANCE * secs {
            self.violations.push(Violation::new(
                "sender_idle",
                format!(
                    "the client left open slots unused with data and credit for {idle:.3} s of the {secs} s before the close"
                ),
            ));
        }
    }
}

/// Payload bytes/s a stream's feed offers.
fn offered_rate(feed: Feed) -> f64 {
    match feed {
        Feed::Cbr { size, interval_ms } => {
            f64::from(size.max(TAG_LEN as u32)) * 1000.0 / interval_ms.max(1) as f64
        }
        Feed::Bulk { .. } => f64::INFINITY,
    }
}

/// Add the allocation held since the last change to the window's integral.
fn integrate(m: &mut AllocMeter, now: Duration, window_from: Duration) {
    let from = m.since.max(window_from);
    if now > from && m.seen {
        m.integral += m.rate * (now - from).as_secs_f64();
    }
    m.since = now;
}

type Cell<T> = Arc<Mutex<Option<Result<T, HostError>>>>;

/// Where a host's answer to one operation lands (it answers before the call returns).
fn answer_cell<T: Send + 'static>() -> (Cell<T>, horde_host::Answer<T>) {
    let cell = Arc::new(Mutex::new(None));
    let c = cell.clone();
    (
        cell,
        Box::new(move |v| *c.lock().expect("not poisoned") = Some(v)),
    )
}

fn digest_event(d: &mut Digest, e: &Event) {
    let (code, a, b) = match *e {
        Event::Connected => (1, 0, 0),
        Event::Ack {
            stream, stream_seq, ..
        } => (2, stream, stream_seq),
        Event::Nack {
            stream, stream_seq, ..
        } => (3, stream, stream_seq),
        Event::LateAck {
            stream, stream_seq, ..
        } => (4, stream, stream_seq),
        Event::Throttle { stream, rate } => (5, stream, rate.to_bits()),
        Event::Writable { stream } => (6, stream, 0),
        Event::Received {
            stream, stream_seq, ..
        } => (7, stream, stream_seq),
        Event::ChannelDown { channel } => (8, u32::from(channel), 0),
        Event::ChannelUp { channel } => (9, u32::from(channel), 0),
        Event::Closed { reason } => (10, reason as u32, 0),
        Event::Reconnecting { attempt, .. } => (11, attempt, 0),
        Event::FlowBlocked => (12, 0, 0),
        Event::FlowResumed => (13, 0, 0),
    };
    d.add_u64(code);
    d.add_u64(u64::from(a));
    d.add_u64(b);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::plan::DrawLimits;

    /// Seed `seed`'s violations, the client's sender stopped `mute_before` ahead of the
    /// close if given.
    fn violations(seed: u64, mute_before: Option<Duration>) -> Vec<&'static str> {
        let plan = RunPlan::draw(seed, DrawLimits::default());
        let close = plan.close_at;
        let mut w = World::new(plan).expect("the plan sets up");
        if let Some(before) = mute_before {
            w.run_until(close - before);
            w.client_muted = true;
        }
        let end = w.end();
        w.run_until(end);
        w.finish();
        w.violations.iter().map(|v| v.kind).collect()
    }

    #[test]
    fn a_sender_that_stops_sending_with_data_queued_is_caught_idle() {
        // Seed 3 holds every invariant; the same run with the sender stopped 3.5 s
        // before the close (inside the 4 s window, before the idle timeout can end the
        // session) leaves its slots open with data queued.
        assert!(!violations(3, None).contains(&"sender_idle"));
        assert!(violations(3, Some(Duration::from_millis(3_500))).contains(&"sender_idle"));
    }
}
