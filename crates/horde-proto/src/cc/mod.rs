//! Per-channel congestion control (thesis §3.3.3: below the striping layer, one
//! independent controller per channel, and channel-specific where that pays off).
//!
//! The channel manager feeds a controller one [`AckSample`] per ack frame (with a
//! delivery-rate sample, for model-based controllers) and one [`LossSample`] per packet
//! declared lost, and asks it how many bytes may leave now. Controllers are not coupled
//! across channels: see docs/congestion.md for why.

use std::time::Duration;

mod aimd;
mod cbr;
mod pacer;

pub use aimd::Aimd;
pub use cbr::Cbr;
pub use pacer::Pacer;

/// What one ack frame told the channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AckSample {
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
    Congestion,
    Link,
}

/// A packet declared lost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossSample {
    pub now: Duration,
    pub bytes: u32,
    pub sent_at: Duration,
    pub kind: LossKind,
    /// Bytes in flight after removing the lost packet.
    pub in_flight: u64,
}

/// A congestion controller decides when the channel may send; the channel manager turns
/// each permission into a `txSlot`.
pub trait CongestionControl: Send + std::fmt::Debug {
    fn name(&self) -> &'static str;
    fn on_sent(&mut self, now: Duration, bytes: u32, in_flight: u64);
    fn on_ack(&mut self, ack: &AckSample);
    fn on_loss(&mut self, loss: &LossSample);
    /// A packet sent at `sent_at`, earlier declared lost, was acknowledged after all:
    /// undo the response to it if it was the only cause (RFC 8985 §9.2 / RFC 6675 undo).
    fn on_spurious_loss(&mut self, _now: Duration, _sent_at: Duration) {}
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
    /// The controller's name as written in configuration files.
    pub fn kind(&self) -> &'static str {
        match self {
            CcConfig::Aimd { .. } => "aimd",
            CcConfig::Cbr { .. } => "cbr",
        }
    }

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
