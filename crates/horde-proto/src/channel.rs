//! The network channel manager (`ncManager`, thesis §3.3, ch. 4): one per channel.
//!
//! It owns the channel's congestion control and estimators, numbers and tracks the
//! packets it sends, detects their loss, turns congestion-control permission into real
//! `txSlot`s and its rate estimate into phantom ones, and keeps the receive state from
//! which it acknowledges the peer's packets on the same channel.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use horde_policy::TxSlot;

use crate::cc::{CcConfig, CongestionControl};
use crate::estimator::{thesis_burst_correlation, LossEstimator, RttEstimator};
use crate::wire::{Ack, DATA_HEADER_LEN, MAX_ACK_RANGES};

/// Channel settings.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    /// Largest ADU one slot carries, in bytes (thesis `maximumSize`). Datagrams are
    /// this plus the Horde header, plus the secure layer's overhead on real networks.
    #[serde(default = "default_mtu")]
    pub mtu: u32,
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
}

/// Where a channel's slot-pair loss correlations ([`TxSlot::burst_correlation`]) come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossCorrelation {
    /// P(both lost | either lost) measured on the channel's own packets, per gap
    /// ([`LossEstimator::burst_correlation`]).
    #[default]
    Measured,
    /// The fixed model of the thesis's simulations (§7.2.1): adjacent slots fully
    /// correlated, halving with each further step, nothing beyond
    /// [`horde_policy::CORRELATION_SPAN`] ([`thesis_burst_correlation`]).
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
        }
    }
}

/// What a sent packet carried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SentAdu {
    pub adu: u64,
    pub stream: u32,
    pub stream_seq: u64,
    pub inserted: Duration,
    /// Position in the session's transmission history, if it is being kept.
    pub history: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
struct SentPacket {
    sent_at: Duration,
    size: u32,
    adu: Option<SentAdu>,
}

#[derive(Debug, Clone, Copy)]
enum Fate {
    InFlight(SentPacket),
    Acked,
    Lost,
}

/// A resolved packet, reported to the session.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resolved {
    pub seq: u64,
    pub adu: Option<SentAdu>,
    /// `Some(rtt)` if acked, `None` if declared lost.
    pub rtt: Option<Duration>,
}

/// Liveness of a channel (thesis `chPoolMan`: dead channels get no slots).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    /// No ack for too long; only probes are sent until one is acked.
    Dead {
        next_probe: Duration,
    },
}

/// How long after the oldest outstanding packet or the last ack, with nothing acked, a
/// channel is declared dead, as a multiple of its loss timeout.
const DEAD_AFTER_TIMEOUTS: u32 = 3;
const MIN_DEAD_AFTER: Duration = Duration::from_millis(1000);
const PROBE_INTERVAL: Duration = Duration::from_millis(250);
/// Real slots offered per channel per cycle, so one very wide window cannot swamp a
/// scheduling cycle.
pub const MAX_REAL_SLOTS_PER_CYCLE: usize = 64;
const MAX_PHANTOM_SLOTS: usize = 64;
const MAX_ACK_DELAY: Duration = Duration::from_millis(1);
/// Received packets that trigger an immediate ack. Fewer acks save datagrams (and their
/// encryption) at high rates; at low rates MAX_ACK_DELAY decides.
const ACK_EVERY: u32 = 4;
/// Received-sequence ranges kept for building acks. Older ranges are forgotten, and
/// anything at or below what was forgotten counts as a duplicate.
const MAX_RECV_RANGES: usize = 64;

pub struct Channel {
    pub id: u8,
    /// Local interface (socket) index this channel sends from.
    pub local: u16,
    /// Peer address; follows the peer if its address changes.
    pub remote: SocketAddr,
    pub config: ChannelConfig,
    cc: Box<dyn CongestionControl>,
    pub rtt: RttEstimator,
    pub loss: LossEstimator,
    liveness: Liveness,

    next_seq: u64,
    base_seq: u64,
    fates: VecDeque<Fate>,
    bytes_in_flight: u64,
    largest_acked: Option<u64>,
    last_progress: Duration,
    /// Packets declared lost since the last ack.
    losses_since_ack: u32,

    recv_ranges: Vec<(u64, u64)>,
    /// Sequence numbers below this were dropped from `recv_ranges`: the receiver can no
    /// longer tell whether it saw them, so it treats them as duplicates.
    forgotten_below: u64,
    recv_largest_at: Duration,
    recv_largest_ts: u32,
    unacked_received: u32,
    ack_due: Option<Duration>,

