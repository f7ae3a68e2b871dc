//! Channel estimators: what a channel manager knows about its channel (thesis §4.1, §7.2.1).
//!
//! - [`RttEstimator`]: TCP-style smoothed RTT and variance (RFC 6298 gains 1/8 and 1/4);
//!   the thesis's experiments used exactly this `srtt` for slot latency expectations.
//! - [`LossEstimator`]: losses / total over a sliding window of resolved packets, burst
//!   statistics, and P(both lost | either lost) for same-channel slot pairs at each gap.
//!   An optional [`LossPrior`] stands in for the packets not yet seen.

use std::time::Duration;

use horde_policy::CORRELATION_SPAN;

#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt: Option<f64>,
    rttvar: f64,
    latest: f64,
    samples: u64,
    min: WindowedExtreme,
    max: WindowedExtreme,
}

/// How long the minimum and maximum RTT are remembered: long enough to span a few
/// congestion-control cycles, short enough to follow a cellular path whose base delay
/// moves (BBR keeps its min RTT for 10 s).
const RTT_EXTREME_WINDOW: Duration = Duration::from_secs(10);

/// The minimum (or maximum) of the samples of the last `window` to `2 * window`: two
/// buckets, the older dropped as the newer one fills, so it costs O(1) per sample.
#[derive(Debug, Clone)]
pub(crate) struct WindowedExtreme {
    is_max: bool,
    current: Option<f64>,
    previous: Option<f64>,
    bucket_start: Duration,
}

impl WindowedExtreme {
    pub(crate) fn new(is_max: bool) -> Self {
        Self {
            is_max,
            current: None,
            previous: None,
            bucket_start: Duration::ZERO,
        }
    }

    fn better(&self, a: f64, b: f64) -> f64 {
        if self.is_max {
            a.max(b)
        } else {
            a.min(b)
        }
    }

    pub(crate) fn on_sample(&mut self, now: Duration, x: f64) {
        if now.saturating_sub(self.bucket_start) >= RTT_EXTREME_WINDOW {
            self.previous = self.current.take();
            self.bucket_start = now;
        }
        self.current = Some(self.current.map_or(x, |c| self.better(c, x)));
    }

    pub(crate) fn get(&self) -> Option<f64> {
        match (self.current, self.previous) {
            (Some(a), Some(b)) => Some(self.better(a, b)),
            (a, b) => a.or(b),
        }
    }
}

impl Default for RttEstimator {
    fn default() -> Self {
        Self::new()
    }
}

impl RttEstimator {
    pub fn new() -> Self {
        Self {
            srtt: None,
            rttvar: 0.0,
            latest: 0.0,
            samples: 0,
            min: WindowedExtreme::new(false),
            max: WindowedExtreme::new(true),
        }
    }

    /// Take an RTT sample measured at `now`.
    pub fn on_sample(&mut self, now: Duration, rtt: Duration) {
        let r = rtt.as_secs_f64() * 1e3;
        self.latest = r;
        self.min.on_sample(now, r);
        self.max.on_sample(now, r);
        self.samples += 1;
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(s) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (s - r).abs();
                self.srtt = Some(0.875 * s + 0.125 * r);
            }
        }
    }

    /// Smoothed RTT in ms, if any sample was taken.
    pub fn srtt_ms(&self) -> Option<f64> {
        self.srtt
    }

    /// Mean deviation of the RTT in ms.
    pub fn rttvar_ms(&self) -> f64 {
        self.rttvar
    }

    pub fn latest_ms(&self) -> f64 {
        self.latest
    }

    /// Smallest RTT of the last 10-20 s, in ms.
    pub fn min_ms(&self) -> Option<f64> {
        self.min.get()
    }

    /// Largest RTT of the last 10-20 s, in ms.
    pub fn max_ms(&self) -> Option<f64> {
        self.max.get()
    }
}

/// How many resolved packets the loss rate is averaged over.
const LOSS_WINDOW: usize = 1024;
/// Pseudo-observations behind the prior of each correlation estimate.
const CORRELATION_PRIOR_WEIGHT: f64 = 4.0;
/// Exponential forgetting of correlation counts per resolved packet, so the estimate
/// follows a channel whose burstiness changes.
const CORRELATION_FORGET: f64 = 0.999;

