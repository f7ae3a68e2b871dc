//! The send side of a channel's loss recovery: what is in flight, RACK-style time and
//! order based loss detection (RFC 8985) with a reordering window that grows when losses
//! prove spurious, probe timeouts that probe rather than declare (RFC 9002 §6.2), the
//! memory of declared losses that lets a late ack be recognised, and delivery-rate samples
//! (draft-cheng-iccrg-delivery-rate-estimation) for model-based congestion control.
//!
//! Horde never retransmits at this layer: a declared loss becomes a nack to the
//! application, so every false declaration costs the application, not only the window.

use std::collections::VecDeque;
use std::time::Duration;

use crate::cc::{LossKind, RateSample};
use crate::estimator::LossEstimator;
use crate::wire::Ack;

/// What a sent packet carried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SentAdu {
    pub adu: u64,
    pub stream: u32,
    pub stream_seq: u64,
    pub inserted: Duration,
    /// Position in the session's transmission history, if it is being kept.
    pub history: Option<u64>,
    /// Payload bytes (the peer's flow-control credit it takes).
    pub payload: u32,
}

/// Where a packet's ADUs sit in the tracker's ADU log: `count` entries from absolute
/// index `start`. A ping carries none; a packed packet several.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AduSpan {
    start: u64,
    count: u16,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct SentPacket {
    pub sent_at: Duration,
    pub size: u32,
    adus: AduSpan,
    /// Delivery-rate state when it was sent.
    delivered: u64,
    delivered_time: Duration,
    first_sent_time: Duration,
    app_limited: bool,
    /// Nothing else was in flight when it was sent: its round trip saw no queue of this
    /// sender's making.
    pub found_empty: bool,
}

#[derive(Debug, Clone, Copy)]
enum Fate {
    InFlight(SentPacket),
    Acked,
    Lost(LossKind),
}

/// A packet declared lost, remembered for a while so that a late ack for it is reported
/// as such and its congestion response undone.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LostPacket {
    pub seq: u64,
    pub packet: SentPacket,
    pub declared_at: Duration,
    pub kind: LossKind,
}

/// How long declared losses are remembered, at least and in round trips.
const LATE_ACK_MEMORY_MIN: Duration = Duration::from_secs(2);
const LATE_ACK_MEMORY_RTTS: u32 = 4;
/// At most this many declared losses are remembered per channel.
const LATE_ACK_MEMORY_PACKETS: usize = 4096;
/// The reordering window is min_rtt/4 times a multiplier (RFC 8985 §6.2) that grows by
/// one per round trip in which a spurious loss is seen, up to this, and is capped by srtt.
const MAX_REO_WND_MULT: u32 = 64;
/// Loss episodes without a spurious loss after which the multiplier falls back to 1.
const REO_WND_PERSIST: u32 = 16;
/// Timer granularity: runtimes wake on timers of about a millisecond.
const GRANULARITY: Duration = Duration::from_millis(1);
/// Room the ADU log, the fates and the loss memory always keep: steady state stays
/// within it (or within twice what it holds) and never reallocates.
const KEEP_ROOM: usize = 1024;

/// The capacity a buffer holding `len` entries in `capacity` gives back to, if it should:
/// once it holds under a quarter of its room, it keeps twice what it holds (at least
/// [`KEEP_ROOM`]). An outage fills these buffers with the packets sent into it, declared
/// lost and remembered for late acks; without this their peak room stayed allocated for
/// the session's life, and a sender's resident memory crept up outage after outage
/// (`docs/results.md`, "Soak"). Shrinking at a quarter to a half leaves the room to
/// double again before the next shrink, so it costs O(1) per entry, amortized.
fn shrunk_capacity(len: usize, capacity: usize) -> Option<usize> {
    let target = (2 * len).max(KEEP_ROOM);
    (capacity > 4 * len && capacity > target).then_some(target)
}

/// How an acked or lost packet was resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Resolution {
    Acked {
        rtt: Duration,
    },
    Lost(LossKind),
    /// Acked after it had been declared lost.
    LateAcked {
        rtt: Duration,
        kind: LossKind,
    },
}

