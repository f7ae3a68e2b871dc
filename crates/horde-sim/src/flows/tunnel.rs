//! A [`Carrier`] that tunnels the simulated hosts' IP packets through Horde.
//!
//! The client host's packets become ADUs of one stream of a client (vehicle) session,
//! the server host's packets ADUs of one stream of the server (wired side) session, and
//! the two sessions talk over N simulated links, each a `horde-links` model per
//! direction. This is the simulator's half of PluriBus: the same `horde-proto` code a
//! real tunnel runs, with the stream's [`StreamConfig`] (ordering, loss recovery, queue
//! limits) and the scheduler taken from the scenario.
//!
//! The links, the clock and the datagrams inside them are a [`World`], which the flow
//! simulator's own event loop drives through the carrier: [`Carrier::deliver`] moves
//! the world's clock, hands arrived datagrams and due timers to the sessions, and
//! [`Carrier::next_delivery`] adds the sessions' timers to the world's next delivery,
//! so there is no second driver loop here.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_links::{LinkSpec, LinkStats};
use horde_policy::Fields;
use horde_proto::recovery::RecoveryStats;
use horde_proto::{
    wire, ChannelConfig, ChannelSpec, Event, Session, SessionConfig, SessionError, StreamConfig,
};
use serde::Serialize;

