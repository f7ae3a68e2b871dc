//! Per-channel congestion control (thesis §3.3.3: below the striping layer, one
//! independent controller per channel, and channel-specific where that pays off).
//!
//! The channel manager feeds a controller one [`AckSample`] per ack frame (with a
//! delivery-rate sample, for model-based controllers) and one [`LossSample`] per packet
//! declared lost, and asks it how many bytes may leave now. Controllers are not coupled
//! across channels: see docs/congestion.md for why.

use std::time::Duration;

mod aimd;
mod bbr;
mod bbr1;
mod cbr;
mod copa;
mod cubic;
mod filter;
mod forecast;
mod ontime;
mod pacer;
#[cfg(test)]
mod testbed;
mod verb;

// The controllers themselves are reached through `CcConfig::build`.
pub(crate) use aimd::Aimd;
pub(crate) use bbr::{Bbr, BbrParams};
pub(crate) use bbr1::{Bbr1, Bbr1Params};
pub(crate) use cbr::Cbr;
pub(crate) use copa::{Copa, CopaParams};
pub(crate) use cubic::{Cubic, CubicParams};
pub use filter::Windowed;
pub(crate) use ontime::{Ontime, OntimeParams};
pub(crate) use pacer::Pacer;
pub(crate) use verb::{Verb, VerbParams};

/// What one ack frame told the channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AckSample {
    /// When the ack frame arrived, on the driver's clock.
    pub now: Duration,
    /// Bytes newly acknowledged by this frame.
    pub acked_bytes: u64,
    /// Round trip of the most recently sent packet this frame newly acknowledged.
    pub rtt: Duration,
    /// Windowed minimum round trip of the channel (its propagation delay estimate).
    pub min_rtt: Duration,
    /// Smoothed round trip of the channel.
    pub srtt: Duration,
    /// Bytes in flight before this frame was processed.
    pub prior_in_flight: u64,
    /// Bytes in flight after it.
    pub in_flight: u64,
    /// Delivery rate measured over the newly acknowledged packets, if one could be.
    pub rate: Option<RateSample>,
}

/// A delivery-rate sample (draft-cheng-iccrg-delivery-rate-estimation): bytes delivered
/// between the send of the acknowledged packet and this ack, over the longer of the send
/// and ack intervals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateSample {
    /// Bytes per second.
    pub delivery_rate: f64,
    /// Bytes delivered over the interval.
    pub delivered: u64,
    /// The interval the rate is measured over: the longer of the send and ack intervals.
    pub interval: Duration,
    /// The sender had nothing to send for part of the interval, so the rate is a lower
    /// bound on what the channel can carry.
    pub app_limited: bool,
    /// Bytes delivered on the channel since it started (a round counter for BBR).
    pub total_delivered: u64,
    /// `total_delivered` when the acknowledged packet was sent.
    pub prior_delivered: u64,
}

/// Why a packet was declared lost: overflow of a queue the sender itself filled, or a loss
/// of the link (radio, outage) that no slower sending would have avoided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LossKind {
    /// A queue this sender filled overflowed: back off.
    Congestion,
    /// The link lost it (radio, outage): sending slower would not have helped.
    Link,
}

/// A packet declared lost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossSample {
    /// When the loss was declared, on the driver's clock.
    pub now: Duration,
    /// The lost packet's size on the wire, bytes.
    pub bytes: u32,
    /// When it was sent: controllers react once per round trip, not once per packet.
    pub sent_at: Duration,
    /// What the channel manager thinks caused it.
    pub kind: LossKind,
    /// Bytes in flight after removing the lost packet.
    pub in_flight: u64,
}

