//! The network channel manager (`ncManager`, thesis §3.3, ch. 4): one per channel.
//!
//! It owns the channel's congestion control and estimators, numbers and tracks the
//! packets it sends and detects their loss ([`sent`]), turns congestion-control
//! permission into real `txSlot`s and its rate estimate into phantom ones, and keeps the
//! receive state from which it acknowledges the peer's packets on the same channel
//! ([`receive`]).

mod ack_frequency;
mod queue_bound;
mod queue_estimate;
mod receive;
mod sent;
mod startup;
mod view;

use std::net::SocketAddr;
use std::time::Duration;

use horde_policy::{ChannelId, TxSlot};

use crate::cc::{AckSample, CcConfig, CongestionControl, LossKind, LossSample};
use crate::estimator::{thesis_burst_correlation, LossEstimator, LossPrior, RttEstimator};
use crate::wire::{Ack, DATA_HEADER_LEN};

pub use ack_frequency::AckFrequency;
use queue_bound::QueueBound;
use queue_estimate::QueueEstimate;
use receive::ReceiveState;
pub use sent::{Resolution, SentAdu};
use sent::{SentPacket, SentTracker};
pub use startup::{Startup, STARTUP_ROUNDS};
pub use view::{ChannelView, ChannelViews};

/// Smallest and largest [`ChannelConfig::mtu`]: room for a useful ADU, and what one UDP
/// datagram can carry.
pub const MTU_RANGE: std::ops::RangeInclusive<u32> = 64..=65_000;

/// Channel settings.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    /// Largest ADU one slot carries, in bytes (thesis `maximumSize`). Datagrams are
    /// this plus the Horde header, plus the secure layer's overhead on real networks.
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// The channel's congestion controller and its parameters.
    #[serde(default)]
    pub congestion: CcConfig,
    /// Cost of one kilobyte sent, in the operator's unit (0 = flat rate).
    #[serde(default)]
    pub cost_per_kb: f64,
    /// RTT assumed before the first sample, in ms.
    #[serde(default = "default_initial_rtt_ms")]
    pub initial_rtt_ms: f64,
    /// How the loss correlation of two of this channel's slots is estimated.
    #[serde(default)]
    pub loss_correlation: LossCorrelation,
    /// The loss rate believed before the channel's packets are resolved (none: a
    /// channel with no samples says 0%).
    #[serde(default)]
    pub loss_prior: Option<LossPrior>,
    /// Bytes each datagram takes on the link beyond what the session encodes (the
    /// secure layer's header and tag, UDP and IP headers). Pacing, bytes in flight and
    /// the queue estimate count them, so a controller paced at a share of a link's rate
    /// holds to it even when the datagrams are small. 0 where the link carries the
    /// session's datagrams as they are (the simulator).
    #[serde(default)]
    pub datagram_overhead: u32,
    /// Charge the acks this end sends on the channel to its controller's pacing (a
    /// rate-based controller only): they take the same link as the data.
    #[serde(default)]
    pub pace_acks: bool,
    /// How often this end acks the peer's packets on the channel, and how it reads the
    /// peer's acks; both ends of a channel should use the same.
    #[serde(default)]
    pub acks: AckFrequency,
}

/// Where a channel's slot-pair loss correlations ([`TxSlot::burst_correlation`]) come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossCorrelation {
    /// P(both lost | either lost) measured on the channel's own packets, per gap
    /// (the loss estimator's burst correlation).
    #[default]
    Measured,
    /// The fixed model of the thesis's simulations (§7.2.1): adjacent slots fully
    /// correlated, halving with each further step, nothing beyond
    /// [`horde_policy::CORRELATION_SPAN`].
    Thesis,
}

fn default_mtu() -> u32 {
    1200
}
fn default_initial_rtt_ms() -> f64 {
    500.0
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self {
            mtu: default_mtu(),
            congestion: CcConfig::default(),
            cost_per_kb: 0.0,
            initial_rtt_ms: default_initial_rtt_ms(),
            loss_correlation: LossCorrelation::default(),
            loss_prior: None,
            datagram_overhead: 0,
            pace_acks: false,
            acks: AckFrequency::default(),
        }
    }
}

/// A resolved packet, reported to the session: one entry per ADU it carried (a packed
/// packet's ADUs share its fate), or one with `adu: None` for a probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resolved {
    pub seq: u64,
    pub adu: Option<SentAdu>,
    pub resolution: Resolution,
}

/// Liveness of a channel (thesis `chPoolMan`: dead channels get no slots).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    /// No ack for too long; only probes are sent until one is acked.
    Dead {
        since: Duration,
        next_probe: Duration,
    },
}

/// What a channel's timers asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimerActions {
    /// Send a probe (a sequenced ping) now.
    pub probe: bool,
    /// The channel just died.
    pub died: bool,
}

