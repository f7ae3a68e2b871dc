//! A delay distribution in memory that does not grow with the number of samples.

use std::time::Duration;

use hdrhistogram::Histogram;

use super::stats::Summary;

/// Significant decimal digits the histogram keeps: every bucket spans at most 0.1 % of
/// its values, so a percentile is within 0.1 % of the exact nearest-rank one.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Delays bucketed by an HDR histogram (in microseconds), plus the exact count, sum,
/// minimum and maximum, so the mean and the extremes carry no bucket error.
#[derive(Debug, Clone)]
pub(crate) struct DelayHistogram {
    micros: Histogram<u64>,
    sum_ns: u128,
    min: Duration,
    max: Duration,
}

impl Default for DelayHistogram {
    fn default() -> Self {
        Self {
            // Auto-resizing from a range of 1..2 µs: it grows (logarithmically) only as far
            // as the largest delay recorded.
            micros: Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is valid"),
            sum_ns: 0,
            min: Duration::MAX,
            max: Duration::ZERO,
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

impl DelayHistogram {
    pub(crate) fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        // Auto-resize covers every value up to i64::MAX / 2 µs (146 000 years).
        let _ = self.micros.record(us);
        self.sum_ns += d.as_nanos();
        self.min = self.min.min(d);
        self.max = self.max.max(d);
    }

    /// Add every sample of `other`.
    pub(crate) fn merge(&mut self, other: &DelayHistogram) {
        // Both auto-resize, so adding cannot run out of range.
        let _ = self.micros.add(&other.micros);
        self.sum_ns += other.sum_ns;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    pub(crate) fn count(&self) -> u64 {
        self.micros.len()
    }

    /// Heap bytes held by the bucket counts.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.micros.distinct_values() * std::mem::size_of::<u64>()
    }

    /// A bucket's representative value in ms: its highest equivalent value, clamped to
    /// the exact extremes (so the 100th percentile is the true maximum).
    fn bucket_ms(&self, us: u64) -> f64 {
        let top = self.micros.highest_equivalent(us) as f64 / 1e3;
        top.clamp(ms(self.min), ms(self.max))
    }

    /// Nearest-rank `p`-th percentile (`p` in 1..=100): the bucket holding the
    /// `ceil(p * n / 100)`-th smallest sample.
    fn percentile(&self, p: u32) -> Option<f64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = (u64::from(p.clamp(1, 100)) * n).div_ceil(100).max(1);
        let mut seen = 0;
        for v in self.micros.iter_recorded() {
            seen += v.count_since_last_iteration();
            if seen >= rank {
                return Some(self.bucket_ms(v.value_iterated_to()));
            }
        }
        Some(ms(self.max))
    }

    pub(crate) fn summary(&self) -> Summary {
        let n = self.count();
        if n == 0 {
            return Summary::default();
        }
        Summary {
            count: n,
            mean: Some(self.sum_ns as f64 / n as f64 / 1e6),
            min: Some(ms(self.min)),
            p25: self.percentile(25),
            median: self.percentile(50),
            p75: self.percentile(75),
            p95: self.percentile(95),
            p99: self.percentile(99),
            max: Some(ms(self.max)),
        }
    }

    /// The empirical CDF as `(delay_ms, fraction of samples at or below it)`, one point
    /// per non-empty bucket, ascending.
    pub(crate) fn cdf(&self) -> Vec<(f64, f64)> {
        let n = self.count() as f64;
        let mut seen = 0;
        self.micros
            .iter_recorded()
            .map(|v| {
                seen += v.count_since_last_iteration();
                (self.bucket_ms(v.value_iterated_to()), seen as f64 / n)
            })
            .collect()
    }
}
