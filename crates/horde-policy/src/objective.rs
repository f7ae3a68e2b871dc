//! Objectives: the modular pieces of an application's utility function (thesis §6.1).
//!
//! The scheduler only needs functions from a candidate schedule to a number (§6.4), so an
//! objective is anything that implements [`Objective`]. Compiled hose programs are one
//! implementation; tests and benchmarks may use hand-written ones.

use std::fmt;
use std::sync::Arc;

use crate::scheduler::{Assignment, ScheduleInput};

/// One objective: the utility it adds to a candidate schedule.
pub trait Objective: Send + Sync + fmt::Debug {
    /// Utility of `assignment` over `input` (ADUs of the schedule plus the history).
    fn utility(&self, input: &ScheduleInput<'_>, assignment: &Assignment) -> i64;
}

/// Handle of an objective inside an [`ObjectiveSet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectiveId(pub u64);

/// The active objectives. Injected and removed at run time (time-varying utility).
#[derive(Debug, Default, Clone)]
pub struct ObjectiveSet {
    next_id: u64,
    active: Vec<(ObjectiveId, Arc<dyn Objective>)>,
}

impl ObjectiveSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn inject(&mut self, objective: Arc<dyn Objective>) -> ObjectiveId {
        let id = ObjectiveId(self.next_id);
        self.next_id += 1;
        self.active.push((id, objective));
        id
    }

    /// Remove an objective; returns whether it was active.
    pub fn remove(&mut self, id: ObjectiveId) -> bool {
        let before = self.active.len();
        self.active.retain(|(i, _)| *i != id);
        self.active.len() != before
    }

    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    pub fn len(&self) -> usize {
        self.active.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Objective>> {
        self.active.iter().map(|(_, o)| o)
    }

    /// Sum of every active objective's utility for `assignment` (thesis `evaluate_objectives`).
    pub fn utility(&self, input: &ScheduleInput<'_>, assignment: &Assignment) -> i64 {
        self.active
            .iter()
            .map(|(_, o)| o.utility(input, assignment))
            .sum()
    }
}
