//! BBR, version 3 (draft-ietf-ccwg-bbr-01, "BBR Congestion Control"; the section names
//! below are the draft's).
//!
//! The model of the path is BBR v1's, the bottleneck bandwidth `max_bw` and the propagation
//! delay `min_rtt`, but the model is bounded by what losses say:
//!
//! - `inflight_hi` ("Updating the Model Upon Packet Loss"): the flight at which, while
//!   probing for bandwidth, more than `loss_threshold` (2%) of the data sent was lost. It
//!   caps the window in every ProbeBW phase (with 15% headroom in CRUISE) and only grows
//!   again in ProbeBW_UP, by a slope that doubles each round while nothing is lost.
//! - `bw_lo` and `inflight_lo` ("Bounding BW and cwnd Based on Recent Congestion"): in a
//!   round with a loss outside probing, they fall to `beta` (0.7) times their value, but
//!   not below the latest round's delivery rate and delivered bytes. The pacing rate
//!   uses `min(max_bw, bw_lo)` and the window `min(.., inflight_lo)`, so a link that slows
//!   stops losing within a few rounds instead of waiting for a stale maximum to expire.
//!   They are forgotten when ProbeBW_REFILL starts to probe again.
//!
//! The max filter covers the current and previous ProbeBW cycles ("ProbeBW"), one cycle
//! being DOWN (pacing gain 0.9, until the flight is below the BDP and `inflight_hi`'s
//! headroom), CRUISE (gain 1), REFILL (one round at gain 1 after 2 to 3 s or, for Reno
//! coexistence, after `min(BDP in packets, 63)` rounds), UP (gain 1.25, window gain 2.25,
//! until the delivery rate stops growing, or losses set `inflight_hi`).
//!
//! Startup ("Startup") paces at 4 ln 2 ≈ 2.77 and leaves when the delivery rate has grown
//! by less than 25% in three rounds, or when more than `loss_threshold` of the flight was
//! lost in at least six losses (checked at each loss, not only at the round's end, since a
//! cellular link may fall while Startup doubles); Drain paces at 0.35. ProbeRTT ("ProbeRTT") holds the flight
//! to half a BDP for 200 ms and a round when the minimum RTT has not been seen for half of
//! `min_rtt_window`.
//!
//! Losses: every loss counts toward the loss rate that sets `inflight_hi` (the threshold
//! is what tolerates random radio loss). The lower bounds, which the draft cuts on any
//! loss, are cut after a loss the channel puts down to queue overflow, or when the round
//! lost more than `loss_threshold` of its data in at least six losses, whatever the
//! channel thought: a radio loses
//! packets at any load, and a classifier may take an overflow for one. The recovery
//! response of BBR v1 (packet conservation for a round, "Modulating cwnd in Loss
//! Recovery") stays for overflow losses; spurious losses undo it.
//!
//! Per-packet state the draft keeps in the transport's packet records (`tx_in_flight`, the
//! flight when a packet was sent, and `C.lost` at that time) is kept here, in a short log
//! of sends looked up by send time.

use std::collections::VecDeque;
use std::time::Duration;

use super::filter::MaxOverRounds;
use super::{AckSample, CongestionControl, LossKind, LossSample, Pacer};

/// Parameters (the draft's defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BbrParams {
    pub initial_window_packets: u32,
    /// Window as a multiple of the estimated bandwidth-delay product in ProbeBW (UP
    /// uses this plus 0.25).
    pub cwnd_gain: f64,
    /// How long a minimum RTT stands (`MinRTTFilterLen`); ProbeRTT runs when no RTT as
    /// low has been seen for half of it (`ProbeRTTInterval`).
    pub min_rtt_window: Duration,
    pub probe_rtt_duration: Duration,
    /// Largest tolerated share of lost data in a probing round (`LossThresh`).
    pub loss_threshold: f64,
    /// Multiplicative decrease of the lower bounds per lossy round (`Beta`).
    pub beta: f64,
}

impl Default for BbrParams {
    fn default() -> Self {
        Self {
            initial_window_packets: 10,
            cwnd_gain: 2.0,
            min_rtt_window: Duration::from_secs(10),
            probe_rtt_duration: Duration::from_millis(200),
            loss_threshold: 0.02,
            beta: 0.7,
        }
    }
}

/// 4 ln 2: doubles the sending rate each round, the delivery rate lagging one round.
const STARTUP_PACING_GAIN: f64 = 2.77;
const STARTUP_CWND_GAIN: f64 = 2.0;
const DRAIN_PACING_GAIN: f64 = 0.35;
const DOWN_PACING_GAIN: f64 = 0.9;
const UP_PACING_GAIN: f64 = 1.25;
const UP_EXTRA_CWND_GAIN: f64 = 0.25;
const PROBE_RTT_CWND_GAIN: f64 = 0.5;
/// Pace 1% below the estimate, so the bottleneck queue drains rather than creeps up.
const PACING_MARGIN: f64 = 0.01;
/// Share of `inflight_hi` left free in CRUISE for other flows (`Headroom`).
const HEADROOM: f64 = 0.15;
/// The max filter spans this many ProbeBW cycles (`MaxBwFilterLen`).
const MAX_BW_FILTER_CYCLES: u64 = 2;
/// The delivery rate plateaued: this many rounds without `FULL_BW_GROWTH`.
const FULL_BW_ROUNDS: u32 = 3;
const FULL_BW_GROWTH: f64 = 1.25;
/// Losses in a round needed before its loss rate counts (`BBRStartupFullLossCnt`).
const FULL_LOSS_COUNT: u32 = 6;
/// Wait before probing for bandwidth again: this plus up to one more second at random.
const PROBE_WAIT_BASE: Duration = Duration::from_secs(2);
/// At most this many rounds between probes, whatever the BDP (Reno coexistence).
const MAX_RENO_ROUNDS: u64 = 63;
const MIN_PIPE_PACKETS: u64 = 4;
/// Packets of headroom over the BDP for ack jitter and pacing quanta (two more in UP).
const QUANTA_PACKETS: u64 = 3;
/// The send log keeps at least this long, and four smoothed RTTs, of sends.
const SEND_LOG_MIN: Duration = Duration::from_secs(1);
const SEND_LOG_MAX_ENTRIES: usize = 1 << 16;