/// A congestion controller decides when the channel may send; the channel manager turns
/// each permission into a `txSlot`.
pub trait CongestionControl: Send + std::fmt::Debug {
    /// Short lower-case name for reports ("cubic").
    fn name(&self) -> &'static str;
    /// A packet of `bytes` left at `now`; `in_flight` counts it.
    fn on_sent(&mut self, now: Duration, bytes: u32, in_flight: u64);
    /// An ack frame newly acknowledged data.
    fn on_ack(&mut self, ack: &AckSample);
    /// A packet was declared lost.
    fn on_loss(&mut self, loss: &LossSample);
    /// A packet sent at `sent_at`, earlier declared lost, was acknowledged after all:
    /// undo the response to it if it was the only cause (RFC 8985 §9.2 / RFC 6675 undo).
    fn on_spurious_loss(&mut self, _now: Duration, _sent_at: Duration) {}
    /// A datagram outside the channel's sequence space (an ack) of `bytes` left at `now`:
    /// a rate-based controller holding to a share of the link charges it like data; a
    /// window-based one, clocked by the acks of its own packets, ignores it.
    fn on_unsequenced_sent(&mut self, _now: Duration, _bytes: u32) {}
    /// Bytes that may be sent now, given the bytes in flight.
    fn allowance(&self, now: Duration, in_flight: u64) -> u64;
    /// When the allowance will next grow without an ack (pacing), if ever.
    fn next_allowance_at(&self, now: Duration) -> Option<Duration>;
    /// Sustained sending rate estimate in bytes per second, for bandwidth allocation and
    /// phantom-slot prediction. `srtt` is the channel's smoothed RTT.
    fn rate(&self, srtt: Duration) -> f64;
    /// The congestion window in bytes, if the controller has one (for reports).
    fn window(&self) -> Option<u64> {
        None
    }
    /// Whether the controller is still in its start-up (slow start, BBR's Startup): its
    /// window grows about twofold each round trip and has not met the path's capacity
    /// yet, so its rate says how far it has come, not what the path carries.
    fn in_startup(&self) -> bool {
        false
    }
    /// Forget everything, e.g. when a dead channel comes back.
    fn reset(&mut self, now: Duration);
}

