//! `bbr1`: BBR, version 1 (Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM Queue
//! 2016; draft-cardwell-iccrg-bbr-congestion-control-00), kept beside `bbr` (version 3) so
//! the two can be compared on the same links.
//!
//! A model of the path instead of a reaction to loss: the bottleneck bandwidth `BtlBw` is
//! the largest delivery rate measured over the last ten round trips (application-limited
//! samples count only if they raise it), the propagation delay `RTprop` the smallest RTT
//! over ten seconds. The sender paces at `pacing_gain * BtlBw` and keeps at most
//! `cwnd_gain * BtlBw * RTprop` (plus three packets for ack jitter) in flight.
//!
//! States: Startup doubles the rate each round (gain 2/ln 2) until three rounds raise
//! `BtlBw` by less than 25%; Drain empties the queue Startup built; ProbeBW cycles the
//! pacing gain through 5/4, 3/4 and six rounds of 1 to probe for more bandwidth and give
//! back the queue that built; ProbeRTT, when `RTprop` has not been refreshed for ten
//! seconds, drops to four packets in flight for 200 ms and a round trip so the queue
//! drains and the true propagation delay shows.
//!
//! Loss: a loss the channel puts down to the link is ignored outright; cellular radios
//! lose packets at any load, and slowing down for them only costs throughput. A loss put
//! down to queue overflow gets BBRv1's mild response: the window shrinks by the lost
//! bytes and packet conservation holds it at what is in flight for one round trip, after
//! which the window before the episode is restored. The rate model is untouched, so an
//! overflow costs at most a round of sending. Spurious losses undo even that.

use std::time::Duration;

use super::filter::MaxOverRounds;
use super::{AckSample, CongestionControl, LossKind, LossSample, Pacer};

/// Parameters (the paper's defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bbr1Params {
    pub initial_window_packets: u32,
    /// Window as a multiple of the estimated bandwidth-delay product in ProbeBW.
    pub cwnd_gain: f64,
    /// Length of the bottleneck bandwidth filter, in round trips.
    pub bw_window_rounds: u64,
    /// How long a minimum RTT stands before ProbeRTT refreshes it.
    pub min_rtt_window: Duration,
    pub probe_rtt_duration: Duration,
}

impl Default for Bbr1Params {
    fn default() -> Self {
        Self {
            initial_window_packets: 10,
            cwnd_gain: 2.0,
            bw_window_rounds: 10,
            min_rtt_window: Duration::from_secs(10),
            probe_rtt_duration: Duration::from_millis(200),
        }
    }
}

/// 2/ln 2: the smallest gain that doubles the delivery rate each round.
const HIGH_GAIN: f64 = 2.885;
const PROBE_BW_GAINS: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// Startup ends after this many rounds without `BtlBw` growing by `FULL_BW_GROWTH`.
const FULL_BW_ROUNDS: u32 = 3;
const FULL_BW_GROWTH: f64 = 1.25;
const MIN_WINDOW_PACKETS: u64 = 4;
/// Packets of headroom over the BDP for ack jitter and pacing quanta.
const QUANTA_PACKETS: u64 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Startup,
    Drain,
    /// In gain-cycle phase `phase` since `since`.
    ProbeBw {
        phase: usize,
        since: Duration,
    },
    /// Waiting for the flight to drain (`done_at` none), then for `done_at` and the end
    /// of a round trip.
    ProbeRtt {
        done_at: Option<Duration>,
        round_done: bool,
    },
}

#[derive(Debug, Clone)]
pub struct Bbr1 {
    p: Bbr1Params,
    mss: u64,
    mode: Mode,
    btl_bw: MaxOverRounds,
    rt_prop: Option<Duration>,
    rt_prop_stamp: Duration,
    round: u64,
    next_round_delivered: u64,
    delivered: u64,
    full_bw: f64,
    full_bw_rounds: u32,
    filled_pipe: bool,
    pacing_gain: f64,
    cwnd_gain: f64,
    cwnd: u64,
    /// The window to go back to after recovery or ProbeRTT.
    prior_cwnd: u64,
    /// A congestion-loss episode: when it began, and the round its packet conservation
    /// lasts until.
    recovery: Option<(Duration, u64)>,
    /// Congestion losses since the last ack (they end a probing phase early).
    lost_since_ack: bool,
    pacer: Pacer,
    /// Seeds the random start of the gain cycle; deterministic per controller.
    rng: u64,
}