/// The phases of ProbeBW ("ProbeBW").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Down,
    Cruise,
    Refill,
    Up,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Startup,
    Drain,
    ProbeBw(Phase),
    /// Waiting for the flight to drain (`done_at` none), then for `done_at` and the end
    /// of a round trip.
    ProbeRtt {
        done_at: Option<Duration>,
        round_done: bool,
    },
}

/// What the draft keeps per packet: the flight when it left and the bytes lost so far.
#[derive(Debug, Clone, Copy)]
struct Send {
    at: Duration,
    tx_in_flight: u64,
    lost: u64,
}

/// A rate sample as the draft's loss checks read it.
#[derive(Debug, Clone, Copy)]
struct LossProbe {
    tx_in_flight: u64,
    /// Bytes lost between the packet's send and now.
    lost: u64,
}

#[derive(Debug, Clone)]
pub struct Bbr {
    p: BbrParams,
    mss: u64,
    mode: Mode,

    // The model.
    max_bw: MaxOverRounds,
    cycle_count: u64,
    /// The max filter moves to a new cycle at the first round start after DOWN began,
    /// once the probe's own acks are in (the draft's `ACKS_PROBE_STOPPING`).
    advance_filter_at_round: bool,
    bw_lo: Option<f64>,
    inflight_lo: Option<u64>,
    inflight_hi: Option<u64>,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Duration,
    probe_rtt_min_delay: Option<Duration>,
    probe_rtt_min_stamp: Duration,

    // Rounds.
    delivered: u64,
    round_count: u64,
    next_round_delivered: u64,
    round_start: bool,

    // Loss signals of the current round ("BBRUpdateLatestDeliverySignals").
    loss_round_delivered: u64,
    loss_in_round: bool,
    lost_in_round: u64,
    losses_in_round: u32,
    delivered_at_loss_round: u64,
    bw_latest: f64,
    inflight_latest: u64,
    lost_total: u64,
    sends: VecDeque<Send>,

    // Startup and the plateau check.
    full_bw: f64,
    full_bw_count: u32,
    full_bw_now: bool,
    filled_pipe: bool,

    // ProbeBW.
    cycle_stamp: Duration,
    probe_wait: Duration,
    rounds_since_probe: u64,
    /// Losses of packets sent while probing may set `inflight_hi`.
    bw_probe_samples: bool,
    bw_probe_up_rounds: u32,
    bw_probe_up_acks: u64,
    probe_up_cnt: Option<u64>,

    pacing_gain: f64,
    cwnd_gain: f64,
    cwnd: u64,
    /// The window to go back to after recovery or ProbeRTT.
    prior_cwnd: u64,
    /// A congestion-loss episode: when it began, and the round its packet conservation
    /// lasts until.
    recovery: Option<(Duration, u64)>,
    pacer: Pacer,
    /// Seeds the random probe wait; deterministic per controller.
    rng: u64,
}

impl Bbr {
    pub fn new(mss: u32, p: BbrParams) -> Self {
        let mss = u64::from(mss);
        let cwnd = mss * u64::from(p.initial_window_packets.max(MIN_PIPE_PACKETS as u32));
        Self {
            p,
            mss,
            mode: Mode::Startup,
            max_bw: MaxOverRounds::new(MAX_BW_FILTER_CYCLES),
            cycle_count: 0,
            advance_filter_at_round: false,
            bw_lo: None,
            inflight_lo: None,
            inflight_hi: None,
            min_rtt: None,
            min_rtt_stamp: Duration::ZERO,
            probe_rtt_min_delay: None,
            probe_rtt_min_stamp: Duration::ZERO,
            delivered: 0,
            round_count: 0,
            next_round_delivered: 0,
            round_start: false,
            loss_round_delivered: 0,
            loss_in_round: false,
            lost_in_round: 0,
            losses_in_round: 0,
            delivered_at_loss_round: 0,
            bw_latest: 0.0,
            inflight_latest: 0,
            lost_total: 0,
            sends: VecDeque::new(),
            full_bw: 0.0,
            full_bw_count: 0,
            full_bw_now: false,
            filled_pipe: false,
            cycle_stamp: Duration::ZERO,
            probe_wait: PROBE_WAIT_BASE,
            rounds_since_probe: 0,
            bw_probe_samples: false,
            bw_probe_up_rounds: 0,
            bw_probe_up_acks: 0,
            probe_up_cnt: None,
            pacing_gain: STARTUP_PACING_GAIN,
            cwnd_gain: STARTUP_CWND_GAIN,
            cwnd,
            prior_cwnd: cwnd,
            recovery: None,
            pacer: Pacer::new(mss),
            rng: 0x2545_F491_4F6C_DD1D,
        }
    }

    /// For the controller's own tests.
    #[cfg(test)]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// For the controller's own tests.
    #[cfg(test)]
    pub fn bounds(&self) -> (Option<u64>, Option<u64>, Option<f64>) {
        (self.inflight_hi, self.inflight_lo, self.bw_lo)
    }

    /// For the controller's own tests.
    #[cfg(test)]
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// For the controller's own tests.
    #[cfg(test)]
    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    /// The bandwidth the model uses, bytes/s: the max filter bounded by `bw_lo`.
    pub fn bw(&self) -> Option<f64> {
        let max = self.max_bw.get()?;
        Some(self.bw_lo.map_or(max, |lo| lo.min(max)))
    }

