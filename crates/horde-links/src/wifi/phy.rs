//! Timing constants of an 802.11 PHY and the closed forms built on them.

use std::time::Duration;

use super::{Channel, WifiError};

/// The timing constants of one 802.11 PHY at one data rate. Times are in microseconds,
/// rates in Mbit/s, as the standard and the seed write them.
///
/// One attempt takes `difs + preamble + (payload + mac_header) * 8 / data_mbps + sifs +
/// preamble + ack * 8 / basic_mbps` (seed Eq. 7.1 plus a PLCP preamble before each of
/// the two frames). A failed attempt takes as long: the sender waits an ACK timeout of
/// SIFS plus the ACK's duration before it gives up on the attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Phy {
    /// DCF inter-frame space before each attempt.
    pub difs_us: f64,
    /// Short inter-frame space between DATA and ACK.
    pub sifs_us: f64,
    /// One backoff slot.
    pub slot_us: f64,
    /// PLCP preamble and header before each frame (DATA and ACK).
    pub preamble_us: f64,
    /// Rate of the DATA frame.
    pub data_mbps: f64,
    /// Rate of the ACK frame.
    pub basic_mbps: f64,
    /// MAC header and FCS added to every payload (seed §7.1: 34 bytes).
    pub mac_header_bytes: u32,
    /// ACK frame size (seed §7.1: 14 bytes).
    pub ack_bytes: u32,
    /// Contention window after the first failure, in slots (seed §7.1: W_min = 32).
    pub cw_min: u32,
    /// Largest contention window, in slots (seed §7.1: W_max = 1024).
    pub cw_max: u32,
    /// Transmission attempts before the frame is dropped, the first one included.
    pub max_attempts: u32,
}

impl Phy {
    /// 802.11b (HR-DSSS) at `data_mbps` (1, 2, 5.5 or 11) with the long preamble, as an
    /// 802.11b/g access point sends to 802.11b stations: 192 µs PLCP preamble and header,
    /// 20 µs slot, SIFS 10 µs, DIFS 50 µs (IEEE 802.11 DSSS PHY); ACK at 1 Mbit/s, the
    /// basic rate of seed Eq. 7.1; 7 attempts (seed §6.4).
    pub fn dot11b(data_mbps: f64) -> Phy {
        Phy {
            difs_us: 50.0,
            sifs_us: 10.0,
            slot_us: 20.0,
            preamble_us: 192.0,
            data_mbps,
            basic_mbps: 1.0,
            mac_header_bytes: 34,
            ack_bytes: 14,
            cw_min: 32,
            cw_max: 1024,
            max_attempts: 7,
        }
    }

    /// 802.11g (ERP-OFDM) at `data_mbps` as in the dissertation's simulations (seed §6.3,
    /// §6.5): DIFS 50 µs and SIFS 10 µs, hence the long 20 µs slot of a b/g-compatible
    /// network (DIFS = SIFS + 2 slots); ACK at 6 Mbit/s; 20 µs OFDM preamble and SIGNAL
    /// field (IEEE 802.11 OFDM PHY); 7 attempts (seed §6.4).
    pub fn dot11g(data_mbps: f64) -> Phy {
        Phy {
            difs_us: 50.0,
            sifs_us: 10.0,
            slot_us: 20.0,
            preamble_us: 20.0,
            data_mbps,
            basic_mbps: 6.0,
            mac_header_bytes: 34,
            ack_bytes: 14,
            cw_min: 32,
            cw_max: 1024,
            max_attempts: 7,
        }
    }

    /// The dissertation's Linux emulation of 802.11g (seed §7.1, Eqs. 7.1-7.4) exactly:
    /// 54 Mbit/s data, ACK at the 1 Mbit/s basic rate, no preamble, 5 attempts (4
    /// retransmissions). Gives 177.0 µs for an empty frame and 399.3 µs for 1500 bytes.
    pub fn chap_emulation() -> Phy {
        Phy {
            preamble_us: 0.0,
            basic_mbps: 1.0,
            max_attempts: 5,
            ..Phy::dot11g(54.0)
        }
    }

