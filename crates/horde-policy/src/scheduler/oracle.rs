//! Exhaustive search over every schedule of a small instance: the yardstick for
//! how close a scheduler gets to the best schedule.

use super::matching::max_placeable;
use super::{Assignment, ScheduleInput};
use crate::objective::PreparedSet;

/// Largest instance (in slots and in ADUs) [`exhaustive`] accepts: 8! = 40,320 schedules.
pub const MAX_SLOTS: usize = 8;

/// The best and worst utility over every valid schedule that places as many ADUs
/// as possible (the space every scheduler here searches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Optimum {
    /// Highest total utility of any such schedule.
    pub best: i64,
    /// Lowest total utility of any such schedule.
    pub worst: i64,
    /// A schedule reaching `best`.
    pub assignment: Assignment,
    /// How many schedules were scored.
    pub schedules: u64,
}

impl Optimum {
    /// Where `utility` falls between the worst and the best schedule, in [0, 1]
    /// when it comes from the same space (1 when every schedule is equally good).
    /// Unlike `utility / best` this is meaningful when utilities are negative.
    pub fn fraction(&self, utility: i64) -> f64 {
        if self.best == self.worst {
            1.0
        } else {
            (utility as f64 - self.worst as f64) / (self.best as f64 - self.worst as f64)
        }
    }
}

/// Score every schedule; `None` if the instance has more than [`MAX_SLOTS`] slots
/// or ADUs.
pub fn exhaustive(input: &ScheduleInput<'_>) -> Option<Optimum> {
    let (n, m) = (input.adus.len(), input.slots.len());
    if n > MAX_SLOTS || m > MAX_SLOTS {
        return None;
    }
    let mut search = Search {
        input,
        set: input.objectives.prepare(input),
        need: max_placeable(input),
        work: vec![None; n],
        used: vec![false; m],
        best: None,
        worst: i64::MAX,
        schedules: 0,
    };
    search.go(0, 0);
    let (best, assignment) = search.best?;
    Some(Optimum {
        best,
        worst: search.worst,
        assignment,
        schedules: search.schedules,
    })
}

struct Search<'i, 'a> {
    input: &'i ScheduleInput<'a>,
    set: PreparedSet<'a>,
    need: usize,
    work: Assignment,
    used: Vec<bool>,
    best: Option<(i64, Assignment)>,
    worst: i64,
    schedules: u64,
}

impl Search<'_, '_> {
    fn go(&mut self, i: usize, placed: usize) {
        let n = self.work.len();
        if i == n {
            if placed == self.need {
                let u = self.set.utility(&self.work);
                self.schedules += 1;
                self.worst = self.worst.min(u);
                match &self.best {
                    Some((b, _)) if *b >= u => {}
                    _ => self.best = Some((u, self.work.clone())),
                }
            }
            return;
        }
        let len = self.input.adus[i].length;
        for s in 0..self.used.len() {
            if !self.used[s] && self.input.slots[s].max_size >= len {
                self.used[s] = true;
                self.work[i] = Some(s);
                self.go(i + 1, placed + 1);
                self.work[i] = None;
                self.used[s] = false;
            }
        }
        // Leave ADU i out only if the rest can still reach the most placeable.
        if placed + (n - i - 1) >= self.need {
            self.go(i + 1, placed);
        }
    }
}
