//! An in-memory network for tests and fuzzing (feature `harness`): [`Endpoint`]s on
//! virtual hosts ("nodes"), joined by paths with delay, jitter, loss and an optional
//! bottleneck rate, and an optional drop filter, driven in virtual time exactly as a real
//! driver drives them: arriving datagrams through the endpoint, due timers, then every
//! transmit and event drained.
//!
//! ```
//! # use std::time::Duration;
//! # use horde_proto::harness::{Harness, PathConfig};
//! # use horde_proto::{ChannelConfig, ChannelSpec, ConnectOptions, EndpointConfig, ServerConfig};
//! let mut net = Harness::new(1);
//! let client = net.add_node(EndpointConfig::default(), 1);
//! let server = net.add_node(EndpointConfig::default(), 1);
//! net.listen(server, 7, ServerConfig::uniform(ChannelConfig::default()));
//! net.set_default_path(PathConfig::delay(Duration::from_millis(10)));
//! let remote = Harness::addr(server, 0);
//! let channels = vec![ChannelSpec { local: 0, remote, config: ChannelConfig::default() }];
//! let conn = net
//!     .connect(client, ConnectOptions { service: 7, channels, ..Default::default() })
//!     .unwrap();
//! assert!(net.run_until_pred(Duration::from_secs(1), |n| n.session(client, conn).is_connected()));
//! assert!(net.accept(server).is_some());
//! ```

mod path;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

pub use path::PathConfig;

use crate::endpoint::{
    ConnectOptions, DatagramEvent, Endpoint, EndpointConfig, ServerConfig, SessionHandle,
};
use crate::event::Event;
use crate::session::{Session, SessionError, Transmit};

/// Names one node of a [`Harness`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(usize);

impl NodeId {
    /// The node's position, in the order nodes were added.
    pub fn index(self) -> usize {
        self.0
    }
}

/// A datagram leaving a node, as the drop filter sees it.
#[derive(Debug)]
pub struct Sent<'a> {
    /// When it was sent.
    pub at: Duration,
    /// The sending node.
    pub from: NodeId,
    /// The node that owns `dst`, if any.
    pub to: Option<NodeId>,
    /// The sending interface's address.
    pub src: SocketAddr,
    /// Where it is sent.
    pub dst: SocketAddr,
    /// What the session said about it (channel, sequence number, ADUs).
    pub transmit: &'a Transmit,
    /// Its bytes.
    pub bytes: &'a [u8],
}

/// Decides, for each datagram sent, whether the network drops it (`true`).
pub type DropFilter = Box<dyn FnMut(&Sent<'_>) -> bool>;

/// Counters of the harness's network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HarnessStats {
    /// Datagrams the sessions sent.
    pub sent: u64,
    /// Dropped by the drop filter.
    pub filtered: u64,
    /// Lost by their path's loss rate.
    pub lost: u64,
    /// Sent to an address no node has.
    pub unroutable: u64,
    /// Handed to an endpoint.
    pub delivered: u64,
    /// Steps taken: instants at which datagrams arrived or timers ran.
    pub steps: u64,
}

struct Node {
    endpoint: Endpoint,
    sessions: BTreeMap<SessionHandle, Session>,
    events: BTreeMap<SessionHandle, EventLog>,
}

/// A session's events and, in parallel, the times they came out.
#[derive(Default)]
struct EventLog {
    events: Vec<Event>,
    times: Vec<Duration>,
}

struct Datagram {
    to: NodeId,
    iface: u16,
    src: SocketAddr,
    bytes: Bytes,
}

/// Endpoints in virtual time over an in-memory network: see the module documentation.
pub struct Harness {
    now: Duration,
    nodes: Vec<Node>,
    default_path: PathConfig,
    paths: HashMap<(SocketAddr, SocketAddr), PathConfig>,
    /// When the bottleneck queue of each path with a rate next empties.
    queues: HashMap<(SocketAddr, SocketAddr), Duration>,
    filter: Option<DropFilter>,
    /// (arrival, order of sending) -> datagram.
    wire: BTreeMap<(Duration, u64), Datagram>,
    order: u64,
    rng: ChaCha8Rng,
    buf: Vec<u8>,
    step_limit: usize,
    stats: HarnessStats,
}