/// Which controller a channel runs, as configured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum CcConfig {
    /// Window-based additive-increase multiplicative-decrease (thesis E1).
    Aimd {
        /// Congestion window at start and after a reset, packets of one MTU.
        #[serde(default = "default_initial_window")]
        initial_window_packets: u32,
    },
    /// A constant rate regardless of feedback (the thesis simulations' slot generator).
    Cbr {
        /// The sending rate, kbit/s.
        kbps: f64,
        /// Longest idle time whose unused slots may be banked, in ms.
        #[serde(default = "default_burst_ms")]
        burst_ms: f64,
    },
    /// CUBIC (RFC 9438) with HyStart++ slow start (RFC 9406).
    Cubic {
        /// Congestion window at start and after a reset, packets of one MTU.
        #[serde(default = "default_modern_initial_window")]
        initial_window_packets: u32,
        /// Cubic scaling constant C, in segments/s^3.
        #[serde(default = "default_cubic_c")]
        c: f64,
        /// Multiplicative decrease factor.
        #[serde(default = "default_cubic_beta")]
        beta: f64,
        /// Release bandwidth faster to a newcomer by remembering a lower `W_max` after a
        /// loss (RFC 9438 §4.7).
        #[serde(default = "yes")]
        fast_convergence: bool,
        /// Leave slow start on a delay rise before the first loss (HyStart++).
        #[serde(default = "yes")]
        hystart: bool,
        /// Whether losses put down to the link (not to queue overflow) reduce the window.
        #[serde(default = "yes")]
        link_loss_reduces: bool,
    },
    /// BBR version 3 (draft-ietf-ccwg-bbr): BBR's model bounded by the loss rate
    /// (`inflight_hi`) and by recent losses (`bw_lo`, `inflight_lo`).
    Bbr {
        /// Congestion window at start and after a reset, packets of one MTU.
        #[serde(default = "default_modern_initial_window")]
        initial_window_packets: u32,
        /// The window as a multiple of the estimated bandwidth-delay product.
        #[serde(default = "default_bbr_cwnd_gain")]
        cwnd_gain: f64,
        /// How long a minimum RTT stands, in s; ProbeRTT refreshes it after half of it.
        #[serde(default = "default_min_rtt_window_s")]
        min_rtt_window_s: f64,
        /// How long ProbeRTT holds the flight at half a BDP, in ms.
        #[serde(default = "default_bbr_probe_rtt_ms")]
        probe_rtt_ms: f64,
        /// Largest share of a probing round's data that may be lost before `inflight_hi`
        /// bounds the flight.
        #[serde(default = "default_bbr_loss_threshold")]
        loss_threshold: f64,
        /// Multiplicative decrease of `bw_lo` and `inflight_lo` per round with losses.
        #[serde(default = "default_bbr_beta")]
        beta: f64,
    },
    /// BBR version 1: paced at the measured bottleneck rate, window twice the BDP; kept
    /// for comparison with `bbr`.
    Bbr1 {
        /// Congestion window at start and after a reset, packets of one MTU.
        #[serde(default = "default_modern_initial_window")]
        initial_window_packets: u32,
        /// The window as a multiple of the estimated bandwidth-delay product.
        #[serde(default = "default_bbr_cwnd_gain")]
        cwnd_gain: f64,
        /// Length of the bottleneck-bandwidth filter, in round trips.
        #[serde(default = "default_bbr_bw_window_rounds")]
        bw_window_rounds: u32,
        /// How long a minimum RTT stands before ProbeRTT refreshes it, in s.
        #[serde(default = "default_min_rtt_window_s")]
        min_rtt_window_s: f64,
        /// How long ProbeRTT holds the flight at four packets, in ms.
        #[serde(default = "default_bbr_probe_rtt_ms")]
        probe_rtt_ms: f64,
    },
    /// Copa (NSDI 2018), default mode: targets a queue of 1/delta packets.
    Copa {
        /// Congestion window at start and after a reset, packets of one MTU.
        #[serde(default = "default_modern_initial_window")]
        initial_window_packets: u32,
        /// Weight of delay against throughput: the target queue is 1/delta packets.
        #[serde(default = "default_copa_delta")]
        delta: f64,
        /// Window of the minimum RTT filter, in s.
        #[serde(default = "default_min_rtt_window_s")]
        min_rtt_window_s: f64,
        /// While shrinking, cap the window at the recent delivery rate times the minimum
        /// RTT (plus Copa's target queue), so a link that slows is drained in one step.
        #[serde(default = "yes")]
        drain_cap: bool,
    },
    /// `ontime`: sends what a forecast of the link's rate, made from the acks alone, says
    /// will arrive within a delay target (docs/congestion.md).
    Ontime {
        /// Congestion window at start and after a reset, packets of one MTU.
        #[serde(default = "default_modern_initial_window")]
        initial_window_packets: u32,
        /// The queueing delay each packet should stay within, ms.
        #[serde(default = "default_ontime_delay_target_ms")]
        delay_target_ms: f64,
        /// Probability with which the forecast must hold.
        #[serde(default = "default_ontime_confidence")]
        confidence: f64,
        /// Relative standard deviation of the link rate's moves per square root of a
        /// second: how fast the forecast expects the rate to wander.
        #[serde(default = "default_ontime_volatility")]
        volatility: f64,
    },
    /// `verb`, the thesis's CDMA2000 controller (§7.4.1): rate plateaus, a coarse timer
    /// resetting to goodput, delay-based back-off (docs/cdma.md).
    Verb {
        /// The coarse timer, in s.
        #[serde(default = "default_verb_period_s")]
        period_s: f64,
        /// Back off when a round trip exceeds this multiple of the minimum.
        #[serde(default = "default_verb_rtt_rise")]
        rtt_rise: f64,
        /// Starting rate in kbit/s.
        #[serde(default = "default_verb_initial_kbps")]
        initial_kbps: f64,
    },
}

fn default_ontime_delay_target_ms() -> f64 {
    OntimeParams::default().delay_target.as_secs_f64() * 1e3
}
fn default_ontime_confidence() -> f64 {
    OntimeParams::default().confidence
}
fn default_ontime_volatility() -> f64 {
    OntimeParams::default().volatility
}
fn default_verb_period_s() -> f64 {
    VerbParams::default().period.as_secs_f64()
}
fn default_verb_rtt_rise() -> f64 {
    VerbParams::default().rtt_rise
}
fn default_verb_initial_kbps() -> f64 {
    VerbParams::default().initial_kbps
}

fn default_initial_window() -> u32 {
    4
}
fn default_burst_ms() -> f64 {
    150.0
}
fn default_modern_initial_window() -> u32 {
    10
}
fn default_cubic_c() -> f64 {
    CubicParams::default().c
}
fn default_cubic_beta() -> f64 {
    CubicParams::default().beta
}
fn yes() -> bool {
    true
}
fn default_bbr_cwnd_gain() -> f64 {
    BbrParams::default().cwnd_gain
}
fn default_bbr_bw_window_rounds() -> u32 {
    Bbr1Params::default().bw_window_rounds as u32
}
fn default_bbr_loss_threshold() -> f64 {
    BbrParams::default().loss_threshold
}
fn default_bbr_beta() -> f64 {
    BbrParams::default().beta
}
fn default_min_rtt_window_s() -> f64 {
    10.0
}
fn default_bbr_probe_rtt_ms() -> f64 {
    BbrParams::default().probe_rtt_duration.as_secs_f64() * 1e3
}
fn default_copa_delta() -> f64 {
    CopaParams::default().delta
}

