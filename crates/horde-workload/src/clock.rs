//! Frame clocks for timed sources.

use std::time::Duration;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Frame times `phase + k * period`. Each time is computed from `k` rather than by adding
/// periods, so rounding to nanoseconds never accumulates into rate drift.
#[derive(Debug, Clone)]
pub(crate) struct Clock {
    phase_ns: u64,
    period_ns: f64,
    k: u64,
}

impl Clock {
    /// A clock with a random phase in `[0, period)`: independent real sources are not
    /// aligned, and aligning them would make every stream's frame arrive in the same
    /// instant, an artefact the scheduler would see.
    pub(crate) fn new(period_ns: f64, rng: &mut ChaCha8Rng) -> Self {
        let phase_ns = (rng.gen::<f64>() * period_ns) as u64;
        Self {
            phase_ns,
            period_ns,
            k: 0,
        }
    }

    /// Index of the next frame, from 0.
    pub(crate) fn index(&self) -> u64 {
        self.k
    }

    /// When the next frame is due.
    pub(crate) fn next(&self) -> Duration {
        Duration::from_nanos(self.phase_ns + (self.k as f64 * self.period_ns).round() as u64)
    }

    pub(crate) fn advance(&mut self) {
        self.k += 1;
    }
}
