//! Transmission tokens (`txSlot`s, thesis ch. 4, Fig. 4-1).
//!
//! A real slot is a capability to send one packet on a channel, now or (in a periodic
//! cycle) at its `wait_ms` within the cycle's period; a phantom slot is a channel
//! manager's prediction of a slot to come (look-ahead, §4.2). The scheduler decides only
//! from what is in these values.

use crate::ChannelId;

/// How many same-channel sequence gaps the burst-loss correlation table covers. Beyond
/// this gap slots are treated as uncorrelated (thesis §7.2.1: zero beyond 8).
pub const CORRELATION_SPAN: usize = 8;

/// One transmission slot, real or phantom. Every field of thesis Fig. 4-1 is here.
#[derive(Debug, Clone, PartialEq)]
pub struct TxSlot {
    /// Parent channel.
    pub channel: ChannelId,
    /// The per-channel sequence number a packet in this slot carries (predicted for phantoms).
    pub sequence: u64,
    /// Estimated loss probability of a packet sent in this slot, in [0, 1].
    pub loss_probability: f64,
    /// Expected time from transmission in this slot to reception of its ack, in ms.
    pub expected_rtt_ms: f64,
    /// How long from now until the slot can be used, in ms (0 for real slots open now).
    pub wait_ms: f64,
    /// The most bytes a packet in this slot can carry.
    pub max_size: u32,
    /// Cost of one kilobyte (1000 bytes) sent in this slot, in the channel's cost unit.
    pub cost_per_kb: f64,
    /// `Some(confidence)` for phantom slots, confidence in (0, 1); `None` for real ones.
    pub phantom: Option<f32>,
    /// P(both lost | either lost) with the slot `g + 1` sequence numbers away on the same
    /// channel, for `g` in `0..CORRELATION_SPAN`.
    pub burst_correlation: [f32; CORRELATION_SPAN],
}

impl TxSlot {
    /// Whether the slot can be used now (a phantom is a prediction).
    pub fn is_real(&self) -> bool {
        self.phantom.is_none()
    }

    /// Estimate of P(both lost | either lost) for packets in `self` and `other`.
    /// Slots on different channels are taken as independent (thesis §7.2.1).
    pub fn loss_correlation(&self, other: &TxSlot) -> f64 {
        if self.channel != other.channel {
            return 0.0;
        }
        let gap = self.sequence.abs_diff(other.sequence) as usize;
        match gap {
            0 => 1.0,
            g if g <= CORRELATION_SPAN => f64::from(self.burst_correlation[g - 1]),
            _ => 0.0,
        }
    }

    /// Cost of sending `bytes` in this slot.
    pub fn cost(&self, bytes: u32) -> f64 {
        self.cost_per_kb * f64::from(bytes) / 1000.0
    }

    /// hose's `prob(x::lost?)` for an ADU in this slot: the loss probability as a
    /// whole percentage, round(100 x p), in 0..=100.
    pub fn loss_pct(&self) -> i64 {
        percent(self.loss_probability)
    }

    /// This slot's part of hose's `expected(x::latency)`: round(wait + expected RTT)
    /// in ms (an ADU adds its own queueing delay).
    pub fn latency_ms(&self) -> i64 {
        round_ms(self.wait_ms + self.expected_rtt_ms)
    }

    /// hose's `prob(correlated_loss(a, b))`: [`TxSlot::loss_correlation`] as a whole
    /// percentage.
    pub fn loss_correlation_pct(&self, other: &TxSlot) -> i64 {
        percent(self.loss_correlation(other))
    }
}

/// A probability as a whole percentage in 0..=100, rounding halves up (NaN
/// counts as 0). Plain arithmetic rather than `f64::round`, which is a library
/// call: this runs for every slot and slot pair an objective looks at.
pub fn percent(p: f64) -> i64 {
    if p.is_nan() || p <= 0.0 {
        0
    } else if p >= 1.0 {
        100
    } else {
        (p * 100.0 + 0.5) as i64
    }
}

/// Milliseconds rounded to the nearest integer, halves away from zero; saturates,
/// and NaN counts as 0.
pub fn round_ms(ms: f64) -> i64 {
    if ms >= 0.0 {
        (ms + 0.5) as i64
    } else if ms < 0.0 {
        -((-ms + 0.5) as i64)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding() {
        assert_eq!(percent(0.044), 4);
        assert_eq!(percent(0.045), 5);
        assert_eq!(percent(-0.2), 0);
        assert_eq!(percent(1.7), 100);
        assert_eq!(percent(f64::NAN), 0);
        assert_eq!(round_ms(2.5), 3);
        assert_eq!(round_ms(-2.5), -3);
        assert_eq!(round_ms(-2.4), -2);
        assert_eq!(round_ms(f64::NAN), 0);
        assert_eq!(round_ms(1e300), i64::MAX);
        assert_eq!(round_ms(-1e300), i64::MIN + 1);
    }
}
