//! `verb`: the CDMA2000-specific rate controller of the Horde thesis (§7.4.1).
//!
//! A paced sending rate moved between throughput *plateaus* (default every 5 kbit/s from 5
//! to 133 kbit/s):
//!
//! - a coarse timer (`period`) resets the rate to the goodput acknowledged over the last
//!   period whenever the channel did not carry what was sent (or queues grew), so the rate
//!   settles no higher than what the channel gives;
//! - a round trip above `rtt_rise` times the minimum is taken as a queue building up, and
//!   the rate backs off by `backoff` at most once per round trip, before any loss;
//! - while stable, the rate edges up by `ai_kbps` per period inside its plateau (gentle
//!   AIMD: a loss costs `loss_backoff`, once per round trip), and after `stable_periods`
//!   calm periods it tries the next plateau; at the top plateau probing stops.
//!
//! The thesis leaves every constant open; ours and why are in docs/cdma.md.

use std::time::Duration;

use super::{AckSample, CongestionControl, LossSample};

/// `verb`'s constants.
#[derive(Debug, Clone, PartialEq)]
pub struct VerbParams {
    /// Plateau rates, ascending, in kbit/s.
    pub plateaus_kbps: Vec<f64>,
    /// The coarse timer.
    pub period: Duration,
    /// A round trip above this multiple of the minimum signals queueing.
    pub rtt_rise: f64,
    /// Rate factor on a queueing signal.
    pub backoff: f64,
    /// Rate factor on a loss.
    pub loss_backoff: f64,
    /// Additive increase per calm period, kbit/s.
    pub ai_kbps: f64,
    /// Calm periods before trying the next plateau.
    pub stable_periods: u32,
    /// Starting rate, kbit/s.
    pub initial_kbps: f64,
}

impl Default for VerbParams {
    fn default() -> Self {
        let mut plateaus: Vec<f64> = (1..=26).map(|i| 5.0 * f64::from(i)).collect();
        plateaus.push(133.0);
        VerbParams {
            plateaus_kbps: plateaus,
            period: Duration::from_secs(4),
            rtt_rise: 3.0,
            backoff: 0.9,
            loss_backoff: 0.85,
            ai_kbps: 1.0,
            stable_periods: 2,
            initial_kbps: 20.0,
        }
    }
}

/// The `verb` controller.
#[derive(Debug, Clone)]
pub struct Verb {
    p: VerbParams,
    mss: f64,
    /// Sending rate, bytes/s.
    rate: f64,
    /// Pacing credit in bytes at `last_sent`.
    tokens: f64,
    last_sent: Duration,
    period_start: Option<Duration>,
    acked_in_period: u64,
    congested_in_period: bool,
    stable: u32,
    last_decrease: Duration,
    srtt: Option<Duration>,
    min_rtt: Option<Duration>,
}

const KBPS: f64 = 125.0; // bytes/s per kbit/s

impl Verb {
    pub fn new(mss: u32, p: VerbParams) -> Self {
        let rate = p.initial_kbps * KBPS;
        let mss = f64::from(mss);
        Self {
            p,
            mss,
            rate,
            tokens: mss,
            last_sent: Duration::ZERO,
            period_start: None,
            acked_in_period: 0,
            congested_in_period: false,
            stable: 0,
            last_decrease: Duration::ZERO,
            srtt: None,
            min_rtt: None,
        }
    }

    /// The sending rate in kbit/s.
    pub fn rate_kbps(&self) -> f64 {
        self.rate / KBPS
    }

    fn floor(&self) -> f64 {
        self.p.plateaus_kbps[0] * KBPS
    }

    fn top(&self) -> f64 {
        self.p.plateaus_kbps[self.p.plateaus_kbps.len() - 1] * KBPS
    }

    /// The plateau at or above the rate (the ceiling AIMD may reach without a jump).
    fn plateau_above(&self) -> f64 {
        let r = self.rate_kbps() + 1e-9;
        self.p
            .plateaus_kbps
            .iter()
            .copied()
            .find(|&x| x >= r)
            .unwrap_or(self.top() / KBPS)
            * KBPS
    }

