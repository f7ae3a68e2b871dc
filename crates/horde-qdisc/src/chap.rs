//! CHAP: credit-based queueing (Lee, WPI 2010, §4.2).
//!
//! Each flow holds a credit in channel time, starting at `I`. The backlogged flow with the
//! most credits is served; the channel time each sent packet actually took is charged to
//! its flow afterwards ([`Qdisc::charge`]). When every backlogged flow is at zero or below,
//! all active flows (idle ones too) are boosted: `α' = α/2 + I`. When the queue is full,
//! the oldest packet of the backlogged flow with the fewest credits is dropped.
//!
//! The boost is applied lazily so that it costs O(1) however many flows are active. Write
//! `d = α − 2I`; the boost is `d' = d/2`, so a flow stores `d · 2^shift` and the current
//! credit is `2I + (stored >> shift)`, where `shift` counts the boosts since the stored
//! values were last rebased. So credits are exact binary fractions of a nanosecond, as the
//! halving makes them, and flows are ordered by their exact credit (among exact equals the
//! older flow first); a credit reads floored to whole nanoseconds, and the rebase every 62
//! boosts drops the fractions. The boost preserves the order of credits, so the two heaps
//! that pick the flow to serve and the flow to drop from stay valid through it.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use crate::heap::{IndexedHeap, Order};
use crate::{FlowKey, Limit, Packet, Qdisc, QdiscError, PROTO_UDP};

/// How packets are grouped into flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlowKeyMode {
    /// Source and destination address and port, and protocol (the dissertation's design).
    #[default]
    FiveTuple,
    /// Source and destination address and protocol, ports ignored (its Linux prototype).
    HostPair,
}

/// CHAP configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChapConfig {
    /// The boost increment `I`, and every new flow's credit.
    pub increment: Duration,
    /// Capacity. With a packet bound `q`, at most `q − 1` packets stay queued.
    pub limit: Limit,
    /// A UDP flow without backlog is forgotten after this long.
    pub udp_timeout: Duration,
    /// A flow of any other protocol without backlog is forgotten after this long.
    pub timeout: Duration,
    /// How flows are keyed.
    pub key_mode: FlowKeyMode,
    /// Most flows tracked at once; beyond it the longest-idle flow is forgotten early.
    pub max_flows: usize,
}

impl Default for ChapConfig {
    /// `I` = 25 ms, 35 packets, 120 s for UDP and 3600 s for the rest, 5-tuples, 65,536 flows.
    fn default() -> ChapConfig {
        ChapConfig {
            increment: Duration::from_millis(25),
            limit: Limit::packets(35),
            udp_timeout: Duration::from_secs(120),
            timeout: Duration::from_secs(3600),
            key_mode: FlowKeyMode::FiveTuple,
            max_flows: 65_536,
        }
    }
}

/// Credits are kept within `2I − 2^44 ns` (about 4.9 hours) below, and one charge within
/// `2^40 ns`, so `d · 2^shift` fits an `i128` for every `shift` below [`MAX_SHIFT`].
const MIN_D_NS: i128 = -(1 << 44);
const MAX_CHARGE_NS: u128 = 1 << 40;
/// Stored values are rebased after this many boosts.
const MAX_SHIFT: u32 = 62;

#[derive(Debug)]
struct Flow<T> {
    key: FlowKey,
    queue: VecDeque<Packet<T>>,
    /// `(credit − 2I) · 2^shift`, in ns.
    scaled: i128,
    /// Creation order: among equal credits the older flow is served first.
    seq: u64,
    /// Bumped each time the slot is freed, so stale idle marks are recognised.
    generation: u32,
    /// When the queue last became empty; `None` while backlogged.
    idle_since: Option<Duration>,
    live: bool,
}

/// A flow that became idle at `since`, to be forgotten after its timeout.
#[derive(Debug, Clone, Copy)]
struct IdleMark {
    slot: u32,
    generation: u32,
    since: Duration,
}

/// The CHAP queue discipline. See the module documentation.
#[derive(Debug)]
pub struct Chap<T> {
    config: ChapConfig,
    increment_ns: i128,
    flows: Vec<Flow<T>>,
    free: Vec<u32>,
    index: HashMap<FlowKey, u32>,
    /// Backlogged flows, most credits on top (ties: oldest flow).
    most: IndexedHeap,
    /// Backlogged flows, fewest credits on top (ties: newest flow).
    fewest: IndexedHeap,
    shift: u32,
    next_seq: u64,
    idle_udp: VecDeque<IdleMark>,
    idle_other: VecDeque<IdleMark>,
    live_flows: usize,
    len: usize,
    bytes: u64,
    boosts: u64,
}

