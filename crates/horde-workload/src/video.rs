//! Video: frames at `fps` following a group-of-pictures pattern, sizes per frame type.

use std::time::Duration;

use horde_policy::Value;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use super::clock::Clock;
use super::frag::{frame_fields, push_frame};
use super::{AduSpec, Workload};

#[derive(Debug, Clone)]
pub(crate) struct Video {
    clock: Clock,
    /// Frame types in emission order, one GoP; repeats forever.
    gop: Vec<u8>,
    /// Mean frame bytes for I, P, B.
    mean: [f64; 3],
    /// Log-normal shape parameter; 0 means constant sizes.
    sigma: f64,
    max_adu: u32,
    rng: ChaCha8Rng,
}

pub(crate) fn type_index(t: u8) -> usize {
    match t {
        b'I' => 0,
        b'P' => 1,
        _ => 2,
    }
}

fn type_name(t: u8) -> &'static str {
    match t {
        b'I' => "I",
        b'P' => "P",
        _ => "B",
    }
}

impl Video {
    /// `jitter` is the coefficient of variation (sd / mean) of frame sizes.
    pub(crate) fn new(
        fps: f64,
        gop: &str,
        mean: [f64; 3],
        jitter: f64,
        max_adu: u32,
        mut rng: ChaCha8Rng,
    ) -> Self {
        Self {
            clock: Clock::new(1e9 / fps, &mut rng),
            gop: gop.bytes().collect(),
            mean,
            sigma: (1.0 + jitter * jitter).ln().sqrt(),
            max_adu,
            rng,
        }
    }

    /// Log-normal sizes, `mean * exp(sigma z - sigma^2 / 2)`: always positive, right-skewed
    /// like real frame sizes, and with exactly the configured mean and coefficient of
    /// variation, so the long-run bit rate is what the spec says.
    fn frame_bytes(&mut self, t: u8) -> u64 {
        let mean = self.mean[type_index(t)];
        let x = if self.sigma == 0.0 {
            mean
        } else {
            let z: f64 = StandardNormal.sample(&mut self.rng);
            mean * (self.sigma * z - self.sigma * self.sigma / 2.0).exp()
        };
        (x.round() as u64).max(1)
    }
}

impl Workload for Video {
    fn next_at(&self) -> Option<Duration> {
        Some(self.clock.next())
    }

    fn emit(&mut self, now: Duration, out: &mut Vec<AduSpec>) {
        while self.clock.next() <= now {
            let k = self.clock.index();
            let t = self.gop[(k % self.gop.len() as u64) as usize];
            let fields = frame_fields("video", k, Some(Value::from(type_name(t))));
            let bytes = self.frame_bytes(t);
            push_frame(bytes, fields, self.clock.next(), self.max_adu, out);
            self.clock.advance();
        }
    }

    fn is_bulk(&self) -> bool {
        false
    }
}
