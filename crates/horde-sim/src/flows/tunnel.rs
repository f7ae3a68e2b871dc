//! A [`Carrier`] that tunnels the simulated hosts' IP packets through Horde.
//!
//! The client host's packets become ADUs of one stream of the vehicle's connection, the
//! server host's packets ADUs of one stream of the wired side's, and the two ends talk
//! over N simulated links, each a `horde-links` model per direction. This is the
//! simulator's half of PluriBus: each end is a [`VirtualHost`], the `horde-host` a real
//! tunnel runs (sealing, routing by crypto index, the touched walk and timer table),
//! with the stream's [`StreamConfig`] (ordering, loss recovery, queue limits) and the
//! scheduler taken from the scenario.
//!
//! The links, the clock and the datagrams inside them are a [`World`], which the flow
//! simulator's own event loop drives through the carrier: [`Carrier::deliver`] moves
//! the world's clock, hands arrived datagrams and due timers to the hosts, and
//! [`Carrier::next_delivery`] adds the hosts' timers to the world's next delivery,
//! so there is no second driver loop here.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_host::{ChannelTarget, HostEvent, SessionIdentity};
use horde_links::{LinkSpec, LinkStats};
use horde_policy::Fields;
use horde_proto::recovery::RecoveryStats;
use horde_proto::{
    ChannelConfig, EndpointConfig, Event, ServerConfig, Session, SessionConfig, StreamConfig,
};
use serde::Serialize;

use super::carrier::{Carrier, CarrierStats, Side};
use crate::engine::SchedulerFactory;
use crate::virtual_host::{VirtualHost, VirtualHostError};
use crate::workload::stream_seed;
use crate::world::{Arrival, World, DOWN, UP};

/// The stream carrying client-to-server packets.
pub const UP_STREAM: u32 = 1;
/// The stream carrying server-to-client packets.
pub const DOWN_STREAM: u32 = 2;

/// One path between the two tunnel ends.
#[derive(Debug, Clone, PartialEq)]
pub struct TunnelLink {
    pub name: String,
    /// Client to server.
    pub up: LinkSpec,
    /// Server to client.
    pub down: LinkSpec,
    /// The client's channel on this link (its congestion control paces `up`).
    pub up_channel: ChannelConfig,
    /// The server's channel on this link.
    pub down_channel: ChannelConfig,
}

/// Everything a tunnel carrier is built from.
#[derive(Clone)]
pub struct TunnelSetup {
    pub links: Vec<TunnelLink>,
    pub session: SessionConfig,
    /// Configuration of both streams (one per direction).
    pub stream: StreamConfig,
    pub scheduler: SchedulerFactory,
    pub seed: u64,
    /// Where relative trace paths are resolved.
    pub base_dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum TunnelError {
    #[error("tunnel link {link}: {source}")]
    Link {
        link: String,
        #[source]
        source: horde_links::LinkError,
    },
    #[error("a tunnel needs at least one link")]
    NoLinks,
    #[error("tunnel ends: {0}")]
    Host(#[from] VirtualHostError),
}

/// IP packets through the tunnel in one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DirectionStats {
    /// IP packets handed to the tunnel entry.
    pub packets_in: u64,
    pub bytes_in: u64,
    /// IP packets that came out of the tunnel exit.
    pub packets_out: u64,
    pub bytes_out: u64,
    /// IP packets the entry session refused (queue full, too large, closed).
    pub refused: u64,
    /// Datagrams the entry session sent on all links (data, acks, probes, coding).
    pub datagrams: u64,
    /// Their bytes, Horde headers included.
    pub wire_bytes: u64,
}

impl DirectionStats {
    /// The fraction of IP packets that entered and never came out.
    pub fn end_host_loss(&self) -> f64 {
        if self.packets_in == 0 {
            0.0
        } else {
            1.0 - (self.packets_out as f64 / self.packets_in as f64).min(1.0)
        }
    }

    /// Bytes the tunnel sent per IP byte offered, less one: headers, acks, probes and
    /// any redundancy the stream's recovery added.
    pub fn overhead(&self) -> f64 {
        if self.bytes_in == 0 {
            0.0
        } else {
            self.wire_bytes as f64 / self.bytes_in as f64 - 1.0
        }
    }
}

/// What the streams' loss recovery did, both directions together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RecoveryCounts {
    /// Data ADUs sent (first copies) and their payload bytes.
    pub data_sent: u64,
    pub data_bytes: u64,
    /// Coded ADUs sent (XOR or parity) and their bytes.
    pub coded_sent: u64,
    pub coded_bytes: u64,
    pub retransmitted: u64,
    /// Data ADUs the receivers rebuilt from coded ones.
    pub recovered: u64,
}

