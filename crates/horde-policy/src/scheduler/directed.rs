//! `Directed`: an objective-driven scheduler that uses the objectives' structure
//! instead of sampling schedules blindly.
//!
//! 1. Every objective is prepared for the cycle and split into terms.
//! 2. Terms over a single ADU that read only its slot's loss and latency form a
//!    utility matrix `U[adu][slot]`. Each objective groups slots into classes that
//!    are equal in what its terms read, so each such term is evaluated once per
//!    class, not once per slot.
//! 3. The Hungarian algorithm places the ADUs that have such terms optimally for
//!    `U`; the others fill the remaining slots at random (randomized round-robin for
//!    streams nobody cares about).
//! 4. A local search over swaps and moves improves the remaining *higher* terms
//!    (pairs such as X4, stream windows, opaque objectives), re-evaluating only the
//!    terms a move touches and skipping moves that the terms' bounds say cannot pay.

use rand::seq::SliceRandom;
use rand::RngCore;

use super::hungarian::{Hungarian, FORBIDDEN};
use super::local_search::LocalSearch;
use super::matching::{all_fit, max_placeable, RandomMatcher};
use super::model::{Model, NO_KERNEL};
use super::{Assignment, CycleStats, ScheduleInput, Scheduler};
use crate::objective::{PreparedCache, PreparedSet, SlotReads};

/// Unary utilities enter the assignment solver clamped to this magnitude, which
/// keeps its arithmetic exact; the local search uses exact values.
const U_CLAMP: i64 = 1 << 31;

/// Each objective's unary utility is clamped to this before rows are summed, so
/// up to 2^12 objectives cannot overflow.
const TERM_CLAMP: i64 = 1 << 50;

/// Pair kernels are tabulated per slot pair only up to this many slots.
const MAX_KERNEL_SLOTS: usize = 256;

/// The default search budget.
pub const DEFAULT_SEARCH_BUDGET: usize = 6_000;

/// The budget of [`Directed::fast`]: with the first values of X4's 752 terms it
/// leaves about 750 units of moves at 32 + 32 slots, which keeps the session's
/// cycle under 100 µs of CPU (docs/schedulers.md, "Effort where the utility is").
pub const FAST_SEARCH_BUDGET: usize = 1_500;

/// Past this size the assignment solver is skipped for a random start.
const MAX_SOLVER_WORK: usize = 1 << 28;

/// The directed scheduler; see the module documentation and `docs/schedulers.md`.
#[derive(Debug)]
pub struct Directed {
    /// Local-search passes over the ADUs that have higher terms (32).
    pub max_passes: usize,
    /// Ceiling on the term computations (cached or not) the local search may
    /// spend, the first value of every higher term included (6000; 1500 in
    /// [`Directed::fast`]). The work is counted, not timed, so a seeded run
    /// repeats exactly.
    pub search_budget: usize,
    /// Search the ADUs with the most utility still open first (true, in
    /// [`Directed::fast`]) instead of in random order (false, the default). The
    /// budget seldom lasts one whole pass at 32 + 32 slots, so the order decides
    /// which ADUs are searched at all (docs/schedulers.md, "Effort where the
    /// utility is").
    pub open_first: bool,
    /// If set, search work per member of each higher term below its upper bound
    /// after placement: the budget becomes the terms' first values plus this much
    /// per such member, capped by `search_budget`. Off by default: at 12 it keeps
    /// the session cycle at N = 32 under 100 µs but weakens X4 in the thesis's S4
    /// (docs/schedulers.md, "A budget that follows the open terms").
    pub search_per_member: Option<usize>,
    /// Rebuild the objectives' preparations in full every cycle (false by
    /// default, [`Directed::full_rebuild`]) instead of renumbering the contexts
    /// of ADUs that stay queued. The schedules are the same; the full rebuild is
    /// kept to check that and to measure what the reuse saves.
    pub full_rebuild: bool,
    hungarian: Hungarian,
    search: LocalSearch,
    matcher: RandomMatcher,
    rows: Vec<usize>,
    cols: Vec<Option<usize>>,
    costs: Vec<i64>,
    buf: Vec<usize>,
    class_vals: Vec<i64>,
    term_vals: Vec<i64>,
    /// Per slot: (loss percent, latency ms), what class-separable terms read.
    slot_keys: Vec<(i64, i64)>,
    class_of: Vec<u32>,
    reps: Vec<usize>,
    unary: Vec<(u32, u32)>,
    degree: Vec<u32>,
    fill: Vec<u32>,
    taken: Vec<bool>,
    rest: Vec<usize>,
    /// The objectives' preparations and the model, kept to reuse their memory.
    cache: PreparedCache,
    model: Model,
}

