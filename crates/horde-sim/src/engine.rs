//! The discrete-event driver: `horde-host` hosts running `horde-proto` sessions, a link model per
//! channel per direction, workloads feeding streams, and a metrics collector watching
//! it all, on a nanosecond virtual clock.
//!
//! The clock, the links and the datagrams inside them are a [`World`]; every step
//! advances it to the earliest of: a packet leaving a link, a session timer, a
//! workload's next frame, or the end. Everything is kept in ordered containers
//! and every random draw comes from seeds derived from the run's seed, so the same
//! [`Topology`] and seed give the same run, bit for bit.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_host::{ChannelTarget, HostEvent, HostTransmit, SessionIdentity};
use horde_links::LinkSpec;
use horde_policy::{Objective, Value};
use horde_proto::wire;
use horde_proto::{
    ChannelConfig, EndpointConfig, Event, NackReason, ServerConfig, Session, SessionConfig,
    StreamConfig,
};
use thiserror::Error;

use crate::metrics::{Metrics, MetricsChannel, Report};
use crate::virtual_host::{VirtualHost, VirtualHostError};
use crate::workload::{stream_seed, AduSpec, Workload, WorkloadSpec};
use crate::world::{earliest, Arrival, World};

/// One channel between two hosts: settings of its endpoints and a link per direction.
#[derive(Debug, Clone)]
pub struct ChannelSetup {
    pub name: String,
    /// Host indices: `a` opens the session (client), `b` accepts it.
    pub a: usize,
    pub b: usize,
    pub config: ChannelConfig,
    /// Link from `a` to `b`.
    pub up: LinkSpec,
    /// Link from `b` to `a`.
    pub down: LinkSpec,
}

/// One stream: who sends it, how it is configured, what feeds it, what it wants.
#[derive(Debug, Clone)]
pub struct StreamSetup {
    pub id: u32,
    pub from: usize,
    pub to: usize,
    pub config: StreamConfig,
    pub workload: WorkloadSpec,
    pub objectives: Vec<Arc<dyn Objective>>,
}

/// Builds a scheduler for each session.
pub use horde_proto::SchedulerFactory;

/// A fully resolved simulation: what a scenario file becomes after validation.
#[derive(Clone)]
pub struct Topology {
    pub hosts: Vec<String>,
    pub channels: Vec<ChannelSetup>,
    pub streams: Vec<StreamSetup>,
    pub session: SessionConfig,
    pub scheduler: SchedulerFactory,
    pub seed: u64,
    pub duration: Duration,
    /// Where relative paths (traces) are resolved.
    pub base_dir: PathBuf,
}

#[derive(Debug, Error)]
pub enum SimError {
    #[error("channel {channel}: {source}")]
    Link {
        channel: String,
        #[source]
        source: horde_links::LinkError,
    },
    #[error("stream {stream}: {message}")]
    Stream { stream: u32, message: String },
    #[error("channel {channel}: joins a host to itself")]
    Loop { channel: String },
    #[error("stream {stream}: no channel between its hosts")]
    NoPath { stream: u32 },
    #[error("session: {0}")]
    Session(#[from] horde_proto::SessionError),
    #[error("host: {0}")]
    Host(VirtualHostError),
}

impl From<VirtualHostError> for SimError {
    fn from(e: VirtualHostError) -> Self {
        match e {
            VirtualHostError::Host(horde_host::HostError::Session(e)) => SimError::Session(e),
            e => SimError::Host(e),
        }
    }
}

/// A datagram inside a link, as the world carries it.
struct InFlight {
    to_host: usize,
    to_iface: u16,
    from: SocketAddr,
    bytes: Bytes,
    sent_at: Duration,
    /// The global channel, if the packet crosses it in its `up` direction.
    up_channel: Option<usize>,
}

/// A connection between two hosts and the channels it uses.
struct Pair {
    client: usize,
    server: usize,
    /// Global channel indices, in the session's channel-id order.
    channels: Vec<usize>,
    /// The connection's key in the client host.
    client_key: u64,
    /// Its key in the server host, once the client's hello has opened it there.
    server_key: Option<u64>,
}

impl Pair {
    /// Whether connection `key` of host `host` is this pair's.
    fn holds(&self, host: usize, key: u64) -> bool {
        (self.client == host && self.client_key == key)
            || (self.server == host && self.server_key == Some(key))
    }

