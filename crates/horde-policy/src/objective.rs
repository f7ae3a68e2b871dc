//! Objectives: the modular pieces of an application's utility function (thesis §6.1).
//!
//! The scheduler only needs functions from a candidate schedule to a number (§6.4), so an
//! objective is anything that implements [`Objective`]. Compiled hose programs are one
//! implementation; tests and benchmarks may use hand-written ones. What an objective
//! judges is an [`Assignment`] over a [`ScheduleInput`], which lists the active
//! objectives in turn; both live here so that schedulers depend on objectives and
//! not the other way round.
//!
//! Schedulers that search cleverly also want the objective's *structure*: which ADUs
//! each part of the utility depends on and what it reads from their slots. That is
//! [`Objective::prepare`], which returns a per-cycle [`PreparedObjective`]: the utility
//! as a sum of *terms* (for hose, one term per context binding). The default treats
//! the whole objective as one opaque term over all ADUs, so hand-written objectives
//! work with every scheduler unchanged.

use std::fmt;
use std::sync::Arc;

use crate::adu::{AduView, HistoryEntry, StreamStats};
use crate::slot::TxSlot;
use crate::ChannelId;

/// Everything one scheduling cycle sees.
#[derive(Debug, Clone, Copy)]
pub struct ScheduleInput<'a> {
    /// Real slots first, then phantoms; schedulers must not depend on that order.
    pub slots: &'a [TxSlot],
    /// Candidate ADUs, already chosen by the bandwidth allocator's constraints.
    pub adus: &'a [AduView],
    /// Recent transmissions, oldest first.
    pub history: &'a [HistoryEntry],
    /// Per-stream statistics the objectives' stream variables read.
    pub streams: &'a [StreamStats],
    /// The objectives the schedule is judged by.
    pub objectives: &'a ObjectiveSet,
}

/// `assignment[i]` is the index into `slots` that ADU `i` goes in, or `None` to keep it
/// queued. No slot may be used twice, and an ADU may only go in a slot large enough.
pub type Assignment = Vec<Option<usize>>;

/// One objective: the utility it adds to a candidate schedule.
pub trait Objective: Send + Sync + fmt::Debug {
    /// Utility of `assignment` over `input` (ADUs of the schedule plus the history).
    fn utility(&self, input: &ScheduleInput<'_>, assignment: &Assignment) -> i64;

    /// A per-cycle view of this objective as a sum of terms. The sum of all terms'
    /// values for an assignment must equal [`Objective::utility`].
    fn prepare<'a>(&'a self, input: &ScheduleInput<'a>) -> Box<dyn PreparedObjective + 'a> {
        Box::new(Opaque::new(self, *input))
    }

    /// A preparation that owns everything it holds, so a scheduler can keep it and
    /// prepare it again each cycle in the same buffers ([`ObjectiveSet::prepare_reusing`]).
    /// `None` (the default) when the objective only has [`Objective::prepare`].
    fn prepare_owned(&self, _input: &ScheduleInput<'_>) -> Option<Box<dyn Reprepare>> {
        None
    }
}

/// A prepared objective that can be prepared again for a new cycle, keeping its
/// buffers: after warm-up a cycle allocates nothing.
pub trait Reprepare: PreparedObjective + Send {
    /// Prepare for the cycle over `input`; the result is as if prepared afresh.
    fn reprepare(&mut self, input: &ScheduleInput<'_>);

    /// Whether [`Reprepare::reprepare`] may reuse work of the last cycle (true, the
    /// default of implementations that can) or must redo all of it. The result is
    /// the same either way; the switch keeps the full rebuild reachable for tests
    /// and benchmarks.
    fn set_incremental(&mut self, _on: bool) {}
}

/// Which properties of its members' slots a term's value depends on (besides which
/// members are placed at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SlotReads(u8);

impl SlotReads {
    /// Reads nothing of its members' slots.
    pub const NONE: SlotReads = SlotReads(0);
    /// The member's slot through [`crate::TxSlot::loss_pct`].
    pub const LOSS: SlotReads = SlotReads(1);
    /// The member's slot through [`crate::TxSlot::latency_ms`].
    pub const LATENCY: SlotReads = SlotReads(2);
    /// Anything else: loss correlation, stream windows, the whole schedule.
    pub const OTHER: SlotReads = SlotReads(4);
    /// Reads everything: [`SlotReads::LOSS`], [`SlotReads::LATENCY`] and
    /// [`SlotReads::OTHER`].
    pub const ALL: SlotReads = SlotReads(7);

