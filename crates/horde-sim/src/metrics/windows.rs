//! Per-stream byte counts over time windows: what a stream offered and what Horde sent
//! of it, for checking bandwidth allocations over time rather than over the whole run.

use std::time::Duration;

use super::Metrics;

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
        self.adus
            .values()
            .filter_map(|r| r.txs.first().map(|t| t.at))
            .min()
    }

    /// `stream`'s bytes in the windows `[from + k·step, from + k·step + width)` that end
    /// by `until`.
    pub fn windows(
        &self,
        stream: u32,
        from: Duration,
        width: Duration,
        step: Duration,
        until: Duration,
    ) -> Vec<WindowBytes> {
        let mut out = Vec::new();
        if step.is_zero() {
            return out;
        }
        let mut start = from;
        while start + width <= until {
            out.push(WindowBytes {
                start,
                ..WindowBytes::default()
            });
            start += step;
        }
        let inside = |w: &WindowBytes, t: Duration| t >= w.start && t < w.start + width;
        for r in self.adus.values().filter(|r| r.stream == stream) {
            let first_tx = r.txs.first().map(|t| t.at);
            for w in &mut out {
                if inside(w, r.inserted) {
                    w.offered += u64::from(r.size);
                }
                if first_tx.is_some_and(|t| inside(w, t)) {
                    w.sent += u64::from(r.size);
                }
            }
        }
        out
    }
}
