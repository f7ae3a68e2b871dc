//! Sending frames: attempts, losses, backoffs and the airtime they add up to.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::phy::us_to_duration;
use super::{Channel, Phy, WifiError};

/// What sending one frame cost and how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameOutcome {
    /// Channel time from the start of the first attempt to the ACK of the successful one,
    /// or to the ACK timeout of the last one: every attempt and every backoff between
    /// attempts (seed §4.3, Eq. 7.4). The value a queue discipline charges the flow.
    pub airtime: Duration,
    /// Attempts made, `1..=max_attempts`.
    pub attempts: u32,
    /// Whether the receiver got the frame and the sender its ACK.
    pub delivered: bool,
}

/// An access point's 802.11 sender. One seeded RNG decides every DATA and ACK loss and
/// every backoff, in that order, so a run is reproducible from its seed.
#[derive(Debug, Clone)]
pub struct Transmitter {
    phy: Phy,
    rng: ChaCha8Rng,
}

impl Transmitter {
    /// A sender with the given PHY constants and RNG seed.
    pub fn new(phy: Phy, seed: u64) -> Result<Transmitter, WifiError> {
        phy.validate()?;
        Ok(Transmitter {
            phy,
            rng: ChaCha8Rng::seed_from_u64(seed),
        })
    }

    /// The PHY constants.
    pub fn phy(&self) -> &Phy {
        &self.phy
    }

    /// Send one frame of `payload_bytes` to a receiver over `channel`. An attempt succeeds
    /// when the DATA frame and then the ACK frame both survive; after the n-th failure the
    /// sender waits `random(W_n)` slots (seed Eq. 7.3) and tries again, until
    /// [`Phy::max_attempts`] attempts have been made.
    pub fn send(&mut self, payload_bytes: u32, channel: &Channel) -> FrameOutcome {
        let fer = channel.fer();
        let mut backoff_slots: u64 = 0;
        let mut attempts = 0;
        let mut delivered = false;
        while attempts < self.phy.max_attempts {
            if attempts > 0 {
                backoff_slots += u64::from(self.rng.gen_range(0..self.phy.window(attempts)));
            }
            attempts += 1;
            let data_ok = self.rng.gen::<f64>() >= fer;
            let ack_ok = data_ok && self.rng.gen::<f64>() >= fer;
            if ack_ok {
                delivered = true;
                break;
            }
        }
        let us = f64::from(attempts) * self.phy.attempt_us(payload_bytes)
            + backoff_slots as f64 * self.phy.slot_us;
        FrameOutcome {
            airtime: us_to_duration(us),
            attempts,
            delivered,
        }
    }
}
