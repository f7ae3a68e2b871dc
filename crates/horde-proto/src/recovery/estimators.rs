//! Receiver-side path estimators (PluriBus §5.1-§5.3), one set per channel: capacity from
//! receive against send rate, one-way delay plus clock offset (Paxson), and loss.

use std::time::Duration;

use horde_policy::ChannelId;

use super::header::{ReportEntry, NO_DELAY};

/// Length of one capacity measurement interval (§5.2).
pub(crate) const CAPACITY_INTERVAL: Duration = Duration::from_millis(500);
/// Consecutive agreeing intervals before the capacity estimate moves (§5.2).
pub(crate) const CAPACITY_VOTES: usize = 3;
/// Gain of the delay average (the paper gives none; RFC 6298's srtt gain).
pub(crate) const DELAY_GAIN: f64 = 1.0 / 8.0;
/// Gain of the loss average: about the last 20 packets, the horizon the paper checks
/// its loss estimate against (§6.3).
pub(crate) const LOSS_GAIN: f64 = 1.0 / 20.0;

/// Capacity in bytes/s, from 500 ms intervals. An interval counts only when the sender
/// sent faster than the current estimate (then the receive rate shows what the
/// bottleneck drains); the estimate moves to the median receive rate of three
/// consecutive counting intervals that all lie on the same side of it. An interval that
/// does not count, or disagrees, restarts the run.
#[derive(Debug, Clone, Default)]
pub(crate) struct CapacityEstimator {
    estimate: Option<f64>,
    start: Option<Duration>,
    bytes: u64,
    first_send_us: Option<u32>,
    last_send_us: u32,
    votes: Vec<f64>,
    above: bool,
}

impl CapacityEstimator {
    /// Start from an expected capacity (the paper bootstraps proxies with one). Only the
    /// tests start from one today.
    #[cfg(test)]
    pub fn with_bootstrap(bytes_per_sec: f64) -> Self {
        Self {
            estimate: Some(bytes_per_sec),
            ..Self::default()
        }
    }

    pub fn estimate(&self) -> Option<f64> {
        self.estimate
    }

    /// A packet of `bytes` sent at sender time `send_us` arrived at `now`.
    pub fn on_packet(&mut self, now: Duration, send_us: u32, bytes: usize) {
        let start = *self.start.get_or_insert(now);
        if now.saturating_sub(start) >= CAPACITY_INTERVAL {
            self.close_interval();
            // Whole empty intervals in between are idle: they do not count either way.
            self.start = Some(now);
        }
        self.bytes += bytes as u64;
        if self.first_send_us.is_none() {
            self.first_send_us = Some(send_us);
        }
        self.last_send_us = send_us;
    }

    fn close_interval(&mut self) {
        let recv_rate = self.bytes as f64 / CAPACITY_INTERVAL.as_secs_f64();
        let span_us = self
            .first_send_us
            .map_or(0, |f| self.last_send_us.wrapping_sub(f));
        let send_rate = if span_us == 0 {
            f64::INFINITY
        } else {
            self.bytes as f64 / (f64::from(span_us) / 1e6)
        };
        self.bytes = 0;
        self.first_send_us = None;
        let current = self.estimate.unwrap_or(0.0);
        if send_rate <= current || recv_rate == 0.0 || recv_rate == current {
            self.votes.clear();
            return;
        }
        let above = recv_rate > current;
        if !self.votes.is_empty() && above != self.above {
            self.votes.clear();
        }
        self.above = above;
        self.votes.push(recv_rate);
        if self.votes.len() == CAPACITY_VOTES {
            self.votes.sort_by(f64::total_cmp);
            self.estimate = Some(self.votes[CAPACITY_VOTES / 2]);
            self.votes.clear();
        }
    }
}

/// One-way delay plus the clock offset between the ends, `d + δ` (§5.3), in ms.
/// Samples are `t_recv - t_send - size/capacity`, taken only from packets that found the
/// queue empty (arrived at least twice their transmission time after the previous one).
/// Both clocks are 32-bit microsecond counters; the difference is taken modulo 2^32 as
/// a signed value, so wrap-around does not matter. Clock skew (the offset drifting as
/// the clocks run at slightly different rates) moves every sample alike and the average
/// follows it; it is the same on every path, so path comparisons are unaffected.
#[derive(Debug, Clone, Default)]
pub(crate) struct DelayEstimator {
    average_ms: Option<f64>,
    last_arrival: Option<Duration>,
    pub samples: u64,
}

