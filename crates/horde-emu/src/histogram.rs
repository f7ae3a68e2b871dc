//! A log-linear histogram of non-negative durations (nanosecond resolution, ~3 % buckets).

use std::time::Duration;

/// Sub-buckets per power of two (32 gives a relative bucket width of at most 1/32).
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Values below `2 * SUB` ns get one bucket each; above, 32 buckets per octave up to 2^64.
const BUCKETS: usize = ((64 - SUB_BITS) as usize) * SUB as usize + SUB as usize;

/// Histogram of durations with exact count, sum, min and max.
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    /// Counts of buckets `first..first + counts.len()`: only the span between the
    /// lowest and the highest bucket recorded, so that an empty histogram holds no heap
    /// and one of delays within an octave or two a few hundred bytes, not all 1,920
    /// buckets (a server keeps several per connection).
    counts: Vec<u64>,
    first: usize,
    count: u64,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count)
            .field("p50", &self.quantile(0.5))
            .field("p99", &self.quantile(0.99))
            .field("max", &self.max())
            .finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

fn bucket_of(v: u64) -> usize {
    if v < 2 * SUB {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    (shift as usize) * SUB as usize + (v >> shift) as usize
}

/// The largest value that falls in bucket `i`.
fn bucket_high(i: usize) -> u64 {
    let i = i as u64;
    if i < 2 * SUB {
        return i;
    }
    let shift = i / SUB - 1;
    let mantissa = i - shift * SUB;
    let low = mantissa << shift;
    low.saturating_add((1u64 << shift) - 1)
}

impl Histogram {
    pub fn new() -> Self {
        Self {
            counts: Vec::new(),
            first: 0,
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }

    /// Record one value.
    pub fn record(&mut self, value: Duration) {
        let ns = u64::try_from(value.as_nanos()).unwrap_or(u64::MAX);
        let b = bucket_of(ns);
        self.cover(b, b);
        self.counts[b - self.first] += 1;
        self.count += 1;
        self.sum_ns += u128::from(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Add every value recorded in `other`.
    pub fn merge(&mut self, other: &Histogram) {
        if !other.counts.is_empty() {
            self.cover(other.first, other.first + other.counts.len() - 1);
            let at = other.first - self.first;
            for (a, b) in self.counts[at..].iter_mut().zip(other.counts.iter()) {
                *a += b;
            }
        }
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// Widen the buckets held to cover `lo..=hi`.
    fn cover(&mut self, lo: usize, hi: usize) {
        debug_assert!(lo <= hi && hi < BUCKETS);
        if self.counts.is_empty() {
            self.first = lo;
            self.counts.resize(hi - lo + 1, 0);
            return;
        }
        if lo < self.first {
            let grow = self.first - lo;
            self.counts.splice(0..0, std::iter::repeat_n(0, grow));
            self.first = lo;
        }
        let end = self.first + self.counts.len();
        if hi >= end {
            self.counts.resize(hi - self.first + 1, 0);
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Largest recorded value (zero when empty).
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }

    /// Smallest recorded value (zero when empty).
    pub fn min(&self) -> Duration {
        if self.count == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos(self.min_ns)
        }
    }

    pub fn mean(&self) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos((self.sum_ns / u128::from(self.count)) as u64)
    }

    /// The `q`-quantile (0 ≤ q ≤ 1), as the upper edge of its bucket clamped to the
    /// recorded range, so it overstates by at most ~3 %. Zero when empty.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let q = q.clamp(0.0, 1.0);
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let v = bucket_high(self.first + i).clamp(self.min_ns, self.max_ns);
                return Duration::from_nanos(v);
            }
        }
        self.max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_cover_their_values() {
        let mut prev = 0;
        for v in (0..5000u64).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b < BUCKETS, "bucket {b} of {v}");
            assert!(bucket_high(b) >= v, "value {v} above its bucket {b}");
            if v < 5000 {
                assert!(b == prev || b == prev + 1, "gap at {v}");
                prev = b;
            }
        }
    }

    #[test]
    fn quantiles_are_within_bucket_precision() {
        let mut h = Histogram::new();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let p50 = h.quantile(0.5).as_secs_f64() * 1e6;
        let p99 = h.quantile(0.99).as_secs_f64() * 1e6;
        assert!((500.0..=500.0 * 1.04).contains(&p50), "p50 {p50}");
        assert!((990.0..=1000.0).contains(&p99), "p99 {p99}");
        assert_eq!(h.max(), Duration::from_micros(1000));
        assert_eq!(h.min(), Duration::from_micros(1));
        assert_eq!(h.count(), 1000);
        assert_eq!(h.mean(), Duration::from_nanos(500_500));
    }

    #[test]
    fn empty_and_merge() {
        let mut a = Histogram::new();
        assert_eq!(a.quantile(0.99), Duration::ZERO);
        assert_eq!(a.min(), Duration::ZERO);
        let mut b = Histogram::new();
        b.record(Duration::from_millis(3));
        a.record(Duration::from_millis(1));
        a.merge(&b);
        assert_eq!(a.count(), 2);
        assert_eq!(a.max(), Duration::from_millis(3));
        let p50 = a.quantile(0.5);
        assert!(p50 >= Duration::from_millis(1) && p50 < Duration::from_micros(1040));
    }

    /// The quantiles of every bucket as a full table of all buckets would give them.
    fn dense_quantile(values: &[u64], q: f64) -> u64 {
        let mut counts = vec![0u64; BUCKETS];
        for &v in values {
            counts[bucket_of(v)] += 1;
        }
        let n = values.len() as u64;
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let (lo, hi) = (*values.iter().min().unwrap(), *values.iter().max().unwrap());
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_high(i).clamp(lo, hi);
            }
        }
        hi
    }

    #[test]
    fn holding_only_the_recorded_span_gives_the_full_table_s_quantiles() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..50 {
            let (mut a, mut b) = (Histogram::new(), Histogram::new());
            let mut values = Vec::new();
            for i in 0..(1 + round * 7) {
                // Values from nanoseconds to minutes, recorded into either half.
                let v = next() >> (next() % 64);
                values.push(v);
                let h = if i % 3 == 0 { &mut a } else { &mut b };
                h.record(Duration::from_nanos(v));
            }
            a.merge(&b);
            for q in [0.0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0] {
                let want = dense_quantile(&values, q);
                assert_eq!(
                    a.quantile(q),
                    Duration::from_nanos(want),
                    "round {round} q {q}"
                );
            }
        }
    }

    #[test]
    fn an_empty_histogram_holds_no_buckets_and_a_narrow_one_few() {
        let mut h = Histogram::new();
        assert_eq!(h.counts.capacity(), 0);
        h.merge(&Histogram::new());
        assert_eq!(h.counts.capacity(), 0);
        for ms in [20, 22, 25, 31, 40] {
            h.record(Duration::from_millis(ms));
        }
        // 20 to 40 ms is one octave: 33 buckets, not 1,920.
        assert!(
            h.counts.len() <= 2 * SUB as usize,
            "{} buckets",
            h.counts.len()
        );
        assert_eq!(h.count(), 5);
    }
}
