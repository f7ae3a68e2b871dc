//! Constant bit rate: the thesis simulations' slot generator.

use std::time::Duration;

use super::{AckSample, CongestionControl, LossSample};

/// Constant bit rate: a token bucket filled at `rate` bytes/s.
#[derive(Debug, Clone)]
pub struct Cbr {
    rate: f64,
    /// Bucket depth in bytes.
    depth: f64,
    tokens: f64,
    last: Duration,
    mss: f64,
}

impl Cbr {
    pub fn new(rate_bytes_per_s: f64, burst: Duration, mss: u32, now: Duration) -> Self {
        let mss = f64::from(mss);
        let depth = (rate_bytes_per_s * burst.as_secs_f64()).max(mss);
        Self {
            rate: rate_bytes_per_s.max(1.0),
            depth,
            tokens: mss,
            last: now,
            mss,
        }
    }

    fn tokens_at(&self, now: Duration) -> f64 {
        let dt = now.saturating_sub(self.last).as_secs_f64();
        (self.tokens + dt * self.rate).min(self.depth)
    }
}

impl CongestionControl for Cbr {
    fn name(&self) -> &'static str {
        "cbr"
    }

    fn on_sent(&mut self, now: Duration, bytes: u32, _in_flight: u64) {
        self.tokens = self.tokens_at(now) - f64::from(bytes);
        self.last = now;
    }

    fn on_unsequenced_sent(&mut self, now: Duration, bytes: u32) {
        self.on_sent(now, bytes, 0);
    }

    fn on_ack(&mut self, _ack: &AckSample) {}

    fn on_loss(&mut self, _loss: &LossSample) {}

    fn allowance(&self, now: Duration, _in_flight: u64) -> u64 {
        self.tokens_at(now).max(0.0) as u64
    }

    fn next_allowance_at(&self, now: Duration) -> Option<Duration> {
        let have = self.tokens_at(now);
        if have >= self.mss {
            return Some(now);
        }
        let wait = (self.mss - have) / self.rate;
        // Round up to the next nanosecond so the tokens are really there.
        Some(now + Duration::from_nanos((wait * 1e9).ceil() as u64))
    }

    fn rate(&self, _srtt: Duration) -> f64 {
        self.rate
    }

    fn reset(&mut self, now: Duration) {
        self.tokens = self.mss;
        self.last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbr_paces_at_its_rate() {
        let mss = 768;
        let start = Duration::ZERO;
        let mut c = Cbr::new(16_000.0, Duration::from_millis(100), mss, start);
        let mut now = start;
        let mut sent = 0u64;
        while now < Duration::from_secs(10) {
            if c.allowance(now, 0) >= u64::from(mss) {
                c.on_sent(now, mss, 0);
                sent += u64::from(mss);
            }
            now = c
                .next_allowance_at(now)
                .unwrap()
                .max(now + Duration::from_micros(1));
        }
        let rate = sent as f64 / 10.0;
        assert!((rate - 16_000.0).abs() / 16_000.0 < 0.02, "{rate}");
    }
}
