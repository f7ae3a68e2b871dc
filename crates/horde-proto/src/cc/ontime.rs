//! `ontime`: a delay-bounded controller that keeps a cellular link busy. It sends only what
//! a forecast of the link's rate says will arrive within a delay target, in the manner of
//! Sprout (NSDI 2013), from acknowledgements alone (docs/congestion.md).
//!
//! The window is `mean · min_rtt + Q`, where `mean` is the forecast rate
//! ([`RateForecast`]) and `Q` the bytes the link delivers within the delay target with the
//! configured confidence (a low quantile of the forecast of cumulative deliveries), never
//! less than a few packets. The first term covers what is on the wires; the second is the
//! only queue the controller lets stand, and a packet that joins it is served within the
//! target unless the link falls below the forecast's low quantile. That standing queue is
//! also what keeps the link busy: when the rate rises, the queue feeds it until the acks
//! raise the forecast.
//!
//! A tick of the delivery process counts as a measurement of the link only when a queue
//! of ours stood in front of it (more in flight than the path holds, and a round trip
//! above the minimum); otherwise what it delivered is a lower bound (see [`RateForecast`]).
//! The floor of a few packets on `Q` makes an underestimated rate show itself.
//!
//! Sending is paced at twice the forecast rate (or at twice what drains the window over a
//! round trip plus the target, if more), so that the window is refilled within half a
//! round trip rather than in one burst.
//!
//! Loss: a loss with little of ours queued is the link's and is ignored. A loss while a
//! queue of ours stood means `Q` did not fit in the bottleneck's buffer (the channel may
//! call it a link loss: a shallow queue spreads round trips too little to tell), so the
//! queue allowance is capped at half the queue that overflowed, once per round trip; the
//! cap then grows by a packet per round trip.

use std::time::Duration;

use super::forecast::{normal_quantile, RateForecast};
use super::{AckSample, CongestionControl, LossKind, LossSample, Pacer};

/// Parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OntimeParams {
    pub initial_window_packets: u32,
    /// The queueing delay each packet should stay within.
    pub delay_target: Duration,
    /// Probability with which the forecast must hold: the lower tail is `1 - confidence`.
    pub confidence: f64,
    /// Relative standard deviation of the link rate's moves per square root of a second.
    pub volatility: f64,
    /// Length of one observation of the delivery process.
    pub tick: Duration,
}

impl Default for OntimeParams {
    fn default() -> Self {
        Self {
            initial_window_packets: 10,
            delay_target: Duration::from_millis(100),
            confidence: 0.9,
            volatility: 2.5,
            tick: Duration::from_millis(20),
        }
    }
}

const PACING_GAIN: f64 = 2.0;
const MIN_WINDOW_PACKETS: f64 = 2.0;
/// A round trip this much above the minimum, with more in flight than the path holds by
/// this many packets, shows a queue of ours in front of the link.
const QUEUE_EVIDENCE: Duration = Duration::from_millis(3);
const QUEUE_EVIDENCE_PACKETS: f64 = 2.0;
/// The queue allowance never falls below this many packets, so that an underestimated
/// rate is found out: the link then delivers more than the forecast.
const MIN_QUEUE_PACKETS: f64 = 4.0;
/// A loss the channel puts down to the link counts as an overflow if at least this many
/// packets of ours were queued.
const OVERFLOW_EVIDENCE_PACKETS: f64 = 16.0;
/// After an overflow the queue allowance is capped at this fraction of the queue then.
const OVERFLOW_CUT: f64 = 0.5;

#[derive(Debug, Clone)]
pub struct Ontime {
    p: OntimeParams,
    mss: f64,
    /// The quantile of the forecast the window takes, in standard deviations (negative).
    z: f64,
    forecast: RateForecast,
    cwnd: f64,
    min_rtt: Option<Duration>,
    /// Cap on the queue allowance learnt from overflows, bytes.
    queue_cap: f64,
    /// The latest overflow episode began then.
    recovery_start: Duration,
    pacer: Pacer,
}

impl Ontime {
    pub fn new(mss: u32, p: OntimeParams) -> Self {
        Self {
            p,
            mss: f64::from(mss),
            z: normal_quantile(1.0 - p.confidence),
            forecast: RateForecast::new(p.tick, p.volatility, mss),
            cwnd: f64::from(mss) * f64::from(p.initial_window_packets).max(MIN_WINDOW_PACKETS),
            min_rtt: None,
            queue_cap: f64::INFINITY,
            recovery_start: Duration::ZERO,
            pacer: Pacer::new(u64::from(mss)),
        }
    }

    /// The bytes the path holds outside the queue at the forecast rate.
    fn pipe(&self) -> Option<f64> {
        Some(self.forecast.mean()? * self.min_rtt?.as_secs_f64())
    }

    /// The window the forecast allows; `None` before it has one.
    fn forecast_window(&self) -> Option<f64> {
        let queue = self
            .forecast
            .quantile_bytes(self.p.delay_target, self.z)?
            .max(MIN_QUEUE_PACKETS * self.mss)
            .min(self.queue_cap);
        Some((self.pipe()? + queue).max(MIN_WINDOW_PACKETS * self.mss))
    }
}