use super::carrier::{Carrier, CarrierStats, Side};
use crate::engine::SchedulerFactory;
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
    #[error("session: {0}")]
    Session(#[from] SessionError),
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

/// The client session, the server session once the handshake reached it, and the links.
pub struct TunnelCarrier {
    /// The clock and the links, `[up, down]` each, carrying datagram bytes; link `i` is
    /// both ends' channel `i`.
    world: World<Bytes>,
    client: Session,
    server: Option<Session>,
    setup: TunnelSetup,
    stats: TunnelStats,
    scratch: Vec<u8>,
    arrivals: Vec<Arrival<Bytes>>,
    /// Received packets not yet handed out.
    held: Vec<(Side, Vec<u8>)>,
    /// The entries' stream queues: `[up, down]`.
    queues: [QueueTrace; 2],
}

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
        let specs = setup
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| ChannelSpec {
                local: i as u16,
                remote: label(true, i as u16),
                config: l.up_channel.clone(),
            })
            .collect();
        let aliases = (0..setup.links.len() as u16)
            .map(|i| label(false, i))
            .collect();
        let config = SessionConfig {
            seed: stream_seed(setup.seed, 0x7c),
            ..setup.session.clone()
        };
        let conn = stream_seed(setup.seed, 0x7d) | 1;
        let mut client = Session::connect(config, conn, 0, specs, aliases, Duration::ZERO)?;
        client.set_scheduler((setup.scheduler)());
        client.open_stream(UP_STREAM, setup.stream.clone())?;
        let mut c = TunnelCarrier {
            world: World::new(links),
            client,
            server: None,
            stats: TunnelStats::default(),
            scratch: Vec::with_capacity(2048),
            arrivals: Vec::new(),
            held: Vec::new(),
            queues: [QueueTrace::default(); 2],
            setup,
        };
        // The handshake leaves at once.
        c.pump(&mut Vec::new());
        Ok(c)
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
        let ends = [
            self.client.recovery_stats(UP_STREAM),
            self.client.recovery_stats(DOWN_STREAM),
            self.server
                .as_ref()
                .and_then(|x| x.recovery_stats(DOWN_STREAM)),
            self.server
                .as_ref()
                .and_then(|x| x.recovery_stats(UP_STREAM)),
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
        &self.client
    }

    /// The server session, once the client's handshake reached it.
    pub fn server_session(&self) -> Option<&Session> {
        self.server.as_ref()
    }

    /// Hand a datagram that left its link to the session at its far end; the server
    /// session is created from the first hello.
    fn arrive(&mut self, a: Arrival<Bytes>) {
        let now = self.world.now();
        let (channel, bytes) = (a.link as u16, a.payload);
        if a.dir == DOWN {
            let from = label(true, channel);
            self.client.handle_datagram(now, channel, from, bytes);
            return;
        }
        let from = label(false, channel);
        if let Some(s) = self.server.as_mut() {
            s.handle_datagram(now, channel, from, bytes);
            return;
        }
        if !wire::is_hello(&bytes) {
            return;
        }
        let configs: Vec<ChannelConfig> = self
            .setup
            .links
            .iter()
            .map(|l| l.down_channel.clone())
            .collect();
        let aliases = (0..self.setup.links.len() as u16)
            .map(|i| label(true, i))
            .collect();
        let config = SessionConfig {
            seed: stream_seed(self.setup.seed, 0x7e),
            ..self.setup.session.clone()
        };
        if let Ok(mut s) = Session::accept(
            config,
            now,
            channel,
            from,
            bytes,
            aliases,
            Arc::new(move |id| configs.get(usize::from(id)).cloned().unwrap_or_default()),
        ) {
            s.set_scheduler((self.setup.scheduler)());
            if s.open_stream(DOWN_STREAM, self.setup.stream.clone())
                .is_ok()
            {
                self.server = Some(s);
            }
        }
    }

    /// Move every datagram both sessions want to send into the links, and every ADU
    /// they received into `out`.
    fn pump(&mut self, out: &mut Vec<(Side, Vec<u8>)>) {
        let now = self.world.now();
        for up in [true, false] {
            let session = if up {
                &mut self.client
            } else {
                match self.server.as_mut() {
                    Some(s) => s,
                    None => continue,
                }
            };
            while let Some(t) = session.poll_transmit(now, &mut self.scratch) {
                let dir = if up {
                    &mut self.stats.up
                } else {
                    &mut self.stats.down
                };
                dir.datagrams += 1;
                dir.wire_bytes += self.scratch.len() as u64;
                let link = usize::from(t.channel);
                if link >= self.world.link_count() {
                    continue;
                }
                let dir = if up { UP } else { DOWN };
                let bytes = Bytes::copy_from_slice(&self.scratch);
                self.world
                    .offer(link, dir, self.scratch.len() as u32, None, bytes);
            }
            while let Some(e) = session.poll_event() {
                if let Event::Received { payload, .. } = e {
                    // Received by the server means it goes to the server host.
                    let (to, dir) = if up {
                        (Side::Client, &mut self.stats.down)
                    } else {
                        (Side::Server, &mut self.stats.up)
                    };
                    dir.packets_out += 1;
                    dir.bytes_out += payload.len() as u64;
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
        let (session, stream, dir) = match from {
            Side::Client => (Some(&mut self.client), UP_STREAM, &mut self.stats.up),
            Side::Server => (self.server.as_mut(), DOWN_STREAM, &mut self.stats.down),
        };
        dir.packets_in += 1;
        dir.bytes_in += packet.len() as u64;
        let sent = session.map(|s| s.send_adu(now, stream, Bytes::from(packet), Fields::new()));
        if !matches!(sent, Some(Ok(_))) {
            dir.refused += 1;
        }
        // Sending happens at once, as a tunnel entry forwards; anything received on the
        // way goes out with the next `deliver`.
        let mut held = std::mem::take(&mut self.held);
        self.pump(&mut held);
        self.held = held;
        let (queued, trace) = match from {
            Side::Client => (self.client.queued_bytes(UP_STREAM), &mut self.queues[0]),
            Side::Server => (
                self.server
                    .as_ref()
                    .map_or(0, |s| s.queued_bytes(DOWN_STREAM)),
                &mut self.queues[1],
            ),
        };
        trace.on_arrival(queued);
    }

    fn next_delivery(&self) -> Option<Duration> {
        let now = self.world.now();
        let timers = [
            self.client.poll_timeout(now),
            self.server.as_ref().and_then(|s| s.poll_timeout(now)),
        ];
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
        self.client.handle_timeout(now);
        if let Some(s) = self.server.as_mut() {
            s.handle_timeout(now);
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
