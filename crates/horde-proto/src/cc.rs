//! Per-channel congestion control (thesis §3.3.3: below the striping layer, one
//! independent controller per channel, and channel-specific where that pays off).

use std::time::Duration;

/// A congestion controller decides when the channel may send; the channel manager turns
/// each permission into a `txSlot`.
pub trait CongestionControl: Send + std::fmt::Debug {
    fn name(&self) -> &'static str;
    fn on_sent(&mut self, now: Duration, bytes: u32);
    fn on_ack(&mut self, now: Duration, bytes: u32, rtt: Duration);
    /// A packet sent at `sent_at` was declared lost.
    fn on_loss(&mut self, now: Duration, bytes: u32, sent_at: Duration);
    /// Bytes that may be sent now, given the bytes in flight.
    fn allowance(&self, now: Duration, in_flight: u64) -> u64;
    /// Bytes in flight right after a send, for controllers that grow only a used window.
    fn note_in_flight(&mut self, _in_flight: u64) {}
    /// When the allowance will next grow without an ack (rate-based control), if ever.
    fn next_allowance_at(&self, now: Duration) -> Option<Duration>;
    /// Sustained sending rate estimate in bytes per second, for bandwidth allocation and
    /// phantom-slot prediction. `srtt` is the channel's smoothed RTT.
    fn rate(&self, srtt: Duration) -> f64;
    /// Forget everything, e.g. when a dead channel comes back.
    fn reset(&mut self, now: Duration);
}

/// Which controller a channel runs, as configured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum CcConfig {
    /// Window-based additive-increase multiplicative-decrease (thesis E1).
    Aimd {
        #[serde(default = "default_initial_window")]
        initial_window_packets: u32,
    },
    /// A constant rate regardless of feedback (the thesis simulations' slot generator).
    Cbr {
        kbps: f64,
        /// Longest idle time whose unused slots may be banked, in ms.
        #[serde(default = "default_burst_ms")]
        burst_ms: f64,
    },
}

fn default_initial_window() -> u32 {
    4
}
fn default_burst_ms() -> f64 {
    150.0
}

impl Default for CcConfig {
    fn default() -> Self {
        CcConfig::Aimd {
            initial_window_packets: default_initial_window(),
        }
    }
}

impl CcConfig {
    pub fn build(&self, mss: u32, now: Duration) -> Box<dyn CongestionControl> {
        match *self {
            CcConfig::Aimd {
                initial_window_packets,
            } => Box::new(Aimd::new(mss, initial_window_packets.max(2))),
            CcConfig::Cbr { kbps, burst_ms } => Box::new(Cbr::new(
                kbps * 1000.0 / 8.0,
                Duration::from_secs_f64(burst_ms.max(0.0) / 1e3),
                mss,
                now,
            )),
        }
    }
}

/// Window AIMD with slow start: +1 MSS per RTT, halve once per RTT on loss. Sending is
/// paced at a multiple of cwnd/srtt (2x in slow start, 1.25x after, as Linux does), so
/// the slots a channel offers arrive in proportion to its rate rather than in window-sized
/// bursts; and the window only grows while it is actually used (RFC 7661), so an
/// application-limited channel does not build a window it has never tested.
#[derive(Debug, Clone)]
pub struct Aimd {
    mss: u64,
    initial: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Losses of packets sent before this time belong to an already-handled episode.
    recovery_start: Duration,
    srtt: Option<Duration>,
    /// Pacing credit in bytes at `last`.
    tokens: f64,
    last: Duration,
    /// Highest bytes in flight seen since the last ack, to tell a used window.
    peak_in_flight: u64,
}

/// Pacing credit never exceeds this many full packets...
const PACING_BURST_PACKETS: f64 = 2.0;
/// ...or this much time at the pacing rate, whichever is more: runtimes wake on timers of
/// about a millisecond, so at high rates the bucket must span a few ticks.
const PACING_BURST_TIME: f64 = 0.002;

impl Aimd {
    pub fn new(mss: u32, initial_window_packets: u32) -> Self {
        let initial = u64::from(mss) * u64::from(initial_window_packets);
        Self {
            mss: u64::from(mss),
            initial,
            cwnd: initial,
            ssthresh: u64::MAX,
            recovery_start: Duration::ZERO,
            srtt: None,
            tokens: f64::from(mss) * PACING_BURST_PACKETS,
            last: Duration::ZERO,
            peak_in_flight: 0,
        }
    }

    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    /// Bytes per second the pacer releases; unpaced until the first RTT sample.
    fn pacing_rate(&self) -> Option<f64> {
        let srtt = self.srtt?.as_secs_f64().max(1e-6);
        let gain = if self.cwnd < self.ssthresh { 2.0 } else { 1.25 };
        Some(gain * self.cwnd as f64 / srtt)
    }

    fn tokens_at(&self, now: Duration) -> f64 {
        match self.pacing_rate() {
            Some(r) => {
                let depth = (self.mss as f64 * PACING_BURST_PACKETS).max(r * PACING_BURST_TIME);
                (self.tokens + now.saturating_sub(self.last).as_secs_f64() * r).min(depth)
            }
            // Before the first RTT sample only the window limits sending.
            None => f64::INFINITY,
        }
    }
}

