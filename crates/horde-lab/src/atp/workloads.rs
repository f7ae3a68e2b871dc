//! The six workloads of the ATP paper's Table 2 (§5.4) as lists of message arrivals, the
//! same for every protocol.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::traces::KB;

/// A workload of Table 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    Uniform,
    Prioritised,
    Reversed,
    Filesystem,
    Overload,
    Random,
}

/// Every workload, in the paper's order.
pub const ALL: [Workload; 6] = [
    Workload::Uniform,
    Workload::Prioritised,
    Workload::Reversed,
    Workload::Filesystem,
    Workload::Overload,
    Workload::Random,
];

/// One class of messages sent at a fixed interval.
#[derive(Debug, Clone, Copy)]
struct Class {
    /// Index in the workload's classes (0 the most important).
    class: usize,
    size: u64,
    timer: Duration,
    every: Duration,
}

/// One message of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Arrival {
    /// When the application sends it.
    pub at: Duration,
    /// Its class: 0 the most important (high), then low (or medium, then low).
    pub class: usize,
    /// Bytes.
    pub size: u64,
    /// Its timer: useful only if it arrives within this.
    pub timer: Duration,
}

impl Workload {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Uniform => "uniform",
            Workload::Prioritised => "prioritised",
            Workload::Reversed => "reversed",
            Workload::Filesystem => "filesystem",
            Workload::Overload => "overload",
            Workload::Random => "random",
        }
    }

    /// Parses a name.
    pub fn parse(name: &str) -> Option<Self> {
        ALL.into_iter().find(|w| w.name() == name)
    }

    /// Names of its classes, most important first.
    pub fn class_names(self) -> &'static [&'static str] {
        match self {
            Workload::Uniform => &["high 4K", "high 32K"],
            Workload::Random => &["high", "medium", "low"],
            _ => &["high", "low"],
        }
    }

    /// The strict priority of each class. In "uniform" both classes are high.
    pub fn priority(self, class: usize) -> u8 {
        match self {
            Workload::Uniform => 0,
            _ => class as u8,
        }
    }

    /// The paper's rows (size, timer, interval) per class.
    fn classes(self) -> Vec<Class> {
        let c = |class, size: f64, timer_ms, every_ms| Class {
            class,
            size: size as u64,
            timer: Duration::from_millis(timer_ms),
            every: Duration::from_millis(every_ms),
        };
        match self {
            Workload::Uniform => vec![c(0, 4.0 * KB, 1000, 500), c(1, 32.0 * KB, 4000, 2000)],
            Workload::Prioritised => {
                vec![c(0, 4.0 * KB, 1000, 500), c(1, 256.0 * KB, 16000, 8000)]
            }
            Workload::Reversed => vec![c(0, 64.0 * KB, 16000, 8000), c(1, 4.0 * KB, 1000, 500)],
            Workload::Filesystem => vec![c(0, 64.0, 500, 100), c(1, 64.0 * KB, 1000, 1000)],
            Workload::Overload => vec![c(0, 16.0 * KB, 1000, 250), c(1, 64.0 * KB, 1000, 500)],
            Workload::Random => vec![],
        }
    }

    /// Every message sent over `span`, in time order. Each class sends from 0 at its
    /// interval while before `span` (the paper's counts span 300 s, except "reversed"'s
    /// high class, whose 75 × 8 s would be 600 s: it sends 38 here). "random" draws, every
    /// 0.5 s, a class, a size of 1–64 KB and a timer of 0.5–4 s, from `seed`.
    pub fn arrivals(self, span: Duration, seed: u64) -> Vec<Arrival> {
        let mut out = Vec::new();
        if self == Workload::Random {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let every = Duration::from_millis(500);
            let mut at = Duration::ZERO;
            while at < span {
                out.push(Arrival {
                    at,
                    class: rng.gen_range(0..3),
                    size: rng.gen_range(KB as u64..=64 * KB as u64),
                    timer: Duration::from_millis(rng.gen_range(500..=4000)),
                });
                at += every;
            }
            return out;
        }
        for class in self.classes() {
            let mut at = Duration::ZERO;
            while at < span {
                out.push(Arrival {
                    at,
                    class: class.class,
                    size: class.size,
                    timer: class.timer,
                });
                at += class.every;
            }
        }
        out.sort_by_key(|a| (a.at, a.class));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counts_are_the_papers_over_five_minutes() {
        let span = Duration::from_secs(300);
        let count = |w: Workload, class| {
            w.arrivals(span, 1)
                .iter()
                .filter(|a| a.class == class)
                .count()
        };
        assert_eq!(count(Workload::Uniform, 0), 600);
        assert_eq!(count(Workload::Uniform, 1), 150);
        assert_eq!(count(Workload::Prioritised, 1), 38);
        assert_eq!(count(Workload::Filesystem, 0), 3000);
        assert_eq!(count(Workload::Filesystem, 1), 300);
        assert_eq!(count(Workload::Overload, 0), 1200);
        assert_eq!(Workload::Random.arrivals(span, 1).len(), 600);
        let a = Workload::Random.arrivals(span, 1);
        assert!(a.iter().all(|m| (1000..=64_000).contains(&m.size)));
        assert_eq!(a, Workload::Random.arrivals(span, 1));
    }
}