    /// What either reads.
    pub fn union(self, other: SlotReads) -> SlotReads {
        SlotReads(self.0 | other.0)
    }

    /// Whether `self` reads everything `other` does.
    pub fn contains(self, other: SlotReads) -> bool {
        self.0 & other.0 == other.0
    }

    /// The value depends on a slot only through its loss and latency percentages, so
    /// slots equal in those are interchangeable.
    pub fn is_class_separable(self) -> bool {
        !self.contains(SlotReads::OTHER)
    }
}

/// One objective prepared for one scheduling cycle: its utility as a sum of terms.
///
/// A term's value depends only on the slots of its members (ADU indices into
/// `input.adus`). An *evaluation* is one computation of one term (for hose: one run
/// of a context's goal, and its utility when the goal holds); implementations count
/// them in [`PreparedObjective::evaluations`].
pub trait PreparedObjective {
    /// Number of terms.
    fn terms(&self) -> usize;
    /// The ADUs a term's value depends on.
    fn members(&self, term: usize) -> &[u32];
    /// What the term reads from its members' slots.
    fn reads(&self, _term: usize) -> SlotReads {
        SlotReads::ALL
    }
    /// Bounds on the term's value over every assignment.
    fn bounds(&self, _term: usize) -> (i64, i64) {
        (i64::MIN, i64::MAX)
    }
    /// `Some(k)` if the term has exactly two members and its value is
    /// `K(slot of members[0], slot of members[1])` (0 unless both are placed) for a
    /// function `K` shared by every term of this objective with the same `k`.
    /// Schedulers may then tabulate `K` per slot pair.
    fn pair_kernel(&self, _term: usize) -> Option<u32> {
        None
    }
    /// `Some(k)`, with `k < solo_kernels()`, if the term has exactly one member and
    /// its value is `K(slot of members[0])` (0 while it is unplaced) for a function
    /// `K` shared by every term of this objective with the same `k`, such as a pair
    /// of a schedule ADU with a history ADU. Schedulers may then tabulate `K` per slot.
    fn solo_kernel(&self, _term: usize) -> Option<u32> {
        None
    }
    /// Whether pair kernel `k` reads its two slots only through the loss
    /// correlation between them ([`crate::TxSlot::loss_correlation_pct`], either
    /// way round), which is 0 for slots on different channels: `K` then has one
    /// value for every such pair, and a scheduler may compute it once.
    fn pair_kernel_by_correlation(&self, _k: u32) -> bool {
        false
    }
    /// Where solo kernel `k` is constant: `Some(None)` if it has one value in
    /// every slot, `Some(Some(c))` if it has one value in every slot not on
    /// channel `c` (it reads its member's slot only through the loss correlation
    /// with a slot on `c`), `None` if neither is known. A scheduler may then
    /// compute that value once.
    fn solo_kernel_off_channel(&self, _k: u32) -> Option<Option<ChannelId>> {
        None
    }
    /// How many solo kernel ids this cycle's terms may have: every
    /// [`PreparedObjective::solo_kernel`] is below it.
    fn solo_kernels(&self) -> usize {
        0
    }
    /// The term's value under `assignment`. With `cached`, the implementation may
    /// reuse a value it computed earlier this cycle from identical inputs (a cache
    /// hit is not an evaluation); the result is the same either way.
    fn value(&mut self, term: usize, assignment: &[Option<usize>], cached: bool) -> i64;
    /// Values of a term with one member, placed in each of `slots` in turn, into
    /// `out`. `assignment` is a scratch all-unplaced assignment of every ADU; it is
    /// left as it was found.
    fn values_in_slots(
        &mut self,
        term: usize,
        assignment: &mut [Option<usize>],
        slots: &[usize],
        cached: bool,
        out: &mut Vec<i64>,
    ) {
        out.clear();
        let Some(&a) = self.members(term).first() else {
            out.resize(slots.len(), 0);
            return;
        };
        let a = a as usize;
        let saved = assignment[a];
        for &s in slots {
            assignment[a] = Some(s);
            let v = self.value(term, assignment, cached);
            out.push(v);
        }
        assignment[a] = saved;
    }
    /// Evaluations performed so far.
    fn evaluations(&self) -> u64;
    /// Sum of all terms, evaluating each (no cache): equals [`Objective::utility`].
    fn utility(&mut self, assignment: &[Option<usize>]) -> i64 {
        let mut sum = 0i128;
        for t in 0..self.terms() {
            sum += i128::from(self.value(t, assignment, false));
        }
        clamp(sum)
    }
}

/// Saturate an exact sum into i64.
pub(crate) fn clamp(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// The default structure: one term over every ADU, evaluated by calling
/// [`Objective::utility`].
struct Opaque<'a, O: ?Sized> {
    objective: &'a O,
    input: ScheduleInput<'a>,
    members: Vec<u32>,
    scratch: Assignment,
    evaluations: u64,
}

impl<'a, O: Objective + ?Sized> Opaque<'a, O> {
    fn new(objective: &'a O, input: ScheduleInput<'a>) -> Self {
        let n = u32::try_from(input.adus.len()).unwrap_or(u32::MAX);
        Opaque {
            objective,
            input,
            members: (0..n).collect(),
            scratch: Vec::new(),
            evaluations: 0,
        }
    }
}

impl<O: Objective + ?Sized> PreparedObjective for Opaque<'_, O> {
    fn terms(&self) -> usize {
        1
    }