    /// Every constant must be usable: finite, non-negative times, positive rates, at
    /// least one attempt and `1 <= cw_min <= cw_max`. [`Transmitter::new`] checks it;
    /// the closed forms below assume it and give meaningless (but never panicking)
    /// results on a `Phy` that fails it.
    ///
    /// [`Transmitter::new`]: super::Transmitter::new
    pub fn validate(&self) -> Result<(), WifiError> {
        let times = [
            ("difs_us", self.difs_us),
            ("sifs_us", self.sifs_us),
            ("slot_us", self.slot_us),
            ("preamble_us", self.preamble_us),
        ];
        for (what, v) in times {
            if !(v.is_finite() && v >= 0.0) {
                return Err(WifiError::invalid(what, "a finite time >= 0 µs", v));
            }
        }
        for (what, v) in [
            ("data_mbps", self.data_mbps),
            ("basic_mbps", self.basic_mbps),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(WifiError::invalid(what, "a finite rate > 0 Mbit/s", v));
            }
        }
        if self.max_attempts == 0 {
            return Err(WifiError::invalid("max_attempts", "at least 1", 0));
        }
        if self.cw_min == 0 {
            return Err(WifiError::invalid("cw_min", "at least 1 slot", 0));
        }
        if self.cw_max < self.cw_min {
            return Err(WifiError::invalid(
                "cw_max",
                format!("at least cw_min ({})", self.cw_min),
                self.cw_max,
            ));
        }
        Ok(())
    }

    /// One attempt in µs: DIFS, DATA, SIFS, ACK (or the ACK timeout, which lasts as long).
    pub fn attempt_us(&self, payload_bytes: u32) -> f64 {
        let data_bits = f64::from(payload_bytes + self.mac_header_bytes) * 8.0;
        let ack_bits = f64::from(self.ack_bytes) * 8.0;
        self.difs_us
            + self.preamble_us
            + data_bits / self.data_mbps
            + self.sifs_us
            + self.preamble_us
            + ack_bits / self.basic_mbps
    }

    /// [`Phy::attempt_us`] as a duration, rounded to the nanosecond.
    pub fn attempt_time(&self, payload_bytes: u32) -> Duration {
        us_to_duration(self.attempt_us(payload_bytes))
    }

    /// The contention window W for the backoff after the `failure`-th failed attempt
    /// (1-based): `min(cw_min * 2^(failure - 1), cw_max)` slots (seed Eq. 7.3).
    pub fn window(&self, failure: u32) -> u32 {
        let doublings = failure.saturating_sub(1).min(31);
        let w = u64::from(self.cw_min) << doublings;
        w.min(u64::from(self.cw_max)) as u32
    }

    /// Mean backoff in µs after the `failure`-th failure: `random(W)` is uniform on the
    /// integers `0..W`, so its mean is `(W - 1) / 2` slots.
    fn mean_backoff_us(&self, failure: u32) -> f64 {
        f64::from(self.window(failure).saturating_sub(1)) / 2.0 * self.slot_us
    }

    /// Probability that a frame is delivered within the attempt limit:
    /// `1 - (1 - q)^N` with `q = (1 - fer)^2` (seed Eq. 7.2 summed over n = 1..N).
    pub fn delivery_probability(&self, channel: &Channel) -> f64 {
        1.0 - (1.0 - channel.attempt_success()).powi(self.max_attempts as i32)
    }

    /// Mean airtime of one frame in µs. Attempt n is made only if the n - 1 before it
    /// failed, probability `(1 - q)^(n-1)`, and then costs one attempt plus the backoff
    /// that preceded it:
    /// `E = sum_{n=1..N} (1 - q)^(n-1) * (d + E[b(n-1)])`, with `E[b(0)] = 0`.
    pub fn expected_airtime_us(&self, payload_bytes: u32, channel: &Channel) -> f64 {
        let d = self.attempt_us(payload_bytes);
        let fail = 1.0 - channel.attempt_success();
        (1..=self.max_attempts)
            .map(|n| {
                let backoff = if n == 1 {
                    0.0
                } else {
                    self.mean_backoff_us(n - 1)
                };
                fail.powi(n as i32 - 1) * (d + backoff)
            })
            .sum()
    }

    /// [`Phy::expected_airtime_us`] as a duration.
    pub fn expected_airtime(&self, payload_bytes: u32, channel: &Channel) -> Duration {
        us_to_duration(self.expected_airtime_us(payload_bytes, channel))
    }

    /// The most one frame can cost in µs: every attempt made and every backoff at the top
    /// of its window, `N * d + sum_{i=1..N-1} (W_i - 1) * slot`. The last attempt's
    /// timeout ends the charge, so no backoff follows it (seed §4.3, Fig. 4.2(c)).
    pub fn max_airtime_us(&self, payload_bytes: u32) -> f64 {
        let d = self.attempt_us(payload_bytes);
        let backoffs: f64 = (1..self.max_attempts)
            .map(|i| f64::from(self.window(i).saturating_sub(1)) * self.slot_us)
            .sum();
        f64::from(self.max_attempts) * d + backoffs
    }

    /// [`Phy::max_airtime_us`] as a duration.
    pub fn max_airtime(&self, payload_bytes: u32) -> Duration {
        us_to_duration(self.max_airtime_us(payload_bytes))
    }
}

pub(crate) fn us_to_duration(us: f64) -> Duration {
    Duration::from_nanos((us * 1000.0).round() as u64)
}