impl Default for Directed {
    fn default() -> Self {
        Directed {
            max_passes: 32,
            search_budget: DEFAULT_SEARCH_BUDGET,
            open_first: false,
            search_per_member: None,
            full_rebuild: false,
            hungarian: Hungarian::default(),
            search: LocalSearch::default(),
            matcher: RandomMatcher::default(),
            rows: Vec::new(),
            cols: Vec::new(),
            costs: Vec::new(),
            buf: Vec::new(),
            class_vals: Vec::new(),
            term_vals: Vec::new(),
            slot_keys: Vec::new(),
            class_of: Vec::new(),
            reps: Vec::new(),
            unary: Vec::new(),
            degree: Vec::new(),
            fill: Vec::new(),
            taken: Vec::new(),
            rest: Vec::new(),
            cache: PreparedCache::default(),
            model: Model::default(),
        }
    }
}

impl Directed {
    /// A search of 1500 units, the ADUs with the most open utility first: about
    /// 60 µs less per session cycle at 32 + 32 slots (under 100 µs), some 3% less
    /// utility per cycle on the benchmark instances, X4 stronger in the thesis's
    /// S4, but more I-frames lost in the demo scenario, so not the default
    /// (docs/schedulers.md, "Effort where the utility is").
    pub fn fast() -> Self {
        Directed {
            search_budget: FAST_SEARCH_BUDGET,
            open_first: true,
            ..Directed::default()
        }
    }

    /// The default search with every cycle's preparation rebuilt in full: the
    /// same schedules as [`Directed::default`], at the cost of the scheduler
    /// before contexts were kept across cycles.
    pub fn full_rebuild() -> Self {
        Directed {
            full_rebuild: true,
            ..Directed::default()
        }
    }