impl Bbr1 {
    pub fn new(mss: u32, p: Bbr1Params) -> Self {
        let mss = u64::from(mss);
        let cwnd = mss * u64::from(p.initial_window_packets.max(MIN_WINDOW_PACKETS as u32));
        Self {
            p,
            mss,
            mode: Mode::Startup,
            btl_bw: MaxOverRounds::new(p.bw_window_rounds),
            rt_prop: None,
            rt_prop_stamp: Duration::ZERO,
            round: 0,
            next_round_delivered: 0,
            delivered: 0,
            full_bw: 0.0,
            full_bw_rounds: 0,
            filled_pipe: false,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            cwnd,
            prior_cwnd: cwnd,
            recovery: None,
            lost_since_ack: false,
            pacer: Pacer::new(mss),
            rng: 0x2545_F491_4F6C_DD1D,
        }
    }

    /// For the controller's own tests.
    #[cfg(test)]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The bottleneck bandwidth estimate, bytes/s.
    pub fn btl_bw(&self) -> Option<f64> {
        self.btl_bw.get()
    }

    /// For the controller's own tests.
    #[cfg(test)]
    pub fn rt_prop(&self) -> Option<Duration> {
        self.rt_prop
    }

    /// For the controller's own tests.
    #[cfg(test)]
    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    fn initial_window(&self) -> u64 {
        self.mss * u64::from(self.p.initial_window_packets)
    }

    fn min_window(&self) -> u64 {
        self.mss * MIN_WINDOW_PACKETS
    }

    /// `gain` times the estimated BDP, plus headroom.
    fn inflight(&self, gain: f64) -> u64 {
        match (self.btl_bw(), self.rt_prop) {
            (Some(bw), Some(rtt)) => {
                (gain * bw * rtt.as_secs_f64()) as u64 + QUANTA_PACKETS * self.mss
            }
            _ => self.initial_window(),
        }
    }

    fn on_round(&mut self, ack: &AckSample) -> bool {
        let Some(rs) = ack.rate else {
            return false;
        };
        let round_start = rs.prior_delivered >= self.next_round_delivered;
        if round_start {
            self.next_round_delivered = rs.total_delivered;
            self.round += 1;
        }
        // Skipped samples do not age the filter: an application-limited spell keeps the
        // estimate it began with.
        if !rs.app_limited || self.btl_bw().is_none_or(|bw| rs.delivery_rate >= bw) {
            self.btl_bw.update(self.round, rs.delivery_rate);
        }
        if round_start && !rs.app_limited && !self.filled_pipe {
            self.check_full_pipe();
        }
        round_start
    }

    fn check_full_pipe(&mut self) {
        let bw = self.btl_bw().unwrap_or(0.0);
        if bw >= self.full_bw * FULL_BW_GROWTH {
            self.full_bw = bw;
            self.full_bw_rounds = 0;
            return;
        }
        self.full_bw_rounds += 1;
        self.filled_pipe = self.full_bw_rounds >= FULL_BW_ROUNDS;
    }

    fn enter_probe_bw(&mut self, now: Duration) {
        // A random phase, never the draining one, so flows sharing a bottleneck desync.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let phase = [0, 2, 3, 4, 5, 6, 7][(self.rng % 7) as usize];
        self.set_phase(now, phase);
    }

    fn set_phase(&mut self, now: Duration, phase: usize) {
        self.mode = Mode::ProbeBw { phase, since: now };
        self.pacing_gain = PROBE_BW_GAINS[phase];
        self.cwnd_gain = self.p.cwnd_gain;
    }

    fn check_cycle_phase(&mut self, ack: &AckSample) {
        let Mode::ProbeBw { phase, since } = self.mode else {
            return;
        };
        let full_length = self
            .rt_prop
            .is_some_and(|r| ack.now.saturating_sub(since) > r);
        let next = match self.pacing_gain {
            g if g > 1.0 => {
                full_length && (self.lost_since_ack || ack.prior_in_flight >= self.inflight(g))
            }
            g if g < 1.0 => full_length || ack.prior_in_flight <= self.inflight(1.0),
            _ => full_length,
        };
        if next {
            self.set_phase(ack.now, (phase + 1) % PROBE_BW_GAINS.len());
        }
    }

    fn check_drain(&mut self, ack: &AckSample) {
        if self.mode == Mode::Startup && self.filled_pipe {
            self.mode = Mode::Drain;
            self.pacing_gain = 1.0 / HIGH_GAIN;
            self.cwnd_gain = HIGH_GAIN;
        }
        if self.mode == Mode::Drain && ack.in_flight <= self.inflight(1.0) {
            self.enter_probe_bw(ack.now);
        }
    }

    /// Refresh RTprop; returns whether it had expired.
    fn update_rt_prop(&mut self, ack: &AckSample) -> bool {
        let expired = ack.now > self.rt_prop_stamp + self.p.min_rtt_window;
        if self.rt_prop.is_none_or(|r| ack.rtt <= r) || expired {
            self.rt_prop = Some(ack.rtt);
            self.rt_prop_stamp = ack.now;
        }
        expired
    }

