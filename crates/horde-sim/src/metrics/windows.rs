//! Per-stream byte counts over time windows: what a stream offered and what Horde sent
//! of it, for checking bandwidth allocations over time rather than over the whole run.
//! Counted in buckets of [`BUCKET`] as events arrive, so memory grows with the run's
//! length over the bucket, not with the number of ADUs.

use std::time::Duration;

use super::Metrics;

/// Resolution of window edges.
pub(crate) const BUCKET: Duration = Duration::from_secs(1);

/// One stream's bytes in one window `[start, start + width)`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WindowBytes {
    pub start: Duration,
    /// Payload bytes the application inserted in the window.
    pub offered: u64,
    /// Payload bytes of ADUs first transmitted in the window.
    pub sent: u64,
}

impl Metrics {
    /// When the first ADU of any stream was transmitted (the end of the handshake).
    pub fn first_send(&self) -> Option<Duration> {
        self.first_send
    }

    /// `stream`'s bytes in the windows `[from + k·step, from + k·step + width)` that end
    /// by `until`, with `from` rounded up and the other edges down to [`BUCKET`].
    pub fn windows(
        &self,
        stream: u32,
        from: Duration,
        width: Duration,
        step: Duration,
        until: Duration,
    ) -> Vec<WindowBytes> {
        let mut out = Vec::new();
        let Some(s) = self.streams.get(&stream) else {
            return out;
        };
        if step.is_zero() {
            return out;
        }
        let offered = s.offered_series.series(BUCKET, until);
        let sent = s.sent_series.series(BUCKET, until);
        let bucket = |t: Duration| (t.as_nanos() / BUCKET.as_nanos()) as usize;
        let sum = |v: &[u64], a: usize, b: usize| v[a.min(v.len())..b.min(v.len())].iter().sum();
        let mut start = Duration::from_nanos(
            (from.as_nanos().div_ceil(BUCKET.as_nanos()) * BUCKET.as_nanos()) as u64,
        );
        while start + width <= until {
            let (a, b) = (bucket(start), bucket(start + width));
            out.push(WindowBytes {
                start,
                offered: sum(&offered, a, b),
                sent: sum(&sent, a, b),
            });
            start += step;
        }
        out
    }
}
