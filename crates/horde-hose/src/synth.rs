//! Synthetic scheduling instances with the thesis objectives, for tests, benchmarks
//! and examples: `horde_policy::synth` draws the slots, ADUs and history, this adds
//! the objectives. Built with the `testing` feature.

use std::sync::Arc;

use horde_policy::Objective;
use rand::seq::SliceRandom;
use rand::Rng;

pub use horde_policy::synth::{instance, Instance, Shape};

use crate::thesis::{thesis as compiled, THESIS};

fn thesis(names: &[&str]) -> Vec<Arc<dyn Objective>> {
    names
        .iter()
        .filter_map(|n| compiled(n))
        .map(|o| Arc::new(o) as Arc<dyn Objective>)
        .collect()
}

/// The benchmark cycle ([`Shape::bench`]) with thesis objectives X1, X2, X3, X4.
pub fn bench<R: Rng + ?Sized>(rng: &mut R) -> Instance {
    instance(rng, &Shape::bench(), thesis(&["x1", "x2", "x3", "x4"]))
}

/// A random instance small enough for exhaustive search: 2 to 8 slots (some
/// phantom), 1 to 8 ADUs, up to 4 history entries, and one to three thesis
/// objectives, with ADUs drawn from the streams those objectives select plus one
/// stream none selects.
pub fn small<R: Rng + ?Sized>(rng: &mut R) -> Instance {
    let m = rng.gen_range(2..=8);
    let real = rng.gen_range(1..=m);
    let count = rng.gen_range(1..=3);
    let mut pool: Vec<_> = THESIS.iter().collect();
    pool.shuffle(rng);
    let chosen = &pool[..count];
    let mut streams: Vec<u32> = vec![1];
    for (_, _, s) in chosen {
        streams.extend_from_slice(s);
    }
    streams.sort_unstable();
    streams.dedup();
    let shape = Shape {
        channels: rng.gen_range(1..=3),
        real,
        phantom: m - real,
        adus: rng.gen_range(1..=8),
        history: rng.gen_range(0..=4),
        streams,
    };
    let names: Vec<&str> = chosen.iter().map(|(n, _, _)| *n).collect();
    instance(rng, &shape, thesis(&names))
}