    pub stats: ChannelStats,
}

/// Counters of one channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ChannelStats {
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub acked: u64,
    pub lost: u64,
    pub packets_received: u64,
    pub duplicates: u64,
    pub probes_sent: u64,
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
        id: u8,
        local: u16,
        remote: SocketAddr,
        config: ChannelConfig,
        now: Duration,
    ) -> Self {
        let cc = config
            .congestion
            .build(config.mtu + DATA_HEADER_LEN as u32, now);
        Self {
            id,
            local,
            remote,
            config,
            cc,
            rtt: RttEstimator::new(),
            loss: LossEstimator::new(),
            liveness: Liveness::Alive,
            next_seq: 0,
            base_seq: 0,
            fates: VecDeque::new(),
            bytes_in_flight: 0,
            largest_acked: None,
            last_progress: now,
            losses_since_ack: 0,
            recv_ranges: Vec::new(),
            forgotten_below: 0,
            recv_largest_at: now,
            recv_largest_ts: 0,
            unacked_received: 0,
            ack_due: None,
            stats: ChannelStats::default(),
        }
    }

    pub fn liveness(&self) -> Liveness {
        self.liveness
    }

    /// Whether any sequenced packet (data or probe) has arrived from the peer.
    pub fn has_received(&self) -> bool {
        !self.recv_ranges.is_empty()
    }

    pub fn is_alive(&self) -> bool {
        self.liveness == Liveness::Alive
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
        self.config.mtu + DATA_HEADER_LEN as u32
    }

    pub fn srtt(&self) -> Duration {
        Duration::from_secs_f64(self.rtt.srtt_ms().unwrap_or(self.config.initial_rtt_ms) / 1e3)
    }

    /// Sustained rate this channel is expected to carry, bytes/s (0 while dead).
    pub fn rate(&self) -> f64 {
        if self.is_alive() {
            self.cc.rate(self.srtt())
        } else {
            0.0
        }
    }

    fn expected_rtt_ms(&self) -> f64 {
        self.rtt.srtt_ms().unwrap_or(self.config.initial_rtt_ms)
    }

    /// Declare loss of an outstanding packet this long after sending it when a later
    /// packet was already acked. Tolerates per-packet delay variation (reordering) and
    /// queueing behind earlier packets: QUIC's 9/8 of the larger of smoothed and latest
    /// RTT, or four mean deviations above the smoothed RTT, whichever is larger.
    fn reorder_threshold(&self) -> Duration {
        match self.rtt.srtt_ms() {
            Some(s) => {
                let base = s.max(self.rtt.latest_ms());
                ms((base * 9.0 / 8.0).max(s + 4.0 * self.rtt.rttvar_ms()) + 2.0)
            }
            None => ms(2.0 * self.config.initial_rtt_ms),
        }
    }

    /// Declare loss this long after sending when nothing later was acked either.
    fn timeout(&self) -> Duration {
        self.reorder_threshold() * 5 / 4 + MAX_ACK_DELAY + Duration::from_millis(10)
    }

    /// ADU payload bytes/s this channel is expected to carry in full slots: [`rate`]
    /// less the per-packet header.
    ///
    /// [`rate`]: Channel::rate
    pub fn payload_rate(&self) -> f64 {
        self.rate() * f64::from(self.max_adu()) / f64::from(self.slot_wire_bytes())
    }

    /// Append the real slots available now.
    pub fn real_slots(&self, now: Duration, out: &mut Vec<TxSlot>) -> usize {
        if !self.is_alive() {
            return 0;
        }
        let n = (self.cc.allowance(now, self.bytes_in_flight) / u64::from(self.slot_wire_bytes()))
            as usize;
        let n = n.min(MAX_REAL_SLOTS_PER_CYCLE);
        for k in 0..n {
            out.push(self.slot(self.next_seq + k as u64, 0.0, None));
        }
        n
    }

    /// Append phantom slots predicted for the next `lookahead`, after `real` real ones:
    /// ⌊λ/τ⌋ of them for slot period τ at the current rate (thesis §7.2.1).
    pub fn phantom_slots(
        &self,
        now: Duration,
        lookahead: Duration,
        real: usize,
        out: &mut Vec<TxSlot>,
    ) {
        let rate = self.rate();
        if lookahead.is_zero() || rate <= 0.0 {
            return;
        }
        let period = f64::from(self.slot_wire_bytes()) / rate;
        let first = match self.cc.next_allowance_at(now) {
            Some(t) if real == 0 => t.saturating_sub(now).as_secs_f64(),
            _ => period,
        };
        let horizon = lookahead.as_secs_f64();
        let mut k = 0;
        while k < MAX_PHANTOM_SLOTS {
            let wait = first + k as f64 * period;
            if wait > horizon {
                break;
            }
            let confidence = 0.95f32.powi(k as i32 + 1);
            out.push(self.slot(
                self.next_seq + (real + k) as u64,
                wait * 1e3,
                Some(confidence),
            ));
            k += 1;
        }
    }

    fn slot(&self, sequence: u64, wait_ms: f64, phantom: Option<f32>) -> TxSlot {
        TxSlot {
            channel: u16::from(self.id),
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
        self.next_seq
    }

    /// Record a packet about to be sent; returns its sequence number.
    pub fn on_send(&mut self, now: Duration, size: u32, adu: Option<SentAdu>) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.fates.is_empty() {
            self.base_seq = seq;
            // A channel that was idle, rather than losing everything it sent, starts its
            // dead-man timer from this send, not from the last ack.
            if self.losses_since_ack == 0 {
                self.last_progress = self.last_progress.max(now);
            }
        }
        self.fates.push_back(Fate::InFlight(SentPacket {
            sent_at: now,
            size,
            adu,
        }));
        self.bytes_in_flight += u64::from(size);
        self.cc.on_sent(now, size);
        self.cc.note_in_flight(self.bytes_in_flight);
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += u64::from(size);
        if adu.is_none() {
            self.stats.probes_sent += 1;
        }
        seq
    }

    /// Process an ack from the peer; newly acked packets are appended to `out`.
    pub fn on_ack(&mut self, now: Duration, ack: &Ack, out: &mut Vec<Resolved>) {
        let before = out.len();
        for (lo, hi) in ack.iter_ranges() {
            let lo = lo.max(self.base_seq);
            let hi = hi.min(self.next_seq.saturating_sub(1));
            if self.fates.is_empty() || lo > hi {
                continue;
            }
            for seq in lo..=hi {
                let idx = (seq - self.base_seq) as usize;
                if let Some(Fate::InFlight(p)) = self.fates.get(idx).copied() {
                    self.fates[idx] = Fate::Acked;
                    self.bytes_in_flight -= u64::from(p.size);
                    let mut rtt = now.saturating_sub(p.sent_at);
                    if seq == ack.largest {
                        rtt =
                            rtt.saturating_sub(Duration::from_micros(u64::from(ack.ack_delay_us)));
                    }
                    self.rtt.on_sample(rtt);
                    self.cc.on_ack(now, p.size, rtt);
                    self.stats.acked += 1;
                    out.push(Resolved {
                        seq,
                        adu: p.adu,
                        rtt: Some(rtt),
                    });
                }
            }
        }
        if out.len() > before {
            self.largest_acked = self.largest_acked.max(Some(ack.largest));
            self.last_progress = now;
            self.losses_since_ack = 0;
            if let Liveness::Dead { .. } = self.liveness {
                self.liveness = Liveness::Alive;
                self.cc.reset(now);
            }
        }
        self.detect_losses(now, out);
    }

    /// Declare overdue packets lost (appended to `out`) and retire resolved ones.
    pub fn detect_losses(&mut self, now: Duration, out: &mut Vec<Resolved>) {
        let reorder = self.reorder_threshold();
        let timeout = self.timeout();
        for idx in 0..self.fates.len() {
            let Fate::InFlight(p) = self.fates[idx] else {
                continue;
            };
            let seq = self.base_seq + idx as u64;
            let age = now.saturating_sub(p.sent_at);
            if age < reorder {
                break; // every later packet is younger still
            }
            let overtaken = self.largest_acked.is_some_and(|l| l > seq);
            if overtaken || age >= timeout {
                self.fates[idx] = Fate::Lost;
                self.bytes_in_flight -= u64::from(p.size);
                self.cc.on_loss(now, p.size, p.sent_at);
                self.stats.lost += 1;
                self.losses_since_ack += 1;
                out.push(Resolved {
                    seq,
                    adu: p.adu,
                    rtt: None,
                });
            }
        }
        while let Some(f) = self.fates.front() {
            let lost = match f {
                Fate::InFlight(_) => break,
                Fate::Acked => false,
                Fate::Lost => true,
            };
            self.loss.on_outcome(lost);
            self.fates.pop_front();
            self.base_seq += 1;
        }
    }

    /// Check the dead-man timer; returns `true` if the channel just died.
    pub fn check_liveness(&mut self, now: Duration) -> bool {
        if !self.is_alive() || (self.fates.is_empty() && self.losses_since_ack == 0) {
            return false;
        }
        let limit = (self.timeout() * DEAD_AFTER_TIMEOUTS).max(MIN_DEAD_AFTER);
        if now.saturating_sub(self.last_progress) >= limit {
            self.liveness = Liveness::Dead { next_probe: now };
            return true;
        }
        false
    }

    /// If a probe is due on a dead channel, schedule the next one and return `true`.
    pub fn probe_due(&mut self, now: Duration) -> bool {
        match self.liveness {
            Liveness::Dead { next_probe } if now >= next_probe => {
                self.liveness = Liveness::Dead {
                    next_probe: now + PROBE_INTERVAL,
                };
                true
            }
            _ => false,
        }
    }

    /// Earliest time this channel needs attention (loss timer, ack timer, probe, or
    /// dead-man check).
    pub fn next_timeout(&self) -> Option<Duration> {
        let mut t = self.ack_due;
        let oldest = self.fates.iter().find_map(|f| match f {
            Fate::InFlight(p) => Some(p.sent_at),
            _ => None,
        });
        if let Some(sent) = oldest {
            let overtaken = self.largest_acked.is_some_and(|l| l > self.base_seq);
            let loss_at = sent
                + if overtaken {
                    self.reorder_threshold()
                } else {
                    self.timeout()
                };
            t = min_opt(t, Some(loss_at));
        }
        if self.is_alive() && (oldest.is_some() || self.losses_since_ack > 0) {
            let limit = (self.timeout() * DEAD_AFTER_TIMEOUTS).max(MIN_DEAD_AFTER);
            t = min_opt(t, Some(self.last_progress + limit));
        }
        if let Liveness::Dead { next_probe } = self.liveness {
            t = min_opt(t, Some(next_probe));
        }
        t
    }

    /// When the congestion controller will next allow a send without an ack.
    pub fn next_send_at(&self, now: Duration) -> Option<Duration> {
        if !self.is_alive() {
            return None;
        }
        if self.cc.allowance(now, self.bytes_in_flight) >= u64::from(self.slot_wire_bytes()) {
            return Some(now);
        }
        self.cc.next_allowance_at(now)
    }

    /// Record a received data packet or ping. Returns `false` for a duplicate.
    pub fn on_receive(&mut self, now: Duration, seq: u64, send_ts: u32) -> bool {
        self.stats.packets_received += 1;
        // Only numbers the receiver has forgotten are judged wholesale; everything else
        // by the exact ranges, so a stray far-ahead number (forged or corrupt) cannot
        // make later real packets look old.
        let too_old = seq < self.forgotten_below;
        if too_old || !insert_range(&mut self.recv_ranges, seq) {
            self.stats.duplicates += 1;
            return false;
        }
        if self.recv_ranges.first().map(|r| r.1) == Some(seq) {
            self.recv_largest_at = now;
            self.recv_largest_ts = send_ts;
        }
        if self.recv_ranges.len() > MAX_RECV_RANGES {
            let highest_dropped = self.recv_ranges[MAX_RECV_RANGES].1;
            self.forgotten_below = self.forgotten_below.max(highest_dropped.saturating_add(1));
            self.recv_ranges.truncate(MAX_RECV_RANGES);
        }
        self.unacked_received += 1;
        // Ack every ACK_EVERY packets at once, and anything else within MAX_ACK_DELAY.
        if self.unacked_received >= ACK_EVERY {
            self.ack_due = Some(now);
        } else if self.ack_due.is_none() {
            self.ack_due = Some(now + MAX_ACK_DELAY);
        }
        true
    }

    /// Build the ack to send now, if one is due.
    pub fn take_ack(&mut self, now: Duration, conn: u64) -> Option<Ack> {
        if self.ack_due.is_none_or(|t| t > now) {
            return None;
        }
        self.ack_due = None;
        self.unacked_received = 0;
        let (&(lo0, hi0), rest) = self.recv_ranges.split_first()?;
        let mut ranges = Vec::with_capacity(rest.len().min(MAX_ACK_RANGES));
        let mut prev_lo = lo0;
        for &(lo, hi) in rest.iter().take(MAX_ACK_RANGES) {
            ranges.push((prev_lo - hi - 2, hi - lo));
            prev_lo = lo;
        }
        Some(Ack {
            conn,
            channel: self.id,
            largest: hi0,
            ack_delay_us: now
                .saturating_sub(self.recv_largest_at)
                .as_micros()
                .min(u32::MAX as u128) as u32,
            echo_ts: self.recv_largest_ts,
            first_range: hi0 - lo0,
            ranges,
        })
    }

    pub fn ack_pending(&self) -> bool {
        self.ack_due.is_some()
    }
}

