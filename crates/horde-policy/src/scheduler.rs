//! The scheduler interface (thesis §6.3): slots + ADUs + objectives + history in,
//! an ADU-to-slot assignment out.

use rand::seq::SliceRandom;
use rand::RngCore;

use crate::adu::{AduView, HistoryEntry, StreamStats};
use crate::objective::ObjectiveSet;
use crate::slot::TxSlot;

/// Everything one scheduling cycle sees.
#[derive(Debug, Clone, Copy)]
pub struct ScheduleInput<'a> {
    /// Real slots first, then phantoms; schedulers must not depend on that order.
    pub slots: &'a [TxSlot],
    /// Candidate ADUs, already chosen by the bandwidth allocator's constraints.
    pub adus: &'a [AduView],
    /// Recent transmissions, oldest first.
    pub history: &'a [HistoryEntry],
    pub streams: &'a [StreamStats],
    pub objectives: &'a ObjectiveSet,
}

/// `assignment[i]` is the index into `slots` that ADU `i` goes in, or `None` to keep it
/// queued. No slot may be used twice, and an ADU may only go in a slot large enough.
pub type Assignment = Vec<Option<usize>>;

/// What one cycle cost, for benchmarks and reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CycleStats {
    /// How many times a whole schedule (or a delta of one) was scored against objectives.
    pub evaluations: u64,
}

/// A striping scheduler.
pub trait Scheduler: Send {
    fn name(&self) -> &'static str;
    /// Fill `out` (resized to `input.adus.len()`) with an assignment.
    fn schedule(
        &mut self,
        input: &ScheduleInput<'_>,
        rng: &mut dyn RngCore,
        out: &mut Assignment,
    ) -> CycleStats;
}

/// Check the rules every assignment must obey. Used by tests and debug assertions.
pub fn assignment_is_valid(input: &ScheduleInput<'_>, assignment: &Assignment) -> bool {
    if assignment.len() != input.adus.len() {
        return false;
    }
    let mut used = vec![false; input.slots.len()];
    for (adu, slot) in input.adus.iter().zip(assignment) {
        if let Some(s) = *slot {
            if s >= used.len() || used[s] || input.slots[s].max_size < adu.length {
                return false;
            }
            used[s] = true;
        }
    }
    true
}

/// Randomized round-robin (thesis §5.4, the S0 baseline): a random matching of ADUs to
/// real slots. Phantom slots are ignored, so nothing is ever deferred.
#[derive(Debug, Default)]
pub struct RandomizedRoundRobin {
    slot_order: Vec<usize>,
    adu_order: Vec<usize>,
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
        let mut taken = vec![false; self.slot_order.len()];
        for &a in &self.adu_order {
            let len = input.adus[a].length;
            let fit = (0..self.slot_order.len())
                .find(|&k| !taken[k] && input.slots[self.slot_order[k]].max_size >= len);
            if let Some(k) = fit {
                taken[k] = true;
                out[a] = Some(self.slot_order[k]);
            }
        }
        CycleStats::default()
    }
}
