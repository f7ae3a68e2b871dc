//! Schedulers by name, as scenario, send and tunnel files name them.

use std::sync::Arc;

use thiserror::Error;

use crate::scheduler::{
    Directed, EarliestArrival, RandomWalk, RandomizedRoundRobin, Scheduler, SchedulerFactory,
};

/// The scheduler names a file may give.
pub const SCHEDULERS: &[&str] = &["rrr", "random-walk", "directed", "earliest_arrival"];

/// A scheduler name that is not one of [`SCHEDULERS`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown scheduler \"{0}\" (known: {known})", known = SCHEDULERS.join(", "))]
pub struct UnknownScheduler(pub String);

/// A factory for the scheduler called `kind`; `k` is random-walk's walk length (25 by
/// default, as in the thesis).
pub fn scheduler(kind: &str, k: Option<u32>) -> Result<SchedulerFactory, UnknownScheduler> {
    let f: SchedulerFactory = match kind {
        "rrr" => Arc::new(|| Box::new(RandomizedRoundRobin::default()) as Box<dyn Scheduler>),
        "random-walk" => Arc::new(move || {
            Box::new(k.map_or(RandomWalk::default(), |k| RandomWalk::new(k as usize)))
                as Box<dyn Scheduler>
        }),
        "directed" => Arc::new(|| Box::new(Directed::default()) as Box<dyn Scheduler>),
        "earliest_arrival" => {
            Arc::new(|| Box::new(EarliestArrival::default()) as Box<dyn Scheduler>)
        }
        other => return Err(UnknownScheduler(other.to_string())),
    };
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_builds_its_scheduler() {
        for name in SCHEDULERS {
            let make = scheduler(name, None).unwrap();
            assert_eq!(make().name(), *name);
        }
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones() {
        let e = scheduler("fifo", None).err().unwrap();
        assert_eq!(
            e.to_string(),
            "unknown scheduler \"fifo\" (known: rrr, random-walk, directed, earliest_arrival)"
        );
    }
}