impl RecoveryCounts {
    fn add(&mut self, s: &RecoveryStats) {
        self.data_sent += s.data_sent;
        self.data_bytes += s.data_bytes;
        self.coded_sent += s.coded_sent;
        self.coded_bytes += s.coded_bytes;
        self.retransmitted += s.retransmitted;
        self.recovered += s.recovered;
    }

    /// Coded ADUs among all ADUs sent (the paper's "coded fraction", §6.3.1).
    pub fn coded_fraction(&self) -> f64 {
        let all = self.data_sent + self.coded_sent + self.retransmitted;
        self.coded_sent as f64 / all.max(1) as f64
    }

    /// Coded bytes sent per data byte sent.
    pub fn coding_overhead(&self) -> f64 {
        self.coded_bytes as f64 / self.data_bytes.max(1) as f64
    }
}

/// Counters of the whole tunnel.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TunnelStats {
    pub up: DirectionStats,
    pub down: DirectionStats,
    /// Absent when the streams run without recovery.
    pub recovery: Option<RecoveryCounts>,
    /// Per link: (name, up, down) counters of the link models.
    #[serde(skip)]
    pub links: Vec<(String, LinkStats, LinkStats)>,
}

/// What an IP packet found waiting in the tunnel entry's stream queue (bytes, after the
/// entry sent what it could): where traffic the links cannot take waits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct QueueTrace {
    /// IP packets that entered.
    pub arrivals: u64,
    /// Sum over arrivals of the bytes queued behind which each waits.
    pub queued_sum: u64,
    pub queued_peak: u64,
}

impl QueueTrace {
    fn on_arrival(&mut self, queued: usize) {
        self.arrivals += 1;
        self.queued_sum += queued as u64;
        self.queued_peak = self.queued_peak.max(queued as u64);
    }

    /// Mean bytes queued when an IP packet entered.
    pub fn mean(&self) -> f64 {
        self.queued_sum as f64 / self.arrivals.max(1) as f64
    }
}

/// The two tunnel ends, each a [`VirtualHost`] (the client's connection, and the
/// server's once the client's hello reached it), and the links.
pub struct TunnelCarrier {
    /// The clock and the links, `[up, down]` each, carrying sealed datagrams; link `i` is
    /// both ends' channel `i` and interface `i`.
    world: World<Bytes>,
    /// `[client, server]`.
    ends: [VirtualHost; 2],
    client_key: u64,
    server_key: Option<u64>,
    /// Reference mode: every connection is walked at every step.
    walk_all: bool,
    setup: TunnelSetup,
    stats: TunnelStats,
    arrivals: Vec<Arrival<Bytes>>,
    /// Received packets not yet handed out.
    held: Vec<(Side, Vec<u8>)>,
    /// The entries' stream queues: `[up, down]`.
    queues: [QueueTrace; 2],
}

const CLIENT: usize = 0;
const SERVER: usize = 1;
/// The service the server listens on.
const SERVICE: u32 = 1;

/// An address label for one end's interface: never used for real traffic.
fn label(server: bool, iface: u16) -> SocketAddr {
    SocketAddr::from((
        Ipv4Addr::new(127, 20 + u8::from(server), 0, iface as u8),
        5000,
    ))
}