impl DelayEstimator {
    pub fn estimate_ms(&self) -> Option<f64> {
        self.average_ms
    }

    /// `capacity` in bytes/s (the current estimate; without one every packet counts
    /// and the transmission time is taken as zero).
    pub fn on_packet(
        &mut self,
        now: Duration,
        recv_us: u32,
        send_us: u32,
        bytes: usize,
        capacity: Option<f64>,
    ) {
        let tx = capacity
            .filter(|c| *c > 0.0)
            .map_or(0.0, |c| bytes as f64 / c);
        let gap = self
            .last_arrival
            .map(|t| now.saturating_sub(t).as_secs_f64());
        self.last_arrival = Some(now);
        if gap.is_some_and(|g| g < 2.0 * tx) {
            return; // it queued behind the previous one
        }
        let raw_ms = f64::from(recv_us.wrapping_sub(send_us) as i32) / 1e3;
        let sample = raw_ms - tx * 1e3;
        self.samples += 1;
        self.average_ms = Some(match self.average_ms {
            None => sample,
            Some(a) => a + DELAY_GAIN * (sample - a),
        });
    }
}

/// Loss rate measured by the receiver from the channel's packet sequence numbers: each
/// number skipped counts as a loss, each arrival as a delivery, in an exponential
/// average. A packet arriving after a higher one was counted lost when skipped; it is
/// then counted delivered as well, so reordering biases the estimate up a little.
#[derive(Debug, Clone, Default)]
pub(crate) struct LossEstimator {
    rate: f64,
    highest: Option<u64>,
}

/// Skipped sequence numbers beyond this in one jump are a restart, not losses.
const MAX_GAP: u64 = 1000;

impl LossEstimator {
    pub fn rate(&self) -> f64 {
        self.rate
    }

    pub fn on_packet(&mut self, seq: u64) {
        match self.highest {
            Some(h) if seq == h => return, // several ADUs of one packet
            Some(h) if seq > h => {
                let gap = seq - h - 1;
                if gap <= MAX_GAP {
                    for _ in 0..gap {
                        self.rate += LOSS_GAIN * (1.0 - self.rate);
                    }
                }
                self.highest = Some(seq);
            }
            Some(_) => {}
            None => self.highest = Some(seq),
        }
        self.rate -= LOSS_GAIN * self.rate;
    }
}

/// What the receiver knows about one channel.
#[derive(Debug, Clone, Default)]
pub(crate) struct PathEstimators {
    pub capacity: CapacityEstimator,
    pub delay: DelayEstimator,
    pub loss: LossEstimator,
}

/// What the receiver of a recovery stream has measured of one of the sender's channels
/// (capacity, delay and loss, as PluriBus estimates them), as report frames carry it back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathEstimate {
    /// The sender's channel.
    pub channel: ChannelId,
    /// Bytes/s, once three intervals agreed.
    pub capacity: Option<f64>,
    /// `d + δ`, ms.
    pub delay_ms: Option<f64>,
    /// Loss rate in [0, 1], a moving average over sequence-number gaps.
    pub loss: f64,
}

/// How often the receiver reports its estimates back, at most (while packets arrive).
pub(crate) const REPORT_INTERVAL: Duration = Duration::from_millis(100);

impl PathEstimate {
    /// As carried in a report frame.
    pub fn to_entry(&self) -> ReportEntry {
        ReportEntry {
            channel: self.channel,
            loss: (self.loss.clamp(0.0, 1.0) * 65535.0).round() as u16,
            delay_us: self.delay_ms.map_or(NO_DELAY, |d| {
                (d * 1e3)
                    .round()
                    .clamp(f64::from(i32::MIN + 1), f64::from(i32::MAX)) as i32
            }),
            capacity: self
                .capacity
                .map_or(0, |c| c.round().clamp(1.0, f64::from(u32::MAX)) as u32),
        }
    }

    /// As decoded from a report frame (the inverse of [`PathEstimate::to_entry`], up to
    /// its rounding).
    pub fn from_entry(e: &ReportEntry) -> Self {
        PathEstimate {
            channel: e.channel,
            capacity: (e.capacity > 0).then_some(f64::from(e.capacity)),
            delay_ms: (e.delay_us != NO_DELAY).then_some(f64::from(e.delay_us) / 1e3),
            loss: f64::from(e.loss) / 65535.0,
        }
    }
}

impl PathEstimators {
    pub fn on_packet(&mut self, now: Duration, recv_us: u32, seq: u64, send_us: u32, bytes: usize) {
        self.loss.on_packet(seq);
        self.delay
            .on_packet(now, recv_us, send_us, bytes, self.capacity.estimate());
        self.capacity.on_packet(now, send_us, bytes);
    }