/// What a channel's loss rate is believed to be before its packets say (thesis §4.1:
/// channel-specific estimators may use what is known of a channel a priori): a Beta
/// prior with mean `rate` worth `packets` resolved packets, which stands in for packets
/// the window has not seen yet. With `n` packets in the window and `k` of them lost the
/// estimate is `(k + rate * w) / (n + w)`, `w = min(packets, window - n)`: the prior
/// alone with no samples, half and half after `packets` of them, and once the window is
/// full the measured rate alone, as without a prior. Without a prior a channel with no
/// samples says 0%, so a lossy link looks the safest of all until its first losses are
/// detected.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossPrior {
    /// The loss rate assumed before any packet is resolved, in [0, 1].
    pub rate: f64,
    /// How many resolved packets the prior weighs, >= 0.
    pub packets: f64,
}

/// Why a [`LossPrior`] cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum LossPriorError {
    /// The rate is not a probability.
    #[error("loss_prior.rate must be in [0, 1], got {0}")]
    Rate(f64),
    /// The weight is negative or not a number.
    #[error("loss_prior.packets must be zero or positive, got {0}")]
    Packets(f64),
}

impl LossPrior {
    /// Why the prior cannot be used, if it cannot.
    pub fn check(&self) -> Result<(), LossPriorError> {
        if !(self.rate.is_finite() && (0.0..=1.0).contains(&self.rate)) {
            return Err(LossPriorError::Rate(self.rate));
        }
        if !(self.packets.is_finite() && self.packets >= 0.0) {
            return Err(LossPriorError::Packets(self.packets));
        }
        Ok(())
    }
}

/// The last [`LOSS_WINDOW`] outcomes (lost or not), oldest first, a bit each: 128 bytes
/// in the estimator itself rather than a kilobyte of `bool`s on the heap per channel.
#[derive(Debug, Clone, Default)]
struct Outcomes {
    bits: [u64; LOSS_WINDOW / 64],
    /// The oldest outcome's position in `bits`.
    head: usize,
    len: usize,
}

impl Outcomes {
    fn len(&self) -> usize {
        self.len
    }

    fn at(&self, i: usize) -> (usize, u64) {
        let pos = (self.head + i) % LOSS_WINDOW;
        (pos / 64, 1 << (pos % 64))
    }

    /// The outcome `i` places after the oldest.
    fn get(&self, i: usize) -> bool {
        let (word, bit) = self.at(i);
        self.bits[word] & bit != 0
    }

    fn clear(&mut self, i: usize) {
        let (word, bit) = self.at(i);
        self.bits[word] &= !bit;
    }

    fn push_back(&mut self, lost: bool) {
        debug_assert!(self.len < LOSS_WINDOW);
        let (word, bit) = self.at(self.len);
        if lost {
            self.bits[word] |= bit;
        } else {
            self.bits[word] &= !bit;
        }
        self.len += 1;
    }

    fn pop_front(&mut self) -> Option<bool> {
        if self.len == 0 {
            return None;
        }
        let oldest = self.get(0);
        self.head = (self.head + 1) % LOSS_WINDOW;
        self.len -= 1;
        Some(oldest)
    }
}

/// Loss rate, burst lengths and burst correlation of one channel, fed with the outcome of
/// every packet in sequence order.
#[derive(Debug, Clone)]
pub struct LossEstimator {
    /// The prior's loss rate and weight in packets (0, 0 without one).
    prior_rate: f64,
    prior_packets: f64,
    window: Outcomes,
    window_losses: usize,
    total: u64,
    lost: u64,
    /// Made at the first loss: until then every count in it is zero and stays zero, so
    /// a channel that never lost a packet (an idle one) carries none of its 500 bytes.
    bursts: Option<Box<Bursts>>,
}

/// The burst and correlation statistics of a channel that has lost packets.
#[derive(Debug, Clone)]
struct Bursts {
    /// Outcomes of the last CORRELATION_SPAN packets, most recent first (true = lost).
    recent: [bool; CORRELATION_SPAN],
    both: [f64; CORRELATION_SPAN],
    either: [f64; CORRELATION_SPAN],
    run: u32,
    /// `bursts[i]` counts completed loss bursts of length `i + 1` (the last bucket is "or more").
    bursts: [u64; 32],
}

