//! Horde's policy layer: what the scheduler sees (transmission slots, ADU views,
//! history), what an objective is (the trait; the hose language that compiles to it is
//! `horde-hose`), how schedules are chosen (schedulers) and how bandwidth is shared
//! (the allocator).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod adu;
pub mod bandwidth;
mod channel_id;
pub mod objective;
pub mod registry;
pub mod scheduler;
pub mod slot;
#[cfg(any(test, feature = "testing"))]
pub mod synth;

pub use adu::{AduView, Fields, HistoryEntry, Outcome, StreamStats, Value};
pub use bandwidth::{allocate, Allocator, Demand};
pub use channel_id::{ChannelId, ChannelIdOutOfRange};
pub use objective::{
    Assignment, Objective, ObjectiveId, ObjectiveSet, PreparedCache, PreparedObjective,
    PreparedSet, Reprepare, ScheduleInput, SlotReads,
};
pub use scheduler::{
    assignment_is_valid, CycleStats, Directed, EarliestArrival, RandomWalk, RandomizedRoundRobin,
    Scheduler, SchedulerFactory,
};
pub use slot::{TxSlot, CORRELATION_SPAN};