/// The outcome of one ack frame for the packets it acknowledged.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct AckedFrame {
    pub acked_bytes: u64,
    /// RTT of the most recently sent newly acked packet.
    pub latest_rtt: Option<Duration>,
    pub rate: Option<RateSample>,
}

#[derive(Debug)]
pub(crate) struct SentTracker {
    next_seq: u64,
    /// Sequence number of `fates[0]`.
    base_seq: u64,
    fates: VecDeque<Fate>,
    bytes_in_flight: u64,
    largest_acked: Option<u64>,
    lost: VecDeque<LostPacket>,

    /// Send time and RTT of the most recently sent packet known delivered (RACK.xmit_ts,
    /// RACK.rtt).
    rack: Option<(Duration, Duration)>,
    reo_wnd_mult: u32,
    reo_wnd_persist: u32,
    /// When the multiplier last grew, so it grows at most once per round trip.
    reo_wnd_grown_at: Option<Duration>,
    last_episode_at: Option<Duration>,

    /// Probe timeouts fired since the last ack (the backoff exponent).
    pto_count: u32,
    last_ack_eliciting_at: Duration,

    delivered: u64,
    delivered_time: Duration,
    first_sent_time: Duration,
    /// Delivery count at which an application-limited phase ends (0: not limited).
    app_limited_until: u64,
    /// How long the channel's start-up counts for the message layer, counted from the
    /// rate samples made here (`Channel::startup`).
    pub(crate) startup: super::startup::StartupWatch,

    /// The ADUs of every packet still in flight or remembered as lost, in send order.
    /// Entries are dropped from the front once no such packet refers to them, so the log
    /// stops growing (and allocating) at steady state.
    adus: Vec<SentAdu>,
    /// Absolute index of `adus[0]`.
    adus_base: u64,
}

/// The ADUs of `span` in a log whose first entry has absolute index `base`.
fn span_of(log: &[SentAdu], base: u64, span: AduSpan) -> &[SentAdu] {
    let from = span.start.saturating_sub(base) as usize;
    let to = (from + usize::from(span.count)).min(log.len());
    log.get(from..to).unwrap_or(&[])
}

impl SentTracker {
    pub fn new(now: Duration) -> Self {
        Self {
            next_seq: 0,
            base_seq: 0,
            fates: VecDeque::new(),
            bytes_in_flight: 0,
            largest_acked: None,
            lost: VecDeque::new(),
            rack: None,
            reo_wnd_mult: 1,
            reo_wnd_persist: REO_WND_PERSIST,
            reo_wnd_grown_at: None,
            last_episode_at: None,
            pto_count: 0,
            last_ack_eliciting_at: now,
            delivered: 0,
            delivered_time: now,
            first_sent_time: now,
            app_limited_until: 0,
            startup: super::startup::StartupWatch::default(),
            adus: Vec::new(),
            adus_base: 0,
        }
    }

    /// Entries held in the ADU log (tests: it must not grow without bound).
    #[cfg(test)]
    fn adu_log_len(&self) -> usize {
        self.adus.len()
    }

    /// Room allocated for the ADU log, the fates and the loss memory, in entries (tests:
    /// an outage's peak is given back).
    #[cfg(test)]
    fn room(&self) -> (usize, usize, usize) {
        (
            self.adus.capacity(),
            self.fates.capacity(),
            self.lost.capacity(),
        )
    }

    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    pub fn bytes_in_flight(&self) -> u64 {
        self.bytes_in_flight
    }

    pub fn has_in_flight(&self) -> bool {
        self.bytes_in_flight > 0
    }

    #[cfg(test)]
    pub fn reo_wnd_mult(&self) -> u32 {
        self.reo_wnd_mult
    }

    /// The sender has nothing to send although the channel could take it: rate samples
    /// until what is in flight now is delivered say less than the channel can carry.
    pub fn mark_app_limited(&mut self) {
        self.app_limited_until = (self.delivered + self.bytes_in_flight).max(1);
    }