/// A channel with packets in flight and no ack for this many probe timeouts (and at least
/// MIN_DEAD_AFTER) is declared dead.
const DEAD_AFTER_PTOS: u32 = 3;
const MIN_DEAD_AFTER: Duration = Duration::from_millis(1000);
/// A dead channel probes every `FAST_PROBE_INTERVAL` for `FAST_PROBING` after it died,
/// then every `PROBE_INTERVAL`. The fast probes let a peer behind heavy loss answer
/// several times within the session's unreachability window (`lifecycle::UNREACHABLE_*`)
/// at the cost of a header-only packet each; a link that stays down costs little.
const FAST_PROBE_INTERVAL: Duration = Duration::from_millis(50);
const FAST_PROBING: Duration = Duration::from_millis(1000);
const PROBE_INTERVAL: Duration = Duration::from_millis(250);
/// Real slots offered per channel per cycle, so one very wide window cannot swamp a
/// scheduling cycle.
pub const MAX_REAL_SLOTS_PER_CYCLE: usize = 64;
const MAX_PHANTOM_SLOTS: usize = 64;
/// The least silence of a link's acks that [`Channel::stall`] counts: below it, acks are
/// only batched.
const MIN_ACK_GAP: Duration = Duration::from_millis(10);
/// Full slots a channel whose queue a latency objective bounds keeps open beyond the
/// bound for the latency-bound streams' ADUs (`crate::latency`): without them such an
/// ADU waits for an ack to open the window the bulk data filled, which on a radio link
/// that pauses is most of the bound.
pub(crate) const RESERVED_SLOTS: usize = 2;
/// What [`Channel::period_slots`] appended for one channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeriodSlots {
    /// The first slots, open now: usable at once.
    pub open: usize,
    /// The last of the open ones that only latency-bound streams may take
    /// ([`Channel::reserved_slot_count`]).
    pub reserved: usize,
    /// All of them: the open ones, then those due later in the period.
    pub total: usize,
    /// The wait after the last one, in seconds, where phantom slots begin (`None` when
    /// only open slots were offered).
    pub phantom_start: Option<f64>,
}

/// Slots offered per channel over one period of a periodic cycle, so that a long period
/// on a fast channel stays a bounded scheduling problem.
pub const MAX_PERIOD_SLOTS: usize = 256;
/// A periodic cycle projects this much more than the channel's rate estimate over its
/// period: a window that grows within the period would otherwise find nothing planned
/// and go idle until the next cycle. What the channel does not open in time goes back to
/// the streams at the next cycle.
const PERIOD_RATE_GAIN: f64 = 1.25;
/// A loss is put down to congestion when the round trip of the packet that revealed it
/// had at least this fraction of the largest queueing delay seen: a drop-tail queue drops
/// when it is full, a radio loses packets at any queue level.
const CONGESTION_QUEUE_FRACTION: f64 = 0.7;
/// Below this spread of round trips (ms, and as a fraction of the minimum) no queue has
/// ever built, so a loss cannot be an overflow.
const MIN_QUEUE_SPREAD_MS: f64 = 2.0;
const MIN_QUEUE_SPREAD_FRACTION: f64 = 0.1;
/// Round-trip growth over the minimum (ms, and as a fraction of it) that still counts as
/// no queue: above the ack delay and jitter of a quiet path, well below a full buffer.
const QUEUE_FREE_MARGIN_MS: f64 = 10.0;
const QUEUE_FREE_FRACTION: f64 = 0.5;
/// Least spacing of two `horde_proto::channel::state` debug lines of one channel.
const STATE_LOG_INTERVAL: Duration = Duration::from_millis(100);
/// Spare-capacity coding fills the path up to this many bandwidth-delay products: a
/// little above one, so the delivery-rate estimate can still grow when the path does.
pub const SPARE_BDP_GAIN: f64 = 1.25;

pub struct Channel {
    pub(crate) id: ChannelId,
    /// Local interface (socket) index this channel sends from.
    pub(crate) local: u16,
    /// Peer address; follows the peer if its address changes.
    pub(crate) remote: SocketAddr,
    pub(crate) config: ChannelConfig,
    cc: Box<dyn CongestionControl>,
    pub(crate) rtt: RttEstimator,
    /// `rtt`'s figures as the timers read them, refreshed with each RTT sample.
    rtt_times: RttTimes,
    /// Link losses (congestion losses and late-acked packets excluded).
    pub(crate) loss: LossEstimator,
    /// The largest delivery rate measured lately (bytes/s): with the base RTT, the
    /// path's bandwidth-delay product, which bounds what spare-capacity coding may fill.
    delivery_max: crate::estimator::WindowedExtreme,
    /// PluriBus's bottleneck-queue estimate over everything this end sends here.
    queue: QueueEstimate,
    /// The bound on the link's queue a latency objective sets (none by default).
    queue_bound: QueueBound,
    /// The path's round trip without a queue: the least RTT of packets sent while
    /// nothing else was in flight (see [`BaseRtt`]).
    base_rtt: BaseRtt,
    liveness: Liveness,
    sent: SentTracker,
    /// Last time an ack made progress, or the channel started sending after being idle.
    last_progress: Duration,
    /// When this channel last sent something its peer hears (data, ping, probe or ack).
    last_sent: Duration,
    recv: ReceiveState,
    /// What this end's last ack took on the link: the reverse-path ack budget's unit.
    last_ack_wire: u32,
    pub(crate) stats: ChannelStats,
    /// When the channel's estimates were last logged (`horde_proto::channel::state`).
    last_state_log: Option<Duration>,
}

