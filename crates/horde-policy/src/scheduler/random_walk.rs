//! The thesis's `random-walk` scheduler (Figs. 6-4 and 6-5).

use rand::RngCore;

use super::matching::RandomMatcher;
use super::{Assignment, CycleStats, ScheduleInput, Scheduler};
use crate::objective::PreparedCache;

/// Build `k` uniformly random matchings of ADUs to real and phantom slots, score each
/// with every objective, keep the best (the first of equals). ADUs on phantom slots
/// are returned like the rest; the caller transmits only those on real slots. With
/// no objectives every matching is equally good, so one random matching is returned:
/// randomized round-robin over all slots.
#[derive(Debug)]
pub struct RandomWalk {
    /// Walk length (the thesis's `WALK_LENGTH`, 25 in its experiments).
    pub k: usize,
    /// Let objectives reuse term values computed earlier in the cycle. The thesis
    /// evaluates every objective on every candidate, which is the default (`false`);
    /// `true` is for measuring how much of another scheduler's saving is caching.
    pub cached: bool,
    matcher: RandomMatcher,
    candidate: Assignment,
    /// The objectives' preparations, kept to reuse their memory.
    cache: PreparedCache,
}

impl RandomWalk {
    /// A walk of `k` steps per cycle, without term caching (the thesis's setting).
    pub fn new(k: usize) -> Self {
        RandomWalk {
            k,
            cached: false,
            matcher: RandomMatcher::default(),
            candidate: Vec::new(),
            cache: PreparedCache::default(),
        }
    }
}

impl Default for RandomWalk {
    fn default() -> Self {
        RandomWalk::new(25)
    }
}

impl Scheduler for RandomWalk {
    fn name(&self) -> &'static str {
        "random-walk"
    }

    fn schedule(
        &mut self,
        input: &ScheduleInput<'_>,
        rng: &mut dyn RngCore,
        out: &mut Assignment,
    ) -> CycleStats {
        if input.objectives.is_empty() || self.k <= 1 {
            self.matcher.fill(input, rng, out);
            return CycleStats::default();
        }
        let mut cache = std::mem::take(&mut self.cache);
        let mut set = input.objectives.prepare_reusing(input, &mut cache);
        let mut best = i64::MIN;
        out.clear();
        for _ in 0..self.k {
            self.matcher.fill(input, rng, &mut self.candidate);
            let mut sum = 0i128;
            for o in set.iter_mut() {
                for t in 0..o.terms() {
                    sum += i128::from(o.value(t, &self.candidate, self.cached));
                }
            }
            let u = crate::objective::clamp(sum);
            if out.is_empty() || u > best {
                best = u;
                out.clone_from(&self.candidate);
            }
        }
        let evaluations = set.evaluations();
        drop(set);
        self.cache = cache;
        CycleStats { evaluations }
    }
}