    /// Fill `model` (its old contents are dropped, its memory kept).
    fn build(
        &mut self,
        set: &mut PreparedSet<'_>,
        input: &ScheduleInput<'_>,
        work: &mut Assignment,
        model: &mut Model,
    ) {
        let (n, m) = (input.adus.len(), input.slots.len());
        model.clear(n, m);
        self.degree.clear();
        self.degree.resize(n + 1, 0);
        work.clear();
        work.resize(n, None);
        self.slot_keys.clear();
        self.slot_keys
            .extend(input.slots.iter().map(|s| (s.loss_pct(), s.latency_ms())));
        for oi in 0..set.len() {
            let o = set.get(oi);
            self.unary.clear();
            let mut reads = SlotReads::NONE;
            for t in 0..o.terms() {
                let members = o.members(t);
                let r = o.reads(t);
                if members.len() == 1 && r.is_class_separable() {
                    self.unary.push((members[0], t as u32));
                    reads = reads.union(r);
                } else if !members.is_empty() {
                    model.terms.push((oi as u32, t as u32));
                    model.hi.push(o.bounds(t).1);
                    for &a in members {
                        self.degree[a as usize] += 1;
                    }
                    model.members.extend_from_slice(members);
                    model.members_start.push(model.members.len() as u32);
                    let (kernel, pair) = match o.pair_kernel(t) {
                        Some(k) if members.len() == 2 && m <= MAX_KERNEL_SLOTS => {
                            let pair = [members[0], members[1]];
                            let id = (oi as u32, k);
                            let found = model.kernel_ids.iter().position(|&x| x == id);
                            let index = found.unwrap_or_else(|| {
                                model.kernels.push((oi as u32, t as u32));
                                model.kernel_ids.push(id);
                                model.kernel_pair.push(pair);
                                model
                                    .kernel_by_correlation
                                    .push(o.pair_kernel_by_correlation(k));
                                model.kernels.len() - 1
                            });
                            (index as u32, pair)
                        }
                        _ => (NO_KERNEL, [0, 0]),
                    };
                    model.kernel.push(kernel);
                    model.pair.push(pair);
                }
            }
            if self.unary.is_empty() {
                continue;
            }
            self.classes(reads);
            self.unary.sort_unstable();
            let mut i = 0;
            while i < self.unary.len() {
                let a = self.unary[i].0 as usize;
                let end = i + self.unary[i..]
                    .iter()
                    .take_while(|x| x.0 as usize == a)
                    .count();
                model.unary_adu[a] = true;
                self.class_vals.clear();
                self.class_vals.resize(self.reps.len(), 0);
                for &(_, t) in &self.unary[i..end] {
                    o.values_in_slots(t as usize, work, &self.reps, true, &mut self.term_vals);
                    for (c, v) in self.class_vals.iter_mut().zip(&self.term_vals) {
                        *c = c.saturating_add(*v);
                    }
                }
                // Clamped per objective, so rows add up without overflow checks.
                for c in &mut self.class_vals {
                    *c = (*c).clamp(-TERM_CLAMP, TERM_CLAMP);
                }
                let row = &mut model.u[a * m..(a + 1) * m];
                for (cell, &c) in row.iter_mut().zip(&self.class_of) {
                    *cell += self.class_vals[c as usize];
                }
                i = end;
            }
        }
        // Adjacency: ADU -> higher terms containing it.
        let start = &mut model.adj_start;
        start.clear();
        start.resize(n + 1, 0);
        for a in 0..n {
            start[a + 1] = start[a] + self.degree[a];
        }
        self.fill.clear();
        self.fill.extend_from_slice(start);
        model.adj.clear();
        model.adj.resize(start[n] as usize, 0);
        for h in 0..model.terms.len() {
            let (lo, hi) = (model.members_start[h], model.members_start[h + 1]);
            for &a in &model.members[lo as usize..hi as usize] {
                let a = a as usize;
                model.adj[self.fill[a] as usize] = h as u32;
                self.fill[a] += 1;
            }
        }
    }

    /// Group slots that are equal in what the terms read; `reps` holds one slot of
    /// each class and `class_of` each slot's class.
    fn classes(&mut self, reads: SlotReads) {
        let loss = reads.contains(SlotReads::LOSS);
        let latency = reads.contains(SlotReads::LATENCY);
        let keys = &self.slot_keys;
        let key = |s: usize| {
            let (l, t) = keys[s];
            (if loss { l } else { 0 }, if latency { t } else { 0 })
        };
        self.buf.clear();
        self.buf.extend(0..keys.len());
        self.buf.sort_unstable_by_key(|&s| key(s));
        self.class_of.clear();
        self.class_of.resize(keys.len(), 0);
        self.reps.clear();
        let mut last = None;
        for &s in &self.buf {
            let k = key(s);
            if last != Some(k) {
                last = Some(k);
                self.reps.push(s);
            }
            self.class_of[s] = (self.reps.len() - 1) as u32;
        }
    }

