//! Copa (Arun & Balakrishnan, "Copa: Practical Delay-Based Congestion Control for the
//! Internet", NSDI 2018), default mode: a delay-targeting controller for cellular links,
//! whose deep per-user buffers turn any loss-driven sender into seconds of queueing.
//!
//! Copa aims at the rate `1 / (delta * d_q)` packets per second, where the queueing delay
//! `d_q = RTT_standing - RTT_min`: `RTT_standing` is the smallest RTT of the last half
//! smoothed RTT (recent, but free of ack-compression noise), `RTT_min` the smallest over
//! ten seconds. On every ack, if the current rate `cwnd / RTT_standing` is at most the
//! target the window grows by `v / (delta * cwnd)` packets per packet acked, otherwise it
//! shrinks by as much. At equilibrium about `1/delta` packets (two, with the default
//! `delta = 0.5`) sit in the queue, so the queueing delay stays a few packet times while
//! the link stays busy; when the link slows, the standing RTT rises within half a round
//! trip and the window follows.
//!
//! The velocity `v` speeds convergence: once per round trip the window is compared with a
//! round trip ago; after three rounds moving the same way `v` doubles every round, and it
//! falls back to 1 when the direction changes. It is capped so one round trip changes the
//! window by at most half (a rate-drop on the radio may still halve it each round).
//! Startup doubles the window each round trip until the rate first exceeds the target.
//! Sending is paced at `2 * cwnd / RTT_standing`, and the window grows only while used.
//!
//! Not implemented: the competitive mode, which raises the aggressiveness when a
//! buffer-filling flow shares the bottleneck. A cellular uplink queue is per device, and
//! Horde is usually the only bulk sender on it.
//!
//! Loss: link losses are ignored. A loss put down to queue overflow means the delay signal
//! failed (a buffer too shallow to show a standing queue), so the window halves, once per
//! round trip, as Reno would, and comes back if the loss proves spurious.

use std::time::Duration;

use super::aimd::{take_undo, Undo};
use super::filter::{Windowed, WindowedMin};
use super::{AckSample, CongestionControl, LossKind, LossSample, Pacer};

/// Parameters (the paper's defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CopaParams {
    pub initial_window_packets: u32,
    /// Target: 1/delta packets queued; smaller is more throughput-hungry.
    pub delta: f64,
    /// Window over which the minimum RTT is taken.
    pub min_rtt_window: Duration,
    /// While shrinking, never keep more in flight than the recent delivery rate fills in
    /// a minimum RTT, plus the 1/delta packets Copa means to queue (see the module doc).
    pub drain_cap: bool,
}

impl Default for CopaParams {
    fn default() -> Self {
        Self {
            initial_window_packets: 10,
            delta: 0.5,
            min_rtt_window: Duration::from_secs(10),
            drain_cap: true,
        }
    }
}

const PACING_GAIN: f64 = 2.0;
const MIN_WINDOW_PACKETS: f64 = 2.0;
/// Packets the drain cap allows beyond Copa's target queue (ack and pacing jitter).
const DRAIN_CAP_SLACK_PACKETS: f64 = 2.0;
/// ...or this much queueing at the recent rate, whichever is more: the cap is for a link
/// that slowed, not for Copa's own oscillation about its target.
const DRAIN_CAP_QUEUE: Duration = Duration::from_millis(20);
/// Rounds in one direction before the velocity starts doubling.
const VELOCITY_ROUNDS: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Up,
    Down,
}

#[derive(Debug, Clone)]
pub struct Copa {
    p: CopaParams,
    mss: f64,
    /// Bytes (fractional: growth is a fraction of a packet per ack).
    cwnd: f64,
    slow_start: bool,
    min_rtt: WindowedMin,
    standing_rtt: WindowedMin,
    /// Largest recent delivery rate, bytes/s (for the drain cap).
    delivery_rate: Windowed<f64>,
    srtt: Option<Duration>,
    /// The latest (standing, minimum) RTT pair.
    rtts: Option<(Duration, Duration)>,
    velocity: f64,
    direction: Option<Direction>,
    same_direction: u32,
    /// When the direction was last checked, and the window then.
    checked: Option<(Duration, f64)>,
    /// The latest overflow loss episode began then.
    recovery_start: Duration,
    undo: Option<Undo>,
    pacer: Pacer,
    peak_in_flight: u64,
}

