//! Application quality metrics of the CHAP dissertation (seed 001 §2.5, §6.13): G-model
//! MOS for games, E-model MOS for VoIP, playable frame rate for video, response time for
//! Web pages, throughput for downloads, and Jain's fairness index.
//!
//! Every metric takes what a run records per packet, frame or page, and gives a number
//! or a [`QualityError`] saying what was missing or wrong; none returns NaN or panics.
//! One-way delays are `Option<f64>` in milliseconds, `None` for a packet that never
//! arrived. See `docs/quality.md` for the formulas, their sources and the decisions
//! taken where the text is ambiguous.

mod fairness;
mod game;
#[cfg(test)]
mod properties;
mod throughput;
mod video;
mod voip;
mod web;

pub use fairness::jain_index;
pub use game::{g_model_impairment, g_model_mos, game_mos, G_MODEL_MAX};
pub use throughput::{throughput_bps, windowed_throughput_bps};
pub use video::{playable, playable_frame_rate, FrameKind, VideoFrame};
pub use voip::{
    delay_impairment, e_model_mos, loss_impairment, r_factor, r_to_mos, voip_mos, R_MAX,
};
pub use web::{mean_response_time_ms, mean_response_time_on_common_pages_ms, PageFetch};

/// Why a metric could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QualityError {
    /// Nothing to score, e.g. `game MOS: no downstream packets were sent`.
    #[error("{metric}: {what}")]
    Empty {
        /// The metric.
        metric: &'static str,
        /// What was missing.
        what: &'static str,
    },
    /// An input is out of range, e.g. `loss must be a fraction in [0, 1], got 2`.
    #[error("{what} must be {expected}, got {got}")]
    Invalid {
        /// The input.
        what: &'static str,
        /// What would have been accepted.
        expected: &'static str,
        /// The offending value.
        got: String,
    },
}

pub(crate) fn invalid(
    what: &'static str,
    expected: &'static str,
    got: impl ToString,
) -> QualityError {
    QualityError::Invalid {
        what,
        expected,
        got: got.to_string(),
    }
}

/// A finite, non-negative quantity, or an error naming it.
pub(crate) fn non_negative(what: &'static str, v: f64) -> Result<f64, QualityError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(invalid(what, "a finite number >= 0", v))
    }
}

/// The arrived packets' delays, each checked, and how many packets there were.
pub(crate) fn arrived(
    what: &'static str,
    owd_ms: &[Option<f64>],
) -> Result<Vec<f64>, QualityError> {
    owd_ms
        .iter()
        .flatten()
        .map(|&d| non_negative(what, d))
        .collect()
}

pub(crate) fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}