impl TunnelCarrier {
    pub fn new(setup: TunnelSetup) -> Result<Self, TunnelError> {
        if setup.links.is_empty() {
            return Err(TunnelError::NoLinks);
        }
        let mut links = Vec::new();
        for (i, l) in setup.links.iter().enumerate() {
            let build = |spec: &LinkSpec, dir: u32| {
                spec.build(
                    stream_seed(setup.seed ^ 0x7u64 << 40, 2 * i as u32 + dir),
                    &setup.base_dir,
                )
                .map_err(|source| TunnelError::Link {
                    link: l.name.clone(),
                    source,
                })
            };
            links.push([build(&l.up, 0)?, build(&l.down, 1)?]);
        }
        let n = setup.links.len();
        let end = |role: u64| {
            let endpoint = EndpointConfig {
                session: setup.session.clone(),
                scheduler: Some(setup.scheduler.clone()),
                ..EndpointConfig::default()
            };
            VirtualHost::new(stream_seed(setup.seed, 0x7f) ^ role, endpoint, n)
        };
        let mut ends = [end(0), end(1)];
        let aliases = |server| (0..n as u16).map(|i| label(server, i)).collect();
        let configs: Vec<ChannelConfig> =
            setup.links.iter().map(|l| l.down_channel.clone()).collect();
        let client_public = ends[CLIENT].public();
        ends[SERVER].listen(
            SERVICE,
            ServerConfig {
                channel_config: Arc::new(move |id| {
                    configs.get(usize::from(id)).cloned().unwrap_or_default()
                }),
                seed: Some(stream_seed(setup.seed, 0x7e)),
                aliases: Some(aliases(true)),
            },
            client_public,
        );
        let targets = setup
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| ChannelTarget {
                interface: i,
                remote: label(true, i as u16),
                config: l.up_channel.clone(),
            })
            .collect();
        let identity = SessionIdentity {
            conn_id: stream_seed(setup.seed, 0x7d) | 1,
            seed: stream_seed(setup.seed, 0x7c),
            aliases: aliases(false),
        };
        let [client, server] = &mut ends;
        let client_key =
            VirtualHost::connect(client, server, Duration::ZERO, SERVICE, targets, identity)?;
        client.open_stream(Duration::ZERO, client_key, UP_STREAM, setup.stream.clone())?;
        let mut c = TunnelCarrier {
            world: World::new(links),
            ends,
            client_key,
            server_key: None,
            walk_all: false,
            stats: TunnelStats::default(),
            arrivals: Vec::new(),
            held: Vec::new(),
            queues: [QueueTrace::default(); 2],
            setup,
        };
        // The hello leaves at once.
        c.pump(&mut Vec::new());
        Ok(c)
    }

    /// Reference mode: visit both ends' connections at every step, as if each had been
    /// touched, instead of only those touched or due. A run must come out the same.
    pub fn set_walk_all(&mut self, on: bool) {
        self.walk_all = on;
    }

    /// Counters so far.
    pub fn tunnel_stats(&self) -> TunnelStats {
        let mut s = self.stats.clone();
        s.links = self
            .setup
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let stats = |dir| self.world.link_stats(i, dir);
                (l.name.clone(), stats(UP), stats(DOWN))
            })
            .collect();
        // Each end's stats of both streams: its sending side of one, receiving of the other.
        let client = Some(self.client_session());
        let server = self.server_session();
        let ends = [
            client.and_then(|x| x.recovery_stats(UP_STREAM)),
            client.and_then(|x| x.recovery_stats(DOWN_STREAM)),
            server.and_then(|x| x.recovery_stats(DOWN_STREAM)),
            server.and_then(|x| x.recovery_stats(UP_STREAM)),
        ];
        if ends.iter().any(Option::is_some) {
            let mut r = RecoveryCounts::default();
            for e in ends.iter().flatten() {
                r.add(e);
            }
            s.recovery = Some(r);
        }
        s
    }

    /// What IP packets found in the entries' stream queues: `[up, down]`.
    pub fn queue_traces(&self) -> [QueueTrace; 2] {
        self.queues
    }

    /// The client (vehicle) session.
    pub fn client_session(&self) -> &Session {
        self.ends[CLIENT]
            .session(self.client_key)
            .expect("the client's connection lives as long as the carrier")
    }

    /// The server session, once the client's hello reached it.
    pub fn server_session(&self) -> Option<&Session> {
        self.ends[SERVER].session(self.server_key?)
    }

    /// Hand a datagram that left its link to the host at its far end; the server opens
    /// its stream as the hello opens the connection.
    fn arrive(&mut self, a: Arrival<Bytes>) {
        let now = self.world.now();
        let to = if a.dir == DOWN { CLIENT } else { SERVER };
        let from = label(to == CLIENT, a.link as u16);
        self.ends[to].receive(now, a.link, from, &a.payload);
        while let Some(e) = self.ends[to].poll_host_event() {
            if let HostEvent::Accepted { key, .. } = e {
                let stream = self.setup.stream.clone();
                if self.ends[SERVER]
                    .open_stream(now, key, DOWN_STREAM, stream)
                    .is_ok()
                {
                    self.server_key = Some(key);
                }
            }
        }
    }

    /// Move every datagram both ends want to send into the links, and every ADU they
    /// received into `out`.
    fn pump(&mut self, out: &mut Vec<(Side, Vec<u8>)>) {
        let now = self.world.now();
        for end in [CLIENT, SERVER] {
            let (dir, stats) = if end == CLIENT {
                (UP, &mut self.stats.up)
            } else {
                (DOWN, &mut self.stats.down)
            };
            while let Some(t) = self.ends[end].poll_sealed(now) {
                stats.datagrams += 1;
                stats.wire_bytes += t.plain_len as u64;
                let link = usize::from(t.transmit.channel);
                if link >= self.world.link_count() {
                    continue;
                }
                // The link is charged the protocol's bytes (see `virtual_host`).
                let bytes = Bytes::copy_from_slice(t.sealed);
                self.world.offer(link, dir, t.plain_len as u32, None, bytes);
            }
            while let Some(e) = self.ends[end].poll_event() {
                if let HostEvent::Conn {
                    event: Event::Received { payload, .. },
                    ..
                } = e
                {
                    // Received by the server means it goes to the server host.
                    let (to, stats) = if end == CLIENT {
                        (Side::Client, &mut self.stats.down)
                    } else {
                        (Side::Server, &mut self.stats.up)
                    };
                    stats.packets_out += 1;
                    stats.bytes_out += payload.len() as u64;
                    out.push((to, payload.to_vec()));
                }
            }
        }
    }
}