    fn initial_window(&self) -> u64 {
        self.mss * u64::from(self.p.initial_window_packets)
    }

    fn min_pipe(&self) -> u64 {
        self.mss * MIN_PIPE_PACKETS
    }

    /// `gain` times the estimated BDP ("BBRBDPMultiple"), or the initial window before
    /// there is one.
    fn bdp(&self, gain: f64) -> u64 {
        match (self.bw(), self.min_rtt) {
            (Some(bw), Some(rtt)) => (gain * bw * rtt.as_secs_f64()) as u64,
            _ => self.initial_window(),
        }
    }

    /// The window the model allows at `gain` ("BBRInflight" with the quantization budget).
    fn inflight(&self, gain: f64) -> u64 {
        let extra = if self.mode == Mode::ProbeBw(Phase::Up) {
            2
        } else {
            0
        };
        self.bdp(gain) + (QUANTA_PACKETS + extra) * self.mss
    }

    /// `inflight_hi` less the headroom left to other flows in CRUISE.
    fn inflight_with_headroom(&self) -> Option<u64> {
        let hi = self.inflight_hi?;
        let headroom = ((HEADROOM * hi as f64) as u64).max(self.mss);
        Some(hi.saturating_sub(headroom).max(self.min_pipe()))
    }

    fn is_probing_bw(&self) -> bool {
        matches!(
            self.mode,
            Mode::Startup | Mode::ProbeBw(Phase::Refill) | Mode::ProbeBw(Phase::Up)
        )
    }

    fn start_round(&mut self) {
        self.next_round_delivered = self.delivered;
    }

    // ---- Sends and losses as the draft's per-packet records see them.

    fn record_send(&mut self, now: Duration, in_flight: u64) {
        if self.sends.len() >= SEND_LOG_MAX_ENTRIES {
            self.sends.pop_front();
        }
        self.sends.push_back(Send {
            at: now,
            tx_in_flight: in_flight,
            lost: self.lost_total,
        });
    }

    /// Forget sends too old to be acknowledged or declared lost any more.
    fn prune_sends(&mut self, now: Duration, srtt: Duration) {
        let keep = (srtt * 4).max(SEND_LOG_MIN);
        while self
            .sends
            .front()
            .is_some_and(|s| now.saturating_sub(s.at) > keep)
        {
            self.sends.pop_front();
        }
    }

    /// The loss probe of the packet sent at `at`: the latest send at or before it.
    fn probe_of(&self, at: Duration) -> Option<LossProbe> {
        let i = self.sends.partition_point(|s| s.at <= at);
        let s = self.sends.get(i.checked_sub(1)?)?;
        Some(LossProbe {
            tx_in_flight: s.tx_in_flight,
            lost: self.lost_total - s.lost,
        })
    }

    /// "IsInflightTooHigh": more than the threshold of the flight was lost.
    fn is_inflight_too_high(&self, probe: &LossProbe) -> bool {
        probe.lost > 0 && probe.lost as f64 > self.p.loss_threshold * probe.tx_in_flight as f64
    }

    /// The flight at which the loss rate crossed the threshold, if the lost packet of
    /// `bytes` was the one that crossed it (as Linux's `bbr_inflight_hi_from_lost_skb`).
    fn inflight_hi_from_lost(&self, probe: &LossProbe, bytes: u64) -> u64 {
        let inflight_prev = probe.tx_in_flight.saturating_sub(bytes) as f64;
        let lost_prev = probe.lost.saturating_sub(bytes) as f64;
        let thresh = self.p.loss_threshold;
        let lost_prefix = ((thresh * inflight_prev - lost_prev) / (1.0 - thresh)).max(0.0);
        (inflight_prev + lost_prefix) as u64
    }

    /// "BBRHandleInflightTooHigh".
    fn handle_inflight_too_high(&mut self, now: Duration, tx_in_flight: u64) {
        self.bw_probe_samples = false;
        let target = self.bdp(1.0).min(self.cwnd);
        self.inflight_hi = Some(tx_in_flight.max((target as f64 * self.p.beta) as u64));
        if self.mode == Mode::ProbeBw(Phase::Up) {
            self.start_down(now);
        }
    }

    // ---- The model on each ack.

    /// Rounds ("BBRUpdateRound") and the latest delivery signals
    /// ("BBRUpdateLatestDeliverySignals"); returns whether a loss round starts.
    fn update_rounds(&mut self, ack: &AckSample) -> bool {
        self.round_start = false;
        let Some(rs) = ack.rate else {
            return false;
        };
        if rs.prior_delivered >= self.next_round_delivered {
            self.start_round();
            self.round_count += 1;
            self.rounds_since_probe += 1;
            self.round_start = true;
        }
        self.bw_latest = self.bw_latest.max(rs.delivery_rate);
        self.inflight_latest = self.inflight_latest.max(rs.delivered);
        if rs.prior_delivered >= self.loss_round_delivered {
            self.loss_round_delivered = self.delivered;
            return true;
        }
        false
    }

    /// "BBRUpdateMaxBw", and the cycle the filter files samples under.
    fn update_max_bw(&mut self, ack: &AckSample) {
        let Some(rs) = ack.rate else {
            return;
        };
        if self.advance_filter_at_round && self.round_start {
            self.advance_filter_at_round = false;
            if !rs.app_limited {
                self.cycle_count += 1;
            }
        }
        // Application-limited samples count only if they raise the estimate.
        if !rs.app_limited || self.max_bw.get().is_none_or(|bw| rs.delivery_rate >= bw) {
            self.max_bw.update(self.cycle_count, rs.delivery_rate);
        }
    }

