//! Randomized round-robin, the thesis's baseline (§5.4, experiment S0).

use rand::seq::SliceRandom;
use rand::RngCore;

use super::{Assignment, CycleStats, ScheduleInput, Scheduler};

/// Randomized round-robin (thesis §5.4, the S0 baseline): a random matching of ADUs to
/// real slots. Phantom slots are ignored, so nothing is ever deferred.
#[derive(Debug, Default)]
pub struct RandomizedRoundRobin {
    slot_order: Vec<usize>,
    adu_order: Vec<usize>,
    /// Per entry of `slot_order`: whether an ADU took it this cycle.
    taken: Vec<bool>,
}

impl Scheduler for RandomizedRoundRobin {
    fn name(&self) -> &'static str {
        "rrr"
    }

    fn schedule(
        &mut self,
        input: &ScheduleInput<'_>,
        rng: &mut dyn RngCore,
        out: &mut Assignment,
    ) -> CycleStats {
        out.clear();
        out.resize(input.adus.len(), None);
        self.slot_order.clear();
        self.slot_order
            .extend((0..input.slots.len()).filter(|&i| input.slots[i].is_real()));
        self.adu_order.clear();
        self.adu_order.extend(0..input.adus.len());
        self.slot_order.shuffle(rng);
        self.adu_order.shuffle(rng);
        // Slots are all the same size on most channels, so the first free slot almost
        // always fits; the scan only matters for mixed MTUs.
        self.taken.clear();
        self.taken.resize(self.slot_order.len(), false);
        for &a in &self.adu_order {
            let len = input.adus[a].length;
            let fit = (0..self.slot_order.len())
                .find(|&k| !self.taken[k] && input.slots[self.slot_order[k]].max_size >= len);
            if let Some(k) = fit {
                self.taken[k] = true;
                out[a] = Some(self.slot_order[k]);
            }
        }
        CycleStats::default()
    }
}
