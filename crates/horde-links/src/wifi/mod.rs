//! An 802.11 DCF airtime model: how long the channel is busy sending one frame, retries
//! included, and whether the frame finally got through.
//!
//! This is the value a credit-based queue discipline charges a flow (CHAP, seed 001 §4.3):
//! the time from the frame's first transmission attempt to its ACK, or to the timeout of
//! its last attempt when it is lost.
//!
//! * [`Phy`] holds the timing constants. [`Phy::attempt_time`] is one attempt
//!   (seed Eq. 7.1 with the PLCP preamble added): DIFS, the DATA frame at the data rate,
//!   SIFS, the ACK at the basic rate.
//! * [`Channel`] is one receiver's frame error rate, given directly or derived from its
//!   distance with the log-normal shadowing model (seed Eq. 6.3).
//! * [`Transmitter`] sends frames: each attempt fails when the DATA or the ACK frame is
//!   lost (seed Eq. 7.2); a failed attempt is followed by a binary exponential backoff
//!   (seed Eq. 7.3) and a retry, up to [`Phy::max_attempts`]. Its RNG is seeded, so the
//!   same seed and the same frames give the same outcomes.
//!
//! The closed forms [`Phy::expected_airtime`], [`Phy::max_airtime`] and
//! [`Phy::delivery_probability`] give the mean, the bound and the success probability
//! without sampling. See `docs/quality.md` for the constants and their sources.

mod airtime;
mod channel;
mod phy;

#[cfg(test)]
mod tests;

pub use airtime::{FrameOutcome, Transmitter};
pub use channel::{Channel, Shadowing};
pub use phy::Phy;

/// A Wi-Fi model parameter is out of range.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum WifiError {
    /// E.g. `fer must be a probability in [0, 1], got 1.5`.
    #[error("{what} must be {expected}, got {got}")]
    Invalid {
        /// The parameter.
        what: &'static str,
        /// What would have been accepted.
        expected: String,
        /// The offending value.
        got: String,
    },
}

impl WifiError {
    pub(crate) fn invalid(
        what: &'static str,
        expected: impl Into<String>,
        got: impl ToString,
    ) -> WifiError {
        WifiError::Invalid {
            what,
            expected: expected.into(),
            got: got.to_string(),
        }
    }
}
