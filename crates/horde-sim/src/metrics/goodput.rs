//! Delivered payload bytes per fixed interval of virtual time.

use std::time::Duration;

/// Bytes delivered in each interval `[k * interval, (k + 1) * interval)`; grows with
/// the run's length divided by the interval, not with the number of ADUs.
#[derive(Debug, Clone, Default)]
pub(crate) struct IntervalBytes {
    bytes: Vec<u64>,
}

impl IntervalBytes {
    pub(crate) fn add(&mut self, interval: Duration, at: Duration, bytes: u64) {
        let k = (at.as_nanos() / interval.as_nanos().max(1)) as usize;
        if self.bytes.len() <= k {
            self.bytes.resize(k + 1, 0);
        }
        self.bytes[k] += bytes;
    }

    /// The series over a run of `duration`: one entry per interval, the last one
    /// possibly shorter; deliveries at or after `duration` count in the last interval.
    pub(crate) fn series(&self, interval: Duration, duration: Duration) -> Vec<u64> {
        let n = (duration.as_nanos().div_ceil(interval.as_nanos().max(1)) as usize).max(1);
        let mut out = vec![0; n];
        for (k, &b) in self.bytes.iter().enumerate() {
            out[k.min(n - 1)] += b;
        }
        out
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.bytes.capacity() * std::mem::size_of::<u64>()
    }
}

/// Length of interval `k` of a run of `duration` cut into `interval`s.
pub(crate) fn interval_len(k: usize, interval: Duration, duration: Duration) -> Duration {
    let start = interval.as_nanos() * k as u128;
    let len = duration
        .as_nanos()
        .saturating_sub(start)
        .min(interval.as_nanos());
    Duration::from_nanos(len as u64)
}
