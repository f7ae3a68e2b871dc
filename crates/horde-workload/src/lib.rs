//! Application data sources: the ADUs a stream's application hands to Horde.
//!
//! The thesis's simulated streams are abstract ADU sources (§7.2.1); the telemedicine
//! application that motivates Horde sends video, audio and EKG telemetry (§1.1). Each
//! source here produces *frames* (a video frame, an audio frame, a batch of samples) on
//! its own clock and hands them out as ADUs no larger than the `max_adu` given at
//! construction; a larger frame becomes several ADUs that share the frame's fields.
//!
//! Every source draws its randomness from one `ChaCha8Rng` seeded from a `u64`, so the
//! same spec, seed and `max_adu` give the same ADUs at the same times, bit for bit.
//!
//! # Fields every ADU carries
//!
//! | field | type | meaning |
//! | --- | --- | --- |
//! | `media` | string | the source kind: `"cbr"`, `"video"`, `"audio"`, `"ekg"`, `"bulk"` |
//! | `frame_seq` | int | the frame's number within the stream, from 0 |
//! | `frag` | int | this ADU's index within its frame, from 0 |
//! | `frags` | int | how many ADUs the frame was split into |
//! | `frame_type` | string | video only: `"I"`, `"P"` or `"B"` |
//!
//! # The driver's contract
//!
//! * Timed sources (`is_bulk() == false`): whenever the clock reaches [`Workload::next_at`],
//!   call [`Workload::emit`] with that time. `emit` appends every frame due at or before
//!   `now` (so a late call catches up) and moves `next_at` on. Calling early appends nothing.
//! * Bulk sources (`is_bulk() == true`) are always backlogged and have no clock:
//!   `next_at` is `None`. Call `emit` whenever the stream's unsent queue inside Horde is
//!   shorter than what the scheduler could use in one cycle (its real plus phantom slots);
//!   each call appends `batch` ADUs. Keeping the queue just that deep keeps the source
//!   saturating without inflating queueing delay.

pub mod apps;
mod bulk;
mod clock;
mod ekg;
mod frag;
mod periodic;
mod spec;
mod video;

#[cfg(test)]
mod tests;

use std::time::Duration;

use horde_policy::Fields;

pub use spec::{
    burst_fits_the_queue, Burst, FrameSizes, WorkloadError, WorkloadSpec, DEFAULT_RATIOS,
};

/// One ADU to insert into a stream: payload size and the header fields policy sees.
#[derive(Debug, Clone, PartialEq)]
pub struct AduSpec {
    /// Payload bytes, `1..=max_adu`.
    pub size: u32,
    /// Application header fields (never transmitted, thesis §3.2.2).
    pub fields: Fields,
    /// When the frame was generated. Equal to the `now` passed to `emit` unless the driver
    /// called late; bulk ADUs carry the `now` of the call.
    pub at: Duration,
}

/// An ADU source. See the module documentation for the driver's contract.
pub trait Workload: Send {
    /// When the next frame is due, or `None` for a bulk source.
    fn next_at(&self) -> Option<Duration>;
    /// Append the ADUs due at or before `now` (timed) or one batch (bulk) to `out`.
    fn emit(&mut self, now: Duration, out: &mut Vec<AduSpec>);
    /// Whether this source is always backlogged and topped up by the driver.
    fn is_bulk(&self) -> bool;
}

/// A per-stream seed from a scenario seed, so streams of one run draw independent
/// randomness and adding a stream does not change the others' ADUs.
pub fn stream_seed(scenario_seed: u64, stream_id: u32) -> u64 {
    // splitmix64 finaliser over the pair: cheap, well mixed, stable across platforms.
    let mut z =
        scenario_seed ^ (u64::from(stream_id).wrapping_add(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