impl Harness {
    /// An empty network; `seed` drives the paths' loss and jitter.
    pub fn new(seed: u64) -> Self {
        Self {
            now: Duration::ZERO,
            nodes: Vec::new(),
            default_path: PathConfig::default(),
            paths: HashMap::new(),
            queues: HashMap::new(),
            filter: None,
            wire: BTreeMap::new(),
            order: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            buf: Vec::with_capacity(2048),
            step_limit: 1_000_000,
            stats: HarnessStats::default(),
        }
    }

    /// The address of interface `iface` of `node`.
    pub fn addr(node: NodeId, iface: u16) -> SocketAddr {
        let n = node.0 as u16;
        SocketAddr::from(([10, (n >> 8) as u8, n as u8, 1], 4000 + iface))
    }

    /// Add a node running an endpoint with `config`. Its aliases default to the
    /// addresses of its `interfaces`. The node's index is mixed into the endpoint's
    /// seed, so that nodes given the same configuration still issue different
    /// connection ids (as real hosts, seeded from entropy, do).
    pub fn add_node(&mut self, mut config: EndpointConfig, interfaces: u16) -> NodeId {
        let id = NodeId(self.nodes.len());
        config.seed ^= (id.0 as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        if config.local_aliases.is_empty() {
            config.local_aliases = (0..interfaces).map(|i| Self::addr(id, i)).collect();
        }
        self.nodes.push(Node {
            endpoint: Endpoint::new(config),
            sessions: BTreeMap::new(),
            events: BTreeMap::new(),
        });
        id
    }

    /// The current virtual time.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// The network's counters.
    pub fn stats(&self) -> HarnessStats {
        self.stats
    }

    /// Datagrams on the wire now.
    pub fn in_flight(&self) -> usize {
        self.wire.len()
    }

    /// Paths without their own settings get these (lossless and instant at first).
    pub fn set_default_path(&mut self, path: PathConfig) {
        self.default_path = path;
    }

    /// Settings of the path from address `src` to address `dst` (one direction).
    pub fn set_path(&mut self, src: SocketAddr, dst: SocketAddr, path: PathConfig) {
        self.paths.insert((src, dst), path);
    }

    /// Settings of both directions between two interfaces.
    pub fn set_link(&mut self, a: (NodeId, u16), b: (NodeId, u16), path: PathConfig) {
        let (a, b) = (Self::addr(a.0, a.1), Self::addr(b.0, b.1));
        self.set_path(a, b, path);
        self.set_path(b, a, path);
    }

    /// Drop the datagrams `filter` picks, before their path sees them.
    pub fn set_drop_filter(&mut self, filter: impl FnMut(&Sent<'_>) -> bool + 'static) {
        self.filter = Some(Box::new(filter));
    }

    /// Most steps one `run_*` call may take before the sessions count as spinning.
    pub fn set_step_limit(&mut self, steps: usize) {
        self.step_limit = steps;
    }

    /// A node's endpoint.
    pub fn endpoint(&self, node: NodeId) -> &Endpoint {
        &self.nodes[node.0].endpoint
    }

    /// Accept hellos for `service` on `node`.
    pub fn listen(&mut self, node: NodeId, service: u32, server: ServerConfig) {
        self.nodes[node.0].endpoint.listen(service, server);
    }

    /// Open a session from `node`; its hellos leave at the next step.
    pub fn connect(
        &mut self,
        node: NodeId,
        options: ConnectOptions,
    ) -> Result<SessionHandle, SessionError> {
        let now = self.now;
        let n = &mut self.nodes[node.0];
        let (h, s) = n.endpoint.connect(now, options)?;
        n.sessions.insert(h, s);
        Ok(h)
    }

    /// The oldest session `node` accepted that the test has not taken yet.
    pub fn accept(&mut self, node: NodeId) -> Option<SessionHandle> {
        self.nodes[node.0].endpoint.accept()
    }

    /// Every session of `node`, accepted or opened, in handle order.
    pub fn handles(&self, node: NodeId) -> Vec<SessionHandle> {
        self.nodes[node.0].sessions.keys().copied().collect()
    }

    /// A session, if `node` has it.
    pub fn get_session(&self, node: NodeId, handle: SessionHandle) -> Option<&Session> {
        self.nodes[node.0].sessions.get(&handle)
    }

    /// A session.
    ///
    /// # Panics
    /// If `node` has no such session (a mistake in the test).
    pub fn session(&self, node: NodeId, handle: SessionHandle) -> &Session {
        self.get_session(node, handle)
            .expect("the node has this session")
    }

    /// A session, to call into.
    ///
    /// # Panics
    /// If `node` has no such session (a mistake in the test).
    pub fn session_mut(&mut self, node: NodeId, handle: SessionHandle) -> &mut Session {
        self.nodes[node.0]
            .sessions
            .get_mut(&handle)
            .expect("the node has this session")
    }

    /// The events a session has reported so far, oldest first.
    pub fn events(&self, node: NodeId, handle: SessionHandle) -> &[Event] {
        self.nodes[node.0]
            .events
            .get(&handle)
            .map_or(&[], |l| l.events.as_slice())
    }

    /// When each of [`Harness::events`] came out (the same length).
    pub fn event_times(&self, node: NodeId, handle: SessionHandle) -> &[Duration] {
        self.nodes[node.0]
            .events
            .get(&handle)
            .map_or(&[], |l| l.times.as_slice())
    }

    /// Take the events a session has reported so far.
    pub fn take_events(&mut self, node: NodeId, handle: SessionHandle) -> Vec<Event> {
        self.nodes[node.0]
            .events
            .get_mut(&handle)
            .map(|l| {
                l.times.clear();
                std::mem::take(&mut l.events)
            })
            .unwrap_or_default()
    }

    /// Take a session out of the harness (its endpoint forgets it): to hand its
    /// streams to a successor ([`Session::inherit`]), or to let it vanish silently.
    pub fn remove_session(&mut self, node: NodeId, handle: SessionHandle) -> Option<Session> {
        let n = &mut self.nodes[node.0];
        n.endpoint.forget(handle);
        n.events.remove(&handle);
        n.sessions.remove(&handle)
    }

    /// Hand `node` a datagram from `src` on interface `iface` now, as if it had just
    /// arrived (forged or replayed traffic), then drain what it caused.
    pub fn inject(&mut self, node: NodeId, iface: u16, src: SocketAddr, bytes: Bytes) {
        self.deliver(Datagram {
            to: node,
            iface,
            src,
            bytes,
        });
        self.flush();
    }

    /// Run until virtual time `end` (nothing after it happens yet).
    ///
    /// # Panics
    /// If the sessions take more than the step limit's events (they spin).
    pub fn run_until(&mut self, end: Duration) {
        self.flush();
        let mut steps = 0;
        while self.step(end) {
            self.count_step(&mut steps);
        }
        self.now = self.now.max(end);
    }

    /// Run until `done` holds (checked after every step) or until `deadline`. Returns
    /// whether `done` held; time stops at the step where it did.
    ///
    /// # Panics
    /// As [`Harness::run_until`].
    pub fn run_until_pred(
        &mut self,
        deadline: Duration,
        mut done: impl FnMut(&Harness) -> bool,
    ) -> bool {
        self.flush();
        let mut steps = 0;
        loop {
            if done(self) {
                return true;
            }
            if !self.step(deadline) {
                self.now = self.now.max(deadline);
                return done(self);
            }
            self.count_step(&mut steps);
        }
    }

    /// Run until nothing is on the wire and no timer is due (a keepalive or an idle
    /// timeout later counts as quiet), or until `deadline`. Returns whether it got quiet.
    ///
    /// # Panics
    /// As [`Harness::run_until`].
    pub fn run_until_quiet(&mut self, deadline: Duration) -> bool {
        self.run_until_pred(deadline, Harness::is_quiet)
    }

    /// Nothing on the wire and no session with work due now.
    pub fn is_quiet(&self) -> bool {
        self.wire.is_empty()
            && self.nodes.iter().all(|n| {
                n.sessions
                    .values()
                    .all(|s| s.poll_timeout(self.now).is_none_or(|t| t > self.now))
            })
    }

    fn count_step(&self, steps: &mut usize) {
        *steps += 1;
        assert!(
            *steps <= self.step_limit,
            "sessions spin at {:?}: {} steps in one run",
            self.now,
            self.step_limit
        );
    }

    /// Advance to the next event if it is not after `end`: deliver what arrives then,
    /// run every session's timers, drain transmits and events. Returns whether it did.
    fn step(&mut self, end: Duration) -> bool {
        let Some(t) = self.next_time() else {
            return false;
        };
        if t > end {
            return false;
        }
        self.now = self.now.max(t);
        self.stats.steps += 1;
        while let Some(entry) = self.wire.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let d = entry.remove();
            self.deliver(d);
        }
        let now = self.now;
        for n in &mut self.nodes {
            for s in n.sessions.values_mut() {
                s.handle_timeout(now);
            }
        }
        self.flush();
        true
    }

    fn next_time(&self) -> Option<Duration> {
        let mut t = self.wire.keys().next().map(|k| k.0);
        for n in &self.nodes {
            for s in n.sessions.values() {
                if let Some(x) = s.poll_timeout(self.now) {
                    t = Some(t.map_or(x, |t| t.min(x)));
                }
            }
        }
        t
    }

    fn deliver(&mut self, d: Datagram) {
        let now = self.now;
        self.stats.delivered += 1;
        let node = &mut self.nodes[d.to.0];
        match node.endpoint.handle(now, d.iface, d.src, &d.bytes) {
            DatagramEvent::Connection(h) => {
                if let Some(s) = node.sessions.get_mut(&h) {
                    s.handle_datagram(now, d.iface, d.src, d.bytes);
                }
            }
            DatagramEvent::NewConnection(new) => {
                node.sessions.insert(new.handle, *new.session);
            }
            DatagramEvent::Dropped(_) => {}
        }
    }

    /// The node and interface that own `addr`.
    fn owner(&self, addr: SocketAddr) -> Option<(NodeId, u16)> {
        let SocketAddr::V4(v4) = addr else {
            return None;
        };
        let [a, hi, lo, d] = v4.ip().octets();
        let node = usize::from(u16::from_be_bytes([hi, lo]));
        let iface = v4.port().checked_sub(4000)?;
        (a == 10 && d == 1 && node < self.nodes.len()).then_some((NodeId(node), iface))
    }

    /// Put every session's transmits on the wire and collect its events, without
    /// advancing time (the `run_*` calls do this after every step).
    pub fn flush(&mut self) {
        let now = self.now;
        let mut buf = std::mem::take(&mut self.buf);
        for n in 0..self.nodes.len() {
            let handles = self.handles(NodeId(n));
            for h in handles {
                while let Some(t) = self.nodes[n]
                    .sessions
                    .get_mut(&h)
                    .and_then(|s| s.poll_transmit(now, &mut buf))
                {
                    self.send(NodeId(n), &t, &buf);
                }
                let node = &mut self.nodes[n];
                let Some(s) = node.sessions.get_mut(&h) else {
                    continue;
                };
                let log = node.events.entry(h).or_default();
                while let Some(e) = s.poll_event() {
                    log.events.push(e);
                    log.times.push(now);
                }
            }
        }
        self.buf = buf;
    }

    fn send(&mut self, from: NodeId, t: &Transmit, bytes: &[u8]) {
        self.stats.sent += 1;
        let src = Self::addr(from, t.local);
        let owner = self.owner(t.dst);
        if let Some(filter) = self.filter.as_mut() {
            let sent = Sent {
                at: self.now,
                from,
                to: owner.map(|o| o.0),
                src,
                dst: t.dst,
                transmit: t,
                bytes,
            };
            if filter(&sent) {
                self.stats.filtered += 1;
                return;
            }
        }
        let Some((to, iface)) = owner else {
            self.stats.unroutable += 1;
            return;
        };
        let key = (src, t.dst);
        let path = self.paths.get(&key).copied().unwrap_or(self.default_path);
        let mut no_queue = Duration::ZERO;
        let queue_free = match path.rate_kbps {
            Some(_) => self.queues.entry(key).or_default(),
            None => &mut no_queue,
        };
        let Some(at) = path.arrival(self.now, bytes.len(), queue_free, &mut self.rng) else {
            self.stats.lost += 1;
            return;
        };
        self.order += 1;
        self.wire.insert(
            (at, self.order),
            Datagram {
                to,
                iface,
                src,
                bytes: Bytes::copy_from_slice(bytes),
            },
        );
    }
}

#[cfg(test)]
mod tests;