    /// Record a packet about to be sent, carrying `adus` (at most `u16::MAX`); returns
    /// its sequence number.
    pub fn on_send(&mut self, now: Duration, size: u32, adus: &[SentAdu]) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.fates.is_empty() {
            self.base_seq = seq;
        }
        // A new flight starts the rate clocks afresh only when nothing sent is still
        // unaccounted for: a packet declared lost may yet be acked late (a channel that
        // died in a burst of lost acks), and its bytes would then count as delivered
        // within an interval that began after it was sent, inflating the sample.
        if self.bytes_in_flight == 0 && self.lost.is_empty() {
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        let span = AduSpan {
            start: self.adus_base + self.adus.len() as u64,
            count: adus.len().min(usize::from(u16::MAX)) as u16,
        };
        self.adus
            .extend_from_slice(&adus[..usize::from(span.count)]);
        self.fates.push_back(Fate::InFlight(SentPacket {
            sent_at: now,
            size,
            adus: span,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            app_limited: self.app_limited_until > 0,
            found_empty: self.bytes_in_flight == 0,
        }));
        self.bytes_in_flight += u64::from(size);
        self.last_ack_eliciting_at = now;
        seq
    }

    /// Apply one ack frame. Calls `each` for every packet newly acked, late-acked
    /// included, with the ADUs it carried.
    pub fn on_ack(
        &mut self,
        now: Duration,
        ack: &Ack,
        min_rtt: Option<Duration>,
        guard_ack_delay: bool,
        estimator: &mut LossEstimator,
        mut each: impl FnMut(u64, &SentPacket, &[SentAdu], Resolution),
    ) -> AckedFrame {
        let largest = ack.largest;
        let ack_delay = Duration::from_micros(ack.ack_delay_us.into());
        let mut frame = AckedFrame::default();
        // The packet that sets the rate sample: the most recently sent one acked.
        let mut sample: Option<SentPacket> = None;
        for (lo, hi) in ack.iter_ranges() {
            let hi = hi.min(self.next_seq.saturating_sub(1));
            if lo > hi {
                continue;
            }
            self.ack_late(now, lo, hi, estimator, &mut each);
            for seq in lo.max(self.base_seq)..=hi {
                let idx = (seq - self.base_seq) as usize;
                let Some(Fate::InFlight(p)) = self.fates.get(idx).copied() else {
                    continue;
                };
                self.fates[idx] = Fate::Acked;
                self.bytes_in_flight -= u64::from(p.size);
                let mut rtt = now.saturating_sub(p.sent_at);
                if seq == largest {
                    // RFC 9002 §5.3: with `guard_ack_delay`, the reported delay is taken
                    // off only where that leaves at least the least round trip seen, so
                    // a delay the receiver overstates (or a late timer) cannot make the
                    // path look faster than it ever was.
                    let keeps_min = min_rtt.is_none_or(|m| rtt >= m + ack_delay);
                    if !guard_ack_delay || keeps_min {
                        rtt = rtt.saturating_sub(ack_delay).max(GRANULARITY.min(rtt));
                    }
                }
                self.delivered += u64::from(p.size);
                self.delivered_time = now;
                frame.acked_bytes += u64::from(p.size);
                if self.rack.is_none_or(|(sent, _)| p.sent_at >= sent) {
                    self.rack = Some((p.sent_at, rtt));
                    frame.latest_rtt = Some(rtt);
                }
                if sample.is_none_or(|s| p.delivered >= s.delivered) {
                    sample = Some(p);
                }
                let adus = span_of(&self.adus, self.adus_base, p.adus);
                each(seq, &p, adus, Resolution::Acked { rtt });
            }
        }
        if frame.acked_bytes > 0 {
            self.largest_acked = self.largest_acked.max(Some(largest));
            self.pto_count = 0;
        }
        if let Some(p) = sample {
            frame.rate = self.rate_sample(now, &p, min_rtt);
        }
        frame
    }