    /// The key of this pair's connection on its client (`forward`) or server side.
    fn key(&self, forward: bool) -> Option<u64> {
        if forward {
            Some(self.client_key)
        } else {
            self.server_key
        }
    }

    /// The host on its client (`forward`) or server side.
    fn host(&self, forward: bool) -> usize {
        if forward {
            self.client
        } else {
            self.server
        }
    }
}

struct StreamRun {
    setup: StreamSetup,
    pair: usize,
    /// Whether the stream flows client -> server in its pair.
    forward: bool,
    workload: Box<dyn Workload>,
    /// A cycle's slots on the stream's fixed-rate channels ([`bulk_low_water`]).
    cbr_slots: usize,
    /// With periodic cycles: the cycle period plus the look-ahead, in seconds, and the
    /// wire bytes of the smallest full slot of the stream's channels, from which
    /// [`period_low_water`] follows the channels' rates.
    period: Option<(f64, f64)>,
}

/// How many slots a periodic cycle can issue now over `session`'s channels beyond what
/// [`bulk_low_water`] counts for fixed-rate ones: for each other channel, those open
/// now, and at its rate (with a quarter to spare, as the cycle projects) one per
/// `slot_wire` bytes over `horizon_s`, plus two. A bulk stream with fewer waiting would
/// leave slots of the period empty; one with more makes its ADUs wait longer.
fn period_low_water(session: &Session, now: Duration, horizon_s: f64, slot_wire: f64) -> usize {
    session
        .channels()
        .iter()
        .filter(|c| c.congestion_control() != "cbr")
        .map(|c| c.open_slots(now) + (c.rate() * 1.25 * horizon_s / slot_wire).ceil() as usize + 2)
        .sum()
}

/// Bulk sources are topped up while fewer than this many of their ADUs wait in Horde, or
/// fewer than one cycle's slots (`bulk_low_water`, and `period_low_water` with periodic
/// cycles), whichever is more.
const BULK_LOW_WATER: usize = 16;

/// How many slots, real and phantom, one scheduling cycle can offer on `channels` (CBR
/// channels only: their rate is known; an AIMD channel's is not, and adds nothing), so
/// that a bulk stream never has fewer ADUs waiting than a cycle could take from it (the
/// workload contract in docs/scenarios.md). A CBR channel banks at most a cycle and a
/// slot of tokens and predicts phantoms for the look-ahead.
fn bulk_low_water(topo: &Topology, channels: &[usize]) -> usize {
    let horizon = topo.session.cycle_ms.max(0.0) + topo.session.lookahead_ms.max(0.0);
    channels
        .iter()
        .map(|&g| match topo.channels[g].config.congestion {
            horde_proto::CcConfig::Cbr { kbps, .. } if kbps > 0.0 => {
                let wire = f64::from(topo.channels[g].config.mtu) + wire::DATA_HEADER_LEN as f64;
                let period_ms = wire * 8.0 / kbps;
                (horizon / period_ms).ceil() as usize + 2
            }
            _ => 0,
        })
        .sum()
}

pub struct Simulation {
    /// The clock, a link per channel and direction (`up` from the channel's `a` to its
    /// `b`), and the datagrams inside them.
    world: World<InFlight>,
    end: Duration,
    topo: Topology,
    /// The hosts, each running every connection it has.
    hosts: Vec<VirtualHost>,
    pairs: Vec<Pair>,
    /// Per global channel: the metrics id.
    metric_channels: Vec<MetricsChannel>,
    streams: Vec<StreamRun>,
    metrics: Metrics,
    arrivals: Vec<Arrival<InFlight>>,
    adu_specs: Vec<AduSpec>,
    /// Every connection is walked at every step, not only those something happened to.
    walk_all: bool,
}

/// An address label for host `h`, interface `i`. Never used for real traffic.
fn label(host: usize, iface: u16) -> SocketAddr {
    SocketAddr::from((
        Ipv4Addr::new(127, 10 + host as u8, (iface >> 8) as u8, iface as u8),
        5000,
    ))
}

/// The metrics id of ADU `stream_seq` of `stream` (stream ids are unique in a
/// topology). A function rather than a table, so that nothing per ADU outlives the ADU.
/// Sequence numbers are kept to 32 bits: four billion ADUs per stream.
fn adu_id(stream: u32, stream_seq: u64) -> u64 {
    (u64::from(stream) << 32) | (stream_seq & 0xFFFF_FFFF)
}

/// A seed for component `k` of kind `kind`, derived from the run's seed.
fn derive_seed(seed: u64, kind: u64, k: u64) -> u64 {
    stream_seed(seed ^ kind.wrapping_mul(0xA24B_AED4_963E_E407), k as u32)
}

impl Simulation {
    pub fn new(topo: Topology) -> Result<Self, SimError> {
        let mut metrics = Metrics::new();
        let mut links = Vec::new();
        let mut metric_channels = Vec::new();
        for (i, c) in topo.channels.iter().enumerate() {
            let build = |spec: &LinkSpec, dir: u64| {
                spec.build(derive_seed(topo.seed, 1 + dir, i as u64), &topo.base_dir)
                    .map_err(|source| SimError::Link {
                        channel: c.name.clone(),
                        source,
                    })
            };
            links.push([build(&c.up, 0)?, build(&c.down, 1)?]);
            metric_channels.push(metrics.add_channel(&c.name));
        }

        // One session per pair of hosts that share channels; the `a` side of the pair's
        // first channel opens it.
        let mut groups: Vec<(usize, usize, Vec<usize>)> = Vec::new();
        for (i, c) in topo.channels.iter().enumerate() {
            if c.a == c.b {
                return Err(SimError::Loop {
                    channel: c.name.clone(),
                });
            }
            let same = |&&mut (x, y, _): &&mut (usize, usize, Vec<usize>)| {
                (x == c.a && y == c.b) || (x == c.b && y == c.a)
            };
            match groups.iter_mut().find(same) {
                Some(g) => g.2.push(i),
                None => groups.push((c.a, c.b, vec![i])),
            }
        }
        // Pair k's connection asks for service k at its server, which sets its session
        // up with that pair's channels, aliases and seed: seeds are fixed per pair, not by
        // arrival order. A host has as many interfaces as its largest pair has channels.
        let mut interfaces = vec![0; topo.hosts.len()];
        for (a, b, channels) in &groups {
            for h in [*a, *b] {
                interfaces[h] = interfaces[h].max(channels.len());
            }
        }
        let mut hosts: Vec<VirtualHost> = interfaces
            .iter()
            .enumerate()
            .map(|(h, &n)| {
                let endpoint = EndpointConfig {
                    session: topo.session.clone(),
                    scheduler: Some(topo.scheduler.clone()),
                    ..EndpointConfig::default()
                };
                VirtualHost::new(derive_seed(topo.seed, 13, h as u64), endpoint, n.max(1))
            })
            .collect();
        let mut pairs = Vec::new();
        for (k, (client, server, channels)) in groups.into_iter().enumerate() {
            let targets = channels
                .iter()
                .enumerate()
                .map(|(iface, &g)| ChannelTarget {
                    interface: iface,
                    remote: label(server, iface as u16),
                    config: topo.channels[g].config.clone(),
                })
                .collect();
            let aliases = |host| (0..channels.len() as u16).map(|i| label(host, i)).collect();
            let configs: Vec<ChannelConfig> = channels
                .iter()
                .map(|&g| topo.channels[g].config.clone())
                .collect();
            let client_public = hosts[client].public();
            hosts[server].listen(
                k as u32,
                ServerConfig {
                    channel_config: Arc::new(move |id| {
                        configs.get(usize::from(id)).cloned().unwrap_or_default()
                    }),
                    seed: Some(derive_seed(topo.seed, 12, k as u64)),
                    aliases: Some(aliases(server)),
                },
                client_public,
            );
            let identity = SessionIdentity {
                conn_id: derive_seed(topo.seed, 10, k as u64) | 1,
                seed: derive_seed(topo.seed, 11, k as u64),
                aliases: aliases(client),
            };
            let (c, s) = two_mut(&mut hosts, client, server);
            let client_key =
                VirtualHost::connect(c, s, Duration::ZERO, k as u32, targets, identity)?;
            pairs.push(Pair {
                client,
                server,
                channels,
                client_key,
                server_key: None,
            });
        }

        let mut streams = Vec::new();
        for s in &topo.streams {
            let pair = pairs
                .iter()
                .position(|p| {
                    (p.client == s.from && p.server == s.to)
                        || (p.client == s.to && p.server == s.from)
                })
                .ok_or(SimError::NoPath { stream: s.id })?;
            let forward = pairs[pair].client == s.from;
            // A channel's mtu is the ADU bytes one slot carries (the header goes on top).
            let max_adu = pairs[pair]
                .channels
                .iter()
                .map(|&g| topo.channels[g].config.mtu)
                .max()
                .unwrap_or(0);
            let workload = s
                .workload
                .build(stream_seed(topo.seed, s.id), max_adu)
                .map_err(|e| SimError::Stream {
                    stream: s.id,
                    message: e.to_string(),
                })?;
            metrics.add_stream(s.id);
            if forward {
                let (host, key) = (&mut hosts[pairs[pair].client], pairs[pair].client_key);
                host.open_stream(Duration::ZERO, key, s.id, s.config.clone())?;
                for o in &s.objectives {
                    host.inject(Duration::ZERO, key, o.clone());
                }
            }
            let cbr_slots = bulk_low_water(&topo, &pairs[pair].channels);
            let period = (topo.session.cycle_ms > 0.0).then(|| {
                let horizon = (topo.session.cycle_ms + topo.session.lookahead_ms.max(0.0)) / 1e3;
                let mtu = pairs[pair]
                    .channels
                    .iter()
                    .map(|&g| topo.channels[g].config.mtu)
                    .min()
                    .unwrap_or(0);
                (horizon, f64::from(mtu) + wire::DATA_HEADER_LEN as f64)
            });
            streams.push(StreamRun {
                setup: s.clone(),
                pair,
                forward,
                workload,
                cbr_slots,
                period,
            });
        }

        Ok(Self {
            world: World::new(links),
            end: topo.duration,
            topo,
            hosts,
            pairs,
            metric_channels,
            streams,
            metrics,
            arrivals: Vec::new(),
            adu_specs: Vec::new(),
            walk_all: false,
        })
    }