/// Counters of one channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ChannelStats {
    /// Packets sent in the channel's sequence space (data, packed, pings and probes).
    pub packets_sent: u64,
    /// Their sizes as the session encoded them, bytes.
    pub bytes_sent: u64,
    /// Packets acknowledged.
    pub acked: u64,
    /// Packets declared lost (late-acked ones included).
    pub lost: u64,
    /// Of those, put down to the sender's own queue overflow.
    pub lost_congestion: u64,
    /// Declared lost, then acknowledged after all.
    pub late_acked: u64,
    /// Data packets and pings received from the peer, duplicates included.
    pub packets_received: u64,
    /// Of those, sequence numbers already seen.
    pub duplicates: u64,
    /// Probes on a dead channel and probe-timeout probes on a live one.
    pub probes_sent: u64,
    /// Probe timeouts on a live channel: data in flight and no ack for a PTO.
    pub probe_timeouts: u64,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("id", &self.id)
            .field("remote", &self.remote)
            .field("cc", &self.cc)
            .field("liveness", &self.liveness)
            .finish_non_exhaustive()
    }
}

impl Channel {
    pub fn new(
        id: ChannelId,
        local: u16,
        remote: SocketAddr,
        config: ChannelConfig,
        now: Duration,
    ) -> Self {
        let cc = config.congestion.build(
            config.mtu + DATA_HEADER_LEN as u32 + config.datagram_overhead,
            now,
        );
        let rtt = RttEstimator::new();
        let rtt_times = RttTimes::of(&rtt, &config);
        let loss = LossEstimator::with_prior(config.loss_prior);
        let config_overhead = config.datagram_overhead;
        Self {
            id,
            local,
            remote,
            config,
            cc,
            rtt,
            rtt_times,
            loss,
            delivery_max: crate::estimator::WindowedExtreme::new(true),
            queue: QueueEstimate::default(),
            queue_bound: QueueBound::default(),
            base_rtt: BaseRtt::default(),
            liveness: Liveness::Alive,
            sent: SentTracker::new(now),
            last_progress: now,
            last_sent: now,
            recv: ReceiveState::new(now),
            last_ack_wire: crate::wire::ACK_HEADER_LEN as u32 + config_overhead,
            stats: ChannelStats::default(),
            last_state_log: None,
        }
    }

    /// Whether any sequenced packet (data or probe) has arrived from the peer.
    pub fn has_received(&self) -> bool {
        self.recv.has_received()
    }

    pub fn is_alive(&self) -> bool {
        self.liveness == Liveness::Alive
    }

    /// When this channel last sent something its peer hears (data, ping, probe or ack):
    /// its own keepalive runs from here.
    pub fn last_sent(&self) -> Duration {
        self.last_sent
    }

    /// An ack of `bytes` went out on this channel: the peer hears from this end's address
    /// on it, and its own data there tells it whether the path works. It takes the link
    /// like any datagram, so the queue estimate counts it, and with `pace_acks` so does
    /// a rate-based controller's pacing.
    pub fn on_ack_sent(&mut self, now: Duration, bytes: usize) {
        self.last_sent = self.last_sent.max(now);
        let wire = self.wire_size(bytes as u32);
        self.last_ack_wire = wire;
        if self.config.pace_acks {
            self.cc.on_unsequenced_sent(now, wire);
        }
        let rate = self.rate();
        self.queue.on_sent(now, wire as usize, rate);
    }

    /// What a datagram the session encoded in `size` bytes takes on the link.
    fn wire_size(&self, size: u32) -> u32 {
        size.saturating_add(self.config.datagram_overhead)
    }

    /// Whether no queue seems to stand in front of this channel: its latest round trip
    /// is within `QUEUE_FREE_MARGIN_MS` (or half the base, if larger) of the base round
    /// trip, which a standing queue cannot age out.
    fn looks_queue_free(&self) -> bool {
        self.base_rtt_ms().is_none_or(|min| {
            self.rtt.latest_ms() <= min + (min * QUEUE_FREE_FRACTION).max(QUEUE_FREE_MARGIN_MS)
        })
    }

    /// The round trip without a queue, ms: [`BaseRtt`], or before it has a sample the
    /// windowed minimum.
    fn base_rtt_ms(&self) -> Option<f64> {
        self.base_rtt.get().or_else(|| self.rtt.min_ms())
    }

    pub fn congestion_control(&self) -> &dyn CongestionControl {
        &*self.cc
    }

    /// Largest ADU payload one slot carries.
    pub fn max_adu(&self) -> u32 {
        self.config.mtu
    }

    /// Bytes on the wire of a full slot.
    fn slot_wire_bytes(&self) -> u32 {
        self.wire_size(self.config.mtu + DATA_HEADER_LEN as u32)
    }

    pub fn srtt(&self) -> Duration {
        self.rtt_times.srtt
    }

    fn min_rtt(&self) -> Duration {
        self.rtt_times.min_rtt
    }

    /// Sustained rate this channel is expected to carry, bytes/s (0 while dead).
    pub fn rate(&self) -> f64 {
        if self.is_alive() {
            self.cc.rate(self.srtt())
        } else {
            0.0
        }
    }