    /// Resolve declared losses in `lo..=hi` as late acks.
    fn ack_late(
        &mut self,
        now: Duration,
        lo: u64,
        hi: u64,
        estimator: &mut LossEstimator,
        each: &mut impl FnMut(u64, &SentPacket, &[SentAdu], Resolution),
    ) {
        let start = self.lost.partition_point(|l| l.seq < lo);
        let end = self.lost.partition_point(|l| l.seq <= hi);
        if start == end {
            return;
        }
        for l in self.lost.drain(start..end) {
            self.delivered += u64::from(l.packet.size);
            // Not yet counted by the estimator: count it delivered; counted: take it back.
            match l.seq.checked_sub(self.base_seq) {
                Some(idx) => self.fates[idx as usize] = Fate::Acked,
                None => {
                    if l.kind == LossKind::Link {
                        estimator.forgive(self.base_seq - 1 - l.seq);
                    }
                }
            }
            let rtt = now.saturating_sub(l.packet.sent_at);
            each(
                l.seq,
                &l.packet,
                span_of(&self.adus, self.adus_base, l.packet.adus),
                Resolution::LateAcked { rtt, kind: l.kind },
            );
            // A spurious loss: widen the reordering window, once per round trip.
            let round = self.rack.map_or(Duration::ZERO, |(_, r)| r);
            if self
                .reo_wnd_grown_at
                .is_none_or(|t| now.saturating_sub(t) >= round)
            {
                self.reo_wnd_mult = (self.reo_wnd_mult + 1).min(MAX_REO_WND_MULT);
                self.reo_wnd_grown_at = Some(now);
            }
            self.reo_wnd_persist = REO_WND_PERSIST;
        }
    }

    fn rate_sample(
        &mut self,
        now: Duration,
        p: &SentPacket,
        min_rtt: Option<Duration>,
    ) -> Option<RateSample> {
        self.first_sent_time = p.sent_at;
        if self.app_limited_until > 0 && self.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        let send_elapsed = p.sent_at.saturating_sub(p.first_sent_time);
        let ack_elapsed = now.saturating_sub(p.delivered_time);
        let interval = send_elapsed.max(ack_elapsed);
        // Shorter than a round trip means acks were compressed: no honest sample.
        if interval.is_zero() || min_rtt.is_some_and(|m| interval < m) {
            return None;
        }
        let delivered = self.delivered - p.delivered;
        Some(RateSample {
            delivery_rate: delivered as f64 / interval.as_secs_f64(),
            delivered,
            interval,
            app_limited: p.app_limited,
            total_delivered: self.delivered,
            prior_delivered: p.delivered,
        })
    }

    /// RACK's reordering window: how much later than the RACK round trip a packet sent
    /// before a delivered one may still arrive.
    pub fn reo_wnd(&self, min_rtt: Duration, srtt: Duration) -> Duration {
        (min_rtt / 4 * self.reo_wnd_mult).min(srtt).max(GRANULARITY)
    }

    /// When the oldest in-flight packet overtaken by a delivered one becomes lost.
    pub fn loss_time(&self, reo_wnd: Duration) -> Option<Duration> {
        let (_, rack_rtt) = self.rack?;
        let largest = self.largest_acked?;
        let overtaken = largest.saturating_sub(self.base_seq) as usize;
        self.fates.iter().take(overtaken).find_map(|f| match f {
            Fate::InFlight(p) => Some(p.sent_at + rack_rtt + reo_wnd),
            _ => None,
        })
    }

    /// Declare lost every packet sent before a delivered one whose time is up (RFC 8985
    /// §6.2); calls `each` for every one. Returns how many were declared.
    pub fn detect_losses(
        &mut self,
        now: Duration,
        reo_wnd: Duration,
        estimator: &mut LossEstimator,
        classify: impl Fn(&SentPacket) -> LossKind,
        mut each: impl FnMut(u64, &SentPacket, &[SentAdu], LossKind),
    ) -> usize {
        let (Some((_, rack_rtt)), Some(largest)) = (self.rack, self.largest_acked) else {
            self.retire(now, rack_rtt_or_zero(self.rack), estimator);
            return 0;
        };
        let mut declared = 0;
        for idx in 0..self.fates.len() {
            let seq = self.base_seq + idx as u64;
            if seq >= largest {
                break;
            }
            let Fate::InFlight(p) = self.fates[idx] else {
                continue;
            };
            if now < p.sent_at + rack_rtt + reo_wnd {
                break; // every later packet was sent later still
            }
            let kind = classify(&p);
            self.declare(now, idx, p, kind);
            each(seq, &p, span_of(&self.adus, self.adus_base, p.adus), kind);
            declared += 1;
        }
        if declared > 0 {
            self.on_loss_episode(now, rack_rtt);
        }
        self.retire(now, rack_rtt, estimator);
        declared
    }

