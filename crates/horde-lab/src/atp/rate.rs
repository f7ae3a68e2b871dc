//! The sender's estimate of its link's rate, which admission, slot choice and early expiry
//! use ([`horde_proto::message::ChannelEstimate`]). A Horde channel gets it from its
//! congestion controller; this single emulated link has none, so it is measured the way
//! ATP's host saw its link: bytes leaving the interface while its send queue stayed busy,
//! and a packet pair when the sender has not kept it busy for a while (ATP's poll of the
//! remote host when its estimate or its sending is zero).

use std::time::Duration;

/// How long a busy stretch must be before it is a sample.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(250);
/// Without a busy sample for this long, a packet pair is sent.
pub const PAIR_AFTER: Duration = Duration::from_secs(1);
/// Weight of a new sample against the estimate.
const GAIN: f64 = 0.5;

/// A packet pair in progress: when the first of the two left the link.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Pair {
    Idle,
    Sent,
    FirstOut(Duration),
}

/// The link-rate estimate, bytes per second of wire bytes.
#[derive(Debug, Clone)]
pub struct RateMeter {
    estimate: f64,
    interval_start: Duration,
    served_at_start: u64,
    emptied: bool,
    last_sample: Duration,
    pair: Pair,
}

impl RateMeter {
    /// Starts at `initial` bytes per second.
    pub fn new(initial: f64) -> Self {
        Self {
            estimate: initial,
            interval_start: Duration::ZERO,
            served_at_start: 0,
            emptied: true,
            last_sample: Duration::ZERO,
            pair: Pair::Idle,
        }
    }

    /// The current estimate.
    pub fn estimate(&self) -> f64 {
        self.estimate
    }

    /// The send queue ran empty at some point: the current stretch is not busy.
    pub fn queue_emptied(&mut self) {
        self.emptied = true;
    }

    /// Called every [`SAMPLE_INTERVAL`] with the bytes served so far and the bytes queued
    /// now. Returns whether a packet pair should be sent.
    pub fn on_interval(&mut self, now: Duration, served: u64, queued: u64) -> bool {
        let dt = now.saturating_sub(self.interval_start).as_secs_f64();
        if !self.emptied && queued > 0 && dt > 0.0 {
            let sample = (served - self.served_at_start) as f64 / dt;
            self.take(now, sample);
        }
        self.interval_start = now;
        self.served_at_start = served;
        self.emptied = queued == 0;
        if self.pair == Pair::Idle && now.saturating_sub(self.last_sample) >= PAIR_AFTER {
            self.pair = Pair::Sent;
            return true;
        }
        false
    }

    /// A packet of the pair left the link at `at`; `size` is the second's size.
    pub fn pair_out(&mut self, at: Duration, size: u32) {
        match self.pair {
            Pair::Sent => self.pair = Pair::FirstOut(at),
            Pair::FirstOut(first) => {
                self.pair = Pair::Idle;
                let gap = at.saturating_sub(first).as_secs_f64();
                if gap > 0.0 {
                    self.take(at, f64::from(size) / gap);
                } else {
                    self.last_sample = at;
                }
            }
            Pair::Idle => {}
        }
    }

    fn take(&mut self, now: Duration, sample: f64) {
        self.estimate = GAIN * sample + (1.0 - GAIN) * self.estimate;
        self.last_sample = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_stretches_are_samples_and_idle_ones_are_not() {
        let mut m = RateMeter::new(0.0);
        let t = |ms| Duration::from_millis(ms);
        m.on_interval(t(0), 0, 5000);
        // Busy for 250 ms at 100 kB/s.
        assert!(!m.on_interval(t(250), 25_000, 5000));
        assert!((m.estimate() - 50_000.0).abs() < 1.0);
        // An emptied stretch teaches nothing.
        m.queue_emptied();
        m.on_interval(t(500), 26_000, 0);
        assert!((m.estimate() - 50_000.0).abs() < 1.0);
        // A second of nothing asks for a pair, whose gap is a sample.
        assert!(!m.on_interval(t(1000), 26_000, 0));
        assert!(m.on_interval(t(1250), 26_000, 0));
        m.pair_out(t(1300), 1500);
        m.pair_out(t(1310), 1500);
        assert!((m.estimate() - 100_000.0).abs() < 1.0);
    }
}