    /// "BBRCheckFullBWReached": the delivery rate grew by less than 25% in three rounds.
    fn check_full_bw(&mut self, ack: &AckSample) {
        let Some(rs) = ack.rate else {
            return;
        };
        if self.full_bw_now || !self.round_start || rs.app_limited {
            return;
        }
        if rs.delivery_rate >= self.full_bw * FULL_BW_GROWTH {
            self.reset_full_bw();
            self.full_bw = rs.delivery_rate;
            return;
        }
        self.full_bw_count += 1;
        self.full_bw_now = self.full_bw_count >= FULL_BW_ROUNDS;
        if self.full_bw_now {
            self.filled_pipe = true;
        }
    }

    fn reset_full_bw(&mut self) {
        self.full_bw = 0.0;
        self.full_bw_count = 0;
        self.full_bw_now = false;
    }

    /// "BBRAdaptUpperBounds": a round that lost little raises `inflight_hi` to what it
    /// carried, and UP raises it further.
    fn adapt_upper_bounds(&mut self, ack: &AckSample) {
        let Some(probe) = self.probe_of(ack.now.saturating_sub(ack.rtt)) else {
            return;
        };
        if self.is_inflight_too_high(&probe) {
            if self.bw_probe_samples && ack.rate.is_some_and(|r| !r.app_limited) {
                self.handle_inflight_too_high(ack.now, probe.tx_in_flight);
            }
            return;
        }
        let Some(hi) = self.inflight_hi else {
            return;
        };
        if probe.tx_in_flight > hi {
            self.inflight_hi = Some(probe.tx_in_flight);
        }
        if self.mode == Mode::ProbeBw(Phase::Up) {
            self.probe_inflight_hi_upward(ack);
        }
    }

    /// "BBRProbeInflightHiUpward": while the window is full at `inflight_hi`, raise it
    /// by a slope that doubles every round.
    fn probe_inflight_hi_upward(&mut self, ack: &AckSample) {
        let cwnd_limited = ack.prior_in_flight + self.mss >= self.cwnd;
        if let (true, Some(hi), Some(cnt)) = (cwnd_limited, self.inflight_hi, self.probe_up_cnt) {
            if self.cwnd >= hi {
                self.bw_probe_up_acks += ack.acked_bytes;
                if self.bw_probe_up_acks >= cnt {
                    let delta = self.bw_probe_up_acks / cnt;
                    self.bw_probe_up_acks -= delta * cnt;
                    self.inflight_hi = Some(hi + delta * self.mss);
                }
            }
        }
        if self.round_start {
            self.raise_inflight_hi_slope();
        }
    }

    /// "BBRRaiseInflightHiSlope": `1 << rounds` packets more per round.
    fn raise_inflight_hi_slope(&mut self) {
        let growth = 1u64 << self.bw_probe_up_rounds;
        self.bw_probe_up_rounds = (self.bw_probe_up_rounds + 1).min(30);
        self.probe_up_cnt = Some((self.cwnd / growth).max(self.mss));
    }

    /// The round lost more than the threshold of what it sent, in enough losses for the
    /// rate to mean something.
    fn round_loss_too_high(&self) -> bool {
        if self.losses_in_round < FULL_LOSS_COUNT {
            return false;
        }
        let delivered = self.delivered - self.delivered_at_loss_round;
        let sent = delivered + self.lost_in_round;
        self.lost_in_round as f64 > self.p.loss_threshold * sent as f64
    }

    /// "BBRAdaptLowerBoundsFromCongestion", once per loss round, outside probing: after
    /// an overflow loss, or losses of any kind above the threshold.
    fn adapt_lower_bounds(&mut self) {
        let lossy = self.loss_in_round || self.round_loss_too_high();
        if self.is_probing_bw() || !lossy {
            return;
        }
        let beta = self.p.beta;
        let bw_lo = self
            .bw_lo
            .or(self.max_bw.get())
            .map(|lo| self.bw_latest.max(beta * lo));
        let inflight_lo = self.inflight_lo.unwrap_or(self.cwnd);
        self.bw_lo = bw_lo;
        self.inflight_lo = Some(
            self.inflight_latest
                .max((beta * inflight_lo as f64) as u64)
                .max(self.min_pipe()),
        );
    }

    /// "BBRCheckStartupHighLoss": a round that lost more than the threshold in enough
    /// losses ends Startup with `inflight_hi` at what the path held.
    fn check_startup_high_loss(&mut self) {
        if self.mode == Mode::Startup && self.round_loss_too_high() {
            self.filled_pipe = true;
            self.inflight_hi = Some(self.bdp(1.0).max(self.inflight_latest));
        }
    }

    /// The end of a loss round: respond to its losses, then start counting afresh
    /// ("BBRUpdateCongestionSignals", "BBRAdvanceLatestDeliverySignals").
    fn end_loss_round(&mut self, ack: &AckSample) {
        self.check_startup_high_loss();
        self.adapt_lower_bounds();
        self.loss_in_round = false;
        self.lost_in_round = 0;
        self.losses_in_round = 0;
        self.delivered_at_loss_round = self.delivered;
        if let Some(rs) = ack.rate {
            self.bw_latest = rs.delivery_rate;
            self.inflight_latest = rs.delivered;
        }
    }

    // ---- The state machine.

    fn check_startup_done(&mut self) {
        if self.mode == Mode::Startup && self.filled_pipe {
            self.mode = Mode::Drain;
            self.pacing_gain = DRAIN_PACING_GAIN;
            self.cwnd_gain = STARTUP_CWND_GAIN;
        }
    }

    fn check_drain_done(&mut self, ack: &AckSample) {
        if self.mode == Mode::Drain && ack.in_flight <= self.inflight(1.0) {
            self.start_down(ack.now);
        }
    }

    fn set_phase(&mut self, phase: Phase, pacing_gain: f64) {
        self.mode = Mode::ProbeBw(phase);
        self.pacing_gain = pacing_gain;
        self.cwnd_gain = self.p.cwnd_gain;
    }