impl CongestionControl for Aimd {
    fn name(&self) -> &'static str {
        "aimd"
    }

    fn on_sent(&mut self, now: Duration, bytes: u32) {
        self.tokens = self.tokens_at(now) - f64::from(bytes);
        self.last = now;
    }

    fn on_ack(&mut self, _now: Duration, bytes: u32, rtt: Duration) {
        self.srtt = Some(match self.srtt {
            None => rtt,
            Some(s) => (s * 7 + rtt) / 8,
        });
        // Grow only a window that was at least half used since the last ack.
        if self.peak_in_flight * 2 >= self.cwnd {
            let b = u64::from(bytes);
            if self.cwnd < self.ssthresh {
                self.cwnd += b;
            } else {
                self.cwnd += (self.mss * b / self.cwnd).max(1);
            }
        }
        self.peak_in_flight = 0;
    }

    fn on_loss(&mut self, now: Duration, _bytes: u32, sent_at: Duration) {
        if sent_at < self.recovery_start {
            return;
        }
        self.recovery_start = now;
        self.cwnd = (self.cwnd / 2).max(2 * self.mss);
        self.ssthresh = self.cwnd;
    }

    fn allowance(&self, now: Duration, in_flight: u64) -> u64 {
        let window = self.cwnd.saturating_sub(in_flight);
        window.min(self.tokens_at(now).max(0.0) as u64)
    }

    fn note_in_flight(&mut self, in_flight: u64) {
        self.peak_in_flight = self.peak_in_flight.max(in_flight);
    }

    fn next_allowance_at(&self, now: Duration) -> Option<Duration> {
        let rate = self.pacing_rate()?;
        let have = self.tokens_at(now);
        if have >= self.mss as f64 {
            return Some(now);
        }
        let wait = (self.mss as f64 - have) / rate;
        Some(now + Duration::from_nanos((wait * 1e9).ceil() as u64))
    }

    fn rate(&self, srtt: Duration) -> f64 {
        self.cwnd as f64 / srtt.as_secs_f64().max(1e-3)
    }

    fn reset(&mut self, now: Duration) {
        self.cwnd = self.initial;
        self.ssthresh = u64::MAX;
        self.recovery_start = now;
        self.srtt = None;
        self.tokens = self.mss as f64 * PACING_BURST_PACKETS;
        self.last = now;
    }
}

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

    fn on_sent(&mut self, now: Duration, bytes: u32) {
        self.tokens = self.tokens_at(now) - f64::from(bytes);
        self.last = now;
    }

    fn on_ack(&mut self, _now: Duration, _bytes: u32, _rtt: Duration) {}

    fn on_loss(&mut self, _now: Duration, _bytes: u32, _sent_at: Duration) {}

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
    fn aimd_halves_once_per_episode_and_grows_linearly() {
        let mut c = Aimd::new(1000, 4);
        let t = Duration::from_millis;
        // Slow start doubles per window.
        for _ in 0..4 {
            c.note_in_flight(c.cwnd());
            c.on_ack(t(1), 1000, t(100));
        }
        assert_eq!(c.cwnd(), 8000);
        c.on_loss(t(10), 1000, t(5));
        assert_eq!(c.cwnd(), 4000);
        // A second loss from the same flight does not halve again.
        c.on_loss(t(11), 1000, t(6));
        assert_eq!(c.cwnd(), 4000);
        // Congestion avoidance: one window of acks adds about one MSS.
        for _ in 0..4 {
            c.note_in_flight(c.cwnd());
            c.on_ack(t(20), 1000, t(100));
        }
        assert!((4900..=5100).contains(&c.cwnd()), "{}", c.cwnd());
        // An application-limited window does not grow.
        let before = c.cwnd();
        c.note_in_flight(1000);
        c.on_ack(t(30), 1000, t(100));
        assert_eq!(c.cwnd(), before);
    }

    #[test]
    fn aimd_paces_at_window_over_rtt() {
        let mss = 1000u32;
        let mut c = Aimd::new(mss, 10);
        let t0 = Duration::from_millis(0);
        c.on_ack(t0, mss, Duration::from_millis(100));
        // 10 packets per 100 ms RTT in slow start at gain 2: about 200 packets/s.
        let mut now = t0;
        let mut sent = 0u32;
        while now < Duration::from_secs(1) {
            if c.allowance(now, 0) >= u64::from(mss) {
                c.on_sent(now, mss);
                sent += 1;
            }
            now = c
                .next_allowance_at(now)
                .unwrap()
                .max(now + Duration::from_micros(10));
        }
        assert!((190..=212).contains(&sent), "{sent}");
    }

    #[test]
    fn cbr_paces_at_its_rate() {
        let mss = 768;
        let start = Duration::ZERO;
        let mut c = Cbr::new(16_000.0, Duration::from_millis(100), mss, start);
        let mut now = start;
        let mut sent = 0u64;
        while now < Duration::from_secs(10) {
            if c.allowance(now, 0) >= u64::from(mss) {
                c.on_sent(now, mss);
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