impl CongestionControl for Ontime {
    fn name(&self) -> &'static str {
        "ontime"
    }

    fn on_sent(&mut self, now: Duration, bytes: u32, _in_flight: u64) {
        self.pacer.on_sent(now, bytes);
    }

    fn on_ack(&mut self, ack: &AckSample) {
        let min_rtt = ack.min_rtt.min(ack.rtt);
        self.min_rtt = Some(min_rtt);
        // More was in flight than the path holds outside a queue, and the round trip shows
        // the wait: then the link could not have delivered more than it did. Neither alone
        // will do: the pipe is itself estimated, and on a radio link a lone packet waits
        // for its transmission opportunity.
        let queued = ack.rtt > min_rtt + QUEUE_EVIDENCE
            && self.pipe().is_some_and(|pipe| {
                ack.prior_in_flight as f64 > pipe + QUEUE_EVIDENCE_PACKETS * self.mss
            });
        self.forecast.on_delivered(ack.now, ack.acked_bytes, queued);
        if self.queue_cap.is_finite() {
            // One packet a round trip: a window's worth of acks arrives per round trip.
            self.queue_cap += self.mss * ack.acked_bytes as f64 / self.cwnd.max(self.mss);
        }
        if let Some(w) = self.forecast_window() {
            self.cwnd = w;
            let mean = self.forecast.mean().unwrap_or(0.0);
            let floor = self.cwnd / (min_rtt + self.p.delay_target).as_secs_f64();
            self.pacer
                .set_rate(ack.now, Some(PACING_GAIN * mean.max(floor)));
        }
    }

    fn on_loss(&mut self, loss: &LossSample) {
        if loss.sent_at < self.recovery_start {
            return;
        }
        // Whatever the channel thinks caused it, a loss while a queue of ours stood may
        // be that queue overflowing a buffer: a shallow queue spreads round trips too
        // little for the channel to tell. A loss with no queue of ours is the link's.
        let pipe = self.pipe().unwrap_or(0.0);
        let queue = loss.in_flight as f64 + f64::from(loss.bytes) - pipe;
        if loss.kind == LossKind::Link && queue < OVERFLOW_EVIDENCE_PACKETS * self.mss {
            return;
        }
        self.recovery_start = loss.now;
        self.queue_cap = (OVERFLOW_CUT * queue).max(MIN_QUEUE_PACKETS * self.mss);
        if let Some(w) = self.forecast_window() {
            self.cwnd = w;
        }
    }

    fn allowance(&self, now: Duration, in_flight: u64) -> u64 {
        self.pacer.allowance(now, self.cwnd as u64, in_flight)
    }

    fn next_allowance_at(&self, now: Duration) -> Option<Duration> {
        self.pacer.next_at(now)
    }

    fn rate(&self, srtt: Duration) -> f64 {
        self.forecast
            .mean()
            .unwrap_or_else(|| self.cwnd / srtt.as_secs_f64().max(1e-3))
    }

    fn window(&self) -> Option<u64> {
        Some(self.cwnd as u64)
    }

    fn reset(&mut self, now: Duration) {
        *self = Self::new(self.mss as u32, self.p);
        self.recovery_start = now;
        self.pacer.reset(now);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testbed::{self, mbps, ms, Link, MSS};
    use super::*;

    #[test]
    fn fills_a_constant_link_with_a_bounded_queue() {
        let rate = mbps(10.0);
        let link = Link::constant(rate, ms(60), 1_000_000);
        let mut c = Ontime::new(MSS, OntimeParams::default());
        let trace = testbed::run(&mut c, &link, ms(10_000), |_, _| {});
        let goodput = trace.goodput(ms(2000), ms(10_000));
        assert!(goodput >= 0.95 * rate, "{goodput} of {rate}");
        // A steady link is forecast narrowly: about the whole target is queued.
        let p95 = trace.owd_quantile(ms(2000), ms(10_000), 0.95);
        assert!(p95 <= ms(30 + 100), "p95 one-way {p95:?}");
        assert_eq!(trace.congestion_losses, 0);
        let estimate = c.rate(ms(60));
        assert!((estimate / rate - 1.0).abs() < 0.1, "{estimate} vs {rate}");
    }

    #[test]
    fn follows_a_cellular_link_on_time() {
        let link = Link::cellular(ms(30), 7);
        let mut c = Ontime::new(MSS, OntimeParams::default());
        let (from, to) = (ms(2000), ms(30_000));
        let trace = testbed::run(&mut c, &link, to, |_, _| {});
        let p95 = trace.owd_quantile(from, to, 0.95);
        let share = trace.goodput(from, to) / link.mean_rate(from, to);
        assert!(p95 <= ms(30 + 100), "p95 one-way delay {p95:?}");
        assert!(share > 0.85, "{share}");
    }

    #[test]
    fn a_shallow_buffer_caps_the_queue() {
        let rate = mbps(20.0);
        let link = Link::constant(rate, ms(40), 30_000);
        let mut c = Ontime::new(MSS, OntimeParams::default());
        let trace = testbed::run(&mut c, &link, ms(10_000), |_, _| {});
        let goodput = trace.goodput(ms(2000), ms(10_000));
        assert!(goodput >= 0.9 * rate, "{goodput} of {rate}");
        let late = trace
            .packets
            .iter()
            .filter(|p| p.sent_at >= ms(2000) && p.arrival.is_none())
            .count();
        let sent = trace
            .packets
            .iter()
            .filter(|p| p.sent_at >= ms(2000))
            .count();
        assert!(
            (late as f64) < 0.01 * sent as f64,
            "{late} of {sent} dropped"
        );
    }
}