    fn next_plateau(&self) -> f64 {
        let r = self.rate_kbps() + 0.5;
        self.p
            .plateaus_kbps
            .iter()
            .copied()
            .find(|&x| x > r)
            .unwrap_or(self.top() / KBPS)
            * KBPS
    }

    fn decrease(&mut self, now: Duration, factor: f64) {
        let spacing = self.srtt.unwrap_or(Duration::from_secs(1));
        if now.saturating_sub(self.last_decrease) >= spacing {
            self.rate = (self.rate * factor).max(self.floor());
            self.last_decrease = now;
            self.stable = 0;
        }
        self.congested_in_period = true;
    }

    /// The coarse timer: reset to the goodput, or probe upward if calm.
    fn end_period(&mut self, now: Duration, start: Duration) {
        let elapsed = (now - start).as_secs_f64().max(1e-3);
        let goodput = self.acked_in_period as f64 / elapsed;
        if self.congested_in_period || goodput < 0.8 * self.rate {
            self.rate = self.rate.min(goodput).max(self.floor());
            self.stable = 0;
        } else if self.rate < self.top() {
            self.stable += 1;
            if self.stable >= self.p.stable_periods {
                self.rate = self.next_plateau();
                self.stable = 0;
            } else {
                self.rate = (self.rate + self.p.ai_kbps * KBPS).min(self.plateau_above());
            }
        }
        self.period_start = Some(now);
        self.acked_in_period = 0;
        self.congested_in_period = false;
    }

    fn tokens_at(&self, now: Duration) -> f64 {
        let dt = now.saturating_sub(self.last_sent).as_secs_f64();
        (self.tokens + dt * self.rate).min(2.0 * self.mss)
    }

    /// Bytes that may be outstanding: two round trips at the rate, so a channel that stops
    /// (a cut, an outage) does not swallow an unbounded burst.
    fn window_bytes(&self) -> u64 {
        let rtt = self.srtt.unwrap_or(Duration::from_secs(1)).as_secs_f64();
        (2.0 * self.rate * rtt).max(4.0 * self.mss) as u64
    }
}

impl CongestionControl for Verb {
    fn name(&self) -> &'static str {
        "verb"
    }

    fn on_sent(&mut self, now: Duration, bytes: u32, _in_flight: u64) {
        self.tokens = self.tokens_at(now) - f64::from(bytes);
        self.last_sent = now;
        self.period_start.get_or_insert(now);
    }

    fn on_ack(&mut self, ack: &AckSample) {
        self.srtt = Some(match self.srtt {
            None => ack.rtt,
            Some(s) => (s * 7 + ack.rtt) / 8,
        });
        let min = ack.min_rtt.min(self.min_rtt.unwrap_or(ack.min_rtt));
        self.min_rtt = Some(min);
        self.acked_in_period += ack.acked_bytes;
        if ack.rtt.as_secs_f64() > self.p.rtt_rise * min.as_secs_f64() {
            self.decrease(ack.now, self.p.backoff);
        }
        let start = *self.period_start.get_or_insert(ack.now);
        if ack.now >= start + self.p.period {
            self.end_period(ack.now, start);
        }
    }

    fn on_loss(&mut self, loss: &LossSample) {
        self.decrease(loss.now, self.p.loss_backoff);
    }

    fn allowance(&self, now: Duration, in_flight: u64) -> u64 {
        let window = self.window_bytes().saturating_sub(in_flight);
        window.min(self.tokens_at(now).max(0.0) as u64)
    }

    fn next_allowance_at(&self, now: Duration) -> Option<Duration> {
        let have = self.tokens_at(now);
        if have >= self.mss {
            return Some(now);
        }
        let wait = (self.mss - have) / self.rate;
        Some(now + Duration::from_nanos((wait * 1e9).ceil() as u64))
    }

    fn rate(&self, _srtt: Duration) -> f64 {
        self.rate
    }

    fn window(&self) -> Option<u64> {
        Some(self.window_bytes())
    }

    fn reset(&mut self, now: Duration) {
        *self = Verb::new(self.mss as u32, self.p.clone());
        self.last_sent = now;
    }
}