    pub fn now(&self) -> Duration {
        self.world.now()
    }

    pub fn duration(&self) -> Duration {
        self.end
    }

    /// The interval of the goodput series in the report (default 1 s); set before
    /// [`Simulation::run`].
    pub fn set_goodput_interval(&mut self, interval: Duration) {
        self.metrics.set_goodput_interval(interval);
    }

    /// Walk every connection of every host at every step, as if something had happened
    /// to each: the reference run that checks the hosts' touched walk (and the sessions'
    /// deadlines it relies on) misses nothing. Same results, more work.
    pub fn set_walk_all(&mut self, on: bool) {
        self.walk_all = on;
    }

    /// Everything measured so far (the raw events behind the [`Report`]).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Run to the end, calling `progress` with the virtual time about once per
    /// simulated second.
    pub fn run(&mut self, mut progress: impl FnMut(Duration)) -> Report {
        let mut next_tick = Duration::ZERO;
        let mut arrivals = std::mem::take(&mut self.arrivals);
        self.step_sessions();
        while let Some(t) = self
            .world
            .step(self.next_driver_event(), self.end, &mut arrivals)
        {
            if t >= next_tick {
                progress(t);
                next_tick = t + Duration::from_secs(1);
            }
            for a in arrivals.drain(..) {
                self.arrive(a);
            }
            self.feed_workloads();
            for h in &mut self.hosts {
                if self.walk_all {
                    h.touch_all();
                }
                h.handle_timeout(t);
            }
            self.step_sessions();
        }
        self.arrivals = arrivals;
        self.world.advance_to(self.end);
        progress(self.end);
        for i in 0..self.world.link_count() {
            let (up, down) = (self.world.link_stats(i, 0), self.world.link_stats(i, 1));
            self.metrics
                .link_stats(self.metric_channels[i], sum_link_stats(up, down));
        }
        self.metrics.report(self.end)
    }

