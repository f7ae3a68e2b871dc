//! The sending side of a session: the send streams, the scheduler and its objectives,
//! and what the scheduling cycle keeps from one cycle to the next.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use horde_policy::{HistoryEntry, ObjectiveSet, RandomizedRoundRobin, Scheduler};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::plan::SlotPlan;
use super::scratch::CycleScratch;
use crate::fair_share::FairShare;
use crate::latency::{LatencySteering, Objective, ACTIVE_HOLD};
use crate::stream::SendStream;

/// The send streams and everything that decides what they send when.
pub(super) struct Sender {
    pub(super) streams: BTreeMap<u32, SendStream>,
    pub(super) scheduler: Box<dyn Scheduler>,
    pub(super) objectives: ObjectiveSet,
    /// Transmissions kept for objective contexts; `history_base` is the absolute index
    /// of the first.
    pub(super) history: VecDeque<HistoryEntry>,
    pub(super) history_base: u64,
    /// The scheduler's randomness, seeded from the configuration.
    pub(super) rng: ChaCha8Rng,
    pub(super) next_adu_id: u64,
    pub(super) next_cycle: Duration,
    /// A periodic session starts no refill cycle before this (see `Session::refill_due`).
    pub(super) refill_after: Duration,
    pub(super) last_refill: Duration,
    pub(super) cycle: CycleScratch,
    pub(super) fair_share: FairShare,
    /// Per stream: payload bytes of its allocation it has not been sent while it had
    /// ADUs waiting, less the common shortfall of the streams at the fair-share level
    /// (see [`Sender::track_debt`]). Unlike credit, never
    /// capped: it is what the fairness pass checks before letting a stream wait for
    /// phantom slots.
    pub(super) debt: BTreeMap<u32, f64>,
    /// Packets a periodic cycle put in slots later in its period, until they are due.
    pub(super) plan: SlotPlan,
    /// Which channels the latency-bound streams keep short, and their ADUs on them.
    pub(super) latency: LatencySteering,
}

impl Sender {
    pub(super) fn new(seed: u64, now: Duration) -> Self {
        Self {
            streams: BTreeMap::new(),
            scheduler: Box::new(RandomizedRoundRobin::default()),
            objectives: ObjectiveSet::new(),
            history: VecDeque::new(),
            history_base: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            next_adu_id: 0,
            next_cycle: now,
            refill_after: now,
            last_refill: now,
            cycle: CycleScratch::default(),
            fair_share: FairShare::default(),
            debt: BTreeMap::new(),
            plan: SlotPlan::default(),
            latency: LatencySteering::default(),
        }
    }

    /// The tightest latency bound of the streams that have one and are active (ADUs
    /// queued, or one queued within `ACTIVE_HOLD`), with their summed allocation in
    /// bytes/s and whether all of them send copies; `None` if there is no such stream.
    pub(super) fn latency_objective(&self, now: Duration) -> Option<Objective> {
        let mut objective: Option<Objective> = None;
        for s in self.streams.values() {
            let Some(ms) = s.config.latency_bound_ms else {
                continue;
            };
            let active = !s.queue.is_empty()
                || s.last_queued
                    .is_some_and(|t| now.saturating_sub(t) < ACTIVE_HOLD);
            if !active {
                continue;
            }
            let bound = Duration::from_secs_f64(ms / 1e3);
            let o = objective.get_or_insert(Objective {
                bound,
                need: 0.0,
                copies: true,
            });
            o.bound = o.bound.min(bound);
            o.need += s.allocation;
            o.copies &= s.config.latency_copies == 2;
        }
        objective
    }

    /// Whether an ADU of a latency-bound stream waits while channels are bounded for it:
    /// their reserved slots are then open to it (`Channel::reserved_slot_count`).
    pub(super) fn bound_waiting(&self) -> bool {
        !self.latency.bounded().is_empty()
            && self
                .streams
                .values()
                .any(|s| s.config.latency_bound_ms.is_some() && !s.queue.is_empty())
    }

    /// Whether any stream has ADUs waiting.
    pub(super) fn has_queued(&self) -> bool {
        self.streams.values().any(|s| !s.queue.is_empty())
    }
}
