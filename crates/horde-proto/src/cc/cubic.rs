//! CUBIC (RFC 9438) with HyStart++ slow start (RFC 9406).
//!
//! After a reduction the window follows `W_cubic(t) = C (t - K)^3 + W_max` (in segments,
//! `t` in seconds since the epoch began, `K = cbrt((W_max - cwnd_epoch) / C)`): concave up
//! to the window where the last loss happened, a plateau around it, then convex probing
//! beyond. Where a Reno flow with the same loss rate would do better (short round trips,
//! small windows), the window tracks that Reno estimate `W_est` instead. Fast convergence
//! releases bandwidth when a loss comes before the previous `W_max` was reached again.
//!
//! Slow start is HyStart++: after eight RTT samples in a round, a minimum RTT that grew by
//! a clamped eighth of the previous round's says the queue is building, and slow start
//! gives way to a conservative slow start (a quarter of the growth) for five rounds before
//! congestion avoidance, or resumes if the RTT falls back. Being paced, no burst limit `L`
//! applies. A deep cellular buffer thus ends slow start before it overflows.
//!
//! Sending is paced at 2x cwnd/srtt in slow start and 1.2x after (Linux's ratios). The
//! window grows only while it is used (RFC 7661): half used in slow start, within two
//! packets of full in congestion avoidance, where time spent application-limited does not
//! advance the cubic clock. A reduction whose losses all prove spurious is undone, curve
//! and all. Losses the channel puts down to the link reduce the window too, as RFC 9438
//! says of any loss, unless `link_loss_reduces` is off.

use std::time::Duration;

use super::aimd::{take_undo, Undo};
use super::{AckSample, CongestionControl, LossKind, LossSample, Pacer};

/// Parameters (RFC 9438 §4 and RFC 9406 §4.3 defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CubicParams {
    pub initial_window_packets: u32,
    /// Aggressiveness of the cubic curve, segments/s^3.
    pub c: f64,
    /// Multiplicative decrease factor.
    pub beta: f64,
    pub fast_convergence: bool,
    pub hystart: bool,
    /// Whether losses put down to the link (not to queue overflow) reduce the window.
    pub link_loss_reduces: bool,
}

impl Default for CubicParams {
    fn default() -> Self {
        Self {
            initial_window_packets: 10,
            c: 0.4,
            beta: 0.7,
            fast_convergence: true,
            hystart: true,
            link_loss_reduces: true,
        }
    }
}

/// Pacing gains in slow start and congestion avoidance.
const SLOW_START_PACING: f64 = 2.0;
const AVOIDANCE_PACING: f64 = 1.2;

/// A congestion-avoidance epoch: the cubic curve's origin.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Epoch {
    start: Duration,
    /// Seconds from `start` to the plateau at `W_max`.
    k: f64,
    /// The Reno-friendly window estimate, in segments.
    w_est: f64,
}

/// What a reduction changed beyond cwnd and ssthresh, to put back on undo.
#[derive(Debug, Clone, Copy)]
struct Curve {
    w_max: f64,
    cwnd_prior: f64,
    epoch: Option<Epoch>,
}

#[derive(Debug, Clone)]
pub struct Cubic {
    p: CubicParams,
    mss: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Window (segments) before the last reduction, after fast convergence.
    w_max: f64,
    /// Window (segments) before the last reduction, as it was.
    cwnd_prior: f64,
    epoch: Option<Epoch>,
    recovery_start: Duration,
    undo: Option<Undo>,
    undo_curve: Option<Curve>,
    srtt: Option<Duration>,
    pacer: Pacer,
    peak_in_flight: u64,
    last_ack: Duration,
    hystart: HyStart,
}

impl Cubic {
    pub fn new(mss: u32, p: CubicParams) -> Self {
        let mss = u64::from(mss);
        Self {
            p,
            mss,
            cwnd: mss * u64::from(p.initial_window_packets.max(2)),
            ssthresh: u64::MAX,
            w_max: 0.0,
            cwnd_prior: 0.0,
            epoch: None,
            recovery_start: Duration::ZERO,
            undo: None,
            undo_curve: None,
            srtt: None,
            pacer: Pacer::new(mss),
            peak_in_flight: 0,
            last_ack: Duration::ZERO,
            hystart: HyStart::default(),
        }
    }