    fn check_probe_rtt(&mut self, ack: &AckSample, expired: bool, round_start: bool) {
        if expired && !matches!(self.mode, Mode::ProbeRtt { .. }) {
            self.mode = Mode::ProbeRtt {
                done_at: None,
                round_done: false,
            };
            self.pacing_gain = 1.0;
            self.cwnd_gain = 1.0;
            if self.recovery.is_none() {
                self.prior_cwnd = self.cwnd;
            }
        }
        let Mode::ProbeRtt {
            done_at,
            round_done,
        } = self.mode
        else {
            return;
        };
        match done_at {
            None if ack.in_flight <= self.min_window() => {
                self.mode = Mode::ProbeRtt {
                    done_at: Some(ack.now + self.p.probe_rtt_duration),
                    round_done: false,
                };
                self.next_round_delivered = self.delivered;
            }
            None => {}
            Some(at) => {
                let round_done = round_done || round_start;
                self.mode = Mode::ProbeRtt {
                    done_at,
                    round_done,
                };
                if round_done && ack.now >= at {
                    self.rt_prop_stamp = ack.now;
                    self.cwnd = self.cwnd.max(self.prior_cwnd);
                    if self.filled_pipe {
                        self.enter_probe_bw(ack.now);
                    } else {
                        self.mode = Mode::Startup;
                        self.pacing_gain = HIGH_GAIN;
                        self.cwnd_gain = HIGH_GAIN;
                    }
                }
            }
        }
    }

    fn set_cwnd(&mut self, ack: &AckSample) {
        let target = self.inflight(self.cwnd_gain);
        let conserving = match self.recovery {
            Some((_, until)) if self.round <= until => true,
            Some(_) => {
                // One round of conservation is over: back to the window before it.
                self.recovery = None;
                self.cwnd = self.cwnd.max(self.prior_cwnd);
                false
            }
            None => false,
        };
        if conserving {
            self.cwnd = self.cwnd.max(ack.in_flight + ack.acked_bytes);
        } else if self.filled_pipe {
            self.cwnd = (self.cwnd + ack.acked_bytes).min(target);
        } else if self.cwnd < target || self.delivered < self.initial_window() {
            self.cwnd += ack.acked_bytes;
        }
        self.cwnd = self.cwnd.max(self.min_window());
        if matches!(self.mode, Mode::ProbeRtt { .. }) {
            self.cwnd = self.cwnd.min(self.min_window());
        }
    }

    fn set_pacing_rate(&mut self, ack: &AckSample) {
        let rate = match self.btl_bw() {
            Some(bw) => self.pacing_gain * bw,
            // No bandwidth sample yet: the initial window per round trip, at high gain.
            None => HIGH_GAIN * self.cwnd as f64 / ack.srtt.as_secs_f64().max(1e-3),
        };
        let current = self.pacer.rate().unwrap_or(0.0);
        if self.filled_pipe || rate > current {
            self.pacer.set_rate(ack.now, Some(rate));
        }
    }
}