    /// The earliest of the hosts' timers and the workloads' next frames (the world
    /// adds its links' deliveries).
    fn next_driver_event(&self) -> Option<Duration> {
        let now = self.world.now();
        let mut t = None;
        for h in &self.hosts {
            t = earliest(t, h.poll_timeout(now));
        }
        for s in &self.streams {
            t = earliest(t, s.workload.next_at());
        }
        t
    }

    /// A datagram out of its link: counted, then handed to its host.
    fn arrive(&mut self, a: Arrival<InFlight>) {
        let pkt = a.payload;
        if let Some(g) = pkt.up_channel {
            let delay = self.world.now().saturating_sub(pkt.sent_at);
            self.metrics
                .packet_delivered(self.metric_channels[g], delay);
        }
        self.receive(pkt);
    }

    fn receive(&mut self, pkt: InFlight) {
        let now = self.world.now();
        let host = pkt.to_host;
        self.hosts[host].receive(now, usize::from(pkt.to_iface), pkt.from, &pkt.bytes);
        // A hello that opened a connection: its pair's streams from this side open at
        // once, before the workloads are fed.
        while let Some(e) = self.hosts[host].poll_host_event() {
            self.host_event(host, now, e);
        }
    }

    /// One of host `host`'s events.
    fn host_event(&mut self, host: usize, now: Duration, e: HostEvent) {
        match e {
            HostEvent::Accepted { key, service, .. } => {
                let pi = service as usize;
                let h = &mut self.hosts[host];
                for st in self
                    .streams
                    .iter()
                    .filter(|st| st.pair == pi && !st.forward)
                {
                    let _ = h.open_stream(now, key, st.setup.id, st.setup.config.clone());
                    for o in &st.setup.objectives {
                        h.inject(now, key, o.clone());
                    }
                }
                self.pairs[pi].server_key = Some(key);
            }
            HostEvent::Conn { event, .. } => record_event(&mut self.metrics, now, event),
            HostEvent::Connected { .. }
            | HostEvent::ConnectFailed { .. }
            | HostEvent::Removed { .. } => {}
        }
    }