    /// While the channel's start-up still counts (its controller is in its start-up, it
    /// has carried fewer than [`STARTUP_ROUNDS`] round trips, and its window, once filled,
    /// has stayed filled): the round trip its rate doubles over (the smoothed one, or the
    /// configured initial one before a sample) and the rounds left. `None` otherwise, or
    /// while the channel is dead: its rate is then what it is judged on.
    pub fn startup(&self) -> Option<Startup> {
        if !self.is_alive() || !self.cc.in_startup() {
            return None;
        }
        let rounds_left = self.sent.startup.rounds_left()?;
        Some(Startup::new(self.srtt(), rounds_left))
    }

    fn expected_rtt_ms(&self) -> f64 {
        self.rtt.srtt_ms().unwrap_or(self.config.initial_rtt_ms)
    }

    fn pto(&self) -> Duration {
        self.rtt_times.pto
    }

    fn dead_after(&self) -> Duration {
        (self.pto() * DEAD_AFTER_PTOS).max(MIN_DEAD_AFTER)
    }

    fn reo_wnd(&self) -> Duration {
        self.sent.reo_wnd(self.min_rtt(), self.srtt())
    }

    /// ADU payload bytes/s this channel is expected to carry in full slots: [`rate`]
    /// less the per-packet header.
    ///
    /// [`rate`]: Channel::rate
    pub fn payload_rate(&self) -> f64 {
        self.rate() * f64::from(self.max_adu()) / f64::from(self.slot_wire_bytes())
    }

    /// Keep the link's queue within `budget` of its rate (a latency objective needs
    /// this channel), or lift the bound (`None`).
    pub(crate) fn set_queue_budget(&mut self, budget: Option<Duration>) {
        self.queue_bound.set_budget(budget);
    }

    /// The queueing budget a latency objective set, if any.
    pub(crate) fn queue_budget(&self) -> Option<Duration> {
        self.queue_bound.budget()
    }

    /// Half the round trip without a queue: the one-way delay of the path alone.
    pub(crate) fn base_one_way(&self) -> Option<Duration> {
        self.base_rtt_ms().map(|m| ms(m / 2.0))
    }

    /// How long a packet sent now is expected to queue: the latest round trip's excess
    /// over the minimum, the freshest sign of the queue in front of the link.
    pub(crate) fn queue_delay(&self) -> Duration {
        ms(self.rtt.latest_ms()).saturating_sub(self.min_rtt())
    }

    /// How long the link has been silent beyond the pace of its acks: the time since data
    /// was last acknowledged while data is in flight, less a quarter of the smoothed
    /// round trip or [`MIN_ACK_GAP`], whichever is longer (acks are batched). The latest
    /// round trip is stale while a radio link pauses; this grows with the pause.
    pub(crate) fn stall(&self, now: Duration) -> Duration {
        if !self.sent.has_in_flight() {
            return Duration::ZERO;
        }
        let gap = (self.srtt() / 4).max(MIN_ACK_GAP);
        now.saturating_sub(self.last_progress).saturating_sub(gap)
    }

    /// The delivery rate averaged over the last seconds, bytes/s.
    pub(crate) fn average_delivery_rate(&self) -> Option<f64> {
        self.queue_bound.average_rate()
    }

    /// Room the queue bound leaves in flight, bytes (unbounded: `u64::MAX`).
    fn bound_room(&self) -> u64 {
        self.queue_bound
            .cap(self.min_rtt(), self.slot_wire_bytes())
            .map_or(u64::MAX, |cap| {
                cap.saturating_sub(self.sent.bytes_in_flight())
            })
    }

    /// Real slots open now beyond [`Channel::real_slot_count`] for the ADUs of
    /// latency-bound streams: up to [`RESERVED_SLOTS`] past the queue bound, whatever the
    /// controller allows (those ADUs are few and rate-limited). None while unbounded.
    pub(crate) fn reserved_slot_count(&self, now: Duration) -> usize {
        if !self.is_alive() {
            return 0;
        }
        let slot = u64::from(self.slot_wire_bytes());
        let Some(cap) = self.queue_bound.cap(self.min_rtt(), self.slot_wire_bytes()) else {
            return 0;
        };
        let room = (cap + RESERVED_SLOTS as u64 * slot).saturating_sub(self.sent.bytes_in_flight());
        ((room / slot) as usize)
            .saturating_sub(self.real_slot_count(now))
            .min(RESERVED_SLOTS)
    }

    /// Bytes the controller allows now, within the queue bound.
    fn allowance(&self, now: Duration) -> u64 {
        self.cc
            .allowance(now, self.sent.bytes_in_flight())
            .min(self.bound_room())
    }

    /// How many real slots are available now.
    pub fn real_slot_count(&self, now: Duration) -> usize {
        if !self.is_alive() {
            return 0;
        }
        let allowance = self.allowance(now);
        let n = (allowance / u64::from(self.slot_wire_bytes())) as usize;
        n.min(MAX_REAL_SLOTS_PER_CYCLE)
    }