/// The values of each controller parameter [`CcConfig::build`] takes as given; outside
/// them it uses the parameter's default instead, so configuration layers refuse what
/// lies outside.
pub mod limits {
    use std::ops::RangeInclusive;

    /// CUBIC's `c`.
    pub const CUBIC_C: RangeInclusive<f64> = 1e-3..=1e3;
    /// CUBIC's `beta`.
    pub const CUBIC_BETA: RangeInclusive<f64> = 0.1..=0.95;
    /// BBR's `cwnd_gain`.
    pub const BBR_CWND_GAIN: RangeInclusive<f64> = 1.0..=10.0;
    /// Copa's `delta`.
    pub const COPA_DELTA: RangeInclusive<f64> = 1e-3..=100.0;
    /// Ontime's `delay_target_ms`.
    pub const ONTIME_DELAY_TARGET_MS: RangeInclusive<f64> = 1.0..=60_000.0;
    /// Ontime's `confidence`.
    pub const ONTIME_CONFIDENCE: RangeInclusive<f64> = 0.5..=0.999;
    /// Ontime's `volatility`.
    pub const ONTIME_VOLATILITY: RangeInclusive<f64> = 0.01..=100.0;
    /// Verb's `rtt_rise`.
    pub const VERB_RTT_RISE: RangeInclusive<f64> = 1.01..=10.0;
    /// Verb's `initial_kbps`.
    pub const VERB_INITIAL_KBPS: RangeInclusive<f64> = 1.0..=1e6;
    /// Times in seconds: `min_rtt_window_s`, `probe_rtt_ms` / 1000, Verb's `period_s`.
    pub const SECONDS: RangeInclusive<f64> = 0.0..=1e6;
    /// `initial_window_packets`: at least one packet; at most far beyond any path's
    /// bandwidth-delay product, so that a slip is refused rather than taken as "no
    /// congestion control until the first loss".
    pub const INITIAL_WINDOW_PACKETS: RangeInclusive<u32> = 1..=100_000;
    /// BBR v1's `bw_window_rounds`.
    pub const BW_WINDOW_ROUNDS: RangeInclusive<u32> = 1..=10_000;
    /// BBR's `loss_threshold`.
    pub const BBR_LOSS_THRESHOLD: RangeInclusive<f64> = 1e-4..=0.5;
    /// BBR's `beta`.
    pub const BBR_BETA: RangeInclusive<f64> = 0.1..=0.95;
}

/// `x` if it is a finite number in `range`, else `default` (configuration layers
/// validate; a controller must never be built from nonsense).
fn within(x: f64, range: std::ops::RangeInclusive<f64>, default: f64) -> f64 {
    if x.is_finite() && range.contains(&x) {
        x
    } else {
        default
    }
}

fn secs(x: f64, default: f64) -> Duration {
    Duration::from_secs_f64(within(x, limits::SECONDS, default))
}

/// CUBIC, chosen by measurement over three generated cellular links (docs/congestion.md,
/// "The default"): the highest goodput of the four, where goodput is what the previous
/// default lost; Copa is the choice when delay matters more than throughput.
impl Default for CcConfig {
    fn default() -> Self {
        CcConfig::with_defaults("cubic").expect("cubic is a known kind")
    }
}

