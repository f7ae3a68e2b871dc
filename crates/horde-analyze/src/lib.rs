//! Cross-layer trace analysis after the CDMA2000 measurement thesis (seed 003 §5) and
//! the Horde thesis (§7.4, App. A): align series into 1 s bins, discretise them, measure
//! how much one explains another with the lagged asymmetric normalised mutual
//! information against a shuffled null, split them into ~2 s and ~32 s Haar components,
//! and summarise distributions; read TCP captures for RTT samples and timeouts; score
//! application quality (game and VoIP MOS, playable video frames, Web response time,
//! throughput, Jain's index) with [`quality`].
//!
//! See `docs/analyze.md`.

#![warn(missing_docs)]

pub mod align;
pub mod csv;
pub mod discretize;
mod error;
pub mod info;
pub mod mahimahi;
pub mod pcap;
pub mod plot;
pub mod quality;
pub mod stats;
pub mod tcp;
pub mod wavelet;

pub use error::AnalyzeError;