    pub fn snapshot(&self, channel: ChannelId) -> PathEstimate {
        PathEstimate {
            channel,
            capacity: self.capacity.estimate(),
            delay_ms: self.delay.estimate_ms(),
            loss: self.loss.rate(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn us(t: Duration) -> u32 {
        t.as_micros() as u32
    }

    /// Packets of 1000 bytes sent every `send_gap`, draining at `rate` bytes/s, for
    /// `secs`, starting at `t0`; returns the end time.
    fn feed(
        c: &mut CapacityEstimator,
        t0: Duration,
        secs: f64,
        send_gap: f64,
        rate: f64,
    ) -> Duration {
        let mut now = t0;
        let mut sent = t0;
        let end = t0 + Duration::from_secs_f64(secs);
        while now < end {
            sent += Duration::from_secs_f64(send_gap);
            now = now.max(sent) + Duration::from_secs_f64(1000.0 / rate);
            c.on_packet(now, us(sent), 1000);
        }
        now
    }

    #[test]
    fn capacity_moves_after_three_agreeing_intervals_only() {
        let mut c = CapacityEstimator::with_bootstrap(50_000.0);
        // Sending 200 kB/s into a 100 kB/s bottleneck: the receive rate shows 100 kB/s.
        let t = feed(&mut c, Duration::ZERO, 1.2, 0.005, 100_000.0);
        assert_eq!(c.estimate(), Some(50_000.0), "two intervals are not enough");
        feed(&mut c, t, 1.0, 0.005, 100_000.0);
        let e = c.estimate().unwrap();
        assert!((e - 100_000.0).abs() < 5_000.0, "{e}");
        // The bottleneck halves: the estimate follows down (we send above it).
        let t = feed(&mut c, Duration::from_secs(10), 2.0, 0.005, 50_000.0);
        let e = c.estimate().unwrap();
        assert!((e - 50_000.0).abs() < 5_000.0, "{e}");
        // Sending below the estimate says nothing about capacity.
        feed(&mut c, t, 3.0, 0.1, 1e9);
        assert!((c.estimate().unwrap() - e).abs() < 1e-9);
    }

    #[test]
    fn delay_uses_empty_queue_samples_and_survives_wrap_and_offset() {
        let mut d = DelayEstimator::default();
        let offset_us: u32 = u32::MAX - 20_000; // the receiver's clock is far ahead, and wraps
        let mut now = Duration::from_secs(1);
        for i in 0..50u32 {
            let send = us(now) + 40_000 * i;
            let _ = send;
            // Sent at `now`, 30 ms one way, 1000 bytes at 1 MB/s (1 ms).
            let send_us = us(now);
            let arrive = now + Duration::from_millis(31);
            d.on_packet(
                arrive,
                us(arrive).wrapping_add(offset_us),
                send_us,
                1000,
                Some(1e6),
            );
            // A back-to-back packet that queued 1 ms behind: ignored.
            let queued = arrive + Duration::from_millis(1);
            d.on_packet(
                queued,
                us(queued).wrapping_add(offset_us),
                send_us,
                1000,
                Some(1e6),
            );
            now += Duration::from_millis(40);
        }
        let expect = 30.0 + f64::from(offset_us as i32) / 1e3;
        assert!(
            (d.estimate_ms().unwrap() - expect).abs() < 1e-6,
            "{:?} {expect}",
            d.estimate_ms()
        );
        assert_eq!(d.samples, 50);
    }

    proptest! {
        /// The receiver's loss estimate follows the real loss rate. Read right after an
        /// arrival, it has just decayed by one step, so it sits a little low (about the
        /// gain times the rate); the paper's own check allows ±0.1.
        #[test]
        fn loss_tracks_the_loss_rate(p in 0.0f64..0.5, seed in any::<u64>()) {
            use rand::{Rng, SeedableRng};
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut l = LossEstimator::default();
            let mut sum = 0.0;
            let n = 4000;
            for seq in 0..n {
                if !rng.gen_bool(p) {
                    l.on_packet(seq);
                }
                if seq >= 1000 { sum += l.rate(); }
            }
            let mean = sum / (n - 1000) as f64;
            prop_assert!((mean - p).abs() < 0.02 + 0.1 * p, "mean estimate {} for {}", mean, p);
            prop_assert!((0.0..=1.0).contains(&l.rate()));
        }
    }
}