impl CcConfig {
    /// The controller `kind` with every parameter at its default; `None` for an unknown
    /// kind or `cbr` (whose rate has no default).
    pub fn with_defaults(kind: &str) -> Option<Self> {
        Some(match kind {
            "aimd" => CcConfig::Aimd {
                initial_window_packets: default_initial_window(),
            },
            "cubic" => CcConfig::Cubic {
                initial_window_packets: default_modern_initial_window(),
                c: default_cubic_c(),
                beta: default_cubic_beta(),
                fast_convergence: true,
                hystart: true,
                link_loss_reduces: true,
            },
            "bbr" => CcConfig::Bbr {
                initial_window_packets: default_modern_initial_window(),
                cwnd_gain: default_bbr_cwnd_gain(),
                min_rtt_window_s: default_min_rtt_window_s(),
                probe_rtt_ms: default_bbr_probe_rtt_ms(),
                loss_threshold: default_bbr_loss_threshold(),
                beta: default_bbr_beta(),
            },
            "bbr1" => CcConfig::Bbr1 {
                initial_window_packets: default_modern_initial_window(),
                cwnd_gain: default_bbr_cwnd_gain(),
                bw_window_rounds: default_bbr_bw_window_rounds(),
                min_rtt_window_s: default_min_rtt_window_s(),
                probe_rtt_ms: default_bbr_probe_rtt_ms(),
            },
            "copa" => CcConfig::Copa {
                initial_window_packets: default_modern_initial_window(),
                delta: default_copa_delta(),
                min_rtt_window_s: default_min_rtt_window_s(),
                drain_cap: true,
            },
            "ontime" => CcConfig::Ontime {
                initial_window_packets: default_modern_initial_window(),
                delay_target_ms: default_ontime_delay_target_ms(),
                confidence: default_ontime_confidence(),
                volatility: default_ontime_volatility(),
            },
            "verb" => CcConfig::Verb {
                period_s: default_verb_period_s(),
                rtt_rise: default_verb_rtt_rise(),
                initial_kbps: default_verb_initial_kbps(),
            },
            _ => return None,
        })
    }

    /// The controller's name as written in configuration files.
    pub fn kind(&self) -> &'static str {
        match self {
            CcConfig::Aimd { .. } => "aimd",
            CcConfig::Cbr { .. } => "cbr",
            CcConfig::Cubic { .. } => "cubic",
            CcConfig::Bbr { .. } => "bbr",
            CcConfig::Bbr1 { .. } => "bbr1",
            CcConfig::Copa { .. } => "copa",
            CcConfig::Ontime { .. } => "ontime",
            CcConfig::Verb { .. } => "verb",
        }
    }

    /// A fresh controller for a channel whose packets are at most `mss` bytes, started
    /// at `now`. Out-of-range parameters fall back to their defaults.
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
            CcConfig::Cubic {
                initial_window_packets,
                c,
                beta,
                fast_convergence,
                hystart,
                link_loss_reduces,
            } => {
                let d = CubicParams::default();
                Box::new(Cubic::new(
                    mss,
                    CubicParams {
                        initial_window_packets: initial_window_packets.max(2),
                        c: within(c, limits::CUBIC_C, d.c),
                        beta: within(beta, limits::CUBIC_BETA, d.beta),
                        fast_convergence,
                        hystart,
                        link_loss_reduces,
                    },
                ))
            }
            CcConfig::Bbr {
                initial_window_packets,
                cwnd_gain,
                min_rtt_window_s,
                probe_rtt_ms,
                loss_threshold,
                beta,
            } => {
                let d = BbrParams::default();
                Box::new(Bbr::new(
                    mss,
                    BbrParams {
                        initial_window_packets: initial_window_packets.max(4),
                        cwnd_gain: within(cwnd_gain, limits::BBR_CWND_GAIN, d.cwnd_gain),
                        min_rtt_window: secs(min_rtt_window_s, 10.0),
                        probe_rtt_duration: secs(probe_rtt_ms / 1e3, 0.2),
                        loss_threshold: within(
                            loss_threshold,
                            limits::BBR_LOSS_THRESHOLD,
                            d.loss_threshold,
                        ),
                        beta: within(beta, limits::BBR_BETA, d.beta),
                    },
                ))
            }
            CcConfig::Bbr1 {
                initial_window_packets,
                cwnd_gain,
                bw_window_rounds,
                min_rtt_window_s,
                probe_rtt_ms,
            } => {
                let d = Bbr1Params::default();
                Box::new(Bbr1::new(
                    mss,
                    Bbr1Params {
                        initial_window_packets: initial_window_packets.max(4),
                        cwnd_gain: within(cwnd_gain, limits::BBR_CWND_GAIN, d.cwnd_gain),
                        bw_window_rounds: u64::from(bw_window_rounds.max(1)),
                        min_rtt_window: secs(min_rtt_window_s, 10.0),
                        probe_rtt_duration: secs(probe_rtt_ms / 1e3, 0.2),
                    },
                ))
            }
            CcConfig::Copa {
                initial_window_packets,
                delta,
                min_rtt_window_s,
                drain_cap,
            } => {
                let d = CopaParams::default();
                Box::new(Copa::new(
                    mss,
                    CopaParams {
                        initial_window_packets: initial_window_packets.max(2),
                        delta: within(delta, limits::COPA_DELTA, d.delta),
                        min_rtt_window: secs(min_rtt_window_s, 10.0),
                        drain_cap,
                    },
                ))
            }
            CcConfig::Ontime {
                initial_window_packets,
                delay_target_ms,
                confidence,
                volatility,
            } => {
                let d = OntimeParams::default();
                let target_ms = d.delay_target.as_secs_f64() * 1e3;
                Box::new(Ontime::new(
                    mss,
                    OntimeParams {
                        initial_window_packets: initial_window_packets.max(2),
                        delay_target: Duration::from_secs_f64(
                            within(delay_target_ms, limits::ONTIME_DELAY_TARGET_MS, target_ms)
                                / 1e3,
                        ),
                        confidence: within(confidence, limits::ONTIME_CONFIDENCE, d.confidence),
                        volatility: within(volatility, limits::ONTIME_VOLATILITY, d.volatility),
                        ..d
                    },
                ))
            }
            CcConfig::Verb {
                period_s,
                rtt_rise,
                initial_kbps,
            } => {
                let d = VerbParams::default();
                Box::new(Verb::new(
                    mss,
                    VerbParams {
                        period: secs(period_s, d.period.as_secs_f64()),
                        rtt_rise: within(rtt_rise, limits::VERB_RTT_RISE, d.rtt_rise),
                        initial_kbps: within(
                            initial_kbps,
                            limits::VERB_INITIAL_KBPS,
                            d.initial_kbps,
                        ),
                        ..d
                    },
                ))
            }
        }
    }
}