    /// Bytes of spare capacity now (PluriBus §4.1: coded packets only where the path's
    /// queue is empty): none while a queue stands in front of the channel or no real slot
    /// is open, else what the pacing allows, at most what keeps the bytes in flight
    /// within [`SPARE_BDP_GAIN`] times the path's bandwidth-delay product plus one full
    /// packet. A window that merely allows a send is not spare capacity: coding into all
    /// of it grows a loss-based window into the link's buffer, and every data packet
    /// then waits behind the coded ones. The one packet beyond the product is the one the
    /// paper's queue estimate lets go when the queue is empty; without it a slow link
    /// (a bandwidth-delay product under one packet) could never carry a coded packet.
    /// Counted in bytes, not full slots, because coded packets are as small as the data
    /// they cover.
    ///
    /// The paper's own test comes last: its queue estimate, over every datagram this end
    /// sent here (acks included, which the pacing does not count), must have room for at
    /// most one packet.
    pub fn spare_bytes(&self, now: Duration) -> usize {
        if !self.looks_queue_free() || self.real_slot_count(now) == 0 {
            return 0;
        }
        let slot = self.slot_wire_bytes() as usize;
        let queue_room = self.queue.room(now, self.rate(), slot) as f64;
        let allowance = (self
            .allowance(now)
            .min(MAX_REAL_SLOTS_PER_CYCLE as u64 * u64::from(self.slot_wire_bytes()))
            as f64)
            .min(queue_room);
        let (Some(rate), Some(min)) = (self.delivery_max.get(), self.base_rtt_ms()) else {
            return allowance as usize;
        };
        let bdp = rate * min / 1e3 * SPARE_BDP_GAIN + f64::from(self.slot_wire_bytes());
        let room = (bdp - self.sent.bytes_in_flight() as f64).max(0.0);
        allowance.min(room) as usize
    }

    /// Append the real slots available now.
    pub fn real_slots(&self, now: Duration, out: &mut Vec<TxSlot>) -> usize {
        let n = self.real_slot_count(now);
        let next = self.sent.next_seq();
        for k in 0..n {
            out.push(self.slot(next + k as u64, 0.0, None));
        }
        n
    }

    /// Append the slots of a cycle period of length `period` that begins now: the real
    /// slots open now ([`Channel::real_slots`]) and, with `reserve`, the reserved ones
    /// ([`Channel::reserved_slot_count`]), then one per full slot the channel's rate
    /// (times [`PERIOD_RATE_GAIN`]) opens before the period ends, each with its wait, the
    /// time from now at which it is due. The window's headroom is what is open now; the
    /// acks expected over the period reopen it at about the rate. With a zero period only
    /// the open slots are appended. Only the open slots may be used at once; the others
    /// are due at their wait and only if the controller then allows a send.
    pub fn period_slots(
        &self,
        now: Duration,
        period: Duration,
        reserve: bool,
        out: &mut Vec<TxSlot>,
    ) -> PeriodSlots {
        let plain = self.real_slots(now, out);
        let reserved = if reserve {
            self.reserved_slot_count(now)
        } else {
            0
        };
        let next = self.sent.next_seq() + plain as u64;
        for k in 0..reserved {
            out.push(self.slot(next + k as u64, 0.0, None));
        }
        let open = plain + reserved;
        let rate = self.rate() * PERIOD_RATE_GAIN;
        // A fixed-rate token bucket that banks a period's tokens (as the simulator sets it
        // up) already offers the period's slots at the cycle, as the thesis's channels do.
        if period.is_zero() || rate <= 0.0 || self.cc.name() == "cbr" {
            return PeriodSlots {
                open,
                reserved,
                total: open,
                phantom_start: None,
            };
        }
        let spacing = f64::from(self.slot_wire_bytes()) / rate;
        let first = self.first_wait(now, plain, spacing);
        let horizon = period.as_secs_f64();
        let next = self.sent.next_seq() + open as u64;
        let mut k = 0;
        let mut wait = first;
        while open + k < MAX_PERIOD_SLOTS && wait < horizon {
            out.push(self.slot(next + k as u64, wait * 1e3, None));
            k += 1;
            wait = first + k as f64 * spacing;
        }
        PeriodSlots {
            open,
            reserved,
            total: open + k,
            phantom_start: Some(wait),
        }
    }

    /// Seconds from now to the first slot after `open` real ones, slots `spacing` apart:
    /// with none open, when the pacing next allows a send.
    fn first_wait(&self, now: Duration, open: usize, spacing: f64) -> f64 {
        match self.cc.next_allowance_at(now) {
            Some(t) if open == 0 => t.saturating_sub(now).as_secs_f64(),
            _ => spacing,
        }
    }

    /// Append phantom slots predicted for the next `lookahead`, after `real` real ones:
    /// ⌊λ/τ⌋ of them for slot period τ at the current rate (thesis §7.2.1). `start`, when
    /// given, is the wait of the first one in seconds (after a periodic cycle's slots).
    pub fn phantom_slots(
        &self,
        now: Duration,
        lookahead: Duration,
        real: usize,
        start: Option<f64>,
        out: &mut Vec<TxSlot>,
    ) {
        let rate = self.rate();
        if lookahead.is_zero() || rate <= 0.0 {
            return;
        }
        let period = f64::from(self.slot_wire_bytes()) / rate;
        let first = start.unwrap_or_else(|| self.first_wait(now, real, period));
        let horizon = lookahead.as_secs_f64();
        let next = self.sent.next_seq();
        let mut k = 0;
        while k < MAX_PHANTOM_SLOTS {
            let wait = first + k as f64 * period;
            if wait > horizon {
                break;
            }
            let confidence = 0.95f32.powi(k as i32 + 1);
            out.push(self.slot(next + (real + k) as u64, wait * 1e3, Some(confidence)));
            k += 1;
        }
    }