    fn members(&self, _term: usize) -> &[u32] {
        &self.members
    }

    fn value(&mut self, _term: usize, assignment: &[Option<usize>], _cached: bool) -> i64 {
        self.evaluations += 1;
        self.scratch.clear();
        self.scratch.extend_from_slice(assignment);
        self.objective.utility(&self.input, &self.scratch)
    }

    fn evaluations(&self) -> u64 {
        self.evaluations
    }
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
    /// No objectives.
    pub fn new() -> Self {
        Self::default()
    }

    /// Activate an objective; the id withdraws it later.
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

    /// Whether no objective is active (a cycle then needs no history).
    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    /// How many objectives are active.
    pub fn len(&self) -> usize {
        self.active.len()
    }

    /// The active objectives, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Objective>> {
        self.active.iter().map(|(_, o)| o)
    }

    /// Sum of every active objective's utility for `assignment` (thesis `evaluate_objectives`).
    /// Saturates instead of overflowing.
    pub fn utility(&self, input: &ScheduleInput<'_>, assignment: &Assignment) -> i64 {
        clamp(
            self.active
                .iter()
                .map(|(_, o)| i128::from(o.utility(input, assignment)))
                .sum(),
        )
    }

    /// Prepare every active objective for one cycle over `input`.
    pub fn prepare<'a>(&'a self, input: &ScheduleInput<'a>) -> PreparedSet<'a> {
        PreparedSet {
            objectives: Prepared::Fresh(
                self.active.iter().map(|(_, o)| o.prepare(input)).collect(),
            ),
        }
    }

    /// As [`ObjectiveSet::prepare`], but kept in `cache` and prepared again in its
    /// buffers while the same objectives stay active: no allocation at steady state.
    /// Falls back to [`ObjectiveSet::prepare`] when an objective has no owned
    /// preparation ([`Objective::prepare_owned`]).
    pub fn prepare_reusing<'a>(
        &'a self,
        input: &ScheduleInput<'a>,
        cache: &'a mut PreparedCache,
    ) -> PreparedSet<'a> {
        // An objective that cannot be kept stays unkeepable: skip straight to fresh
        // preparation while it is active, instead of rebuilding the cache every cycle.
        if let Some(x) = &cache.unkeepable {
            if self.active.iter().any(|(_, o)| same_objective(o, x)) {
                return self.prepare(input);
            }
            cache.unkeepable = None;
        }
        let incremental = !cache.full_rebuild;
        let same = cache.entries.len() == self.active.len()
            && cache
                .entries
                .iter()
                .zip(&self.active)
                .all(|((c, _), (_, o))| same_objective(c, o));
        if same {
            for (_, p) in cache.entries.iter_mut() {
                p.set_incremental(incremental);
                p.reprepare(input);
            }
        } else if !cache.rebuild(&self.active, input) {
            return self.prepare(input);
        }
        PreparedSet {
            objectives: Prepared::Reused(&mut cache.entries),
        }
    }
}

/// The same objective: the cache holds a clone of the `Arc`, so its address cannot
/// be reused by another while cached.
fn same_objective(a: &Arc<dyn Objective>, b: &Arc<dyn Objective>) -> bool {
    std::ptr::eq(Arc::as_ptr(a) as *const (), Arc::as_ptr(b) as *const ())
}

/// One kept preparation and the objective it belongs to.
type Kept = (Arc<dyn Objective>, Box<dyn Reprepare>);

