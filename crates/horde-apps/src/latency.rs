//! Latency samples in memory that does not grow with their number: an HDR histogram in
//! microseconds, plus the exact count and sum (for the mean). A run of days at 10,000
//! ADUs a second holds a few kilobytes per stream, not 8 bytes per ADU.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Significant decimal digits kept: a percentile is within 0.1 % of the exact one.
const SIGNIFICANT_DIGITS: u8 = 3;

#[derive(Debug, Clone)]
pub struct Latencies {
    micros: Histogram<u64>,
    sum_us: u128,
}

impl Default for Latencies {
    fn default() -> Self {
        Self {
            // Auto-resizing: it grows (logarithmically) only as far as the largest sample.
            micros: Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is valid"),
            sum_us: 0,
        }
    }
}

impl Latencies {
    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        // Auto-resize covers every value up to i64::MAX / 2 µs; beyond, the sample is
        // clamped rather than lost.
        if self.micros.record(us).is_err() {
            let _ = self.micros.record(self.micros.high());
        }
        self.sum_us += u128::from(us);
    }

    /// Add every sample of `other`.
    pub fn merge(&mut self, other: &Latencies) {
        // Both auto-resize, so adding cannot run out of range.
        let _ = self.micros.add(&other.micros);
        self.sum_us += other.sum_us;
    }

    /// Forget every sample (the buckets stay allocated).
    pub fn clear(&mut self) {
        self.micros.reset();
        self.sum_us = 0;
    }

    pub fn len(&self) -> u64 {
        self.micros.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The mean in ms.
    pub fn mean_ms(&self) -> Option<f64> {
        (!self.is_empty()).then(|| self.sum_us as f64 / self.len() as f64 / 1e3)
    }

    /// The nearest-rank `p`-th percentile (`p` in 1..=100) in ms: the bucket holding the
    /// `ceil(p * n / 100)`-th smallest sample.
    pub fn percentile_ms(&self, p: f64) -> Option<f64> {
        if self.is_empty() {
            return None;
        }
        let q = (p / 100.0).clamp(0.0, 1.0);
        let us = self.micros.value_at_quantile(q);
        Some(self.micros.highest_equivalent(us) as f64 / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_mean_come_from_the_samples() {
        let mut l = Latencies::default();
        for ms in [10u64, 20, 30, 40] {
            l.record(Duration::from_millis(ms));
        }
        let near = |v: Option<f64>, want: f64| (v.unwrap() - want).abs() <= want * 1e-3;
        assert!(
            near(l.percentile_ms(50.0), 20.0),
            "{:?}",
            l.percentile_ms(50.0)
        );
        assert!(
            near(l.percentile_ms(95.0), 40.0),
            "{:?}",
            l.percentile_ms(95.0)
        );
        assert_eq!(l.mean_ms(), Some(25.0));
        l.clear();
        assert_eq!(l.percentile_ms(50.0), None);
        assert_eq!(l.mean_ms(), None);
    }

    #[test]
    fn memory_does_not_grow_with_the_number_of_samples() {
        let mut l = Latencies::default();
        let mut sizes = Vec::new();
        for round in 0..3 {
            for i in 0..1_000_000u64 {
                l.record(Duration::from_micros(100 + i % 500_000));
            }
            sizes.push((round, l.micros.distinct_values()));
        }
        assert_eq!(l.len(), 3_000_000);
        assert_eq!(sizes[0].1, sizes[2].1, "{sizes:?}");
    }
}