    fn slot(&self, sequence: u64, wait_ms: f64, phantom: Option<f32>) -> TxSlot {
        TxSlot {
            channel: self.id,
            sequence,
            loss_probability: self.loss.loss_rate(),
            expected_rtt_ms: self.expected_rtt_ms(),
            wait_ms,
            max_size: self.max_adu(),
            cost_per_kb: self.config.cost_per_kb,
            phantom,
            burst_correlation: match self.config.loss_correlation {
                LossCorrelation::Measured => self.loss.burst_correlation(),
                LossCorrelation::Thesis => thesis_burst_correlation(),
            },
        }
    }

    /// The sequence number the next packet will carry.
    pub fn next_seq_peek(&self) -> u64 {
        self.sent.next_seq()
    }

    /// The sender had nothing for this channel although it could send: rate samples taken
    /// until what is in flight now is delivered understate the channel.
    pub fn mark_app_limited(&mut self) {
        self.sent.mark_app_limited();
    }

    /// Record a packet about to be sent with the ADUs it carries (none for a probe);
    /// returns its sequence number.
    pub fn on_send(&mut self, now: Duration, size: u32, adus: &[SentAdu]) -> u64 {
        if !self.sent.has_in_flight() {
            // A channel that was idle starts its dead-man timer from this send.
            self.last_progress = self.last_progress.max(now);
        }
        let wire = self.wire_size(size);
        let seq = self.sent.on_send(now, wire, adus);
        self.last_sent = now;
        self.cc.on_sent(now, wire, self.sent.bytes_in_flight());
        let rate = self.rate();
        self.queue.on_sent(now, wire as usize, rate);
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += u64::from(size);
        if adus.is_empty() {
            self.stats.probes_sent += 1;
        }
        seq
    }

    /// Process an ack from the peer; newly acked (and late-acked) packets are appended to
    /// `out`, then any losses the ack reveals.
    pub fn on_ack(&mut self, now: Duration, ack: &Ack, out: &mut Vec<Resolved>) {
        let prior_in_flight = self.sent.bytes_in_flight();
        let min_rtt = self.rtt.min_ms().map(ms);
        let (cc, rtt, stats) = (&mut self.cc, &mut self.rtt, &mut self.stats);
        let base_rtt = &mut self.base_rtt;
        // With delayed acks, only the largest packet's round trip is known without the
        // time the ack waited (its delay is reported); the others' would inflate srtt.
        let largest_only = self.config.acks.sample_largest_only();
        let sampled = |seq: u64| !largest_only || seq == ack.largest;
        // Whether the ack covers a packet with ADUs: pings and probes carry none, and a
        // keepalive's round trip is not one of the start-up's.
        let mut data_acked = false;
        let frame = self.sent.on_ack(
            now,
            ack,
            min_rtt,
            largest_only,
            &mut self.loss,
            |seq, p, adus, resolution| {
                match resolution {
                    Resolution::Acked { rtt: r } => {
                        data_acked |= !adus.is_empty();
                        if sampled(seq) {
                            rtt.on_sample(now, r);
                            if p.found_empty {
                                base_rtt.on_sample(now, r);
                            }
                        }
                        stats.acked += 1;
                    }
                    Resolution::LateAcked { rtt: r, .. } => {
                        if sampled(seq) {
                            rtt.on_sample(now, r);
                        }
                        cc.on_spurious_loss(now, p.sent_at);
                        stats.late_acked += 1;
                    }
                    Resolution::Lost(_) => {}
                }
                push_resolved(out, seq, adus, resolution);
            },
        );
        self.rtt_times = RttTimes::of(&self.rtt, &self.config);
        if let Some(r) = &frame.rate {
            self.delivery_max.on_sample(now, r.delivery_rate);
            self.queue_bound
                .on_delivery_rate(now, r.delivery_rate, r.app_limited);
            if data_acked {
                self.sent.startup.on_rate_sample(r);
            }
        }
        if frame.acked_bytes > 0 {
            self.last_progress = now;
            if let Liveness::Dead { .. } = self.liveness {
                self.liveness = Liveness::Alive;
                self.cc.reset(now);
                // Its path was judged before it died: the new start-up is not counted on.
                self.sent.startup.end();
            }
            self.cc.on_ack(&AckSample {
                now,
                acked_bytes: frame.acked_bytes,
                rtt: frame.latest_rtt.unwrap_or(self.srtt()),
                min_rtt: self.min_rtt(),
                srtt: self.srtt(),
                prior_in_flight,
                in_flight: self.sent.bytes_in_flight(),
                rate: frame.rate,
            });
        }
        self.detect_losses(now, out);
        self.log_state(now, frame.rate.map(|r| r.delivery_rate));
    }

