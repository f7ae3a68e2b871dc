//! A forecast of a channel's deliverable rate from its delivery process alone (the
//! `ontime` controller's model, docs/congestion.md).
//!
//! As in Sprout (Winstein, Sivaraman and Balakrishnan, NSDI 2013), the link's rate moves
//! by Brownian motion and is observed through the bytes delivered in fixed ticks; unlike
//! Sprout's grid of rate hypotheses, the belief is one Gaussian, tracked by a scalar
//! Kalman filter:
//!
//! - predict, each tick of length `τ`: the variance grows by `q·τ`, with
//!   `q = (volatility · level)²`. The volatility is relative (the radio's rate moves in
//!   proportion to itself), and `level` is a slow average of the rate, so that after an
//!   outage has pulled the estimate to zero the filter is still ready to see the rate
//!   come back;
//! - observe `y = bytes / τ`, with the variance of a Poisson count of packets,
//!   `R = NOISE · max(mean, y) · mss / τ`;
//! - a tick in which the link may have been idle for want of data (no queue of ours in
//!   front of it) is censored: what it delivered is a lower bound on what it could have,
//!   so it counts only if it exceeds the estimate.
//!
//! The forecast of the bytes delivered over the next `H` is Gaussian too, with mean
//! `mean·H` and variance `var·H² + q·H³/3` (the integral of a Brownian rate), and the
//! controller takes a low quantile of it: what will arrive in time with the chosen
//! confidence.

use std::time::Duration;

/// The Poisson variance of a count is inflated by this factor for the batching of acks
/// (one ack frame often covers several packets) and the jitter of the ack path.
const NOISE: f64 = 2.0;
/// Time constant of the slow rate average that scales the process noise.
const LEVEL_TIME: f64 = 2.0;

/// The rate belief of one channel.
#[derive(Debug, Clone)]
pub struct RateForecast {
    tick: Duration,
    /// Relative standard deviation of the rate's moves, per square root of a second.
    volatility: f64,
    /// Bytes of one full packet (the unit of the Poisson count).
    mss: f64,
    /// Mean and variance of the rate in bytes/s, once the first delivery is seen.
    belief: Option<(f64, f64)>,
    /// Slow average of the rate, bytes/s.
    level: f64,
    /// The open tick: its start, bytes delivered in it, whether a queue of ours stood
    /// in front of the link during it.
    tick_start: Duration,
    bytes: u64,
    saturated: bool,
}

impl RateForecast {
    pub fn new(tick: Duration, volatility: f64, mss: u32) -> Self {
        Self {
            tick: tick.max(Duration::from_millis(1)),
            volatility,
            mss: f64::from(mss),
            belief: None,
            level: 0.0,
            tick_start: Duration::ZERO,
            bytes: 0,
            saturated: false,
        }
    }

    /// `bytes` were delivered (acknowledged) at `now`; `saturated` says whether the link
    /// had data of ours queued, so that it could not have delivered more. Ticks that
    /// ended before `now` are closed first; those without any delivery count as
    /// saturated when `saturated` is.
    pub fn on_delivered(&mut self, now: Duration, bytes: u64, saturated: bool) {
        self.advance(now, saturated);
        self.bytes += bytes;
        self.saturated |= saturated;
    }

    /// Close every tick that ended by `now`; those without a delivery count as saturated
    /// if `saturated` (an outage while data waits), else as censored.
    pub fn advance(&mut self, now: Duration, saturated: bool) {
        if self.belief.is_none() && self.bytes == 0 {
            // Nothing seen yet: the first tick starts with the first delivery.
            self.tick_start = now;
            return;
        }
        let tau = self.tick.as_secs_f64();
        // After a long silence, closing each tick separately changes nothing more
        // than closing a bounded number of them: the estimate is at zero by then.
        let mut left = 500;
        while now >= self.tick_start + self.tick && left > 0 {
            let (bytes, sat) = (self.bytes, self.saturated || self.bytes == 0 && saturated);
            self.close_tick(bytes as f64 / tau, sat, tau);
            self.tick_start += self.tick;
            self.bytes = 0;
            self.saturated = false;
            left -= 1;
        }
        if now >= self.tick_start + self.tick {
            let behind = now - self.tick_start;
            let whole = behind.as_nanos() / self.tick.as_nanos();
            self.tick_start += self.tick * whole as u32;
        }
    }

    fn close_tick(&mut self, y: f64, saturated: bool, tau: f64) {
        let Some((mean, var)) = self.belief else {
            // The first tick: a wide prior around what it saw.
            self.belief = Some((y, y * y));
            self.level = y;
            return;
        };
        let q = self.process_noise(mean);
        let var = var + q * tau;
        let (mean, var) = if saturated || y > mean {
            let r = NOISE * mean.max(y).max(self.mss / tau) * self.mss / tau;
            let gain = var / (var + r);
            ((mean + gain * (y - mean)).max(0.0), var * (1.0 - gain))
        } else {
            (mean, var)
        };
        self.belief = Some((mean, var));
        self.level += (mean - self.level) * (tau / LEVEL_TIME).min(1.0);
    }

    fn process_noise(&self, mean: f64) -> f64 {
        let scale = mean.max(self.level);
        (self.volatility * scale).powi(2)
    }

    /// The expected rate, bytes/s.
    pub fn mean(&self) -> Option<f64> {
        self.belief.map(|(m, _)| m)
    }