/// Preparations kept across cycles by [`ObjectiveSet::prepare_reusing`], one per
/// active objective, in the set's order.
#[derive(Default)]
pub struct PreparedCache {
    entries: Vec<Kept>,
    /// An active objective without an owned preparation, when there is one.
    unkeepable: Option<Arc<dyn Objective>>,
    /// Prepare every cycle from scratch instead of reusing the last cycle's work
    /// ([`Reprepare::set_incremental`]).
    full_rebuild: bool,
}

impl PreparedCache {
    /// Redo every preparation in full each cycle (`true`) or let the preparations
    /// reuse the last cycle's work where they can (`false`, the default). Schedules
    /// are the same either way.
    pub fn set_full_rebuild(&mut self, full: bool) {
        self.full_rebuild = full;
    }

    /// Match the active objectives again after the set changed: keep the entries of
    /// objectives still active, prepare the new ones. Returns false (and empties the
    /// cache) if some objective has no owned preparation.
    fn rebuild(
        &mut self,
        active: &[(ObjectiveId, Arc<dyn Objective>)],
        input: &ScheduleInput<'_>,
    ) -> bool {
        let mut old = std::mem::take(&mut self.entries);
        for (_, o) in active {
            match old.iter().position(|(c, _)| same_objective(c, o)) {
                Some(i) => {
                    let (c, mut p) = old.swap_remove(i);
                    p.set_incremental(!self.full_rebuild);
                    p.reprepare(input);
                    self.entries.push((c, p));
                }
                None => match o.prepare_owned(input) {
                    Some(mut p) => {
                        p.set_incremental(!self.full_rebuild);
                        self.entries.push((Arc::clone(o), p));
                    }
                    None => {
                        self.entries.clear();
                        self.unkeepable = Some(Arc::clone(o));
                        return false;
                    }
                },
            }
        }
        true
    }
}

impl fmt::Debug for PreparedCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedCache")
            .field("objectives", &self.entries.len())
            .finish()
    }
}

/// Where a [`PreparedSet`]'s objectives live.
enum Prepared<'a> {
    /// Prepared for this cycle only.
    Fresh(Vec<Box<dyn PreparedObjective + 'a>>),
    /// Kept in a [`PreparedCache`].
    Reused(&'a mut [Kept]),
}

/// Every active objective prepared for one cycle.
pub struct PreparedSet<'a> {
    objectives: Prepared<'a>,
}

impl<'a> PreparedSet<'a> {
    /// Number of objectives.
    pub fn len(&self) -> usize {
        match &self.objectives {
            Prepared::Fresh(v) => v.len(),
            Prepared::Reused(v) => v.len(),
        }
    }

    /// Whether there are no objectives.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Objective `o`, in the set's order.
    pub fn get(&mut self, o: usize) -> &mut dyn PreparedObjective {
        match &mut self.objectives {
            Prepared::Fresh(v) => &mut *v[o],
            Prepared::Reused(v) => &mut *v[o].1,
        }
    }

    /// Every objective, in the set's order.
    pub fn iter_mut<'s>(
        &'s mut self,
    ) -> impl Iterator<Item = &'s mut (dyn PreparedObjective + 's)> + use<'a, 's> {
        let (fresh, reused) = match &mut self.objectives {
            Prepared::Fresh(v) => (Some(v.iter_mut()), None),
            Prepared::Reused(v) => (None, Some(v.iter_mut())),
        };
        let fresh = fresh
            .into_iter()
            .flatten()
            .map(|b| &mut **b as &mut dyn PreparedObjective);
        let reused = reused
            .into_iter()
            .flatten()
            .map(|(_, b)| &mut **b as &mut dyn PreparedObjective);
        fresh.chain(reused)
    }

    /// Equals [`ObjectiveSet::utility`] for the same input and assignment.
    pub fn utility(&mut self, assignment: &[Option<usize>]) -> i64 {
        clamp(
            self.iter_mut()
                .map(|o| i128::from(o.utility(assignment)))
                .sum(),
        )
    }

    /// Evaluations performed by all objectives so far.
    pub fn evaluations(&self) -> u64 {
        match &self.objectives {
            Prepared::Fresh(v) => v.iter().map(|o| o.evaluations()).sum(),
            Prepared::Reused(v) => v.iter().map(|(_, o)| o.evaluations()).sum(),
        }
    }
}

impl fmt::Debug for PreparedSet<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedSet")
            .field("objectives", &self.len())
            .finish()
    }
}