    fn feed_workloads(&mut self) {
        let now = self.world.now();
        for k in 0..self.streams.len() {
            let st = &mut self.streams[k];
            let p = &self.pairs[st.pair];
            let host = &mut self.hosts[p.host(st.forward)];
            let Some(key) = p.key(st.forward) else {
                continue;
            };
            let Some(session) = host.session(key) else {
                continue;
            };
            self.adu_specs.clear();
            if st.workload.is_bulk() {
                if session.is_connected() {
                    // Top up to the low-water mark at once: a cycle may have taken many.
                    let slots = match st.period {
                        Some((horizon, wire)) => {
                            st.cbr_slots + period_low_water(session, now, horizon, wire)
                        }
                        None => st.cbr_slots,
                    };
                    let low_water = slots.max(BULK_LOW_WATER);
                    let want = low_water.saturating_sub(session.queued(st.setup.id));
                    // A long period on fast channels can hold more slots than the stream's
                    // queue limit: stop short of it rather than have the queue drop its
                    // oldest ADUs.
                    let cap = st.period.map(|_| st.setup.config.max_queue_bytes);
                    let mut bytes = session.queued_bytes(st.setup.id);
                    let mut batch = 0;
                    while self.adu_specs.len() < want {
                        if cap.is_some_and(|cap| bytes + batch > cap) {
                            break;
                        }
                        let before = self.adu_specs.len();
                        st.workload.emit(now, &mut self.adu_specs);
                        if self.adu_specs.len() == before {
                            break;
                        }
                        batch = self.adu_specs[before..]
                            .iter()
                            .map(|a| a.size as usize)
                            .sum();
                        bytes += batch;
                    }
                }
            } else if st.workload.next_at().is_some_and(|t| t <= now) {
                st.workload.emit(now, &mut self.adu_specs);
            }
            for spec in self.adu_specs.drain(..) {
                let payload = Bytes::from(vec![0u8; spec.size as usize]);
                let frame_type = match spec.fields.get("frame_type") {
                    Some(Value::Str(t)) => t.chars().next(),
                    _ => None,
                };
                match host.send_adu(now, key, st.setup.id, payload, spec.fields) {
                    Ok(h) => {
                        let id = adu_id(h.stream, h.seq);
                        self.metrics.adu_inserted(h.stream, id, spec.size, spec.at);
                        if let Some(t) = frame_type {
                            self.metrics.adu_frame_type(id, t);
                        }
                    }
                    Err(e) => tracing::warn!(stream = st.setup.id, error = %e, "ADU rejected"),
                }
            }
        }
    }