    /// Bytes delivered over the next `horizon` with probability `1 - p` where `z` is
    /// the standard normal quantile of `p` (negative for a cautious forecast), never
    /// below zero.
    pub fn quantile_bytes(&self, horizon: Duration, z: f64) -> Option<f64> {
        let (mean, var) = self.belief?;
        let h = horizon.as_secs_f64();
        let q = self.process_noise(mean);
        let spread = (var * h * h + q * h * h * h / 3.0).sqrt();
        Some((mean * h + z * spread).max(0.0))
    }
}

/// The standard normal quantile of `p` in (0, 1) (Abramowitz and Stegun 26.2.23,
/// absolute error below 5e-4: ample for a confidence level).
pub fn normal_quantile(p: f64) -> f64 {
    let p = p.clamp(1e-9, 1.0 - 1e-9);
    let tail = |p: f64| {
        let t = (-2.0 * p.ln()).sqrt();
        t - (2.515517 + 0.802853 * t + 0.010328 * t * t)
            / (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t)
    };
    if p < 0.5 {
        -tail(p)
    } else {
        tail(1.0 - p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;
    const TICK: Duration = Duration::from_millis(20);

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    /// Deliveries of `rate` bytes/s as one packet at a time, saturated, from `from` to
    /// `to`.
    fn deliver(f: &mut RateForecast, from: Duration, to: Duration, rate: f64, sat: bool) {
        let gap = Duration::from_secs_f64(f64::from(MSS) / rate);
        let mut t = from;
        while t < to {
            f.on_delivered(t, u64::from(MSS), sat);
            t += gap;
        }
        f.advance(to, sat);
    }

    #[test]
    fn a_steady_rate_is_learnt_and_the_forecast_narrows() {
        let mut f = RateForecast::new(TICK, 1.0, MSS);
        deliver(&mut f, ms(0), ms(200), 500_000.0, true);
        let early = f.quantile_bytes(ms(100), -1.645).unwrap();
        deliver(&mut f, ms(200), ms(3000), 500_000.0, true);
        let mean = f.mean().unwrap();
        assert!((mean / 500_000.0 - 1.0).abs() < 0.05, "{mean}");
        let late = f.quantile_bytes(ms(100), -1.645).unwrap();
        // Cautious, but not absurdly so: ten packets a tick are a noisy observation.
        assert!(late < 50_000.0 && late > 22_500.0, "{late}");
        assert!(late > early, "{early} then {late}");
        let optimistic = f.quantile_bytes(ms(100), 1.645).unwrap();
        assert!(optimistic > 50_000.0, "{optimistic}");
    }

    #[test]
    fn a_drop_is_followed_within_a_few_ticks() {
        let mut f = RateForecast::new(TICK, 1.0, MSS);
        deliver(&mut f, ms(0), ms(2000), 1_000_000.0, true);
        deliver(&mut f, ms(2000), ms(2200), 250_000.0, true);
        let mean = f.mean().unwrap();
        assert!(mean < 400_000.0, "{mean} after 200 ms at a quarter");
        // And back up.
        deliver(&mut f, ms(2200), ms(2400), 1_000_000.0, true);
        let mean = f.mean().unwrap();
        assert!(mean > 800_000.0, "{mean} after 200 ms back at full rate");
    }

    #[test]
    fn an_outage_empties_the_forecast_and_the_rate_comes_back() {
        let mut f = RateForecast::new(TICK, 1.0, MSS);
        deliver(&mut f, ms(0), ms(2000), 1_000_000.0, true);
        // Nothing delivered for 500 ms while data waits: the first ack after it closes
        // the empty ticks.
        f.advance(ms(2500), true);
        let cautious = f.quantile_bytes(ms(100), -1.645).unwrap();
        assert!(cautious < 10_000.0, "{cautious} forecast after an outage");
        deliver(&mut f, ms(2500), ms(2700), 1_000_000.0, true);
        let mean = f.mean().unwrap();
        assert!(mean > 700_000.0, "{mean} 200 ms after the outage");
    }

    #[test]
    fn an_idle_sender_does_not_lower_the_estimate() {
        let mut f = RateForecast::new(TICK, 1.0, MSS);
        deliver(&mut f, ms(0), ms(2000), 1_000_000.0, true);
        // The sender had little to send: deliveries are a lower bound.
        deliver(&mut f, ms(2000), ms(3000), 100_000.0, false);
        let mean = f.mean().unwrap();
        assert!(mean > 950_000.0, "{mean}");
        // But more than expected, even unsaturated, raises it.
        deliver(&mut f, ms(3000), ms(3400), 2_000_000.0, false);
        let mean = f.mean().unwrap();
        assert!(mean > 1_600_000.0, "{mean}");
    }

    #[test]
    fn nothing_is_forecast_before_a_delivery() {
        let mut f = RateForecast::new(TICK, 1.0, MSS);
        f.advance(ms(500), true);
        assert_eq!(f.mean(), None);
        assert_eq!(f.quantile_bytes(ms(100), -1.0), None);
    }

    #[test]
    fn normal_quantiles() {
        for (p, z) in [(0.5, 0.0), (0.05, -1.645), (0.95, 1.645), (0.01, -2.326)] {
            assert!(
                (normal_quantile(p) - z).abs() < 1e-3,
                "{p}: {}",
                normal_quantile(p)
            );
        }
    }
}
