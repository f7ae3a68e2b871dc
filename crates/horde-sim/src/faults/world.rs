//! The two hosts of a fault run and the clock that drives them: a client process that
//! keeps one persistent connection (reconnecting with backoff, as `horde-net`'s
//! `connect_persistent` does) and a server process that accepts sessions, lets a new
//! handshake from its peer replace the old session, and reads what it is handed unless
//! its application is paused. Both can crash and restart; each has its own clock, which
//! a fault can make jump forward.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;
use horde_proto::{wire, ChannelConfig, ChannelSpec, CloseReason, Event, InFlightPolicy, Session};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::allocation::{shortfalls, StreamWindow};
use super::ledger::{AduKey, Ledger, TAG_LEN};
use super::net::{Datagram, Net, DOWN, UP};
use super::plan::{FaultKind, Feed, RunPlan};
use super::report::{Digest, Lifecycle, Violation, WindowFigures};
use super::SimFailure;

/// First reconnect delay; it doubles per failed attempt up to [`REDIAL_MAX`].
const REDIAL_FIRST: Duration = Duration::from_millis(100);
const REDIAL_MAX: Duration = Duration::from_secs(1);
/// Sessions the server may hold at once: the live one, one still draining after its
/// peer's `Close`, and one more while a replacement is under way.
pub const MAX_SERVER_SESSIONS: usize = 3;
/// How long after the last fault delivery must have resumed: a dead session is noticed
/// within the idle timeout (3 s), redialled within the backoff cap (1 s), and then needs
/// a handshake and a round trip over links of at most ~300 ms with queues.
pub const CONVERGENCE_BOUND: Duration = Duration::from_secs(6);
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

struct FeedState {
    stream: u32,
    feed: Feed,
    resend: bool,
    next_at: Duration,
    next_seq: u64,
}

struct Client {
    alive: bool,
    incarnation: u32,
    clock: Duration,
    session: Option<Session>,
    /// An ended session whose streams wait for the next one.
    old: Option<Session>,
    redial_at: Option<Duration>,
    attempt: u32,
    nat_epoch: u16,
    feeds: Vec<FeedState>,
    closing: bool,
}

struct Server {
    alive: bool,
    clock: Duration,
    sessions: BTreeMap<u64, Session>,
    /// Connections that ended here: a late copy of their handshake is not a new peer
    /// (the secure layer's handshake timestamps refuse such replays).
    retired: BTreeSet<u64>,
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
}