    /// Declare every in-flight packet lost to the link (the channel died).
    pub fn declare_all_lost(
        &mut self,
        now: Duration,
        estimator: &mut LossEstimator,
        mut each: impl FnMut(u64, &SentPacket, &[SentAdu], LossKind),
    ) {
        for idx in 0..self.fates.len() {
            if let Fate::InFlight(p) = self.fates[idx] {
                self.declare(now, idx, p, LossKind::Link);
                let adus = span_of(&self.adus, self.adus_base, p.adus);
                each(self.base_seq + idx as u64, &p, adus, LossKind::Link);
            }
        }
        self.retire(now, rack_rtt_or_zero(self.rack), estimator);
    }

    fn declare(&mut self, now: Duration, idx: usize, p: SentPacket, kind: LossKind) {
        self.fates[idx] = Fate::Lost(kind);
        self.bytes_in_flight -= u64::from(p.size);
        let seq = self.base_seq + idx as u64;
        let at = self.lost.partition_point(|l| l.seq < seq);
        self.lost.insert(
            at,
            LostPacket {
                seq,
                packet: p,
                declared_at: now,
                kind,
            },
        );
        if self.lost.len() > LATE_ACK_MEMORY_PACKETS {
            self.lost.pop_front();
        }
    }

    /// A round of losses without a spurious one: after enough, trust the short window again.
    fn on_loss_episode(&mut self, now: Duration, round: Duration) {
        if self
            .last_episode_at
            .is_some_and(|t| now.saturating_sub(t) < round)
        {
            return;
        }
        self.last_episode_at = Some(now);
        self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
        if self.reo_wnd_persist == 0 {
            self.reo_wnd_mult = 1;
            self.reo_wnd_persist = REO_WND_PERSIST;
        }
    }

    /// Drop resolved packets from the front, giving the estimator their outcomes in
    /// sequence order (only link losses count as lost: a queue the sender overfilled says
    /// nothing about the link). Forget declared losses too old for a late ack.
    fn retire(&mut self, now: Duration, round: Duration, estimator: &mut LossEstimator) {
        loop {
            let lost = match self.fates.front() {
                Some(Fate::Acked) => false,
                Some(Fate::Lost(kind)) => *kind == LossKind::Link,
                _ => break,
            };
            estimator.on_outcome(lost);
            self.fates.pop_front();
            self.base_seq += 1;
        }
        let memory = (round * LATE_ACK_MEMORY_RTTS).max(LATE_ACK_MEMORY_MIN);
        while self
            .lost
            .front()
            .is_some_and(|l| now.saturating_sub(l.declared_at) > memory)
        {
            self.lost.pop_front();
        }
        self.forget_adus();
    }

    /// Drop the ADU log's entries no packet in flight or in the loss memory refers to.
    /// Both are in send order, so the oldest entry still needed belongs to the first of
    /// either. Entries go in batches of at least half the log: amortized O(1) per ADU,
    /// without reallocating. Then give back the room an outage left (see
    /// [`shrunk_capacity`]).
    fn forget_adus(&mut self) {
        let end = self.adus_base + self.adus.len() as u64;
        let in_flight = self.fates.iter().find_map(|f| match f {
            Fate::InFlight(p) => Some(p.adus.start),
            _ => None,
        });
        let remembered = self.lost.front().map(|l| l.packet.adus.start);
        let keep_from = in_flight.unwrap_or(end).min(remembered.unwrap_or(end));
        let drop = keep_from.saturating_sub(self.adus_base) as usize;
        if drop > 0 && drop * 2 >= self.adus.len() {
            self.adus.drain(..drop);
            self.adus_base += drop as u64;
        }
        if let Some(c) = shrunk_capacity(self.adus.len(), self.adus.capacity()) {
            self.adus.shrink_to(c);
        }
        if let Some(c) = shrunk_capacity(self.fates.len(), self.fates.capacity()) {
            self.fates.shrink_to(c);
        }
        if let Some(c) = shrunk_capacity(self.lost.len(), self.lost.capacity()) {
            self.lost.shrink_to(c);
        }
    }