impl<T> Chap<T> {
    /// A CHAP queue per `config`.
    pub fn new(config: ChapConfig) -> Result<Chap<T>, QdiscError> {
        config.limit.validate("chap limit", 2)?;
        let increment_ns = config.increment.as_nanos();
        if increment_ns == 0 || increment_ns > 1 << 40 {
            return Err(QdiscError::invalid(
                "chap increment",
                "between 1 ns and about 18 minutes",
                format!("{:?}", config.increment),
            ));
        }
        if config.max_flows == 0 || config.max_flows >= u32::MAX as usize {
            return Err(QdiscError::invalid(
                "chap max_flows",
                "between 1 and 2^32 - 2",
                config.max_flows,
            ));
        }
        Ok(Chap {
            config,
            increment_ns: increment_ns as i128,
            flows: Vec::new(),
            free: Vec::new(),
            index: HashMap::new(),
            most: IndexedHeap::new(Order::Max),
            fewest: IndexedHeap::new(Order::Min),
            shift: 0,
            next_seq: 0,
            idle_udp: VecDeque::new(),
            idle_other: VecDeque::new(),
            live_flows: 0,
            len: 0,
            bytes: 0,
            boosts: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ChapConfig {
        &self.config
    }

    /// The current credit of `flow` in ns, if it is tracked.
    pub fn credit(&self, flow: &FlowKey) -> Option<i64> {
        let key = self.flow_key(flow);
        self.index.get(&key).map(|&slot| self.credit_ns(slot))
    }

    /// Every tracked flow and its credit in ns, in no particular order.
    pub fn credits(&self) -> impl Iterator<Item = (FlowKey, i64)> + '_ {
        self.index
            .iter()
            .map(|(key, &slot)| (*key, self.credit_ns(slot)))
    }

    /// Flows tracked (backlogged or idle and not yet expired).
    pub fn flow_count(&self) -> usize {
        self.live_flows
    }

    /// Boosts so far.
    pub fn boosts(&self) -> u64 {
        self.boosts
    }

    fn flow_key(&self, flow: &FlowKey) -> FlowKey {
        match self.config.key_mode {
            FlowKeyMode::FiveTuple => *flow,
            FlowKeyMode::HostPair => flow.host_pair(),
        }
    }

    fn credit_ns(&self, slot: u32) -> i64 {
        let d = self.flows[slot as usize].scaled >> self.shift;
        (2 * self.increment_ns + d) as i64
    }

    fn boost(&mut self) {
        if self.shift == MAX_SHIFT {
            self.rebase();
        }
        self.shift += 1;
        self.boosts += 1;
    }

    /// Divides every stored value by `2^shift` (floor) and sets `shift` to 0.
    fn rebase(&mut self) {
        let shift = self.shift;
        for flow in self.flows.iter_mut().filter(|f| f.live) {
            flow.scaled >>= shift;
        }
        self.shift = 0;
        let flows = &self.flows;
        self.most.rekey(|slot| flows[slot as usize].scaled);
        self.fewest.rekey(|slot| flows[slot as usize].scaled);
    }

    /// Whether `mark` still describes an idle flow (not reused, not backlogged since).
    fn mark_is_current(&self, mark: &IdleMark) -> bool {
        let flow = &self.flows[mark.slot as usize];
        flow.live && flow.generation == mark.generation && flow.idle_since == Some(mark.since)
    }

    /// Forgets flows idle for longer than their timeout.
    fn expire(&mut self, now: Duration) {
        for udp in [true, false] {
            let timeout = if udp {
                self.config.udp_timeout
            } else {
                self.config.timeout
            };
            loop {
                let marks = if udp {
                    &self.idle_udp
                } else {
                    &self.idle_other
                };
                let Some(&mark) = marks.front() else { break };
                if now.saturating_sub(mark.since) <= timeout {
                    break;
                }
                if udp {
                    self.idle_udp.pop_front();
                } else {
                    self.idle_other.pop_front();
                }
                if self.mark_is_current(&mark) {
                    self.free_flow(mark.slot);
                }
            }
        }
    }

    /// Forgets the flow idle the longest, ahead of its timeout; false if none is idle.
    fn evict_longest_idle(&mut self) -> bool {
        loop {
            let udp = self.idle_udp.front().copied();
            let other = self.idle_other.front().copied();
            let (mark, from_udp) = match (udp, other) {
                (None, None) => return false,
                (Some(u), None) => (u, true),
                (None, Some(o)) => (o, false),
                (Some(u), Some(o)) => {
                    if u.since <= o.since {
                        (u, true)
                    } else {
                        (o, false)
                    }
                }
            };
            if from_udp {
                self.idle_udp.pop_front();
            } else {
                self.idle_other.pop_front();
            }
            if self.mark_is_current(&mark) {
                self.free_flow(mark.slot);
                return true;
            }
        }
    }

    fn free_flow(&mut self, slot: u32) {
        let flow = &mut self.flows[slot as usize];
        debug_assert!(flow.queue.is_empty());
        flow.live = false;
        flow.idle_since = None;
        flow.generation = flow.generation.wrapping_add(1);
        self.index.remove(&flow.key);
        self.free.push(slot);
        self.live_flows -= 1;
    }

    /// The slot of `key`, creating the flow with credit `I` if needed; `None` if the flow
    /// table is full of backlogged flows.
    fn slot_for(&mut self, key: FlowKey) -> Option<u32> {
        if let Some(&slot) = self.index.get(&key) {
            return Some(slot);
        }
        if self.live_flows >= self.config.max_flows && !self.evict_longest_idle() {
            return None;
        }
        let scaled = (-self.increment_ns) << self.shift;
        let seq = self.next_seq;
        self.next_seq += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                let flow = &mut self.flows[slot as usize];
                flow.key = key;
                flow.scaled = scaled;
                flow.seq = seq;
                flow.live = true;
                slot
            }
            None => {
                self.flows.push(Flow {
                    key,
                    queue: VecDeque::new(),
                    scaled,
                    seq,
                    generation: 0,
                    idle_since: None,
                    live: true,
                });
                (self.flows.len() - 1) as u32
            }
        };
        self.index.insert(key, slot);
        self.live_flows += 1;
        Some(slot)
    }

