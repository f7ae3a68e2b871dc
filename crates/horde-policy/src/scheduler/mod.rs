//! The scheduler interface (thesis §6.3): slots + ADUs + objectives + history in,
//! an ADU-to-slot assignment out.

use std::sync::Arc;

use rand::RngCore;

use crate::objective::{Assignment, ScheduleInput};

mod directed;
mod earliest_arrival;
mod hungarian;
mod lazy_table;
mod local_search;
mod matching;
mod model;
pub mod oracle;
mod random_walk;
mod rrr;

pub use directed::Directed;
pub use earliest_arrival::EarliestArrival;
pub use random_walk::RandomWalk;
pub use rrr::RandomizedRoundRobin;

/// What one cycle cost, for benchmarks and reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CycleStats {
    /// Objective evaluations: one per computation of one objective term (for hose,
    /// one run of one context's goal, plus its utility when the goal holds; for an
    /// objective without structure, one call of `Objective::utility`). Every
    /// scheduler counts the same way; see `docs/schedulers.md`.
    pub evaluations: u64,
}

/// A striping scheduler.
pub trait Scheduler: Send {
    /// A short name for logs and reports (`rrr`, `random-walk`, ...).
    fn name(&self) -> &'static str;
    /// Fill `out` (resized to `input.adus.len()`) with an assignment.
    fn schedule(
        &mut self,
        input: &ScheduleInput<'_>,
        rng: &mut dyn RngCore,
        out: &mut Assignment,
    ) -> CycleStats;
    /// Whether the scheduler has its own reason to leave an ADU on a phantom slot when
    /// no objective is active (a path-delay estimate, say). The session keeps such ADUs
    /// queued for the better slot, within the stream's deferral budget; for the others
    /// no objective means no reason to wait.
    fn waits_without_objectives(&self) -> bool {
        false
    }
}

/// Builds a scheduler for each new session.
pub type SchedulerFactory = Arc<dyn Fn() -> Box<dyn Scheduler> + Send + Sync>;

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
