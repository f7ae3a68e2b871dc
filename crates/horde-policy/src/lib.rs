//! Horde's policy layer: what the scheduler sees (transmission slots, ADU views,
//! history), how applications say what they want (objectives, the hose language), how
//! schedules are chosen (schedulers) and how bandwidth is shared (the allocator).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod adu;
pub mod bandwidth;
mod channel_id;
pub mod hose;
pub mod objective;
pub mod scheduler;
pub mod slot;
pub mod synth;

pub use adu::{AduView, Fields, HistoryEntry, Outcome, StreamStats, Value};
pub use bandwidth::{allocate, Allocator, Demand};
pub use channel_id::{ChannelId, ChannelIdOutOfRange};
pub use objective::{
    Objective, ObjectiveId, ObjectiveSet, PreparedCache, PreparedObjective, PreparedSet, Reprepare,
    SlotReads,
};
pub use scheduler::{
    assignment_is_valid, Assignment, CycleStats, Directed, EarliestArrival, RandomWalk,
    RandomizedRoundRobin, ScheduleInput, Scheduler,
};
pub use slot::{TxSlot, CORRELATION_SPAN};