    /// For the controller's own tests.
    #[cfg(test)]
    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    /// The window (segments) the cubic curve plateaus at.
    #[cfg(test)]
    pub fn w_max(&self) -> f64 {
        self.w_max
    }

    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    fn segments(&self) -> f64 {
        self.cwnd as f64 / self.mss as f64
    }

    /// `W_cubic(t)` in segments, `t` seconds into the epoch.
    fn w_cubic(&self, k: f64, t: f64) -> f64 {
        self.p.c * (t - k).powi(3) + self.w_max
    }

    fn update_pacing(&mut self, now: Duration) {
        let gain = if self.in_slow_start() {
            SLOW_START_PACING
        } else {
            AVOIDANCE_PACING
        };
        let rate = self
            .srtt
            .map(|s| gain * self.cwnd as f64 / s.as_secs_f64().max(1e-6));
        self.pacer.set_rate(now, rate);
    }

    fn slow_start(&mut self, ack: &AckSample) {
        if !self.p.hystart {
            self.cwnd += ack.acked_bytes;
            return;
        }
        match self.hystart.on_ack(ack.rtt) {
            Phase::SlowStart => self.cwnd += ack.acked_bytes,
            Phase::Conservative => self.cwnd += ack.acked_bytes / CSS_GROWTH_DIVISOR,
            Phase::Done => self.ssthresh = self.cwnd,
        }
    }

    /// RFC 9438 §4.2-4.4: one ack in congestion avoidance.
    fn avoidance(&mut self, ack: &AckSample) {
        let cwnd = self.segments();
        let epoch = *self.epoch.get_or_insert_with(|| {
            if self.w_max < cwnd {
                self.w_max = cwnd; // no loss yet, or the old plateau was passed
            }
            Epoch {
                start: ack.now,
                k: ((self.w_max - cwnd) / self.p.c).cbrt(),
                w_est: cwnd,
            }
        });
        let t = ack.now.saturating_sub(epoch.start).as_secs_f64();
        let rtt = self.srtt.unwrap_or(ack.rtt).as_secs_f64();
        let acked = ack.acked_bytes as f64 / self.mss as f64;

        let alpha = if epoch.w_est >= self.cwnd_prior {
            1.0
        } else {
            3.0 * (1.0 - self.p.beta) / (1.0 + self.p.beta)
        };
        let w_est = epoch.w_est + alpha * acked / cwnd;
        self.epoch = Some(Epoch { w_est, ..epoch });

        let next = if self.w_cubic(epoch.k, t) < w_est {
            w_est // the Reno-friendly region
        } else {
            let target = self.w_cubic(epoch.k, t + rtt).clamp(cwnd, 1.5 * cwnd);
            cwnd + (target - cwnd) / cwnd * acked
        };
        self.cwnd = ((next * self.mss as f64) as u64).max(self.cwnd);
    }

