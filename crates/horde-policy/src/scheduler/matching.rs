//! Matchings of ADUs to slots that every scheduler needs: the thesis's random
//! schedule (Fig. 6-5) and the largest number of ADUs that can be placed at all.

use rand::seq::SliceRandom;
use rand::RngCore;

use super::{Assignment, ScheduleInput};

/// Reusable buffers for [`RandomMatcher::fill`].
#[derive(Debug, Default)]
pub(crate) struct RandomMatcher {
    slots: Vec<usize>,
    adus: Vec<usize>,
    taken: Vec<bool>,
}

impl RandomMatcher {
    /// Thesis Fig. 6-5 over real and phantom slots: shuffle both, then pair them in
    /// order. An ADU too long for its slot takes the next free slot that fits.
    pub fn fill(&mut self, input: &ScheduleInput<'_>, rng: &mut dyn RngCore, out: &mut Assignment) {
        out.clear();
        out.resize(input.adus.len(), None);
        self.slots.clear();
        self.slots.extend(0..input.slots.len());
        self.adus.clear();
        self.adus.extend(0..input.adus.len());
        self.slots.shuffle(rng);
        self.adus.shuffle(rng);
        self.taken.clear();
        self.taken.resize(self.slots.len(), false);
        let mut first_free = 0;
        for &a in &self.adus {
            while first_free < self.slots.len() && self.taken[first_free] {
                first_free += 1;
            }
            let len = input.adus[a].length;
            let fit = (first_free..self.slots.len())
                .find(|&k| !self.taken[k] && input.slots[self.slots[k]].max_size >= len);
            if let Some(k) = fit {
                self.taken[k] = true;
                out[a] = Some(self.slots[k]);
            }
        }
    }
}

/// Whether every ADU fits every slot (the usual case: one MTU).
pub(crate) fn all_fit(input: &ScheduleInput<'_>) -> bool {
    let longest = input.adus.iter().map(|a| a.length).max().unwrap_or(0);
    input.slots.iter().all(|s| s.max_size >= longest)
}

/// The most ADUs any valid assignment can place (bipartite matching).
pub(crate) fn max_placeable(input: &ScheduleInput<'_>) -> usize {
    if all_fit(input) {
        return input.adus.len().min(input.slots.len());
    }
    let mut owner: Vec<Option<usize>> = vec![None; input.slots.len()];
    let mut count = 0;
    for a in 0..input.adus.len() {
        let mut seen = vec![false; input.slots.len()];
        if augment(input, a, &mut owner, &mut seen) {
            count += 1;
        }
    }
    count
}

fn augment(
    input: &ScheduleInput<'_>,
    a: usize,
    owner: &mut [Option<usize>],
    seen: &mut [bool],
) -> bool {
    for s in 0..input.slots.len() {
        if seen[s] || input.slots[s].max_size < input.adus[a].length {
            continue;
        }
        seen[s] = true;
        let free = match owner[s] {
            None => true,
            Some(b) => augment(input, b, owner, seen),
        };
        if free {
            owner[s] = Some(a);
            return true;
        }
    }
    false
}