impl Carrier for TunnelCarrier {
    fn send(&mut self, now: Duration, from: Side, packet: Vec<u8>) {
        self.world.advance_to(now);
        let now = self.world.now();
        let (end, key, stream, dir) = match from {
            Side::Client => (CLIENT, Some(self.client_key), UP_STREAM, &mut self.stats.up),
            Side::Server => (SERVER, self.server_key, DOWN_STREAM, &mut self.stats.down),
        };
        dir.packets_in += 1;
        dir.bytes_in += packet.len() as u64;
        let sent = key.map(|key| {
            self.ends[end].send_adu(now, key, stream, Bytes::from(packet), Fields::new())
        });
        if !matches!(sent, Some(Ok(_))) {
            dir.refused += 1;
        }
        // Sending happens at once, as a tunnel entry forwards; anything received on the
        // way goes out with the next `deliver`.
        let mut held = std::mem::take(&mut self.held);
        self.pump(&mut held);
        self.held = held;
        let queued = match from {
            Side::Client => Some(self.client_session()),
            Side::Server => self.server_session(),
        }
        .map_or(0, |s| s.queued_bytes(stream));
        self.queues[end].on_arrival(queued);
    }

    fn next_delivery(&self) -> Option<Duration> {
        let now = self.world.now();
        let timers = self.ends.iter().map(|e| e.poll_timeout(now));
        let held = (!self.held.is_empty()).then_some(now);
        [self.world.next_delivery()]
            .into_iter()
            .chain(timers)
            .chain([held])
            .flatten()
            .min()
    }

    fn deliver(&mut self, now: Duration, out: &mut Vec<(Side, Vec<u8>)>) {
        self.world.advance_to(now);
        let now = self.world.now();
        let mut arrivals = std::mem::take(&mut self.arrivals);
        self.world.deliver(&mut arrivals);
        for a in arrivals.drain(..) {
            self.arrive(a);
        }
        self.arrivals = arrivals;
        for end in &mut self.ends {
            if self.walk_all {
                end.touch_all();
            }
            end.handle_timeout(now);
        }
        out.append(&mut self.held);
        self.pump(out);
    }

    fn stats(&self) -> CarrierStats {
        let sum = |dir: usize| {
            (0..self.world.link_count())
                .map(|i| self.world.link_stats(i, dir))
                .fold(LinkStats::default(), |a, b| LinkStats {
                    offered: a.offered + b.offered,
                    queue_drops: a.queue_drops + b.queue_drops,
                    lost: a.lost + b.lost,
                    delivered: a.delivered + b.delivered,
                    bytes_delivered: a.bytes_delivered + b.bytes_delivered,
                })
        };
        CarrierStats {
            up: sum(UP),
            down: sum(DOWN),
        }
    }
}