impl CongestionControl for Bbr1 {
    fn name(&self) -> &'static str {
        "bbr1"
    }

    fn in_startup(&self) -> bool {
        self.mode == Mode::Startup
    }

    fn on_sent(&mut self, now: Duration, bytes: u32, _in_flight: u64) {
        self.pacer.on_sent(now, bytes);
    }

    fn on_ack(&mut self, ack: &AckSample) {
        self.delivered += ack.acked_bytes;
        let round_start = self.on_round(ack);
        self.check_cycle_phase(ack);
        self.check_drain(ack);
        let expired = self.update_rt_prop(ack);
        self.check_probe_rtt(ack, expired, round_start);
        self.set_pacing_rate(ack);
        self.set_cwnd(ack);
        self.lost_since_ack = false;
    }

    fn on_loss(&mut self, loss: &LossSample) {
        if loss.kind == LossKind::Link {
            return;
        }
        self.lost_since_ack = true;
        self.cwnd = self
            .cwnd
            .saturating_sub(u64::from(loss.bytes))
            .max(self.min_window());
        let new_episode = self.recovery.is_none_or(|(start, _)| loss.sent_at >= start);
        if new_episode {
            if self.recovery.is_none() && !matches!(self.mode, Mode::ProbeRtt { .. }) {
                self.prior_cwnd = self.cwnd + u64::from(loss.bytes);
            }
            self.recovery = Some((loss.now, self.round + 1));
            self.cwnd = self
                .cwnd
                .min(loss.in_flight + self.mss)
                .max(self.min_window());
        }
    }

    fn on_spurious_loss(&mut self, _now: Duration, sent_at: Duration) {
        if self.recovery.is_some_and(|(start, _)| sent_at < start) {
            self.recovery = None;
            self.cwnd = self.cwnd.max(self.prior_cwnd);
        }
    }

    fn allowance(&self, now: Duration, in_flight: u64) -> u64 {
        self.pacer.allowance(now, self.cwnd, in_flight)
    }

    fn next_allowance_at(&self, now: Duration) -> Option<Duration> {
        self.pacer.next_at(now)
    }

    fn rate(&self, srtt: Duration) -> f64 {
        self.btl_bw()
            .unwrap_or_else(|| self.cwnd as f64 / srtt.as_secs_f64().max(1e-3))
    }

    fn window(&self) -> Option<u64> {
        Some(self.cwnd)
    }

    fn reset(&mut self, now: Duration) {
        *self = Self::new(self.mss as u32, self.p);
        self.rt_prop_stamp = now;
        self.pacer.reset(now);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testbed::{self, mbps, ms, Link, MSS};
    use super::super::testing::{ack, loss};
    use super::*;

    #[test]
    fn estimates_the_bottleneck_and_keeps_the_queue_small() {
        let rate = mbps(10.0);
        let link = Link::constant(rate, ms(40), 500_000);
        let mut c = Bbr1::new(MSS, Bbr1Params::default());
        let mut queue = Vec::new();
        let mut entered_probe_bw = None;
        let trace = testbed::run(&mut c, &link, ms(8000), |c, a| {
            if let Mode::ProbeBw { .. } = c.mode() {
                entered_probe_bw.get_or_insert(a.now);
                if a.now > ms(2000) {
                    queue.push(a.rtt - c.rt_prop().unwrap());
                }
            }
        });
        let bw = c.btl_bw().unwrap();
        assert!((bw / rate - 1.0).abs() < 0.1, "btl_bw {bw} of {rate}");
        assert!(entered_probe_bw.unwrap() < ms(1500), "{entered_probe_bw:?}");
        let goodput = trace.goodput(ms(2000), ms(8000));
        assert!(goodput >= 0.9 * rate, "{goodput} of {rate}");
        let mean = queue.iter().sum::<Duration>() / queue.len() as u32;
        assert!(mean < ms(10), "mean queue {mean:?} over a 40 ms path");
        assert_eq!(trace.congestion_losses, 0);
        assert!((c.rate(ms(40)) / rate - 1.0).abs() < 0.1);
    }

    #[test]
    fn probe_rtt_finds_a_lower_propagation_delay() {
        let rate = mbps(10.0);
        let link = Link::constant(rate, ms(40), 500_000);
        let p = Bbr1Params {
            min_rtt_window: ms(2000),
            ..Bbr1Params::default()
        };
        let mut c = Bbr1::new(MSS, p);
        let mut probed = 0;
        let mut was_probing = false;
        testbed::run(&mut c, &link, ms(6000), |c, _| {
            let probing = matches!(c.mode(), Mode::ProbeRtt { .. });
            if probing && !was_probing {
                probed += 1;
                assert!(c.cwnd() <= 4 * u64::from(MSS));
            }
            was_probing = probing;
        });
        assert!(probed >= 2, "{probed}");
        let rt_prop = c.rt_prop().unwrap();
        assert!(rt_prop < ms(43), "{rt_prop:?}");
    }

    #[test]
    fn link_losses_are_ignored_and_congestion_losses_mild() {
        let mut c = Bbr1::new(MSS, Bbr1Params::default());
        let w = c.cwnd();
        let mut l = loss(ms(100), MSS, ms(10));
        l.kind = LossKind::Link;
        l.in_flight = 2 * u64::from(MSS);
        c.on_loss(&l);
        assert_eq!(c.cwnd(), w);
        l.kind = LossKind::Congestion;
        c.on_loss(&l);
        assert_eq!(c.cwnd(), 4 * u64::from(MSS));
        // Spurious: the window comes back.
        c.on_spurious_loss(ms(120), ms(10));
        assert_eq!(c.cwnd(), w);
    }

    #[test]
    fn app_limited_samples_do_not_lower_the_estimate() {
        let mut c = Bbr1::new(MSS, Bbr1Params::default());
        let mut a = ack(ms(100), u64::from(MSS), ms(100));
        let sample = |rate: f64, app_limited: bool, n: u64| crate::cc::RateSample {
            delivery_rate: rate,
            delivered: 1,
            interval: ms(100),
            app_limited,
            total_delivered: n + 1,
            prior_delivered: n,
        };
        a.rate = Some(sample(1e6, false, 0));
        c.on_ack(&a);
        for n in 1..30 {
            a.now = ms(100 + n * 100);
            a.rate = Some(sample(1e5, true, n));
            c.on_ack(&a);
        }
        assert_eq!(c.btl_bw(), Some(1e6), "ten rounds of app-limited samples");
        a.rate = Some(sample(2e5, false, 40));
        c.on_ack(&a);
        assert_eq!(c.btl_bw(), Some(2e5));
    }
}