    /// RFC 9438 §4.6-4.7: a congestion event.
    fn reduce(&mut self, now: Duration) {
        self.undo = Some(Undo {
            cwnd: self.cwnd,
            ssthresh: self.ssthresh,
            losses: 1,
        });
        self.undo_curve = Some(Curve {
            w_max: self.w_max,
            cwnd_prior: self.cwnd_prior,
            epoch: self.epoch,
        });
        self.recovery_start = now;
        let cwnd = self.segments();
        self.cwnd_prior = cwnd;
        self.w_max = if self.p.fast_convergence && cwnd < self.w_max {
            cwnd * (1.0 + self.p.beta) / 2.0
        } else {
            cwnd
        };
        self.ssthresh = ((self.cwnd as f64 * self.p.beta) as u64).max(2 * self.mss);
        self.cwnd = self.ssthresh;
        self.epoch = None;
        self.hystart.finish();
        self.update_pacing(now);
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn in_startup(&self) -> bool {
        self.in_slow_start()
    }

    fn on_sent(&mut self, now: Duration, bytes: u32, in_flight: u64) {
        self.pacer.on_sent(now, bytes);
        self.peak_in_flight = self.peak_in_flight.max(in_flight);
        self.hystart.sent += u64::from(bytes);
    }

    fn on_ack(&mut self, ack: &AckSample) {
        self.srtt = Some(ack.srtt);
        self.hystart.resolved += ack.acked_bytes;
        if self.in_slow_start() {
            if self.peak_in_flight * 2 >= self.cwnd {
                self.slow_start(ack);
            }
        } else if self.peak_in_flight + 2 * self.mss >= self.cwnd {
            self.avoidance(ack);
        } else if let Some(e) = &mut self.epoch {
            // Application-limited: the curve waits for the sender.
            e.start += ack.now.saturating_sub(self.last_ack);
        }
        self.last_ack = ack.now;
        self.peak_in_flight = ack.in_flight;
        self.update_pacing(ack.now);
    }

    fn on_loss(&mut self, loss: &LossSample) {
        self.hystart.resolved += u64::from(loss.bytes);
        if loss.kind == LossKind::Link && !self.p.link_loss_reduces {
            return;
        }
        if loss.sent_at < self.recovery_start {
            if let Some(u) = &mut self.undo {
                u.losses += 1;
            }
            return;
        }
        self.reduce(loss.now);
    }

    fn on_spurious_loss(&mut self, now: Duration, sent_at: Duration) {
        if let Some((cwnd, ssthresh)) = take_undo(&mut self.undo, sent_at, self.recovery_start) {
            self.cwnd = self.cwnd.max(cwnd);
            self.ssthresh = ssthresh;
            if let Some(c) = self.undo_curve.take() {
                self.w_max = c.w_max;
                self.cwnd_prior = c.cwnd_prior;
                self.epoch = c.epoch;
            }
            self.update_pacing(now);
        }
    }

    fn allowance(&self, now: Duration, in_flight: u64) -> u64 {
        self.pacer.allowance(now, self.cwnd, in_flight)
    }

    fn next_allowance_at(&self, now: Duration) -> Option<Duration> {
        self.pacer.next_at(now)
    }

    fn rate(&self, srtt: Duration) -> f64 {
        self.cwnd as f64 / srtt.as_secs_f64().max(1e-3)
    }

    fn window(&self) -> Option<u64> {
        Some(self.cwnd)
    }

    fn reset(&mut self, now: Duration) {
        *self = Self::new(self.mss as u32, self.p);
        self.recovery_start = now;
        self.last_ack = now;
        self.pacer.reset(now);
    }
}

/// RFC 9406 §4.3 constants.
const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
const MIN_RTT_DIVISOR: u32 = 8;
const N_RTT_SAMPLE: u32 = 8;
const CSS_GROWTH_DIVISOR: u64 = 4;
const CSS_ROUNDS: u32 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    SlowStart,
    Conservative,
    Done,
}

/// HyStart++ state. Rounds are counted in bytes: a round ends when everything sent
/// before it began has been acked or declared lost.
#[derive(Debug, Clone, Default)]
struct HyStart {
    sent: u64,
    resolved: u64,
    round_end: u64,
    last_round_min: Option<Duration>,
    round_min: Option<Duration>,
    samples: u32,
    /// In conservative slow start: the RTT that triggered it, and rounds spent there.
    css: Option<(Duration, u32)>,
    done: bool,
}

impl HyStart {
    fn on_ack(&mut self, rtt: Duration) -> Phase {
        if self.done {
            return Phase::Done;
        }
        if self.resolved >= self.round_end {
            self.round_end = self.sent;
            self.last_round_min = self.round_min.take();
            self.samples = 0;
            if let Some((_, rounds)) = &mut self.css {
                *rounds += 1;
                if *rounds >= CSS_ROUNDS {
                    self.finish();
                    return Phase::Done;
                }
            }
        }
        self.round_min = Some(self.round_min.map_or(rtt, |m| m.min(rtt)));
        self.samples += 1;
        if self.samples >= N_RTT_SAMPLE {
            let (Some(cur), Some(last)) = (self.round_min, self.last_round_min) else {
                return self.phase();
            };
            match self.css {
                None => {
                    let thresh = (last / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
                    if cur >= last + thresh {
                        self.css = Some((cur, 0));
                    }
                }
                // The RTT rise was a blip: back to slow start.
                Some((baseline, _)) if cur < baseline => self.css = None,
                Some(_) => {}
            }
        }
        self.phase()
    }

    fn phase(&self) -> Phase {
        match (self.done, self.css) {
            (true, _) => Phase::Done,
            (false, Some(_)) => Phase::Conservative,
            (false, None) => Phase::SlowStart,
        }
    }

    fn finish(&mut self) {
        self.done = true;
        self.css = None;
    }
}

#[cfg(test)]
mod tests {
    use super::super::testbed::{self, mbps, ms, Link, MSS};
    use super::super::testing::{ack, loss};
    use super::*;

