//! PluriBus's bottleneck-queue estimate (§5.2): how long the path needs to drain what
//! this end sent on it, counting every datagram (data, coded, probes and acks), drained
//! at the path's usable capacity. Coded packets may go only while it is about empty.

use std::time::Duration;

/// The estimate, kept in bytes: `Q·capacity` of the paper's drain time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct QueueEstimate {
    bytes: f64,
    at: Duration,
}

impl QueueEstimate {
    /// Bytes still queued at `now` when the queue drains at `rate` bytes/s.
    pub fn queued(&self, now: Duration, rate: f64) -> f64 {
        let drained = rate.max(0.0) * now.saturating_sub(self.at).as_secs_f64();
        (self.bytes - drained).max(0.0)
    }

    /// `Q ← size/capacity + max(0, Q − Δt)`, in bytes.
    pub fn on_sent(&mut self, now: Duration, bytes: usize, rate: f64) {
        self.bytes = self.queued(now, rate) + bytes as f64;
        self.at = self.at.max(now);
    }

    /// Bytes that may join the queue now while it holds at most `packet` bytes: the
    /// queue is "deemed empty" when what is left drains within one packet's time.
    pub fn room(&self, now: Duration, rate: f64, packet: usize) -> usize {
        (packet as f64 - self.queued(now, rate)).max(0.0) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn the_queue_drains_at_the_rate_and_grows_by_each_send() {
        let mut q = QueueEstimate::default();
        let rate = 25_000.0; // 200 kbit/s
        assert_eq!(q.queued(MS(0), rate), 0.0);
        q.on_sent(MS(0), 1000, rate);
        q.on_sent(MS(0), 500, rate);
        assert_eq!(q.queued(MS(0), rate), 1500.0);
        // 20 ms drain 500 bytes.
        assert!((q.queued(MS(20), rate) - 1000.0).abs() < 1e-9);
        assert_eq!(q.room(MS(20), rate, 1500), 500);
        // Never below empty, and an idle spell resets it (the paper's argument).
        assert_eq!(q.queued(MS(1000), rate), 0.0);
        q.on_sent(MS(1000), 100, rate);
        assert_eq!(q.queued(MS(1000), rate), 100.0);
        assert_eq!(q.room(MS(1000), rate, 1500), 1400);
    }

    #[test]
    fn acks_count_like_any_datagram() {
        // A reverse link busy with acks has no room for coded packets until they drain.
        let mut q = QueueEstimate::default();
        let rate = 25_000.0;
        for i in 0..40 {
            q.on_sent(MS(i), 80, rate);
        }
        // 3200 bytes sent in 40 ms, 1000 drained.
        assert_eq!(q.room(MS(40), rate, 1500), 0);
        assert!(q.room(MS(100), rate, 1500) > 0);
    }
}