impl Copa {
    pub fn new(mss: u32, p: CopaParams) -> Self {
        let mss = f64::from(mss);
        Self {
            p,
            mss,
            cwnd: mss * f64::from(p.initial_window_packets).max(MIN_WINDOW_PACKETS),
            slow_start: true,
            min_rtt: WindowedMin::min(),
            standing_rtt: WindowedMin::min(),
            delivery_rate: Windowed::max(),
            srtt: None,
            rtts: None,
            velocity: 1.0,
            direction: None,
            same_direction: 0,
            checked: None,
            recovery_start: Duration::ZERO,
            undo: None,
            pacer: Pacer::new(mss as u64),
            peak_in_flight: 0,
        }
    }

    /// For the controller's own tests.
    #[cfg(test)]
    pub fn cwnd(&self) -> u64 {
        self.cwnd as u64
    }

    fn min_window(&self) -> f64 {
        MIN_WINDOW_PACKETS * self.mss
    }

    /// Once per round trip: which way the window went, and the velocity that follows.
    fn update_velocity(&mut self, now: Duration, srtt: Duration) {
        let Some((at, then)) = self.checked else {
            self.checked = Some((now, self.cwnd));
            return;
        };
        if now.saturating_sub(at) < srtt {
            return;
        }
        let direction = if self.cwnd > then {
            Direction::Up
        } else {
            Direction::Down
        };
        if self.direction == Some(direction) && !self.slow_start {
            self.same_direction += 1;
            if self.same_direction >= VELOCITY_ROUNDS {
                self.velocity *= 2.0;
            }
        } else {
            self.velocity = 1.0;
            self.same_direction = 0;
        }
        self.direction = Some(direction);
        self.checked = Some((now, self.cwnd));
    }
}