/// Insert `seq` into descending disjoint inclusive ranges; `false` if already present.
fn insert_range(ranges: &mut Vec<(u64, u64)>, seq: u64) -> bool {
    // Ranges are sorted by descending hi; find the first range with lo <= seq.
    let pos = ranges.partition_point(|&(lo, _)| lo > seq);
    if pos < ranges.len() && ranges[pos].1 >= seq {
        return false;
    }
    let joins_above = pos > 0 && ranges[pos - 1].0 == seq + 1;
    let joins_below = pos < ranges.len() && ranges[pos].1 + 1 == seq;
    match (joins_above, joins_below) {
        (true, true) => {
            ranges[pos - 1].0 = ranges[pos].0;
            ranges.remove(pos);
        }
        (true, false) => ranges[pos - 1].0 = seq,
        (false, true) => ranges[pos].1 = seq,
        (false, false) => ranges.insert(pos, (seq, seq)),
    }
    true
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
mod tests {
    use super::*;

    fn addr() -> SocketAddr {
        "127.0.0.1:9".parse().unwrap()
    }

    #[test]
    fn ranges_merge_and_reject_duplicates() {
        let mut r = Vec::new();
        for s in [5, 7, 6, 1, 2, 10] {
            assert!(insert_range(&mut r, s));
        }
        assert_eq!(r, vec![(10, 10), (5, 7), (1, 2)]);
        assert!(!insert_range(&mut r, 6));
        assert!(insert_range(&mut r, 3));
        assert!(insert_range(&mut r, 4));
        assert_eq!(r, vec![(10, 10), (1, 7)]);
    }

    #[test]
    fn acks_built_by_receiver_resolve_exactly_the_received_packets() {
        let t0 = Duration::ZERO;
        let cfg = ChannelConfig::default();
        let mut tx = Channel::new(0, 0, addr(), cfg.clone(), t0);
        let mut rx = Channel::new(0, 0, addr(), cfg, t0);
        let seqs: Vec<u64> = (0..10).map(|_| tx.on_send(t0, 1000, None)).collect();
        let t1 = Duration::from_millis(100);
        for &s in &seqs {
            if s != 3 && s != 4 && s != 8 {
                rx.on_receive(t1, s, 0);
            }
        }
        let ack = rx.take_ack(t1, 1).unwrap();
        let mut out = Vec::new();
        tx.on_ack(t1, &ack, &mut out);
        let acked: Vec<u64> = out
            .iter()
            .filter(|r| r.rtt.is_some())
            .map(|r| r.seq)
            .collect();
        assert_eq!(acked, vec![9, 5, 6, 7, 0, 1, 2]);
        // The holes are declared lost once the reorder threshold has passed.
        let mut out = Vec::new();
        tx.detect_losses(Duration::from_secs(5), &mut out);
        let lost: Vec<u64> = out.iter().map(|r| r.seq).collect();
        assert_eq!(lost, vec![3, 4, 8]);
        assert_eq!(tx.loss.total(), 10);
        assert_eq!(tx.loss.lost(), 3);
    }

    #[test]
    fn silent_channel_dies_and_comes_back_on_ack() {
        let t = Duration::from_millis;
        let mut ch = Channel::new(0, 0, addr(), ChannelConfig::default(), t(0));
        ch.on_send(t(0), 500, None);
        assert!(!ch.check_liveness(t(500)));
        assert!(ch.check_liveness(t(20_000)));
        assert!(!ch.is_alive());
        assert!(ch.probe_due(t(20_000)));
        assert!(!ch.probe_due(t(20_100)));
        let seq = ch.on_send(t(20_100), 40, None);
        let mut rx = Channel::new(0, 0, addr(), ChannelConfig::default(), t(0));
        rx.on_receive(t(20_150), seq, 0);
        assert!(
            rx.take_ack(t(20_150), 1).is_none(),
            "a lone packet is acked after the ack delay"
        );
        let ack = rx.take_ack(t(20_151), 1).unwrap();
        let mut out = Vec::new();
        ch.on_ack(t(20_200), &ack, &mut out);
        assert!(ch.is_alive());
    }
}
