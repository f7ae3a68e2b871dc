//! A pacing token bucket shared by the window-based controllers: it releases bytes at a
//! set rate so the slots a channel offers arrive spread over the round trip rather than in
//! window-sized bursts.

use std::time::Duration;

/// Pacing credit never exceeds this many full packets...
const BURST_PACKETS: f64 = 2.0;
/// ...or this much time at the pacing rate, whichever is more: runtimes wake on timers of
/// about a millisecond, so at high rates the bucket must span a few ticks.
const BURST_TIME: f64 = 0.002;

#[derive(Debug, Clone)]
pub struct Pacer {
    mss: f64,
    /// Bytes per second; `None` leaves sending unpaced (before the first RTT sample).
    rate: Option<f64>,
    /// Credit in bytes at `last`.
    tokens: f64,
    last: Duration,
}

impl Pacer {
    pub fn new(mss: u64) -> Self {
        let mss = mss as f64;
        Self {
            mss,
            rate: None,
            tokens: mss * BURST_PACKETS,
            last: Duration::ZERO,
        }
    }

    /// Change the rate from `now` on; credit earned so far at the old rate is kept.
    pub fn set_rate(&mut self, now: Duration, rate: Option<f64>) {
        self.tokens = self.tokens_at(now);
        self.last = self.last.max(now);
        self.rate = rate.map(|r| r.max(1.0));
    }

    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// Credit in bytes at `now` (infinite while unpaced).
    pub fn tokens_at(&self, now: Duration) -> f64 {
        match self.rate {
            Some(r) => {
                let depth = (self.mss * BURST_PACKETS).max(r * BURST_TIME);
                let earned = now.saturating_sub(self.last).as_secs_f64() * r;
                (self.tokens + earned).min(depth)
            }
            None => f64::INFINITY,
        }
    }

    /// What a window-based controller may send now: what the window `cwnd` leaves
    /// beside `in_flight`, and no more than the pacing credit.
    pub fn allowance(&self, now: Duration, cwnd: u64, in_flight: u64) -> u64 {
        let window = cwnd.saturating_sub(in_flight);
        window.min(self.tokens_at(now).max(0.0) as u64)
    }

    pub fn on_sent(&mut self, now: Duration, bytes: u32) {
        let have = self.tokens_at(now);
        self.tokens = if have.is_finite() {
            have - f64::from(bytes)
        } else {
            self.mss * BURST_PACKETS
        };
        self.last = self.last.max(now);
    }

    /// When a full packet's credit will be there (now if it already is; `None` if unpaced).
    pub fn next_at(&self, now: Duration) -> Option<Duration> {
        let rate = self.rate?;
        let have = self.tokens_at(now);
        if have >= self.mss {
            return Some(now);
        }
        let wait = (self.mss - have) / rate;
        // Round up to the next nanosecond so the credit is really there.
        Some(now + Duration::from_nanos((wait * 1e9).ceil() as u64))
    }

    pub fn reset(&mut self, now: Duration) {
        self.rate = None;
        self.tokens = self.mss * BURST_PACKETS;
        self.last = now;
    }
}