impl Bursts {
    fn new() -> Self {
        Self {
            recent: [false; CORRELATION_SPAN],
            both: [0.0; CORRELATION_SPAN],
            either: [0.0; CORRELATION_SPAN],
            run: 0,
            bursts: [0; 32],
        }
    }

    fn on_outcome(&mut self, lost: bool) {
        for g in 0..CORRELATION_SPAN {
            self.both[g] *= CORRELATION_FORGET;
            self.either[g] *= CORRELATION_FORGET;
            let earlier = self.recent[g];
            if lost || earlier {
                self.either[g] += 1.0;
                if lost && earlier {
                    self.both[g] += 1.0;
                }
            }
        }
        self.recent.copy_within(0..CORRELATION_SPAN - 1, 1);
        self.recent[0] = lost;

        if lost {
            self.run += 1;
        } else if self.run > 0 {
            self.bursts[(self.run as usize - 1).min(31)] += 1;
            self.run = 0;
        }
    }
}

impl Default for LossEstimator {
    fn default() -> Self {
        Self::new()
    }
}

impl LossEstimator {
    pub fn new() -> Self {
        Self::with_prior(None)
    }

    /// An estimator that starts from `prior`; a prior that fails [`LossPrior::check`]
    /// is ignored, so a bad setting cannot turn the estimate into NaN.
    pub fn with_prior(prior: Option<LossPrior>) -> Self {
        let (prior_rate, prior_packets) = match prior {
            Some(p) if p.check().is_ok() => (p.rate, p.packets),
            _ => (0.0, 0.0),
        };
        Self {
            prior_rate,
            prior_packets,
            window: Outcomes::default(),
            window_losses: 0,
            total: 0,
            lost: 0,
            bursts: None,
        }
    }

    /// Record the outcome of the next packet in sequence order.
    pub fn on_outcome(&mut self, lost: bool) {
        self.total += 1;
        self.lost += u64::from(lost);
        if self.window.len() == LOSS_WINDOW && self.window.pop_front() == Some(true) {
            self.window_losses -= 1;
        }
        self.window.push_back(lost);
        self.window_losses += usize::from(lost);
        if lost && self.bursts.is_none() {
            self.bursts = Some(Box::new(Bursts::new()));
        }
        if let Some(b) = &mut self.bursts {
            b.on_outcome(lost);
        }
    }

    /// A packet recorded lost `age` outcomes ago (0 = the latest) was delivered after all:
    /// take it out of the loss rate. Burst and correlation statistics keep it (they are
    /// running averages that cannot be unwound cheaply); late acks are rare enough.
    pub fn forgive(&mut self, age: u64) {
        let Some(idx) = (self.window.len() as u64)
            .checked_sub(age + 1)
            .map(|i| i as usize)
        else {
            return;
        };
        if self.window.get(idx) {
            self.window.clear(idx);
            self.window_losses -= 1;
            self.lost -= 1;
        }
    }

    /// Fraction of the recent window that was lost, in [0, 1] (losses / total, §7.2.1),
    /// with the prior standing in for the part of the window not filled yet.
    pub fn loss_rate(&self) -> f64 {
        let seen = self.window.len() as f64;
        let stand_in = self.prior_packets.min(LOSS_WINDOW as f64 - seen);
        let packets = seen + stand_in;
        if packets <= 0.0 {
            0.0
        } else {
            (self.window_losses as f64 + self.prior_rate * stand_in) / packets
        }
    }

    #[cfg(test)]
    pub fn total(&self) -> u64 {
        self.total
    }

    #[cfg(test)]
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Mean length of completed loss bursts (0 if none).
    #[cfg(test)]
    pub fn mean_burst(&self) -> f64 {
        let (n, sum) = self
            .burst_histogram()
            .iter()
            .enumerate()
            .fold((0u64, 0u64), |(n, s), (i, &c)| {
                (n + c, s + c * (i as u64 + 1))
            });
        if n == 0 {
            0.0
        } else {
            sum as f64 / n as f64
        }
    }