    /// "BBRStartProbeBW_DOWN".
    fn start_down(&mut self, now: Duration) {
        self.loss_in_round = false;
        self.bw_latest = 0.0;
        self.inflight_latest = 0;
        self.probe_up_cnt = None;
        // 2 to 3 s to the next probe, at random so flows sharing a bottleneck desync.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.probe_wait = PROBE_WAIT_BASE + Duration::from_millis(self.rng % 1000);
        self.rounds_since_probe = 0;
        self.cycle_stamp = now;
        self.advance_filter_at_round = true;
        self.start_round();
        self.set_phase(Phase::Down, DOWN_PACING_GAIN);
    }

    fn start_cruise(&mut self) {
        self.set_phase(Phase::Cruise, 1.0);
    }

    /// "BBRStartProbeBW_REFILL": forget the lower bounds and refill the pipe for a round.
    fn start_refill(&mut self) {
        self.bw_lo = None;
        self.inflight_lo = None;
        self.bw_probe_up_rounds = 0;
        self.bw_probe_up_acks = 0;
        self.start_round();
        self.set_phase(Phase::Refill, 1.0);
    }

    /// "BBRStartProbeBW_UP".
    fn start_up(&mut self, ack: &AckSample) {
        self.bw_probe_samples = true;
        self.start_round();
        self.reset_full_bw();
        self.full_bw = ack.rate.map_or(0.0, |r| r.delivery_rate);
        self.cycle_stamp = ack.now;
        self.set_phase(Phase::Up, UP_PACING_GAIN);
        self.cwnd_gain = self.p.cwnd_gain + UP_EXTRA_CWND_GAIN;
        self.raise_inflight_hi_slope();
    }

    /// "BBRCheckTimeToProbeBW": after the random wait, or as many rounds as a Reno flow
    /// would take to grow by the BDP.
    fn check_time_to_probe(&mut self, now: Duration) -> bool {
        let bdp_packets = self.bdp(1.0) / self.mss;
        let reno_rounds = bdp_packets.min(MAX_RENO_ROUNDS);
        if now.saturating_sub(self.cycle_stamp) > self.probe_wait
            || self.rounds_since_probe >= reno_rounds.max(1)
        {
            self.start_refill();
            return true;
        }
        false
    }

    /// "BBRCheckTimeToCruise".
    fn time_to_cruise(&self, in_flight: u64) -> bool {
        if self.inflight_with_headroom().is_some_and(|h| in_flight > h) {
            return false;
        }
        in_flight <= self.bdp(1.0)
    }

    /// "BBRCheckTimeToGoDown".
    fn time_to_go_down(&mut self, ack: &AckSample) -> bool {
        let cwnd_limited = ack.prior_in_flight + self.mss >= self.cwnd;
        if cwnd_limited && self.inflight_hi.is_some_and(|hi| self.cwnd >= hi) {
            // The flight is held by inflight_hi, not the path: no plateau yet.
            self.reset_full_bw();
            self.full_bw = ack.rate.map_or(0.0, |r| r.delivery_rate);
            return false;
        }
        self.full_bw_now
    }

    /// "BBRUpdateProbeBWCyclePhase".
    fn update_probe_bw_phase(&mut self, ack: &AckSample) {
        if !self.filled_pipe {
            return;
        }
        let Mode::ProbeBw(phase) = self.mode else {
            return;
        };
        match phase {
            Phase::Down => {
                if !self.check_time_to_probe(ack.now) && self.time_to_cruise(ack.in_flight) {
                    self.start_cruise();
                }
            }
            Phase::Cruise => {
                self.check_time_to_probe(ack.now);
            }
            Phase::Refill => {
                if self.round_start {
                    self.start_up(ack);
                }
            }
            Phase::Up => {
                if self.time_to_go_down(ack) {
                    self.start_down(ack.now);
                }
            }
        }
    }

    /// "BBRUpdateMinRTT"; returns whether ProbeRTT is due.
    fn update_min_rtt(&mut self, ack: &AckSample) -> bool {
        let interval = self.p.min_rtt_window / 2;
        let probe_expired =
            self.probe_rtt_min_delay.is_some() && ack.now > self.probe_rtt_min_stamp + interval;
        if self.probe_rtt_min_delay.is_none_or(|d| ack.rtt < d) || probe_expired {
            self.probe_rtt_min_delay = Some(ack.rtt);
            self.probe_rtt_min_stamp = ack.now;
        }
        let min_expired = ack.now > self.min_rtt_stamp + self.p.min_rtt_window;
        if self
            .probe_rtt_min_delay
            .is_some_and(|d| self.min_rtt.is_none_or(|m| d < m))
            || min_expired
        {
            self.min_rtt = self.probe_rtt_min_delay;
            self.min_rtt_stamp = self.probe_rtt_min_stamp;
        }
        probe_expired
    }

    fn probe_rtt_cwnd(&self) -> u64 {
        self.bdp(PROBE_RTT_CWND_GAIN).max(self.min_pipe())
    }

    /// "BBRCheckProbeRTT" and "BBRHandleProbeRTT".
    fn check_probe_rtt(&mut self, ack: &AckSample, expired: bool) {
        if expired && !matches!(self.mode, Mode::ProbeRtt { .. }) {
            self.mode = Mode::ProbeRtt {
                done_at: None,
                round_done: false,
            };
            self.pacing_gain = 1.0;
            self.cwnd_gain = 1.0;
            self.advance_filter_at_round = true;
            self.start_round();
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
            None if ack.in_flight <= self.probe_rtt_cwnd() => {
                self.mode = Mode::ProbeRtt {
                    done_at: Some(ack.now + self.p.probe_rtt_duration),
                    round_done: false,
                };
                self.start_round();
            }
            None => {}
            Some(at) => {
                let round_done = round_done || self.round_start;
                self.mode = Mode::ProbeRtt {
                    done_at,
                    round_done,
                };
                if round_done && ack.now >= at {
                    self.probe_rtt_min_stamp = ack.now;
                    self.cwnd = self.cwnd.max(self.prior_cwnd);
                    self.exit_probe_rtt(ack.now);
                }
            }
        }
    }