impl CongestionControl for Copa {
    fn name(&self) -> &'static str {
        "copa"
    }

    fn in_startup(&self) -> bool {
        self.slow_start
    }

    fn on_sent(&mut self, now: Duration, bytes: u32, in_flight: u64) {
        self.pacer.on_sent(now, bytes);
        self.peak_in_flight = self.peak_in_flight.max(in_flight);
    }

    fn on_ack(&mut self, ack: &AckSample) {
        let srtt = ack.srtt;
        self.srtt = Some(srtt);
        self.min_rtt.update(ack.now, ack.rtt);
        self.standing_rtt.update(ack.now, ack.rtt);
        let min = self.min_rtt.get(ack.now, self.p.min_rtt_window).unwrap();
        let standing = self.standing_rtt.get(ack.now, srtt / 2).unwrap().max(min);
        self.rtts = Some((standing, min));
        if let Some(r) = ack.rate.filter(|r| !r.app_limited) {
            self.delivery_rate.update(ack.now, r.delivery_rate);
        }
        let recent_rate = self.delivery_rate.get(ack.now, srtt / 2);

        let packets = self.cwnd / self.mss;
        let queueing = (standing - min).as_secs_f64();
        let rate = packets / standing.as_secs_f64().max(1e-6);
        let increase = queueing <= 0.0 || rate <= 1.0 / (self.p.delta * queueing);
        let used = self.peak_in_flight as f64 * 2.0 >= self.cwnd;
        let acked = ack.acked_bytes as f64;

        if self.slow_start && !increase {
            self.slow_start = false;
        }
        if self.slow_start {
            if used {
                self.cwnd += acked;
            }
        } else {
            // v / (delta * cwnd) packets per packet acked, at most half a window a round.
            let velocity = self.velocity.min(self.p.delta * packets / 2.0).max(1.0);
            let step = velocity * acked / (self.p.delta * packets);
            if !increase {
                self.cwnd -= step;
                if let Some(rate) = recent_rate.filter(|_| self.p.drain_cap) {
                    let queue = ((1.0 / self.p.delta + DRAIN_CAP_SLACK_PACKETS) * self.mss)
                        .max(rate * DRAIN_CAP_QUEUE.as_secs_f64());
                    self.cwnd = self.cwnd.min(rate * min.as_secs_f64() + queue);
                }
                self.cwnd = self.cwnd.max(self.min_window());
            } else if used {
                self.cwnd += step;
            }
        }
        self.update_velocity(ack.now, srtt);
        self.peak_in_flight = ack.in_flight;
        let pacing = PACING_GAIN * self.cwnd / standing.as_secs_f64().max(1e-6);
        self.pacer.set_rate(ack.now, Some(pacing));
    }

    fn on_loss(&mut self, loss: &LossSample) {
        if loss.kind == LossKind::Link {
            return;
        }
        if loss.sent_at < self.recovery_start {
            if let Some(u) = &mut self.undo {
                u.losses += 1;
            }
            return;
        }
        self.undo = Some(Undo {
            cwnd: self.cwnd as u64,
            ssthresh: 0,
            losses: 1,
        });
        self.recovery_start = loss.now;
        self.slow_start = false;
        self.cwnd = (self.cwnd / 2.0).max(self.min_window());
        self.velocity = 1.0;
        self.same_direction = 0;
    }

    fn on_spurious_loss(&mut self, _now: Duration, sent_at: Duration) {
        if let Some((cwnd, _)) = take_undo(&mut self.undo, sent_at, self.recovery_start) {
            self.cwnd = self.cwnd.max(cwnd as f64);
        }
    }

    fn allowance(&self, now: Duration, in_flight: u64) -> u64 {
        self.pacer.allowance(now, self.cwnd as u64, in_flight)
    }

    fn next_allowance_at(&self, now: Duration) -> Option<Duration> {
        self.pacer.next_at(now)
    }

    fn rate(&self, srtt: Duration) -> f64 {
        self.cwnd / srtt.as_secs_f64().max(1e-3)
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
    use super::super::testing::loss;
    use super::*;

    #[test]
    fn keeps_the_queue_short_over_a_deep_buffer() {
        let rate = mbps(10.0);
        let link = Link::constant(rate, ms(40), 1_000_000);
        let mut c = Copa::new(MSS, CopaParams::default());
        let trace = testbed::run(&mut c, &link, ms(10_000), |_, _| {});
        let goodput = trace.goodput(ms(2000), ms(10_000));
        assert!(goodput >= 0.8 * rate, "{goodput} of {rate}");
        let queue = trace.mean_queue_delay(ms(2000), ms(10_000));
        assert!(queue < ms(50), "mean queue {queue:?}");
        assert_eq!(trace.congestion_losses, 0);
        let honest = c.rate(ms(40) + queue);
        assert!(
            (honest / goodput - 1.0).abs() < 0.25,
            "{honest} vs {goodput}"
        );
    }

    #[test]
    fn follows_a_cellular_link_with_low_delay() {
        let link = Link::cellular(ms(30), 7);
        let mut c = Copa::new(MSS, CopaParams::default());
        let trace = testbed::run(&mut c, &link, ms(30_000), |_, _| {});
        let p95 = trace.owd_quantile(ms(2000), ms(30_000), 0.95);
        assert!(p95 < ms(30 + 100), "p95 one-way delay {p95:?}");
        let share = trace.goodput(ms(2000), ms(30_000)) / link.mean_rate(ms(2000), ms(30_000));
        assert!(share > 0.6, "{share}");
    }

    #[test]
    fn overflow_losses_halve_once_per_episode_and_undo() {
        let mut c = Copa::new(MSS, CopaParams::default());
        let w = c.cwnd();
        let mut l = loss(ms(100), MSS, ms(10));
        l.kind = LossKind::Link;
        c.on_loss(&l);
        assert_eq!(c.cwnd(), w);
        l.kind = LossKind::Congestion;
        c.on_loss(&l);
        c.on_loss(&loss(ms(101), MSS, ms(20)));
        assert_eq!(c.cwnd(), w / 2);
        c.on_spurious_loss(ms(120), ms(10));
        c.on_spurious_loss(ms(121), ms(20));
        assert_eq!(c.cwnd(), w);
    }
}