    /// Completed bursts by length: index `i` is length `i + 1`, the last bucket is 32+.
    #[cfg(test)]
    pub fn burst_histogram(&self) -> &[u64; 32] {
        self.bursts.as_ref().map_or(&[0; 32], |b| &b.bursts)
    }

    /// P(both lost | either lost) for packets `g + 1` apart, `g < CORRELATION_SPAN`.
    ///
    /// Until data arrives the estimate leans on the thesis's prior: adjacent slots fully
    /// correlated, halving with each further step (§7.2.1 gives 1 for adjacent slots and 0
    /// beyond 8 but no decay constant; halving reaches < 1% at the span's end).
    pub fn burst_correlation(&self) -> [f32; CORRELATION_SPAN] {
        let mut out = [0.0f32; CORRELATION_SPAN];
        for (g, o) in out.iter_mut().enumerate() {
            let prior = f64::from(thesis_burst_correlation()[g]);
            let (both, either) = self
                .bursts
                .as_ref()
                .map_or((0.0, 0.0), |b| (b.both[g], b.either[g]));
            let est =
                (both + prior * CORRELATION_PRIOR_WEIGHT) / (either + CORRELATION_PRIOR_WEIGHT);
            *o = est as f32;
        }
        out
    }
}

/// The thesis simulations' slot-pair loss correlation (§7.2.1): 1 for adjacent slots,
/// halving with each further step (the thesis gives 1 for adjacent slots and 0 beyond 8
/// but no decay constant; halving reaches < 1% at the span's end). Index `g` is the
/// correlation of slots `g + 1` sequence numbers apart.
pub fn thesis_burst_correlation() -> [f32; CORRELATION_SPAN] {
    let mut out = [0.0f32; CORRELATION_SPAN];
    for (g, o) in out.iter_mut().enumerate() {
        *o = 0.5f32.powi(g as i32);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_statistics_are_made_at_the_first_loss() {
        let mut l = LossEstimator::new();
        for _ in 0..500 {
            l.on_outcome(false);
        }
        assert!(l.bursts.is_none(), "no loss, no burst statistics");
        let prior = thesis_burst_correlation();
        assert_eq!(l.burst_correlation(), prior);
        for lost in [true, true, false, true, false] {
            l.on_outcome(lost);
        }
        assert!(l.bursts.is_some());
        assert_eq!(l.burst_histogram()[..2], [1, 1]);
        assert!(l.burst_correlation()[0] != prior[0]);
    }

    #[test]
    fn srtt_converges_and_tracks_variance() {
        let mut r = RttEstimator::new();
        for i in 0..200 {
            let ms = if i % 2 == 0 { 90 } else { 110 };
            r.on_sample(Duration::from_millis(i), Duration::from_millis(ms));
        }
        let s = r.srtt_ms().unwrap();
        assert!((s - 100.0).abs() < 5.0, "srtt {s}");
        assert!(
            r.rttvar_ms() > 5.0 && r.rttvar_ms() < 20.0,
            "rttvar {}",
            r.rttvar_ms()
        );
        assert_eq!((r.min_ms(), r.max_ms()), (Some(90.0), Some(110.0)));
    }

    #[test]
    fn rtt_extremes_forget_old_samples() {
        let mut r = RttEstimator::new();
        let s = Duration::from_secs;
        r.on_sample(s(0), Duration::from_millis(50));
        r.on_sample(s(1), Duration::from_millis(80));
        // Still remembered one window later...
        r.on_sample(s(11), Duration::from_millis(100));
        assert_eq!(r.min_ms(), Some(50.0));
        // ...but not two.
        r.on_sample(s(22), Duration::from_millis(100));
        assert_eq!((r.min_ms(), r.max_ms()), (Some(100.0), Some(100.0)));
    }

    #[test]
    fn loss_rate_bursts_and_correlation() {
        let mut l = LossEstimator::new();
        // Pattern of 20: bursts of two losses, then 18 deliveries: 10% loss, all bursts of 2.
        for _ in 0..500 {
            for k in 0..20 {
                l.on_outcome(k < 2);
            }
        }
        assert!((l.loss_rate() - 0.1).abs() < 0.01, "{}", l.loss_rate());
        assert_eq!(l.burst_histogram()[1], 500);
        assert!((l.mean_burst() - 2.0).abs() < 1e-9);
        let c = l.burst_correlation();
        // Adjacent: of pairs with either lost (3 per period), one has both lost.
        assert!((c[0] - 1.0 / 3.0).abs() < 0.05, "{c:?}");
        // Gap 2: never both lost inside one period.
        assert!(c[1] < 0.05, "{c:?}");
    }

    #[test]
    fn a_prior_starts_the_estimate_and_yields_to_samples() {
        let prior = LossPrior {
            rate: 0.1,
            packets: 50.0,
        };
        let mut l = LossEstimator::with_prior(Some(prior));
        assert!((l.loss_rate() - 0.1).abs() < 1e-12, "{}", l.loss_rate());
        // 50 packets without a loss: half prior, half measured.
        for _ in 0..50 {
            l.on_outcome(false);
        }
        assert!((l.loss_rate() - 0.05).abs() < 1e-12, "{}", l.loss_rate());
        // Ten packets short of a full window, the prior stands in for those ten.
        for _ in 50..LOSS_WINDOW - 10 {
            l.on_outcome(false);
        }
        let expected = 0.1 * 10.0 / LOSS_WINDOW as f64;
        assert!(
            (l.loss_rate() - expected).abs() < 1e-12,
            "{}",
            l.loss_rate()
        );
        // A full window: the measured rate alone, here 1%.
        for k in 0..LOSS_WINDOW {
            l.on_outcome(k % 100 == 0);
        }
        let measured = l.window_losses as f64 / LOSS_WINDOW as f64;
        assert_eq!(l.loss_rate(), measured);
        assert!((measured - 0.01).abs() < 0.001, "{measured}");
        // Without a prior, no samples means 0%.
        assert_eq!(LossEstimator::new().loss_rate(), 0.0);
    }

    #[test]
    fn a_bad_prior_is_refused_and_ignored() {
        for (rate, packets) in [
            (1.5, 10.0),
            (-0.1, 10.0),
            (f64::NAN, 10.0),
            (0.1, -1.0),
            (0.1, f64::INFINITY),
        ] {
            let prior = LossPrior { rate, packets };
            assert!(prior.check().is_err(), "{prior:?}");
            let mut l = LossEstimator::with_prior(Some(prior));
            assert_eq!(l.loss_rate(), 0.0);
            l.on_outcome(true);
            assert_eq!(l.loss_rate(), 1.0);
        }
        let none = LossPrior {
            rate: 0.2,
            packets: 0.0,
        };
        assert!(none.check().is_ok());
        assert_eq!(LossEstimator::with_prior(Some(none)).loss_rate(), 0.0);
    }

    #[test]
    fn independent_losses_have_low_correlation() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut l = LossEstimator::new();
        for _ in 0..20_000 {
            l.on_outcome(rng.gen_bool(0.1));
        }
        // P(both | either) for independent p = p^2 / (2p - p^2) ≈ 0.053.
        for c in l.burst_correlation() {
            assert!((c - 0.053).abs() < 0.05, "{c}");
        }
    }

    #[test]
    fn the_outcome_bits_keep_what_a_queue_of_bools_keeps() {
        let mut bits = Outcomes::default();
        let mut queue = std::collections::VecDeque::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..5 * LOSS_WINDOW {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let lost = x.is_multiple_of(7);
            if queue.len() == LOSS_WINDOW {
                assert_eq!(bits.pop_front(), queue.pop_front());
            }
            bits.push_back(lost);
            queue.push_back(lost);
            if step.is_multiple_of(11) {
                let i = (x >> 20) as usize % queue.len();
                bits.clear(i);
                queue[i] = false;
            }
            assert_eq!(bits.len(), queue.len());
            let i = (x >> 40) as usize % queue.len();
            assert_eq!(bits.get(i), queue[i], "step {step}, outcome {i}");
        }
        while let Some(q) = queue.pop_front() {
            assert_eq!(bits.pop_front(), Some(q));
        }
        assert_eq!(bits.pop_front(), None);
    }
}