    const RTT: Duration = Duration::from_millis(100);

    /// A sender with a full window: acks of one segment each, evenly spread over the
    /// round trip, until `until`.
    fn drive(c: &mut Cubic, from: Duration, until: Duration) -> Duration {
        let mut now = from;
        while now < until {
            c.on_sent(now, 0, c.cwnd());
            let mut a = ack(now, u64::from(MSS), RTT);
            a.in_flight = c.cwnd();
            c.on_ack(&a);
            now += RTT / (c.cwnd() / u64::from(MSS)).max(1) as u32;
        }
        now
    }

    /// Leave slow start at about `segments` with a loss at `at`.
    fn cubic_after_loss(p: CubicParams, segments: u64, at: Duration) -> Cubic {
        let mut c = Cubic::new(MSS, p);
        c.cwnd = segments * u64::from(MSS);
        c.on_loss(&loss(at, MSS, at - RTT));
        c
    }

    /// The start-up the message layer counts on lasts until the first reduction.
    #[test]
    fn start_up_lasts_until_the_first_loss() {
        let mut c = Cubic::new(MSS, CubicParams::default());
        assert!(c.in_startup());
        drive(&mut c, ms(0), ms(300));
        assert!(c.in_startup(), "still doubling: cwnd {}", c.cwnd());
        c.on_loss(&loss(ms(300), MSS, ms(200)));
        assert!(!c.in_startup());
    }

    #[test]
    fn window_follows_the_cubic_curve_after_a_loss() {
        let p = CubicParams {
            hystart: false,
            ..CubicParams::default()
        };
        let w_max = 100.0;
        let start = ms(1000);
        let mut c = cubic_after_loss(p, 100, start);
        assert_eq!(c.cwnd(), 70 * u64::from(MSS));
        let k = (w_max * (1.0 - p.beta) / p.c).cbrt();
        let mut now = start;
        for t in [1.0, 2.0, 3.0, k, 5.0, 6.0] {
            now = drive(&mut c, now, start + Duration::from_secs_f64(t));
            let w = c.cwnd() as f64 / f64::from(MSS);
            let expect = p.c * (t - k).powi(3) + w_max;
            // cwnd chases W_cubic one RTT ahead, a window of acks at a time.
            assert!(
                (w - expect).abs() <= 0.04 * expect,
                "t={t}: {w} vs {expect}"
            );
        }
    }

    #[test]
    fn short_round_trips_follow_the_reno_friendly_estimate() {
        let p = CubicParams {
            hystart: false,
            ..CubicParams::default()
        };
        let rtt = ms(10);
        let mut c = cubic_after_loss(p, 20, ms(100));
        let mut now = ms(100);
        while now < ms(1100) {
            c.on_sent(now, 0, c.cwnd());
            let mut a = ack(now, u64::from(MSS), rtt);
            a.in_flight = c.cwnd();
            c.on_ack(&a);
            now += rtt / (c.cwnd() / u64::from(MSS)) as u32;
        }
        // W_est = beta W_max + alpha t / RTT (alpha 1 once past cwnd_prior = 20).
        let alpha = 3.0 * 0.3 / 1.7;
        let t_cross = (20.0 - 14.0) / alpha * 0.010;
        let expect = 20.0 + (1.0 - t_cross) / 0.010;
        let w = c.cwnd() as f64 / f64::from(MSS);
        // Far above the cubic curve, which has not even reached W_max (K = 2.5 s).
        assert!((w - expect).abs() <= 0.05 * expect, "{w} vs {expect}");
    }