#[cfg(test)]
mod tests {
    use super::super::testbed::{self, ms, Link, MSS};
    use super::super::testing;
    use super::*;

    const KBIT: f64 = 125.0;

    #[test]
    fn plateaus_are_about_5_kbps_apart_from_5_to_133() {
        let p = VerbParams::default().plateaus_kbps;
        assert_eq!((p[0], *p.last().unwrap()), (5.0, 133.0));
        assert!(p
            .windows(2)
            .all(|w| w[1] - w[0] > 2.0 && w[1] - w[0] <= 5.0));
    }

    #[test]
    fn settles_near_a_steady_cdma_rate_with_few_losses_and_little_queue() {
        // 60 kbit/s, 500 ms round trip, 30 KB buffer: the sustainable CDMA rate.
        let link = Link::constant(60.0 * KBIT, ms(500), 30_000);
        let mut cc = Verb::new(MSS, VerbParams::default());
        let t = testbed::run(&mut cc, &link, Duration::from_secs(300), |_, _| {});
        let g = t.goodput(Duration::from_secs(60), Duration::from_secs(300)) / KBIT;
        assert!(g > 0.8 * 60.0, "goodput {g} kbit/s");
        let lost = t.congestion_losses as f64 / t.packets.len() as f64;
        assert!(lost < 0.02, "loss {lost}");
        let q = t.mean_queue_delay(Duration::from_secs(60), Duration::from_secs(300));
        assert!(q < ms(1500), "queue {q:?}");
    }

    #[test]
    fn rising_round_trips_back_off_before_any_loss() {
        let mut cc = Verb::new(MSS, VerbParams::default());
        let base = ms(500);
        cc.on_sent(Duration::ZERO, MSS, 0);
        cc.on_ack(&testing::ack(ms(500), u64::from(MSS), base));
        let before = cc.rate_kbps();
        let mut a = testing::ack(ms(2600), u64::from(MSS), ms(2000));
        a.min_rtt = base;
        cc.on_ack(&a);
        assert!(cc.rate_kbps() < before, "{} -> {}", before, cc.rate_kbps());
        // A round trip near the minimum does nothing.
        let r = cc.rate_kbps();
        let mut b = testing::ack(ms(1700), u64::from(MSS), ms(550));
        b.min_rtt = base;
        cc.on_ack(&b);
        assert_eq!(cc.rate_kbps(), r);
    }

    #[test]
    fn the_coarse_timer_resets_the_rate_to_the_goodput() {
        let mut cc = Verb::new(
            MSS,
            VerbParams {
                initial_kbps: 100.0,
                ..VerbParams::default()
            },
        );
        cc.on_sent(Duration::ZERO, MSS, 0);
        // Only 5000 B acknowledged over 4 s: 10 kbit/s.
        for (t, b) in [(500, 2000), (1200, 1000), (4000, 2000)] {
            cc.on_ack(&testing::ack(ms(t), b, ms(500)));
        }
        assert!((cc.rate_kbps() - 10.0).abs() < 0.5, "{}", cc.rate_kbps());
    }

    #[test]
    fn calm_periods_climb_plateaus_up_to_the_top_and_stop_there() {
        let mut cc = Verb::new(MSS, VerbParams::default());
        let mut now = Duration::ZERO;
        cc.on_sent(now, MSS, 0);
        let mut seen = vec![cc.rate_kbps()];
        for _ in 0..1000 {
            now += ms(250);
            // The channel carries whatever is sent, at the base round trip.
            let bytes = (cc.rate * 0.25) as u64;
            cc.on_ack(&testing::ack(now, bytes, ms(500)));
            seen.push(cc.rate_kbps());
        }
        assert!(seen.windows(2).all(|w| w[1] >= w[0] - 1e-9));
        // Gentle: no step bigger than one plateau (5 kbit/s) plus the additive increase.
        assert!(seen.windows(2).all(|w| w[1] - w[0] <= 6.0 + 1e-9));
        assert_eq!(*seen.last().unwrap(), 133.0);
    }
}