    /// Place ADUs optimally for the unary matrix; everyone else at random.
    fn place(
        &mut self,
        model: &Model,
        input: &ScheduleInput<'_>,
        rng: &mut dyn RngCore,
        work: &mut Assignment,
    ) {
        let (n, m) = (model.n, model.m);
        work.clear();
        work.resize(n, None);
        let target = max_placeable(input);
        let uniform = all_fit(input);
        self.rows.clear();
        if uniform {
            self.rows.extend((0..n).filter(|&a| model.unary_adu[a]));
        } else {
            self.rows.extend(0..n);
        }
        let r = self.rows.len();
        // Spare columns let ADUs stay out when there are more ADUs than slots.
        let spare = if uniform { n - target } else { n };
        let cols = m + spare;
        if r > 0 && r.saturating_mul(r).saturating_mul(cols) <= MAX_SOLVER_WORK {
            // Leaving an ADU out costs more than any utility, so the most ADUs are
            // placed whenever sizes make the choice.
            let out_cost = if uniform {
                0
            } else {
                2 * U_CLAMP * (n as i64 + 1) + 1
            };
            // Dense costs, forbidden where the ADU does not fit the slot.
            self.costs.clear();
            for &a in &self.rows {
                let len = input.adus[a].length;
                let row = &model.u[a * m..(a + 1) * m];
                for (j, &u) in row.iter().enumerate() {
                    self.costs
                        .push(if uniform || input.slots[j].max_size >= len {
                            -u.clamp(-U_CLAMP, U_CLAMP)
                        } else {
                            FORBIDDEN
                        });
                }
                self.costs.extend(std::iter::repeat_n(out_cost, cols - m));
            }
            self.hungarian.solve(r, cols, &self.costs, &mut self.cols);
            for (i, c) in self.cols.iter().enumerate() {
                if let Some(j) = *c {
                    if j < m {
                        work[self.rows[i]] = Some(j);
                    }
                }
            }
        } else if r > 0 {
            self.matcher.fill(input, rng, work);
            return;
        }
        // The rest fill the remaining slots at random.
        let taken = &mut self.taken;
        taken.clear();
        taken.resize(m, false);
        let mut placed = 0;
        for s in work.iter().flatten() {
            taken[*s] = true;
            placed += 1;
        }
        self.buf.clear();
        self.buf.extend((0..m).filter(|&s| !taken[s]));
        self.buf.shuffle(rng);
        // Rows the solver left out stay out: it chose them as the cheapest to drop.
        let solved = if uniform { &model.unary_adu[..] } else { &[] };
        self.rest.clear();
        self.rest.extend(
            (0..n).filter(|&a| work[a].is_none() && !solved.get(a).copied().unwrap_or(false)),
        );
        self.rest.shuffle(rng);
        for &a in &self.rest {
            if placed >= target {
                break;
            }
            let len = input.adus[a].length;
            if let Some(k) = self
                .buf
                .iter()
                .position(|&s| input.slots[s].max_size >= len)
            {
                work[a] = Some(self.buf.swap_remove(k));
                placed += 1;
            }
        }
    }
}

impl Scheduler for Directed {
    fn name(&self) -> &'static str {
        "directed"
    }

    fn schedule(
        &mut self,
        input: &ScheduleInput<'_>,
        rng: &mut dyn RngCore,
        out: &mut Assignment,
    ) -> CycleStats {
        if input.objectives.is_empty() || input.adus.is_empty() || input.slots.is_empty() {
            self.matcher.fill(input, rng, out);
            return CycleStats::default();
        }
        // Taken out of `self` for the cycle so that `self` stays free to borrow.
        let mut cache = std::mem::take(&mut self.cache);
        let mut model = std::mem::take(&mut self.model);
        cache.set_full_rebuild(self.full_rebuild);
        let mut set = input.objectives.prepare_reusing(input, &mut cache);
        self.build(&mut set, input, out, &mut model);
        self.place(&model, input, rng, out);
        // Only a search with budget left after the terms' first values reads a
        // solo kernel twice.
        if model.terms.len() < self.search_budget {
            model.find_solo_kernels(&mut set);
        } else {
            model.without_solo_kernels();
        }
        self.search.improve(
            &model,
            &mut set,
            input,
            out,
            rng,
            self.max_passes,
            self.open_first,
            self.search_per_member,
            self.search_budget,
        );
        debug_assert!(super::assignment_is_valid(input, out));
        let evaluations = set.evaluations();
        drop(set);
        self.cache = cache;
        self.model = model;
        CycleStats { evaluations }
    }
}