#[cfg(test)]
mod config_tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Channel {
        congestion: CcConfig,
    }

    fn parse(s: &str) -> Result<CcConfig, toml::de::Error> {
        toml::from_str::<Channel>(s).map(|c| c.congestion)
    }

    #[test]
    fn every_controller_is_configured_by_kind_alone() {
        for kind in ["aimd", "cubic", "bbr", "bbr1", "copa", "ontime", "verb"] {
            let c = parse(&format!("congestion = {{ kind = \"{kind}\" }}")).unwrap();
            assert_eq!(c.kind(), kind);
            assert_eq!(CcConfig::with_defaults(kind), Some(c.clone()));
            assert_eq!(c.build(1235, Duration::ZERO).name(), kind);
        }
        let c = parse("congestion = { kind = \"cubic\", beta = 0.8, hystart = false }").unwrap();
        let CcConfig::Cubic {
            beta, hystart, c, ..
        } = c
        else {
            panic!("{c:?}");
        };
        assert_eq!((beta, hystart, c), (0.8, false, 0.4));
    }

    #[test]
    fn unknown_parameters_are_rejected() {
        let e = parse("congestion = { kind = \"copa\", delta = 0.5, velocity = 2 }").unwrap_err();
        assert!(e.to_string().contains("unknown field `velocity`"), "{e}");
    }

    #[test]
    fn nonsense_parameters_fall_back_to_defaults() {
        let c = parse("congestion = { kind = \"cubic\", beta = 7.0 }").unwrap();
        // A window of 10 packets after a loss keeps 7, not 70.
        let mut cc = c.build(1000, Duration::ZERO);
        cc.on_loss(&testing::loss(
            Duration::from_millis(10),
            1000,
            Duration::from_millis(5),
        ));
        assert_eq!(cc.window(), Some(7000));
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Builders of samples for controller unit tests.
    use super::*;

    pub fn ack(now: Duration, bytes: u64, rtt: Duration) -> AckSample {
        AckSample {
            now,
            acked_bytes: bytes,
            rtt,
            min_rtt: rtt,
            srtt: rtt,
            prior_in_flight: bytes,
            in_flight: 0,
            rate: None,
        }
    }

    pub fn loss(now: Duration, bytes: u32, sent_at: Duration) -> LossSample {
        LossSample {
            now,
            bytes,
            sent_at,
            kind: LossKind::Congestion,
            in_flight: 0,
        }
    }
}
