//! Constant-size frames at a constant interval: the `cbr` and `audio` sources.

use std::time::Duration;

use rand_chacha::ChaCha8Rng;

use super::clock::Clock;
use super::frag::{frame_fields, push_frame};
use super::{AduSpec, Workload};

#[derive(Debug, Clone)]
pub(crate) struct ConstantFrames {
    media: &'static str,
    clock: Clock,
    bytes: u32,
    max_adu: u32,
}

impl ConstantFrames {
    pub(crate) fn new(
        media: &'static str,
        period_ns: f64,
        bytes: u32,
        max_adu: u32,
        rng: &mut ChaCha8Rng,
    ) -> Self {
        Self {
            media,
            clock: Clock::new(period_ns, rng),
            bytes,
            max_adu,
        }
    }
}

impl Workload for ConstantFrames {
    fn next_at(&self) -> Option<Duration> {
        Some(self.clock.next())
    }

    fn emit(&mut self, now: Duration, out: &mut Vec<AduSpec>) {
        while self.clock.next() <= now {
            let fields = frame_fields(self.media, self.clock.index(), None);
            push_frame(
                u64::from(self.bytes),
                fields,
                self.clock.next(),
                self.max_adu,
                out,
            );
            self.clock.advance();
        }
    }

    fn is_bulk(&self) -> bool {
        false
    }
}