    /// At debug level, at most every `STATE_LOG_INTERVAL`: the estimates that decide
    /// pacing and spare capacity, to set beside a link's own queueing records.
    fn log_state(&mut self, now: Duration, delivery: Option<f64>) {
        if !tracing::enabled!(target: "horde_proto::channel::state", tracing::Level::DEBUG)
            || self
                .last_state_log
                .is_some_and(|t| now.saturating_sub(t) < STATE_LOG_INTERVAL)
        {
            return;
        }
        self.last_state_log = Some(now);
        let rate = self.rate();
        tracing::debug!(
            target: "horde_proto::channel::state",
            t = now.as_secs_f64(),
            channel = u8::from(self.id),
            min_rtt_ms = self.rtt.min_ms().unwrap_or(-1.0),
            base_rtt_ms = self.base_rtt_ms().unwrap_or(-1.0),
            latest_rtt_ms = self.rtt.latest_ms(),
            srtt_ms = self.rtt.srtt_ms().unwrap_or(-1.0),
            queue_bytes = self.queue.queued(now, rate),
            in_flight = self.sent.bytes_in_flight(),
            pacing_rate = rate,
            delivery_rate = delivery.unwrap_or(-1.0),
            delivery_max = self.delivery_max.get().unwrap_or(-1.0),
            spare = self.spare_bytes(now),
            "channel state"
        );
    }

    /// Whether a loss revealed now looks like an overflow of the queue the sender filled:
    /// the latest round trip sits near the largest one seen.
    fn classify_loss(rtt: &RttEstimator) -> LossKind {
        let (Some(min), Some(max)) = (rtt.min_ms(), rtt.max_ms()) else {
            return LossKind::Link;
        };
        let spread = max - min;
        if spread < MIN_QUEUE_SPREAD_MS.max(MIN_QUEUE_SPREAD_FRACTION * min) {
            return LossKind::Link;
        }
        if rtt.latest_ms() - min >= CONGESTION_QUEUE_FRACTION * spread {
            LossKind::Congestion
        } else {
            LossKind::Link
        }
    }

    /// Declare overdue packets lost (appended to `out`).
    pub fn detect_losses(&mut self, now: Duration, out: &mut Vec<Resolved>) {
        let reo_wnd = self.reo_wnd();
        let (cc, rtt, stats) = (&mut self.cc, &self.rtt, &mut self.stats);
        let in_flight = self.sent.bytes_in_flight();
        self.sent.detect_losses(
            now,
            reo_wnd,
            &mut self.loss,
            |_| Self::classify_loss(rtt),
            |seq, p, adus, kind| {
                record_loss(cc, stats, now, in_flight, p, kind);
                push_resolved(out, seq, adus, Resolution::Lost(kind));
            },
        );
    }

    /// Run the channel's timers: loss detection, the probe timeout, the dead-man check,
    /// and probes of a dead channel. Losses are appended to `out`.
    pub fn on_timeout(&mut self, now: Duration, out: &mut Vec<Resolved>) -> TimerActions {
        let mut actions = TimerActions::default();
        self.detect_losses(now, out);
        match self.liveness {
            Liveness::Alive => {
                if self.sent.has_in_flight()
                    && now.saturating_sub(self.last_progress) >= self.dead_after()
                {
                    self.die(now, out);
                    actions.died = true;
                    actions.probe = true;
                } else if self.sent.pto_time(self.pto()).is_some_and(|t| t <= now) {
                    self.sent.on_probe_timeout();
                    self.stats.probe_timeouts += 1;
                    actions.probe = true;
                }
            }
            Liveness::Dead { since, next_probe } if now >= next_probe => {
                let interval = if now.saturating_sub(since) < FAST_PROBING {
                    FAST_PROBE_INTERVAL
                } else {
                    PROBE_INTERVAL
                };
                self.liveness = Liveness::Dead {
                    since,
                    next_probe: now + interval,
                };
                actions.probe = true;
            }
            Liveness::Dead { .. } => {}
        }
        actions
    }

    /// Nothing acked for too long: the channel is dead, and what it had in flight is lost.
    fn die(&mut self, now: Duration, out: &mut Vec<Resolved>) {
        self.liveness = Liveness::Dead {
            since: now,
            next_probe: now + FAST_PROBE_INTERVAL,
        };
        self.abandon(now, out);
    }

    /// Declare everything in flight lost to the link (the channel died or is removed).
    pub fn abandon(&mut self, now: Duration, out: &mut Vec<Resolved>) {
        let (cc, stats) = (&mut self.cc, &mut self.stats);
        self.sent
            .declare_all_lost(now, &mut self.loss, |seq, p, adus, kind| {
                record_loss(cc, stats, now, 0, p, kind);
                push_resolved(out, seq, adus, Resolution::Lost(kind));
            });
    }

    /// Earliest time this channel needs [`Channel::on_timeout`] or an ack sent.
    pub fn next_timeout(&self) -> Option<Duration> {
        let mut t = self.recv.ack_due();
        t = min_opt(t, self.sent.loss_time(self.reo_wnd()));
        match self.liveness {
            Liveness::Alive => {
                t = min_opt(t, self.sent.pto_time(self.pto()));
                if self.sent.has_in_flight() {
                    t = min_opt(t, Some(self.last_progress + self.dead_after()));
                }
            }
            Liveness::Dead { next_probe, .. } => t = min_opt(t, Some(next_probe)),
        }
        t
    }