    /// A probe timeout fired: the next one waits twice as long, until an ack.
    pub fn on_probe_timeout(&mut self) {
        self.pto_count += 1;
    }

    /// When the probe timeout fires: `pto` after the last ack-eliciting send, doubled per
    /// probe already unanswered. `None` with nothing in flight.
    pub fn pto_time(&self, pto: Duration) -> Option<Duration> {
        self.has_in_flight()
            .then(|| self.last_ack_eliciting_at + pto * (1u32 << self.pto_count.min(10)))
    }
}

fn rack_rtt_or_zero(rack: Option<(Duration, Duration)>) -> Duration {
    rack.map_or(Duration::ZERO, |(_, r)| r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_policy::ChannelId;

    fn t(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    /// An ack of the one range `lo..=hi`.
    fn frame(lo: u64, hi: u64) -> Ack {
        Ack {
            conn: 1,
            channel: ChannelId::new(0),
            largest: hi,
            ack_delay_us: 0,
            echo_ts: 0,
            first_range: hi - lo,
            ranges: Vec::new(),
        }
    }

    fn ack(s: &mut SentTracker, now: Duration, lo: u64, hi: u64) -> Vec<(u64, Resolution)> {
        let mut out = Vec::new();
        let mut est = LossEstimator::new();
        s.on_ack(now, &frame(lo, hi), None, false, &mut est, |q, _, _, r| {
            out.push((q, r))
        });
        out
    }

    /// The round trip an ack reporting `delay_ms` gives a packet sent at 0 and acked at
    /// 45 ms, on a path whose least round trip was 40 ms.
    fn sampled_rtt(guard: bool, delay_ms: u32) -> Duration {
        let mut s = SentTracker::new(t(0));
        s.on_send(t(0), 1000, &[]);
        let mut a = frame(0, 0);
        a.ack_delay_us = delay_ms * 1000;
        let mut rtt = None;
        let mut est = LossEstimator::new();
        s.on_ack(t(45), &a, Some(t(40)), guard, &mut est, |_, _, _, r| {
            if let Resolution::Acked { rtt: x } = r {
                rtt = Some(x);
            }
        });
        rtt.unwrap()
    }

    #[test]
    fn an_ack_delay_is_taken_off_only_down_to_the_least_round_trip() {
        assert_eq!(sampled_rtt(true, 3), t(42));
        // 45 - 10 would be under the least round trip: the delay is not believed.
        assert_eq!(sampled_rtt(true, 10), t(45));
        // Unguarded (the fixed policy, whose delays are 1 ms) it is taken off.
        assert_eq!(sampled_rtt(false, 10), t(35));
    }

    fn detect(s: &mut SentTracker, now: Duration, reo: Duration) -> Vec<u64> {
        let mut lost = Vec::new();
        let mut est = LossEstimator::new();
        s.detect_losses(
            now,
            reo,
            &mut est,
            |_| LossKind::Link,
            |q, _, _, _| lost.push(q),
        );
        lost
    }

    #[test]
    fn delay_alone_declares_nothing() {
        let mut s = SentTracker::new(t(0));
        for _ in 0..10 {
            s.on_send(t(0), 1000, &[]);
        }
        // A long silence (an outage): no later packet was delivered, so nothing is lost.
        assert!(detect(&mut s, t(5_000), t(10)).is_empty());
        assert_eq!(s.bytes_in_flight(), 10_000);
        // Everything then arrives.
        assert_eq!(ack(&mut s, t(5_050), 0, 9).len(), 10);
        assert!(!s.has_in_flight());
    }

    #[test]
    fn a_hole_is_lost_after_rack_rtt_plus_window() {
        let mut s = SentTracker::new(t(0));
        for i in 0..4 {
            s.on_send(t(i * 10), 1000, &[]);
        }
        ack(&mut s, t(130), 0, 0); // rtt 130
        ack(&mut s, t(160), 2, 3); // packet 1 (sent at 10) is overtaken; rack rtt 130
        let reo = t(20);
        assert_eq!(s.loss_time(reo), Some(t(10 + 130 + 20)));
        assert!(detect(&mut s, t(159), reo).is_empty());
        assert_eq!(detect(&mut s, t(160), reo), vec![1]);
    }

    #[test]
    fn late_ack_is_reported_and_widens_the_window() {
        let mut s = SentTracker::new(t(0));
        for _ in 0..3 {
            s.on_send(t(0), 1000, &[]);
        }
        ack(&mut s, t(100), 1, 2);
        assert_eq!(detect(&mut s, t(200), t(1)), vec![0]);
        assert_eq!(s.reo_wnd_mult(), 1);
        let late = ack(&mut s, t(250), 0, 0);
        let kind = LossKind::Link;
        assert_eq!(late, vec![(0, Resolution::LateAcked { rtt: t(250), kind })]);
        assert_eq!(s.reo_wnd_mult(), 2);
        // Reported once only.
        assert!(ack(&mut s, t(260), 0, 0).is_empty());
    }

    fn sent_adu(adu: u64) -> SentAdu {
        SentAdu {
            adu,
            stream: 1,
            stream_seq: adu,
            inserted: Duration::ZERO,
            history: None,
            payload: 100,
        }
    }

    /// An outage fills the log, the fates and the loss memory with what was sent into it;
    /// once those losses are forgotten, the room they took is given back.
    #[test]
    fn an_outage_gives_its_room_back_once_its_losses_are_forgotten() {
        let mut s = SentTracker::new(t(0));
        let mut est = LossEstimator::new();
        let mut next_adu = 0;
        let mut send = |s: &mut SentTracker, at: Duration| {
            let adus: Vec<_> = (0..10).map(|k| sent_adu(next_adu + k)).collect();
            next_adu += 10;
            s.on_send(at, 1000, &adus)
        };
        // One second of 5000 packets of 10 ADUs each into a dead link, then declared lost.
        for k in 0..5000 {
            send(&mut s, Duration::from_micros(200 * k));
        }
        assert!(s.room().1 >= 5000, "{:?}", s.room());
        let mut lost = 0;
        s.declare_all_lost(t(1000), &mut est, |_, _, a, _| lost += a.len());
        assert_eq!(lost, 50_000);
        let (log, _, memory) = s.room();
        assert!(
            log >= 40_000 && memory >= LATE_ACK_MEMORY_PACKETS,
            "{:?}",
            s.room()
        );
        // The link is back: packets are sent and acked one by one, past the loss memory.
        for round in 0..100 {
            let now = t(1000 + 50 * round);
            let seq = send(&mut s, now);
            s.on_ack(
                now + t(20),
                &frame(seq, seq),
                None,
                false,
                &mut est,
                |_, _, _, _| {},
            );
            // As the channel does after every ack.
            s.detect_losses(
                now + t(20),
                t(1),
                &mut est,
                |_| LossKind::Link,
                |_, _, _, _| {},
            );
        }
        let (log, fates, memory) = s.room();
        assert!(
            log <= 2 * KEEP_ROOM && fates <= 2 * KEEP_ROOM && memory <= 2 * KEEP_ROOM,
            "room kept after the outage: {:?}",
            s.room()
        );
        assert_eq!(s.adu_log_len(), 0);
    }

    #[test]
    fn packed_adus_share_their_packets_fate_and_the_log_stays_bounded() {
        let mut s = SentTracker::new(t(0));
        let mut est = LossEstimator::new();
        let mut next_adu = 0;
        let mut resolved: Vec<(u64, Vec<u64>, bool)> = Vec::new();
        for round in 0..200u64 {
            // Three packets: 3 ADUs, a probe (none), 1 ADU.
            let base = round * 3;
            for n in [3, 0, 1] {
                let adus: Vec<_> = (0..n).map(|k| sent_adu(next_adu + k)).collect();
                next_adu += n;
                s.on_send(t(round * 10), 1000, &adus);
            }
            // The first packet of each round is lost: acked around.
            let now = t(round * 10 + 100);
            s.on_ack(
                now,
                &frame(base + 1, base + 2),
                None,
                false,
                &mut est,
                |q, _, a, r| {
                    resolved.push((
                        q,
                        a.iter().map(|x| x.adu).collect(),
                        matches!(r, Resolution::Acked { .. }),
                    ))
                },
            );
            s.detect_losses(
                now + t(200),
                t(1),
                &mut est,
                |_| LossKind::Link,
                |q, _, a, _| resolved.push((q, a.iter().map(|x| x.adu).collect(), false)),
            );
        }
        // Round 0: packet 1 (probe) and 2 (ADU 3) acked, packet 0 (ADUs 0-2) lost.
        assert_eq!(resolved[0], (1, vec![], true));
        assert_eq!(resolved[1], (2, vec![3], true));
        assert_eq!(resolved[2], (0, vec![0, 1, 2], false));
        let lost: usize = resolved.iter().filter(|r| !r.2).map(|r| r.1.len()).sum();
        assert_eq!(lost, 600, "every ADU of every lost packet reported once");
        // The log holds only what lost-packet memory (for late acks) still refers to.
        assert!(
            s.adu_log_len() <= 2 * 4 * 200,
            "log kept {}",
            s.adu_log_len()
        );
        // A late ack for a remembered lost packet still names its ADUs.
        let mut late = Vec::new();
        s.on_ack(
            t(2300),
            &frame(597, 597),
            None,
            false,
            &mut est,
            |q, _, a, r| late.push((q, a.iter().map(|x| x.adu).collect::<Vec<_>>(), r)),
        );
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].1, vec![796, 797, 798]);
        assert!(matches!(late[0].2, Resolution::LateAcked { .. }));
    }

    #[test]
    fn late_acks_after_a_death_do_not_inflate_the_next_rate_sample() {
        let mut s = SentTracker::new(t(0));
        let mut est = LossEstimator::new();
        // Ten packets of 1000 B at 100 kB/s; every ack is lost and the channel dies.
        for i in 0..10 {
            s.on_send(t(i * 10), 1000, &[]);
        }
        s.declare_all_lost(t(1000), &mut est, |_, _, _, _| {});
        assert_eq!(s.bytes_in_flight(), 0);
        // A probe goes out; its ack also covers the ten, which had arrived after all.
        s.on_send(t(1100), 35, &[]);
        let f = s.on_ack(
            t(1150),
            &frame(0, 10),
            Some(t(40)),
            false,
            &mut est,
            |_, _, _, _| {},
        );
        let r = f.rate.expect("a sample from the probe's ack");
        assert_eq!(r.delivered, 10_035);
        // They were sent at 100 kB/s and arrived no faster: a sample over the probe's
        // 50 ms alone would claim 200 kB/s.
        assert!(r.delivery_rate <= 100_000.0, "{r:?}");
    }

    #[test]
    fn rate_sample_measures_delivery() {
        let mut s = SentTracker::new(t(0));
        // A packet of 1000 B every 10 ms, each acked 100 ms after it was sent: 100 kB/s.
        let mut rate = None;
        for now in (0..400).step_by(10) {
            if now >= 100 {
                let seq = (now - 100) / 10;
                let mut est = LossEstimator::new();
                let f = s.on_ack(
                    t(now),
                    &frame(seq, seq),
                    Some(t(100)),
                    false,
                    &mut est,
                    |_, _, _, _| {},
                );
                rate = f.rate.or(rate);
            }
            s.on_send(t(now), 1000, &[]);
        }
        let r = rate.expect("a sample once a round trip of data was acked");
        assert!((r.delivery_rate - 100_000.0).abs() < 12_000.0, "{r:?}");
        assert!(!r.app_limited);
        // Marked application-limited, the next samples say so.
        s.mark_app_limited();
        s.on_send(t(400), 1000, &[]);
        let mut est = LossEstimator::new();
        let f = s.on_ack(
            t(500),
            &frame(40, 40),
            None,
            false,
            &mut est,
            |_, _, _, _| {},
        );
        assert!(f.rate.unwrap().app_limited);
    }
}