impl World {
    pub fn new(plan: RunPlan) -> Result<Self, SimFailure> {
        let net = Net::new(&plan.links, plan.seed, plan.replay_window)?;
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
                alive: false,
                incarnation: 0,
                clock: Duration::ZERO,
                session: None,
                old: None,
                redial_at: None,
                attempt: 0,
                nat_epoch: 0,
                feeds,
                closing: false,
            },
            server: Server {
                alive: true,
                clock: Duration::ZERO,
                sessions: BTreeMap::new(),
                retired: BTreeSet::new(),
                paused: false,
            },
            ledger,
            rng: ChaCha8Rng::seed_from_u64(plan.seed ^ 0x000C_0FFE),
            digest: Digest::default(),
            scratch: Vec::with_capacity(2048),
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
            plan,
        };
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
                    self.now = self.end;
                    return;
                }
            } else {
                same = 0;
                last = t;
            }
            self.now = t;
            self.step();
        }
        self.now = until;
    }

    fn next_event(&self) -> Option<Duration> {
        let now = self.now;
        let mut t: Option<Duration> = None;
        let mut consider = |x: Option<Duration>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t: Duration| t.min(x)));
            }
        };
        consider(self.net.next_delivery());
        consider(self.schedule.first().map(|s| s.0));
        consider(self.client.redial_at);
        if !self.client.closing {
            consider(Some(self.plan.close_at));
        }
        let c = self.client.clock;
        let polled = self.client.session.iter().chain(self.client.old.iter());
        for s in polled.filter(|_| !self.client_muted) {
            consider(s.poll_timeout(now + c).map(|x| x.saturating_sub(c)));
        }
        if self.client.alive && !self.client.closing {
            for f in &self.client.feeds {
                if let Feed::Cbr { .. } = f.feed {
                    consider(Some(f.next_at));
                }
            }
        }
        let sc = self.server.clock;
        for s in self.server.sessions.values() {
            consider(s.poll_timeout(now + sc).map(|x| x.saturating_sub(sc)));
        }
        t.map(|t| t.max(now))
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
        if self.client.redial_at.is_some_and(|t| t <= now) {
            self.client.redial_at = None;
            self.redial();
        }
        if !self.client.closing && now >= self.plan.close_at {
            self.close_client();
        }
        let mut arrivals = std::mem::take(&mut self.arrivals);
        arrivals.clear();
        self.net.deliver(now, &mut arrivals);
        for d in arrivals.drain(..) {
            self.arrive(d);
        }
        self.arrivals = arrivals;
        self.feed();
        let c = now + self.client.clock;
        for s in self
            .client
            .session
            .iter_mut()
            .chain(self.client.old.iter_mut())
        {
            s.handle_timeout(c);
        }
        let sc = now + self.server.clock;
        for s in self.server.sessions.values_mut() {
            s.handle_timeout(sc);
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
                    && !self.client.alive =>
            {
                self.client_start(false)
            }
            FaultKind::ServerCrash if starts => self.server_kill(),
            FaultKind::ServerCrash if !holding(self, |k| matches!(k, FaultKind::ServerCrash)) => {
                self.server.alive = true
            }
            FaultKind::NatRebind => self.client.nat_epoch += 1,
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
        if !self.client.alive {
            return;
        }
        self.client.alive = false;
        self.client.session = None;
        self.client.old = None;
        self.client.redial_at = None;
        self.ledger
            .client_crashed(self.now, self.client.incarnation);
    }

    fn server_kill(&mut self) {
        if !self.server.alive {
            return;
        }
        self.server.alive = false;
        self.server.sessions.clear();
        self.ledger.server_crashed(self.now);
    }

    // ----- the client -----------------------------------------------------------------

    fn new_client_session(&mut self) -> Option<Session> {
        let now = self.now + self.client.clock;
        let specs = self
            .plan
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| ChannelSpec {
                local: i as u16,
                remote: server_addr(i),
                config: ChannelConfig {
                    congestion: l.congestion.clone(),
                    ..ChannelConfig::default()
                },
            })
            .collect();
        let aliases = (0..self.plan.links.len())
            .map(|i| client_addr(i, self.client.nat_epoch))
            .collect();
        let config = horde_proto::SessionConfig {
            seed: self.rng.gen(),
            ..self.plan.session.clone()
        };
        let conn = self.rng.gen::<u64>() | 1;
        match Session::connect(config, conn, 0, specs, aliases, now) {
            Ok(mut s) => {
                s.set_successor_expected(true);
                self.lifecycle.client_sessions += 1;
                Some(s)
            }
            Err(e) => {
                self.violations
                    .push(Violation::new("connect_failed", e.to_string()));
                None
            }
        }
    }

    /// Start the client process: a new incarnation with fresh streams.
    fn client_start(&mut self, first: bool) {
        if !first {
            self.client.incarnation += 1;
        }
        self.client.alive = true;
        self.client.attempt = 0;
        let Some(mut s) = self.new_client_session() else {
            return;
        };
        for st in &self.plan.streams {
            if let Err(e) = s.open_stream(st.id, st.config.clone()) {
                self.violations
                    .push(Violation::new("open_stream_failed", e.to_string()));
            }
        }
        for f in &mut self.client.feeds {
            f.next_seq = 0;
            f.next_at = self.now;
        }
        self.client.session = Some(s);
    }

    /// Open a new session to the server, carrying on the ended one's streams.
    fn redial(&mut self) {
        if !self.client.alive || self.client.closing {
            return;
        }
        let Some(mut old) = self.client.old.take() else {
            return;
        };
        let Some(mut s) = self.new_client_session() else {
            return;
        };
        s.inherit(&mut old, self.now + self.client.clock);
        self.lifecycle.reconnects += 1;
        let inc = self.client.incarnation;
        while let Some(e) = old.poll_event() {
            self.client_event(inc, &e);
        }
        self.client.session = Some(s);
    }

    fn close_client(&mut self) {
        self.client.closing = true;
        self.client.redial_at = None;
        let now = self.now + self.client.clock;
        if let Some(s) = self.client.session.as_mut() {
            s.close(now);
        }
        if let Some(old) = self.client.old.as_mut() {
            old.release();
        }
        self.flush();
    }

    fn feed(&mut self) {
        if !self.client.alive || self.client.closing {
            return;
        }
        let now = self.now + self.client.clock;
        let inc = self.client.incarnation;
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
                Feed::Bulk { size, depth } => match self.client.session.as_ref() {
                    Some(s) if s.is_connected() => (size, depth.saturating_sub(s.queued(stream))),
                    _ => continue,
                },
            };
            for _ in 0..count {
                let session = match (self.client.session.as_mut(), self.client.old.as_mut()) {
                    (Some(s), _) if !s.is_closed() || s.successor_expected() => s,
                    (_, Some(o)) => o,
                    _ => break,
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
                match session.send_adu(now, stream, Bytes::from(payload), Fields::default()) {
                    Ok(h) => {
                        if h.seq != key.seq {
                            self.violations.push(Violation::new(
                                "sequence",
                                format!("{key:?} got stream sequence {}", h.seq),
                            ));
                        }
                        fk.next_seq += 1;
                        self.ledger.queued(key, len, resend);
                    }
                    Err(e) => {
                        self.violations
                            .push(Violation::new("send_refused", format!("{key:?}: {e}")));
                        break;
                    }
                }
            }
        }
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
                self.client.attempt = 0;
                self.flow_blocked_now = false;
            }
            _ => {}
        }
    }

    // ----- the server -----------------------------------------------------------------

    fn accept(&mut self, d: Datagram) {
        let conn = wire::peek_conn(&d.bytes).unwrap_or(0);
        if self.server.retired.contains(&conn) {
            return;
        }
        let configs: Vec<ChannelConfig> = self
            .plan
            .links
            .iter()
            .map(|l| ChannelConfig {
                congestion: l.congestion.clone(),
                ..ChannelConfig::default()
            })
            .collect();
        let aliases = (0..self.plan.links.len()).map(server_addr).collect();
        let config = horde_proto::SessionConfig {
            seed: self.rng.gen(),
            ..self.plan.session.clone()
        };
        let now = self.now + self.server.clock;
        let Ok(mut s) = Session::accept(
            config,
            now,
            d.link as u16,
            d.from,
            d.bytes,
            aliases,
            Arc::new(move |id| configs.get(usize::from(id)).cloned().unwrap_or_default()),
        ) else {
            return;
        };
        s.set_receive_buffer(Some(self.plan.recv_buffer));
        self.lifecycle.server_sessions += 1;
        // One peer: its new handshake replaces whatever it had here before.
        let old: Vec<u64> = self.server.sessions.keys().copied().collect();
        for k in old {
            if let Some(mut o) = self.server.sessions.remove(&k) {
                if !o.is_closed() {
                    self.lifecycle.replaced += 1;
                }
                o.replaced(now);
                self.drain_server(k, &mut o);
                self.server.retired.insert(k);
            }
        }
        self.server.sessions.insert(s.conn_id(), s);
    }

    fn drain_server(&mut self, conn: u64, s: &mut Session) {
        while let Some(e) = s.poll_event() {
            digest_event(&mut self.digest, &e);
            if let Event::Received {
                stream,
                stream_seq,
                payload,
                ..
            } = &e
            {
                if self.resumed_after.is_none() && self.now >= self.plan.quiet_from {
                    self.resumed_after = Some(self.now - self.plan.quiet_from);
                }
                self.ledger
                    .server_received(self.now, conn, *stream, *stream_seq, payload);
            }
        }
    }

    // ----- packets --------------------------------------------------------------------

    fn arrive(&mut self, d: Datagram) {
        if d.dir == UP {
            if !self.server.alive {
                return;
            }
            let now = self.now + self.server.clock;
            let conn = wire::peek_conn(&d.bytes);
            match conn.and_then(|c| self.server.sessions.get_mut(&c)) {
                Some(s) => s.handle_datagram(now, d.link as u16, d.from, d.bytes),
                None if wire::is_hello(&d.bytes) => self.accept(d),
                None => {}
            }
        } else {
            if !self.client.alive || d.dst != client_addr(d.link, self.client.nat_epoch) {
                return; // nobody there, or a NAT binding that no longer exists
            }
            let now = self.now + self.client.clock;
            let conn = wire::peek_conn(&d.bytes);
            for s in self
                .client
                .session
                .iter_mut()
                .chain(self.client.old.iter_mut())
            {
                if Some(s.conn_id()) == conn {
                    s.handle_datagram(now, d.link as u16, d.from, d.bytes);
                    break;
                }
            }
        }
    }

    /// Drain every session's datagrams into the network and its events into the books.
    fn flush(&mut self) {
        let now = self.now;
        // The client.
        let inc = self.client.incarnation;
        let cnow = now + self.client.clock;
        let mut ended = None;
        for which in 0..2 {
            loop {
                let s = if which == 0 {
                    self.client.session.as_mut()
                } else {
                    self.client.old.as_mut()
                };
                let Some(s) = s.filter(|_| !self.client_muted) else {
                    break;
                };
                let Some(t) = s.poll_transmit(cnow, &mut self.scratch) else {
                    break;
                };
                let link = usize::from(t.local);
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
                self.send(Datagram {
                    link,
                    dir: UP,
                    from: client_addr(link, self.client.nat_epoch),
                    dst: t.dst,
                    bytes: Bytes::copy_from_slice(&self.scratch),
                    intact: true,
                    seal: 0,
                });
            }
            loop {
                let s = if which == 0 {
                    self.client.session.as_mut()
                } else {
                    self.client.old.as_mut()
                };
                let Some(e) = s.and_then(Session::poll_event) else {
                    break;
                };
                if let Event::Closed { reason } = e {
                    if which == 0 && reason != CloseReason::LocalClose {
                        ended = Some(reason);
                    }
                }
                self.client_event(inc, &e);
            }
        }
        if ended.is_some() && !self.client.closing {
            // The session died: keep it for its successor and dial again after a backoff.
            if let Some(s) = self.client.session.take() {
                if s.successor_expected() {
                    self.client.old = Some(s);
                    let backoff = REDIAL_FIRST
                        .saturating_mul(1 << self.client.attempt.min(10))
                        .min(REDIAL_MAX);
                    self.client.attempt += 1;
                    self.client.redial_at = Some(now + backoff);
                }
            }
        }
        // The server.
        let snow = now + self.server.clock;
        let conns: Vec<u64> = self.server.sessions.keys().copied().collect();
        for k in conns {
            let Some(mut s) = self.server.sessions.remove(&k) else {
                continue;
            };
            self.flush_server(snow, &mut s);
            self.drain_server(k, &mut s);
            if !self.server.paused {
                let unread = s.unread_bytes();
                if unread > 0 {
                    s.consumed(snow, unread);
                }
            }
            // Window updates the read just queued go out now.
            self.flush_server(snow, &mut s);
            if s.is_closed() && s.poll_timeout(snow).is_none() {
                self.server.retired.insert(k);
            } else {
                self.server.sessions.insert(k, s);
            }
        }
    }

    /// Sends every datagram a server session has queued, down the link it chose.
    fn flush_server(&mut self, snow: Duration, s: &mut Session) {
        while let Some(t) = s.poll_transmit(snow, &mut self.scratch) {
            let link = usize::from(t.local);
            self.send(Datagram {
                link,
                dir: DOWN,
                from: server_addr(link),
                dst: t.dst,
                bytes: Bytes::copy_from_slice(&self.scratch),
                intact: true,
                seal: 0,
            });
        }
    }

    fn send(&mut self, d: Datagram) {
        self.digest.add_u64(self.now.as_nanos() as u64);
        self.digest.add_u64((d.link * 2 + d.dir) as u64);
        self.digest.add(&d.bytes);
        if d.link < self.net.link_count() {
            self.net.send(self.now, d);
        } else {
            self.violations.push(Violation::new(
                "bad_interface",
                format!("a session sent on interface {}", d.link),
            ));
        }
    }

    // ----- invariants checked as the run goes ------------------------------------------

    /// Whether the client's sender, after this step, leaves a channel's open slot unused
    /// though it is connected, has ADUs queued and the peer's credit is not holding it
    /// back. Sessions schedule as soon as a slot and an ADU meet, so this is a sender
    /// that could send and does not; a channel without open slots is the limit instead.
    fn sender_idle(&self) -> bool {
        let Some(s) = self.client.session.as_ref() else {
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

    fn check_bounds(&mut self) {
        let mut found = None;
        if let Some(s) = self.client.session.as_ref().or(self.client.old.as_ref()) {
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
        if self.server.sessions.len() > MAX_SERVER_SESSIONS {
            found = Some(format!(
                "server holds {} sessions, bound {MAX_SERVER_SESSIONS}",
                self.server.sessions.len()
            ));
        }
        for s in self.server.sessions.values() {
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