    /// Drain every host's transmits into the links and its events into the metrics.
    fn step_sessions(&mut self) {
        let now = self.world.now();
        for host in 0..self.hosts.len() {
            while let Some(t) = self.hosts[host].poll_sealed(now) {
                let sent = &t.transmit;
                let Some(p) = self.pairs.iter().find(|p| p.holds(host, sent.conn)) else {
                    continue;
                };
                let g = p.channels[usize::from(sent.channel)];
                let to_host = if p.client == host { p.server } else { p.client };
                let flow = flow_key(host, to_host, sent.adus.iter().next().map(|a| a.stream));
                account_sent(
                    &mut self.metrics,
                    self.metric_channels[g],
                    now,
                    sent,
                    t.plain_len,
                );
                let dir = if host == self.topo.channels[g].a {
                    0
                } else {
                    1
                };
                let pkt = InFlight {
                    to_host,
                    to_iface: u16::from(sent.channel),
                    from: label(host, sent.iface as u16),
                    bytes: Bytes::copy_from_slice(t.sealed),
                    sent_at: now,
                    up_channel: (dir == 0).then_some(g),
                };
                // The link is charged the protocol's bytes (see `virtual_host`).
                let size = t.plain_len as u32;
                self.world.offer(g, dir, size, Some(&flow), pkt);
            }
            while let Some(e) = self.hosts[host].poll_event() {
                self.host_event(host, now, e);
            }
        }
    }
}

/// Tell the metrics what a datagram leaving on metrics channel `ch` carries: the
/// transmit names its ADUs.
fn account_sent(
    metrics: &mut Metrics,
    ch: MetricsChannel,
    now: Duration,
    t: &HostTransmit,
    len: usize,
) {
    match t.seq.filter(|_| !t.adus.is_empty()) {
        Some(seq) => {
            for a in t.adus.iter() {
                metrics.adu_sent(adu_id(a.stream, a.seq), ch, seq, now);
            }
        }
        None => metrics.control_sent(ch, len as u32),
    }
}

/// The flow a datagram belongs to, for links whose queue tells flows apart: the hosts
/// as addresses and the stream of its first ADU as the ports (a packed datagram goes
/// with its first ADU's stream; acks and other control datagrams form a flow of their
/// own per direction).
fn flow_key(from: usize, to: usize, stream: Option<u32>) -> horde_links::FlowKey {
    let addr = |h: usize| [10, (h >> 16) as u8, (h >> 8) as u8, h as u8];
    let (hi, lo) = match stream {
        Some(s) => (((s >> 16) as u16).wrapping_add(1), s as u16),
        None => (0, 0),
    };
    horde_links::FlowKey::udp(addr(from), hi, addr(to), lo)
}

/// Feed a session event to the metrics, naming ADUs by their (stream, stream_seq).
fn record_event(metrics: &mut Metrics, now: Duration, e: Event) {
    match e {
        // A late ack turns an earlier declared loss into a delivery.
        Event::Ack {
            stream, stream_seq, ..
        }
        | Event::LateAck {
            stream, stream_seq, ..
        } => metrics.adu_acked(adu_id(stream, stream_seq), now),
        Event::Nack {
            stream,
            stream_seq,
            reason,
            ..
        } => {
            let id = adu_id(stream, stream_seq);
            match reason {
                NackReason::Lost | NackReason::Abandoned => metrics.adu_nacked(id, now),
                NackReason::QueueOverflow | NackReason::Removed | NackReason::Closed => {
                    metrics.adu_dropped(id, now)
                }
            }
        }
        Event::Received {
            stream, stream_seq, ..
        } => metrics.adu_delivered(adu_id(stream, stream_seq), now),
        _ => {}
    }
}

fn sum_link_stats(a: horde_links::LinkStats, b: horde_links::LinkStats) -> horde_links::LinkStats {
    horde_links::LinkStats {
        offered: a.offered + b.offered,
        queue_drops: a.queue_drops + b.queue_drops,
        lost: a.lost + b.lost,
        delivered: a.delivered + b.delivered,
        bytes_delivered: a.bytes_delivered + b.bytes_delivered,
    }
}

/// Hosts `a` and `b` (distinct) of `hosts`, both mutable.
fn two_mut(hosts: &mut [VirtualHost], a: usize, b: usize) -> (&mut VirtualHost, &mut VirtualHost) {
    if a < b {
        let (lo, hi) = hosts.split_at_mut(b);
        (&mut lo[a], &mut hi[0])
    } else {
        let (lo, hi) = hosts.split_at_mut(a);
        (&mut hi[0], &mut lo[b])
    }
}