    /// When the congestion controller will next allow a send without an ack.
    pub fn next_send_at(&self, now: Duration) -> Option<Duration> {
        if !self.is_alive() {
            return None;
        }
        let allowance = self.allowance(now);
        if allowance >= u64::from(self.slot_wire_bytes()) {
            return Some(now);
        }
        if self.bound_room() < u64::from(self.slot_wire_bytes()) {
            // Held by the queue bound: only an ack opens it.
            return None;
        }
        // Pacing credit that is already there but cannot be used means the window is
        // full: only an ack opens it, and asking again now would spin the driver.
        self.cc.next_allowance_at(now).filter(|&t| t > now)
    }

    /// Record a received data packet or ping. Returns `false` for a duplicate.
    pub fn on_receive(&mut self, now: Duration, seq: u64, send_ts: u32) -> bool {
        self.stats.packets_received += 1;
        let schedule = self
            .config
            .acks
            .schedule(self.srtt(), self.rate(), self.last_ack_wire);
        let fresh = self.recv.on_receive(now, seq, send_ts, schedule);
        if !fresh {
            self.stats.duplicates += 1;
        }
        fresh
    }

    /// Build the ack to send now, if one is due.
    pub fn take_ack(&mut self, now: Duration, conn: u64) -> Option<Ack> {
        let recent_only = self.config.acks == AckFrequency::ReversePath;
        self.recv.take_ack(now, conn, self.id, recent_only)
    }

    /// Hand back an ack built by [`Channel::take_ack`] once it is encoded: its range
    /// list is reused by the next one, so acking allocates nothing at steady state.
    pub fn recycle_ack(&mut self, ack: Ack) {
        self.recv.recycle(ack.ranges);
    }

    /// The current RACK reordering-window multiplier (1 until losses prove spurious).
    #[cfg(test)]
    pub fn reordering_multiplier(&self) -> u32 {
        self.sent.reo_wnd_mult()
    }
}

/// The least round trip of packets sent while nothing else was in flight on the
/// channel, over the last 10-20 s **of such samples**: only those saw no queue this end
/// built (the sender-side form of PluriBus §5.3's samples from packets that "found the
/// queue empty"). The plain windowed minimum ages out while a standing queue lasts
/// longer than its window, and the queue then looks like the base; this one keeps its
/// last value until a packet sent into an empty path measures it again, so it follows a
/// path whose base delay really changed as soon as traffic pauses.
#[derive(Debug, Clone)]
struct BaseRtt(crate::estimator::WindowedExtreme);

impl Default for BaseRtt {
    fn default() -> Self {
        Self(crate::estimator::WindowedExtreme::new(false))
    }
}

impl BaseRtt {
    fn on_sample(&mut self, now: Duration, rtt: Duration) {
        self.0.on_sample(now, rtt.as_secs_f64() * 1e3);
    }

    fn get(&self) -> Option<f64> {
        self.0.get()
    }
}

/// One entry per ADU of a resolved packet; one without an ADU for a probe.
fn push_resolved(out: &mut Vec<Resolved>, seq: u64, adus: &[SentAdu], resolution: Resolution) {
    if adus.is_empty() {
        out.push(Resolved {
            seq,
            adu: None,
            resolution,
        });
    }
    for a in adus {
        out.push(Resolved {
            seq,
            adu: Some(*a),
            resolution,
        });
    }
}

fn record_loss(
    cc: &mut Box<dyn CongestionControl>,
    stats: &mut ChannelStats,
    now: Duration,
    in_flight: u64,
    p: &SentPacket,
    kind: LossKind,
) {
    cc.on_loss(&LossSample {
        now,
        bytes: p.size,
        sent_at: p.sent_at,
        kind,
        in_flight,
    });
    stats.lost += 1;
    if kind == LossKind::Congestion {
        stats.lost_congestion += 1;
    }
}

/// The round-trip times a channel's timers and its congestion controller read. They
/// change only with an RTT sample but are read on every poll of the session's timers,
/// so they are converted from the estimator's milliseconds once per sample.
#[derive(Debug, Clone, Copy)]
struct RttTimes {
    srtt: Duration,
    min_rtt: Duration,
    /// The probe timeout (RFC 9002 §6.2.1): srtt + max(4 rttvar, granularity) + the
    /// peer's ack delay; before any sample, three initial RTTs.
    pto: Duration,
}

impl RttTimes {
    fn of(rtt: &RttEstimator, config: &ChannelConfig) -> Self {
        let srtt = ms(rtt.srtt_ms().unwrap_or(config.initial_rtt_ms));
        let var = match rtt.srtt_ms() {
            Some(_) => rtt.rttvar_ms(),
            None => config.initial_rtt_ms / 2.0,
        };
        Self {
            srtt,
            min_rtt: ms(rtt.min_ms().unwrap_or(config.initial_rtt_ms)),
            pto: srtt + ms((4.0 * var).max(1.0)) + config.acks.peer_max_delay(),
        }
    }
}

fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x.max(0.0) / 1e3)
}

pub(crate) fn min_opt(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

#[cfg(test)]
mod ack_tests;
#[cfg(test)]
mod link_tests;
#[cfg(test)]
mod tests;