    /// "BBRExitProbeRTT".
    fn exit_probe_rtt(&mut self, now: Duration) {
        self.bw_lo = None;
        self.inflight_lo = None;
        if self.filled_pipe {
            self.start_down(now);
            self.start_cruise();
        } else {
            self.mode = Mode::Startup;
            self.pacing_gain = STARTUP_PACING_GAIN;
            self.cwnd_gain = STARTUP_CWND_GAIN;
        }
    }

    // ---- Control parameters.

    fn set_pacing_rate(&mut self, ack: &AckSample) {
        let rate = match self.bw() {
            Some(bw) => self.pacing_gain * bw * (1.0 - PACING_MARGIN),
            // No bandwidth sample yet: the initial window per round trip, at Startup gain.
            None => STARTUP_PACING_GAIN * self.cwnd as f64 / ack.srtt.as_secs_f64().max(1e-3),
        };
        let current = self.pacer.rate().unwrap_or(0.0);
        if self.filled_pipe || rate > current {
            self.pacer.set_rate(ack.now, Some(rate));
        }
    }

    /// "BBRSetCwnd": grow toward the model's window, then bound it.
    fn set_cwnd(&mut self, ack: &AckSample) {
        let target = self.inflight(self.cwnd_gain);
        let conserving = match self.recovery {
            Some((_, until)) if self.round_count <= until => true,
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
        self.cwnd = self.cwnd.max(self.min_pipe());
        if matches!(self.mode, Mode::ProbeRtt { .. }) {
            self.cwnd = self.cwnd.min(self.probe_rtt_cwnd());
        }
        self.cwnd = self.cwnd.min(self.model_cap());
    }

    /// "BBRBoundCwndForModel": `inflight_hi` while probing or draining, with headroom in
    /// CRUISE and ProbeRTT, and `inflight_lo` always.
    fn model_cap(&self) -> u64 {
        let hi = match self.mode {
            Mode::ProbeBw(Phase::Cruise) | Mode::ProbeRtt { .. } => self.inflight_with_headroom(),
            Mode::ProbeBw(_) => self.inflight_hi,
            Mode::Startup | Mode::Drain => None,
        };
        let cap = match (hi, self.inflight_lo) {
            (Some(h), Some(l)) => h.min(l),
            (h, l) => h.or(l).unwrap_or(u64::MAX),
        };
        cap.max(self.min_pipe())
    }
}

impl CongestionControl for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }

    fn in_startup(&self) -> bool {
        self.mode == Mode::Startup
    }

    fn on_sent(&mut self, now: Duration, bytes: u32, in_flight: u64) {
        self.pacer.on_sent(now, bytes);
        self.record_send(now, in_flight);
    }

    fn on_ack(&mut self, ack: &AckSample) {
        self.delivered += ack.acked_bytes;
        let loss_round_start = self.update_rounds(ack);
        self.update_max_bw(ack);
        self.adapt_upper_bounds(ack);
        if loss_round_start {
            self.end_loss_round(ack);
        }
        self.check_full_bw(ack);
        self.check_startup_done();
        self.check_drain_done(ack);
        self.update_probe_bw_phase(ack);
        let expired = self.update_min_rtt(ack);
        self.check_probe_rtt(ack, expired);
        self.set_pacing_rate(ack);
        self.set_cwnd(ack);
        self.prune_sends(ack.now, ack.srtt);
    }

    fn on_loss(&mut self, loss: &LossSample) {
        let bytes = u64::from(loss.bytes);
        self.lost_total += bytes;
        self.lost_in_round += bytes;
        self.losses_in_round = self.losses_in_round.saturating_add(1);
        if loss.kind == LossKind::Congestion {
            self.loss_in_round = true;
        }
        // "Updating the Model Upon Packet Loss": a packet sent while probing that takes
        // the loss rate over the threshold bounds the flight. Startup counts as probing,
        // and leaves at once rather than at the end of the round: a cellular link that
        // falls while Startup doubles would otherwise lose a round's worth of its rise.
        if self.mode == Mode::Startup && self.losses_in_round >= FULL_LOSS_COUNT {
            if let Some(probe) = self.probe_of(loss.sent_at) {
                if self.is_inflight_too_high(&probe) {
                    let hi = self.inflight_hi_from_lost(&probe, bytes);
                    self.filled_pipe = true;
                    self.inflight_hi = Some(self.bdp(1.0).max(hi));
                    self.check_startup_done();
                }
            }
        } else if self.bw_probe_samples {
            if let Some(probe) = self.probe_of(loss.sent_at) {
                if self.is_inflight_too_high(&probe) {
                    let hi = self.inflight_hi_from_lost(&probe, bytes);
                    self.handle_inflight_too_high(loss.now, hi);
                }
            }
        }
        if loss.kind == LossKind::Link {
            return;
        }
        // Packet conservation for a round ("Modulating cwnd in Loss Recovery").
        self.cwnd = self.cwnd.saturating_sub(bytes).max(self.min_pipe());
        let new_episode = self.recovery.is_none_or(|(start, _)| loss.sent_at >= start);
        if new_episode {
            if self.recovery.is_none() && !matches!(self.mode, Mode::ProbeRtt { .. }) {
                self.prior_cwnd = self.cwnd + bytes;
            }
            self.recovery = Some((loss.now, self.round_count + 1));
            self.cwnd = self
                .cwnd
                .min(loss.in_flight + self.mss)
                .max(self.min_pipe());
        }
    }

    fn on_spurious_loss(&mut self, _now: Duration, sent_at: Duration) {
        if self.recovery.is_some_and(|(start, _)| sent_at < start) {
            self.recovery = None;
            self.cwnd = self.cwnd.max(self.prior_cwnd).min(self.model_cap());
        }
    }

    fn allowance(&self, now: Duration, in_flight: u64) -> u64 {
        self.pacer.allowance(now, self.cwnd, in_flight)
    }

    fn next_allowance_at(&self, now: Duration) -> Option<Duration> {
        self.pacer.next_at(now)
    }

    fn rate(&self, srtt: Duration) -> f64 {
        self.bw()
            .unwrap_or_else(|| self.cwnd as f64 / srtt.as_secs_f64().max(1e-3))
    }

    fn window(&self) -> Option<u64> {
        Some(self.cwnd)
    }

    fn reset(&mut self, now: Duration) {
        *self = Self::new(self.mss as u32, self.p);
        self.min_rtt_stamp = now;
        self.probe_rtt_min_stamp = now;
        self.pacer.reset(now);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testbed::{self, mbps, ms, Link, Trace, MSS};
    use super::super::testing::loss;
    use super::super::{Bbr1, Bbr1Params};
    use super::*;

    /// Share of the packets sent in `[from, to)` that the bottleneck dropped.
    fn drop_rate(trace: &Trace, from: Duration, to: Duration) -> f64 {
        let sent: Vec<_> = trace
            .packets
            .iter()
            .filter(|p| p.sent_at >= from && p.sent_at < to)
            .collect();
        let dropped = sent.iter().filter(|p| p.queue_delay.is_none()).count();
        dropped as f64 / sent.len().max(1) as f64
    }

    #[test]
    fn estimates_the_bottleneck_and_keeps_the_queue_small() {
        let rate = mbps(10.0);
        let link = Link::constant(rate, ms(40), 500_000);
        let mut c = Bbr::new(MSS, BbrParams::default());
        let mut queue = Vec::new();
        let mut entered_probe_bw = None;
        let trace = testbed::run(&mut c, &link, ms(8000), |c, a| {
            if let Mode::ProbeBw(_) = c.mode() {
                entered_probe_bw.get_or_insert(a.now);
                if a.now > ms(2000) {
                    queue.push(a.rtt - c.min_rtt().unwrap());
                }
            }
        });
        let bw = c.bw().unwrap();
        assert!((bw / rate - 1.0).abs() < 0.1, "bw {bw} of {rate}");
        assert!(entered_probe_bw.unwrap() < ms(1500), "{entered_probe_bw:?}");
        let goodput = trace.goodput(ms(2000), ms(8000));
        assert!(goodput >= 0.9 * rate, "{goodput} of {rate}");
        let mean = queue.iter().sum::<Duration>() / queue.len() as u32;
        assert!(mean < ms(10), "mean queue {mean:?} over a 40 ms path");
        assert_eq!(trace.congestion_losses, 0);
    }

    /// The phases follow one another in the draft's order, UP ending in DOWN, and the
    /// lower bounds are forgotten when REFILL starts.
    #[test]
    fn probe_bw_cycles_down_cruise_refill_up() {
        let link = Link::constant(mbps(10.0), ms(40), 500_000);
        let mut c = Bbr::new(MSS, BbrParams::default());
        let mut phases: Vec<(Duration, Phase)> = Vec::new();
        testbed::run(&mut c, &link, ms(12_000), |c, a| {
            if let Mode::ProbeBw(p) = c.mode() {
                if phases.last().is_none_or(|&(_, last)| last != p) {
                    phases.push((a.now, p));
                }
                if p == Phase::Refill {
                    assert_eq!(c.bounds().1, None, "inflight_lo survived REFILL");
                    assert_eq!(c.bounds().2, None, "bw_lo survived REFILL");
                }
            }
        });
        let order: Vec<Phase> = phases.iter().map(|&(_, p)| p).collect();
        assert_eq!(order[0], Phase::Down, "{order:?}");
        for w in order.windows(2) {
            let ok = matches!(
                (w[0], w[1]),
                (Phase::Down, Phase::Cruise)
                    | (Phase::Down, Phase::Refill)
                    | (Phase::Cruise, Phase::Refill)
                    | (Phase::Refill, Phase::Up)
                    | (Phase::Up, Phase::Down)
            );
            assert!(ok, "{w:?} in {order:?}");
        }
        let ups: Vec<Duration> = phases
            .iter()
            .filter(|&&(_, p)| p == Phase::Up)
            .map(|&(t, _)| t)
            .collect();
        assert!(ups.len() >= 3, "{phases:?}");
        // A 40-packet BDP: Reno coexistence probes every 40 rounds, about 1.6 s; never
        // more than 3 s apart (the random wait's bound) nor within a second.
        for w in ups.windows(2) {
            let gap = w[1] - w[0];
            assert!(gap > ms(1000) && gap < ms(3200), "{gap:?} between probes");
        }
    }

    /// A buffer of a third of the BDP: BBR v1's window of two BDPs keeps overflowing it;
    /// BBR v3 learns `inflight_hi` from the losses and stays below it.
    #[test]
    fn a_shallow_buffer_bounds_the_flight() {
        let rate = mbps(10.0);
        let link = Link::constant(rate, ms(40), 16_000);
        let (from, to) = (ms(3000), ms(20_000));
        let mut v3 = Bbr::new(MSS, BbrParams::default());
        let t3 = testbed::run(&mut v3, &link, to, |_, _| {});
        let mut v1 = Bbr1::new(MSS, Bbr1Params::default());
        let t1 = testbed::run(&mut v1, &link, to, |_, _| {});
        let (l3, l1) = (drop_rate(&t3, from, to), drop_rate(&t1, from, to));
        let (hi, _, _) = v3.bounds();
        let hi = hi.expect("losses set inflight_hi");
        let bdp = (rate * 0.040) as u64;
        assert!(
            hi < bdp + link.buffer + 4 * u64::from(MSS),
            "{hi} over {bdp}"
        );
        assert!(l3 < 0.01, "v3 loses {l3}");
        assert!(l1 > 2.0 * l3, "v1 {l1} against v3 {l3}");
        let goodput = t3.goodput(from, to);
        assert!(goodput > 0.9 * rate, "{goodput} of {rate}");
    }

    /// Startup on a shallow buffer leaves on the loss rate, not after three rounds of
    /// drops, and takes `inflight_hi` with it.
    #[test]
    fn startup_ends_on_high_loss() {
        let link = Link::constant(mbps(20.0), ms(60), 12_000);
        let mut c = Bbr::new(MSS, BbrParams::default());
        let mut left_startup = None;
        let trace = testbed::run(&mut c, &link, ms(3000), |c, a| {
            if c.mode() != Mode::Startup && left_startup.is_none() {
                left_startup = Some((a.now, c.bounds().0));
            }
        });
        let (at, hi) = left_startup.expect("Startup ended");
        assert!(at < ms(1500), "{at:?}");
        assert!(hi.is_some(), "left Startup without inflight_hi");
        let lost_in_startup = trace
            .packets
            .iter()
            .filter(|p| p.sent_at < at && p.queue_delay.is_none())
            .count();
        let sent = trace.packets.iter().filter(|p| p.sent_at < at).count();
        assert!(
            (lost_in_startup as f64) < 0.2 * sent as f64,
            "{lost_in_startup} of {sent}"
        );
    }

    /// The link's rate falls to a quarter: losses outside probing halve `bw_lo` within a
    /// few rounds, where v1's max filter keeps the old rate for ten.
    #[test]
    fn a_rate_drop_cuts_the_lower_bounds() {
        let link = Link {
            rates: vec![(Duration::ZERO, mbps(20.0)), (ms(6000), mbps(5.0))],
            one_way: ms(20),
            buffer: 40_000,
            link_loss: 0.0,
        };
        let mut v3 = Bbr::new(MSS, BbrParams::default());
        let mut cut_at = None;
        let t3 = testbed::run(&mut v3, &link, ms(12_000), |c, a| {
            if a.now > ms(6000) && cut_at.is_none() && c.bw().is_some_and(|b| b < mbps(10.0)) {
                cut_at = Some(a.now);
            }
        });
        let cut_at = cut_at.expect("the model followed the drop");
        assert!(cut_at < ms(6600), "{cut_at:?}");
        let mut v1 = Bbr1::new(MSS, Bbr1Params::default());
        let t1 = testbed::run(&mut v1, &link, ms(12_000), |_, _| {});
        let (from, to) = (ms(6000), ms(12_000));
        let (l3, l1) = (drop_rate(&t3, from, to), drop_rate(&t1, from, to));
        assert!(l3 < 0.5 * l1, "v3 {l3} against v1 {l1}");
        assert!(t3.goodput(ms(7000), to) > 0.85 * mbps(5.0));
    }

    /// Random radio loss under the threshold neither bounds the flight nor the rate.
    #[test]
    fn random_loss_below_the_threshold_is_tolerated() {
        let rate = mbps(10.0);
        let link = Link {
            link_loss: 0.005,
            ..Link::constant(rate, ms(40), 500_000)
        };
        let mut c = Bbr::new(MSS, BbrParams::default());
        let trace = testbed::run(&mut c, &link, ms(15_000), |_, _| {});
        assert!(trace.link_losses > 20, "{}", trace.link_losses);
        let goodput = trace.goodput(ms(3000), ms(15_000));
        assert!(goodput > 0.9 * rate, "{goodput} of {rate}");
        assert_eq!(c.bounds().2, None, "link losses cut bw_lo");
    }

    #[test]
    fn inflight_hi_is_where_the_loss_rate_crossed_the_threshold() {
        let c = Bbr::new(1000, BbrParams::default());
        // 100 kB in flight when the lost packet left, 2.5 kB lost since, this 1 kB too.
        let probe = LossProbe {
            tx_in_flight: 100_000,
            lost: 2500,
        };
        assert!(c.is_inflight_too_high(&probe));
        // Before this loss: 1.5 kB of 99 kB lost; 2% is reached (1980 - 1500) / 0.98
        // bytes further on.
        assert_eq!(c.inflight_hi_from_lost(&probe, 1000), 99_489);
        let few = LossProbe {
            tx_in_flight: 100_000,
            lost: 1000,
        };
        assert!(!c.is_inflight_too_high(&few));
    }

    #[test]
    fn link_losses_keep_the_window_and_congestion_losses_conserve() {
        let mut c = Bbr::new(MSS, BbrParams::default());
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
    fn probe_rtt_finds_a_lower_propagation_delay() {
        let rate = mbps(10.0);
        let link = Link::constant(rate, ms(40), 500_000);
        let p = BbrParams {
            min_rtt_window: ms(4000),
            ..BbrParams::default()
        };
        let mut c = Bbr::new(MSS, p);
        let mut probed = 0;
        let mut was_probing = false;
        testbed::run(&mut c, &link, ms(9000), |c, _| {
            let probing = matches!(c.mode(), Mode::ProbeRtt { .. });
            if probing && !was_probing {
                probed += 1;
            }
            if probing {
                // Half a BDP (25 kB) and the quanta at most.
                assert!(c.cwnd() <= 30_000, "{}", c.cwnd());
            }
            was_probing = probing;
        });
        assert!(probed >= 2, "{probed}");
        let min_rtt = c.min_rtt().unwrap();
        assert!(min_rtt < ms(43), "{min_rtt:?}");
    }
}