    #[test]
    fn fast_convergence_lowers_the_plateau() {
        let mut c = cubic_after_loss(CubicParams::default(), 100, ms(1000));
        assert_eq!(c.w_max(), 100.0);
        // A second loss before the window regained 100 segments.
        c.on_loss(&loss(ms(2000), MSS, ms(1900)));
        assert!((c.w_max() - 70.0 * 1.7 / 2.0).abs() < 0.1, "{}", c.w_max());
    }

    #[test]
    fn spurious_losses_undo_the_reduction_and_curve() {
        let mut c = cubic_after_loss(CubicParams::default(), 50, ms(1000));
        let before = c.cwnd();
        // Grow a little on the curve, then two losses of one later episode.
        let now = drive(&mut c, ms(1000), ms(2000));
        let grown = c.cwnd();
        assert!(grown > before);
        let epoch = c.epoch;
        c.on_loss(&loss(now, MSS, now - RTT));
        c.on_loss(&loss(now, MSS, now - RTT / 2));
        assert!(c.cwnd() < grown);
        c.on_spurious_loss(now + ms(10), now - RTT);
        assert!(c.cwnd() < grown, "one loss is still real");
        c.on_spurious_loss(now + ms(20), now - RTT / 2);
        assert_eq!(c.cwnd(), grown);
        assert_eq!(c.w_max(), 50.0);
        assert_eq!(c.epoch, epoch);
    }

    #[test]
    fn an_unused_window_does_not_grow() {
        let mut c = cubic_after_loss(CubicParams::default(), 50, ms(1000));
        let w = c.cwnd();
        for i in 0..200 {
            let now = ms(1000 + i * 10);
            c.on_sent(now, MSS, 10 * u64::from(MSS));
            let mut a = ack(now, u64::from(MSS), RTT);
            a.in_flight = 9 * u64::from(MSS);
            c.on_ack(&a);
        }
        assert_eq!(c.cwnd(), w);
    }

    #[test]
    fn link_losses_can_be_ignored() {
        let p = CubicParams {
            link_loss_reduces: false,
            ..CubicParams::default()
        };
        let mut c = Cubic::new(MSS, p);
        let w = c.cwnd();
        let mut l = loss(ms(100), MSS, ms(10));
        l.kind = LossKind::Link;
        c.on_loss(&l);
        assert_eq!(c.cwnd(), w);
        l.kind = LossKind::Congestion;
        c.on_loss(&l);
        assert!(c.cwnd() < w);
    }

    #[test]
    fn fills_a_bottleneck_with_a_one_bdp_buffer() {
        let rate = mbps(10.0);
        let link = Link::constant(rate, ms(40), 50_000);
        let mut c = Cubic::new(MSS, CubicParams::default());
        let trace = testbed::run(&mut c, &link, ms(8000), |_, _| {});
        let goodput = trace.goodput(ms(2000), ms(8000));
        assert!(goodput >= 0.9 * rate, "{goodput} of {rate}");
        assert!(
            trace.congestion_losses > 0,
            "cubic probes until the buffer overflows"
        );
    }

    #[test]
    fn hystart_leaves_slow_start_before_a_deep_buffer_overflows() {
        let rate = mbps(10.0);
        let link = Link::constant(rate, ms(40), 500_000);
        // (slow start ended at, by a loss, overflow drops of packets sent before then)
        let slow_start = |hystart: bool| {
            let mut c = Cubic::new(
                MSS,
                CubicParams {
                    hystart,
                    ..CubicParams::default()
                },
            );
            let mut exit = None;
            let trace = testbed::run(&mut c, &link, ms(3000), |c, a| {
                if exit.is_none() && !c.in_slow_start() {
                    exit = Some((a.now, c.undo.is_some()));
                }
            });
            let (at, by_loss) = exit.expect("slow start ended");
            let drops = trace
                .packets
                .iter()
                .filter(|p| p.sent_at < at && p.queue_delay.is_none())
                .count();
            (at, by_loss, drops)
        };
        let (at, by_loss, drops) = slow_start(true);
        assert!(!by_loss && drops == 0, "{at:?} {by_loss} {drops}");
        // Plain slow start doubles into BDP + buffer = 550 kB and loses much of a window.
        let (_, by_loss, drops) = slow_start(false);
        assert!(by_loss && drops > 100, "{by_loss} {drops}");
    }
}