    /// Takes the flow at `slot`, whose queue just emptied, out of the heaps.
    fn went_idle(&mut self, slot: u32, now: Duration) {
        self.most.remove(slot);
        self.fewest.remove(slot);
        let flow = &mut self.flows[slot as usize];
        flow.idle_since = Some(now);
        let mark = IdleMark {
            slot,
            generation: flow.generation,
            since: now,
        };
        if flow.key.protocol == PROTO_UDP {
            self.idle_udp.push_back(mark);
        } else {
            self.idle_other.push_back(mark);
        }
    }

    /// Drops the oldest packet of the backlogged flow with the fewest credits.
    fn drop_from_fewest(&mut self, now: Duration, drops: &mut Vec<Packet<T>>) {
        let Some(victim) = self.fewest.peek().map(|e| e.slot) else {
            return;
        };
        let flow = &mut self.flows[victim as usize];
        let packet = flow
            .queue
            .pop_front()
            .expect("backlogged flow has a packet");
        let emptied = flow.queue.is_empty();
        self.len -= 1;
        self.bytes -= u64::from(packet.len);
        drops.push(packet);
        if emptied {
            self.went_idle(victim, now);
        }
    }
}

impl<T> Qdisc<T> for Chap<T> {
    fn enqueue(&mut self, packet: Packet<T>, drops: &mut Vec<Packet<T>>) {
        let now = packet.arrival;
        self.expire(now);
        let key = self.flow_key(&packet.flow);
        let Some(slot) = self.slot_for(key) else {
            drops.push(packet);
            return;
        };
        let len = packet.len;
        let flow = &mut self.flows[slot as usize];
        let was_idle = flow.queue.is_empty();
        flow.queue.push_back(packet);
        if was_idle {
            flow.idle_since = None;
            let (scaled, seq) = (flow.scaled, flow.seq);
            self.most.push(scaled, seq, slot);
            self.fewest.push(scaled, seq, slot);
        }
        self.len += 1;
        self.bytes += u64::from(len);
        // "Full with the incoming packet": keep one packet of room, or the byte bound.
        while self.len > 0 && !self.config.limit.holds(self.len + 1, self.bytes) {
            self.drop_from_fewest(now, drops);
        }
    }

    fn dequeue(&mut self, now: Duration, _drops: &mut Vec<Packet<T>>) -> Option<Packet<T>> {
        self.expire(now);
        let slot = loop {
            let top = self.most.peek()?.slot;
            if self.credit_ns(top) > 0 {
                break top;
            }
            // Every backlogged flow is at zero or below. One boost suffices unless a packet
            // cost more than 2I; repeat until the top is positive.
            self.boost();
        };
        let flow = &mut self.flows[slot as usize];
        let packet = flow
            .queue
            .pop_front()
            .expect("backlogged flow has a packet");
        let emptied = flow.queue.is_empty();
        self.len -= 1;
        self.bytes -= u64::from(packet.len);
        if emptied {
            self.went_idle(slot, now);
        }
        Some(packet)
    }

    fn charge(&mut self, flow: &FlowKey, airtime: Duration) {
        let key = self.flow_key(flow);
        let Some(&slot) = self.index.get(&key) else {
            return; // forgotten since it was sent: nothing left to charge
        };
        let cost = airtime.as_nanos().min(MAX_CHARGE_NS) as i128;
        let floor = MIN_D_NS << self.shift;
        let f = &mut self.flows[slot as usize];
        f.scaled = (f.scaled - (cost << self.shift)).max(floor);
        let scaled = f.scaled;
        self.most.update(slot, scaled);
        self.fewest.update(slot, scaled);
    }

    fn len(&self) -> usize {
        self.len
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }
}
