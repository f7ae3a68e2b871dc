//! EKG-style telemetry: samples at a fixed rate, sent in batches every `batch_ms`.

use std::time::Duration;

use rand_chacha::ChaCha8Rng;

use super::clock::Clock;
use super::frag::{frame_fields, push_frame};
use super::{AduSpec, Workload};

#[derive(Debug, Clone)]
pub(crate) struct Ekg {
    clock: Clock,
    /// Samples taken per batch interval; need not be an integer.
    samples_per_batch: f64,
    bytes_per_sample: u32,
    max_adu: u32,
    frame_seq: u64,
}

impl Ekg {
    pub(crate) fn new(
        sample_hz: f64,
        bytes_per_sample: u32,
        batch_ms: f64,
        max_adu: u32,
        rng: &mut ChaCha8Rng,
    ) -> Self {
        Self {
            clock: Clock::new(batch_ms * 1e6, rng),
            samples_per_batch: sample_hz * batch_ms / 1000.0,
            bytes_per_sample,
            max_adu,
            frame_seq: 0,
        }
    }

    /// Samples in batch `k`: those taken in its interval. Counting from the cumulative
    /// total keeps the long-run rate exact when a batch holds a fractional sample count.
    fn samples_in(&self, k: u64) -> u64 {
        let upto = |n: u64| (n as f64 * self.samples_per_batch).floor() as u64;
        upto(k + 1) - upto(k)
    }
}

impl Workload for Ekg {
    fn next_at(&self) -> Option<Duration> {
        Some(self.clock.next())
    }

    fn emit(&mut self, now: Duration, out: &mut Vec<AduSpec>) {
        while self.clock.next() <= now {
            let samples = self.samples_in(self.clock.index());
            if samples > 0 {
                let fields = frame_fields("ekg", self.frame_seq, None);
                let bytes = samples * u64::from(self.bytes_per_sample);
                push_frame(bytes, fields, self.clock.next(), self.max_adu, out);
                self.frame_seq += 1;
            }
            self.clock.advance();
        }
    }

    fn is_bulk(&self) -> bool {
        false
    }
}
