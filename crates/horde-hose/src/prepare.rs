//! A compiled objective prepared for one scheduling cycle.
//!
//! Context filters read only definite ADU fields, never slots, so the set of
//! contexts does not depend on the candidate schedule: it is enumerated once per
//! cycle here, over the schedule's ADUs (rows `0..n`) and the history (rows `n..`).
//! Each context becomes one term; evaluating a term for an assignment only reads the
//! slots of its members.
//!
//! A preparation owns copies of what it reads (no borrow of the cycle's input), so a
//! scheduler can keep it and prepare it again next cycle in the same buffers.

use std::sync::Arc;

use horde_policy::adu::{HistoryEntry, Outcome, StreamStats};
use horde_policy::objective::{PreparedObjective, Reprepare, ScheduleInput, SlotReads};
use horde_policy::slot::{percent, round_ms, TxSlot, CORRELATION_SPAN};
use horde_policy::{ChannelId, Value};

use crate::eval::{boolean, contribution, Env, FieldVal, PreVals, StreamVals};
use crate::ir::{Atom, Bool, CmpOp, Num, PreField, ProgramIr, Scalar, Var, VarIr, MAX_VARS};
use crate::memo::{Key, Memo};
use crate::window::Window;

/// Most contexts enumerated per objective per cycle; the rest are ignored.
pub const MAX_CONTEXTS: usize = 1 << 16;

/// Cache misses after which an objective whose cache hits less often than it
/// misses stops caching for the rest of the cycle.
const MEMO_TRIAL: u32 = 64;

/// Marks a term that is not a pair kernel.
const NO_KERNEL: u32 = u32::MAX;

/// Marks a stream variable's entry in a binding.
const NO_ROW: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemoMode {
    /// The value depends only on the atoms: one cache for all terms.
    Shared,
    /// The value also depends on the term's own ADU fields.
    PerTerm,
    /// Stream fields (the whole window) or too many atoms: never cached.
    Off,
}

/// What `correlated_loss` needs of a slot, in integers.
#[derive(Debug, Clone, Copy)]
struct CorrInfo {
    channel: ChannelId,
    sequence: u64,
    /// `percent(burst_correlation[g])`.
    burst: [i8; CORRELATION_SPAN],
    /// The ADU sent in it was acked: it cannot be part of a joint loss.
    acked: bool,
}

impl CorrInfo {
    fn new(slot: &TxSlot, acked: bool) -> Self {
        let mut burst = [0i8; CORRELATION_SPAN];
        for (b, &c) in burst.iter_mut().zip(&slot.burst_correlation) {
            *b = percent(f64::from(c)) as i8;
        }
        CorrInfo {
            channel: slot.channel,
            sequence: slot.sequence,
            burst,
            acked,
        }
    }

    /// `TxSlot::loss_correlation_pct`, from the tables.
    fn pct(&self, other: &CorrInfo) -> i64 {
        if self.acked || other.acked || self.channel != other.channel {
            return 0;
        }
        match self.sequence.abs_diff(other.sequence) as usize {
            0 => 100,
            g if g <= CORRELATION_SPAN => i64::from(self.burst[g - 1]),
            _ => 0,
        }
    }
}

/// A term's solo kernel reads no variable besides its member's.
const SOLO_NONE: u8 = u8::MAX - 1;

/// A term without a solo kernel.
const NOT_SOLO: u8 = u8::MAX;

/// Last cycle's contexts with each row given by its index among its variable's
/// candidates (its *rank*).
///
/// When every ADU variable's filter reads only the candidate itself, the contexts
/// are a function of the candidate lists alone, and only through their shape: how
/// many candidates of each variable are schedule ADUs (they come first, the rows
/// being ascending) and how many are history ADUs, and which variables share their
/// candidates. A new cycle whose candidates have the same shape has the same
/// contexts in rank space, in the same order, with the same members' positions,
/// bounds, reads and pair kernels, so they are renumbered (ranks to this cycle's
/// rows, and the solo kernels, which name history rows) instead of enumerated.
/// Between two cycles most ADUs stay queued and the streams' shares of the queue
/// change little, so the shape usually repeats.
#[derive(Debug, Default)]
struct KeptContexts {
    /// `ranks` describes the current contexts.
    valid: bool,
    /// Per variable: candidates that are schedule ADUs, candidates in the history.
    shape: Vec<(u32, u32)>,
    /// Per pair of variables `(v, w)`, `v < w`, in order: whether their candidates
    /// are the same rows (else they share none).
    same: Vec<bool>,
    /// Per term and variable: the rank of the row bound, or `NO_ROW`.
    ranks: Vec<u32>,
}

/// Programs with at most this many variables keep a [`MaskInfo`] per mask.
const MASKED_VARS: usize = 8;

/// What a program's atoms make of a context, given which of its variables hold
/// schedule ADUs (bit `v` of `mask`): it depends on nothing else, so it is worked
/// out once per mask instead of once per context.
#[derive(Debug, Clone, Copy)]
struct MaskInfo {
    /// What the atoms read of the schedule ADUs' slots.
    reads: SlotReads,
    /// Every atom reads only schedule ADUs, and no latency (which adds the ADU's
    /// own queueing delay): with two members, the term is a pair kernel.
    kernel_atoms: bool,
    /// With one member: the atoms read no latency of it and at most one other
    /// variable (`Some(Some(v))`, or `Some(None)` for none); `None` otherwise.
    solo_other: Option<Option<u8>>,
}

impl MaskInfo {
    fn of(ir: &ProgramIr, mask: u32) -> Self {
        let sched = |v: u8| mask & (1 << v) != 0;
        let mut reads = SlotReads::NONE;
        for a in &ir.atoms {
            reads = reads.union(match *a {
                Atom::Prob(v) if sched(v) => SlotReads::LOSS,
                Atom::Latency(v) if sched(v) => SlotReads::LATENCY,
                Atom::Corr(x, y) if sched(x) || sched(y) => SlotReads::OTHER,
                _ => SlotReads::NONE,
            });
        }
        let kernel_atoms = ir.atoms.iter().all(|a| match *a {
            Atom::Prob(v) => sched(v),
            Atom::Corr(x, y) => sched(x) && sched(y),
            Atom::Latency(_) => false,
        });
        let member_var = mask.trailing_zeros();
        let mut other: Option<u8> = None;
        let mut note = |v: u8| -> bool {
            if u32::from(v) == member_var || other == Some(v) {
                return true;
            }
            if other.is_some() {
                return false;
            }
            other = Some(v);
            true
        };
        let solo_ok = ir.atoms.iter().all(|a| match *a {
            Atom::Latency(v) if u32::from(v) == member_var => false,
            Atom::Prob(v) | Atom::Latency(v) => note(v),
            Atom::Corr(x, y) => note(x) && note(y),
        });
        MaskInfo {
            reads,
            kernel_atoms,
            solo_other: solo_ok.then_some(other),
        }
    }
}

/// A stream variable's window: the history part and the schedule's ADUs of it.
#[derive(Debug, Clone)]
struct StreamVar {
    id: u32,
    history: Window,
    rows: Vec<u32>,
    /// The core's statistics of the stream, for a window with no samples.
    fallback: Option<StreamStats>,
}

pub(crate) struct PreparedHose {
    ir: Arc<ProgramIr>,
    /// Slots in the cycle.
    m: usize,
    n: usize,
    /// Predefined fields of the schedule's ADUs, then of the history's.
    pre: Vec<PreVals>,
    app: Vec<FieldVal>,
    /// The text of every string field in `app`.
    strings: String,
    slot_loss: Vec<i64>,
    slot_lat: Vec<i64>,
    /// `loss_probability` of each slot, for stream windows.
    slot_loss_prob: Vec<f64>,
    hist_loss: Vec<i64>,
    hist_lat: Vec<i64>,
    /// Schedule slots then history slots, when the objective uses correlation.
    corr: Vec<CorrInfo>,
    streams: Vec<Option<StreamVar>>,
    nv: usize,
    /// Per variable: candidate rows (scratch of `enumerate`).
    cands: Vec<Vec<u32>>,
    /// Per variable: the stream ids its filter allows, when the filter tests
    /// nothing else (see [`stream_id_set`]).
    stream_filters: Vec<Option<Vec<i64>>>,
    binds: Vec<u32>,
    member_start: Vec<u32>,
    members: Vec<u32>,
    /// Members bound to ADU variables come first; all of them must be placed.
    required: Vec<u8>,
    reads: Vec<SlotReads>,
    /// Per term: which variables are bound to schedule ADUs, when the term's value
    /// is a function of those two slots alone (see `pair_kernel`); else `NO_KERNEL`.
    kernel: Vec<u32>,
    /// Per term: its solo kernel (see `solo_kernel`), else `NO_KERNEL`.
    solo: Vec<u32>,
    /// Per term: the variables bound to schedule ADUs (a bit mask).
    sched_mask: Vec<u32>,
    /// Per term: the `other` variable its solo kernel is a function of
    /// ([`SOLO_NONE`] for none, [`NOT_SOLO`] if the term has no solo kernel).
    solo_other: Vec<u8>,
    /// Renumber last cycle's contexts instead of enumerating them again when the
    /// candidates have the same shape (see [`KeptContexts`]).
    incremental: bool,
    /// Every ADU variable's filter reads only its own candidate, and no stream
    /// variable is read: the contexts are then fixed by the candidate lists.
    product_form: bool,
    kept: KeptContexts,
    /// Cycles whose contexts were renumbered rather than enumerated.
    #[cfg(test)]
    renumbered: usize,
    /// History rows in the cycle, plus one: the stride of solo kernel ids.
    solo_stride: u32,
    /// What the atoms make of a context, per set of variables bound to schedule
    /// ADUs (a bit mask), for programs with at most `MASKED_VARS` variables.
    by_mask: Vec<MaskInfo>,
    atoms: Vec<i64>,
    svals: Vec<StreamVals>,
    memo: Memo,
    memo_mode: MemoMode,
    memo_hits: u32,
    memo_misses: u32,
    evaluations: u64,
    truncated: bool,
}

impl PreparedHose {
    pub fn new(ir: Arc<ProgramIr>, input: &ScheduleInput<'_>) -> Self {
        let nv = ir.vars.len();
        let mut p = PreparedHose {
            m: 0,
            n: 0,
            pre: Vec::new(),
            app: Vec::new(),
            strings: String::new(),
            slot_loss: Vec::new(),
            slot_lat: Vec::new(),
            slot_loss_prob: Vec::new(),
            hist_loss: Vec::new(),
            hist_lat: Vec::new(),
            corr: Vec::new(),
            streams: Vec::new(),
            nv,
            cands: Vec::new(),
            stream_filters: ir
                .vars
                .iter()
                .enumerate()
                .map(|(v, var)| match var {
                    VarIr::Adu { indep, .. } if !indep.is_empty() => stream_id_set(indep, v as Var),
                    _ => None,
                })
                .collect(),
            binds: Vec::new(),
            member_start: Vec::new(),
            members: Vec::new(),
            required: Vec::new(),
            reads: Vec::new(),
            kernel: Vec::new(),
            solo: Vec::new(),
            sched_mask: Vec::new(),
            solo_other: Vec::new(),
            incremental: true,
            product_form: ir.vars.iter().all(|v| match v {
                VarIr::Adu { dep, .. } => dep.is_empty(),
                VarIr::Stream(_) => true,
            }),
            kept: KeptContexts::default(),
            #[cfg(test)]
            renumbered: 0,
            solo_stride: 1,
            by_mask: if nv <= MASKED_VARS {
                (0..1u32 << nv)
                    .map(|mask| MaskInfo::of(&ir, mask))
                    .collect()
            } else {
                Vec::new()
            },
            atoms: vec![0; ir.atoms.len()],
            svals: vec![StreamVals::default(); nv],
            memo: Memo::default(),
            memo_mode: MemoMode::Off,
            memo_hits: 0,
            memo_misses: 0,
            evaluations: 0,
            truncated: false,
            ir,
        };
        p.prepare(input);
        p
    }

    /// Prepare for the cycle over `input`, in the buffers of the last one.
    fn prepare(&mut self, input: &ScheduleInput<'_>) {
        let ir = Arc::clone(&self.ir);
        let n = input.adus.len();
        self.n = n;
        self.m = input.slots.len();
        let adus = || {
            input
                .adus
                .iter()
                .chain(input.history.iter().map(|h| &h.adu))
        };
        self.pre.clear();
        self.pre.extend(adus().map(PreVals::of));
        self.app.clear();
        self.strings.clear();
        for a in adus() {
            for f in &ir.fields {
                let v = match (a.fields.get(&f.name), f.ty) {
                    (Some(Value::Int(i)), Scalar::Num) => FieldVal::Int(*i),
                    (Some(Value::Bool(b)), Scalar::Bool) => FieldVal::Bool(*b),
                    (Some(Value::Str(s)), Scalar::Str) => {
                        let start = self.strings.len();
                        self.strings.push_str(s);
                        FieldVal::Str(start as u32, s.len() as u32)
                    }
                    _ => FieldVal::Missing,
                };
                self.app.push(v);
            }
        }
        self.streams.resize_with(self.nv, || None);
        for (v, var) in ir.vars.iter().enumerate() {
            match var {
                VarIr::Stream(id) if ir.stream_read[v] => {
                    let s = self.streams[v].get_or_insert_with(|| StreamVar {
                        id: *id,
                        history: Window::default(),
                        rows: Vec::new(),
                        fallback: None,
                    });
                    s.id = *id;
                    s.history = Window::of_history(input.history, *id);
                    s.rows.clear();
                    s.rows
                        .extend((0..n as u32).filter(|&r| input.adus[r as usize].stream_id == *id));
                    s.fallback = input.streams.iter().find(|x| x.stream_id == *id).copied();
                }
                _ => self.streams[v] = None,
            }
        }
        self.memo_mode = if ir.reads_streams || ir.atoms.len() > 3 {
            MemoMode::Off
        } else if ir.body_reads_fields {
            MemoMode::PerTerm
        } else {
            MemoMode::Shared
        };
        self.corr.clear();
        if ir.atoms.iter().any(|a| matches!(a, Atom::Corr(..))) {
            self.corr
                .extend(input.slots.iter().map(|s| CorrInfo::new(s, false)));
            self.corr.extend(
                input
                    .history
                    .iter()
                    .map(|h| CorrInfo::new(&h.slot, matches!(h.outcome, Outcome::Acked { .. }))),
            );
        }
        self.slot_loss.clear();
        self.slot_loss
            .extend(input.slots.iter().map(TxSlot::loss_pct));
        self.slot_lat.clear();
        self.slot_lat
            .extend(input.slots.iter().map(TxSlot::latency_ms));
        self.slot_loss_prob.clear();
        self.slot_loss_prob
            .extend(input.slots.iter().map(|s| s.loss_probability));
        self.hist_loss.clear();
        self.hist_loss
            .extend(input.history.iter().map(history_loss));
        self.hist_lat.clear();
        self.hist_lat
            .extend(input.history.iter().map(history_latency));
        self.solo_stride = u32::try_from(input.history.len())
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        self.memo.clear();
        self.memo_hits = 0;
        self.memo_misses = 0;
        self.evaluations = 0;
        self.enumerate();
    }

    /// Whether contexts are renumbered across cycles (true, the default) or
    /// enumerated anew every cycle.
    pub fn set_incremental(&mut self, on: bool) {
        self.incremental = on;
        if !on {
            self.kept.valid = false;
        }
    }

    /// Whether some contexts were dropped because there were more than [`MAX_CONTEXTS`].
    #[cfg(test)]
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    fn env<'e>(&'e self, rows: &'e [u32]) -> Env<'e> {
        Env {
            rows,
            pre: &self.pre,
            app: &self.app,
            strings: &self.strings,
            n_fields: self.ir.fields.len(),
            atoms: &self.atoms,
            streams: &self.svals,
        }
    }

    /// Enumerate every context that depends on at least one schedule ADU.
    fn enumerate(&mut self) {
        let rows = self.pre.len() as u32;
        // Candidates per ADU variable from the conjuncts that read only it.
        let mut cands = std::mem::take(&mut self.cands);
        cands.resize_with(self.nv, Vec::new);
        let mut probe = [0u32; MAX_VARS];
        for (k, var) in self.ir.vars.iter().enumerate() {
            let c = &mut cands[k];
            c.clear();
            if let Some(ids) = &self.stream_filters[k] {
                let pre = &self.pre;
                c.extend(
                    (0..rows).filter(|&r| ids.contains(&i64::from(pre[r as usize].stream_id))),
                );
            } else if let VarIr::Adu { indep, .. } = var {
                for r in 0..rows {
                    probe[k] = r;
                    let env = self.env(&probe[..self.nv]);
                    if indep.iter().all(|b| boolean(b, &env)) {
                        c.push(r);
                    }
                }
            }
        }
        let reusable = self.incremental
            && self.product_form
            && self.streams.iter().all(Option::is_none)
            && self.note_shape(&cands);
        if reusable && self.kept.valid {
            self.renumber(&cands);
            self.cands = cands;
            return;
        }
        self.binds.clear();
        self.member_start.clear();
        self.member_start.push(0);
        self.members.clear();
        self.required.clear();
        self.reads.clear();
        self.kernel.clear();
        self.solo.clear();
        self.sched_mask.clear();
        self.solo_other.clear();
        self.truncated = false;
        // Stream variables whose fields are read depend on the schedule's ADUs.
        let streams_bring_schedule = self.streams.iter().flatten().any(|s| !s.rows.is_empty());
        let last_adu = self
            .ir
            .vars
            .iter()
            .rposition(|v| matches!(v, VarIr::Adu { .. }));
        // Reserve for the product of candidate counts (capped): no regrowing.
        let estimate = cands
            .iter()
            .filter(|c| !c.is_empty())
            .map(Vec::len)
            .fold(1usize, |p, c| p.saturating_mul(c))
            .min(MAX_CONTEXTS);
        self.binds.reserve(estimate * self.nv);
        self.members.reserve(estimate * 2);
        self.member_start.reserve(estimate);
        self.required.reserve(estimate);
        self.reads.reserve(estimate);
        self.kernel.reserve(estimate);
        self.solo.reserve(estimate);
        self.sched_mask.reserve(estimate);
        self.solo_other.reserve(estimate);
        let mut binding = [NO_ROW; MAX_VARS];
        let ir = Arc::clone(&self.ir);
        self.dfs(
            &ir,
            0,
            &mut binding,
            streams_bring_schedule,
            last_adu,
            &cands,
        );
        if reusable && !self.truncated {
            self.keep_ranks(&cands);
        } else {
            self.kept.valid = false;
        }
        self.cands = cands;
    }

    /// Compare the candidates' shape with the kept one, and keep this one. Returns
    /// false when the shape cannot describe the contexts (two variables share
    /// some candidates but not all), which also forgets the kept contexts.
    fn note_shape(&mut self, cands: &[Vec<u32>]) -> bool {
        let n = self.n as u32;
        let kept = &mut self.kept;
        let mut same_shape = kept.shape.len() == cands.len();
        kept.shape.resize(cands.len(), (0, 0));
        for (s, c) in kept.shape.iter_mut().zip(cands) {
            let sched = c.partition_point(|&r| r < n) as u32;
            let shape = (sched, c.len() as u32 - sched);
            same_shape &= *s == shape;
            *s = shape;
        }
        let mut i = 0;
        for v in 0..cands.len() {
            for w in v + 1..cands.len() {
                let (a, b) = (&cands[v], &cands[w]);
                let same = a == b;
                if !same && !disjoint(a, b) {
                    kept.valid = false;
                    return false;
                }
                if i < kept.same.len() {
                    same_shape &= kept.same[i] == same;
                    kept.same[i] = same;
                } else {
                    same_shape = false;
                    kept.same.push(same);
                }
                i += 1;
            }
        }
        kept.same.truncate(i);
        kept.valid &= same_shape;
        true
    }

    /// Record the contexts just enumerated in rank space.
    fn keep_ranks(&mut self, cands: &[Vec<u32>]) {
        let kept = &mut self.kept;
        kept.ranks.clear();
        kept.ranks.extend(
            self.binds
                .chunks_exact(self.nv.max(1))
                .flat_map(|b| b.iter().zip(cands))
                .map(|(&r, c)| {
                    if r == NO_ROW {
                        NO_ROW
                    } else {
                        c.binary_search(&r).map_or(NO_ROW, |k| k as u32)
                    }
                }),
        );
        kept.valid = true;
    }

    /// Last cycle's contexts with this cycle's rows: the bindings, the members
    /// (schedule rows, in the same positions) and the solo kernels (which name
    /// history rows). Everything else about a term depends only on its ranks.
    fn renumber(&mut self, cands: &[Vec<u32>]) {
        let nv = self.nv;
        let n = self.n as u32;
        let ranks = std::mem::take(&mut self.kept.ranks);
        self.members.clear();
        for (t, term_ranks) in ranks.chunks_exact(nv.max(1)).enumerate() {
            let binding = &mut self.binds[t * nv..(t + 1) * nv];
            for ((b, &k), c) in binding.iter_mut().zip(term_ranks).zip(cands) {
                *b = if k == NO_ROW { NO_ROW } else { c[k as usize] };
                if *b != NO_ROW && *b < n {
                    self.members.push(*b);
                }
            }
            let other = match self.solo_other[t] {
                NOT_SOLO => continue,
                SOLO_NONE => None,
                v => Some(v),
            };
            self.solo[t] =
                self.solo_kernel_of(&self.binds[t * nv..(t + 1) * nv], self.sched_mask[t], other);
        }
        self.kept.ranks = ranks;
        #[cfg(test)]
        {
            self.renumbered += 1;
        }
    }

    fn dfs(
        &mut self,
        ir: &ProgramIr,
        k: usize,
        binding: &mut [u32; MAX_VARS],
        has_schedule: bool,
        last_adu: Option<usize>,
        cands: &[Vec<u32>],
    ) {
        if self.truncated {
            return;
        }
        if k == self.nv {
            self.emit(&binding[..self.nv]);
            return;
        }
        let VarIr::Adu { dep, .. } = &ir.vars[k] else {
            binding[k] = NO_ROW;
            return self.dfs(ir, k + 1, binding, has_schedule, last_adu, cands);
        };
        // The last ADU variable of a context with no schedule ADU so far must take
        // one: history-only contexts are constant and are not terms.
        let only_schedule = !has_schedule && last_adu == Some(k);
        // The last variable, with no condition on the others: every candidate not
        // bound already completes a context, with no environment to build.
        let completes = k + 1 == self.nv && dep.is_empty();
        for &r in &cands[k] {
            if only_schedule && r as usize >= self.n {
                break;
            }
            if binding[..k].contains(&r) {
                continue;
            }
            binding[k] = r;
            if completes {
                self.emit(&binding[..self.nv]);
            } else {
                let env = self.env(&binding[..self.nv]);
                if dep.iter().all(|b| boolean(b, &env)) {
                    self.dfs(
                        ir,
                        k + 1,
                        binding,
                        has_schedule || (r as usize) < self.n,
                        last_adu,
                        cands,
                    );
                }
            }
            if self.truncated {
                return;
            }
        }
        binding[k] = NO_ROW;
    }

    fn emit(&mut self, binding: &[u32]) {
        if self.required.len() >= MAX_CONTEXTS {
            self.truncated = true;
            return;
        }
        let start = self.members.len();
        let n = self.n as u32;
        for &r in binding {
            if r != NO_ROW && r < n {
                self.members.push(r);
            }
        }
        let required = self.members.len() - start;
        let mut reads = SlotReads::NONE;
        for s in self.streams.iter().flatten() {
            for &r in &s.rows {
                if !self.members[start..].contains(&r) {
                    self.members.push(r);
                }
            }
            if !s.rows.is_empty() {
                reads = reads.union(SlotReads::OTHER);
            }
        }
        if self.members.len() == start {
            return;
        }
        let sched_vars = binding
            .iter()
            .enumerate()
            .filter(|(_, &r)| r != NO_ROW && r < n)
            .fold(0u32, |mask, (v, _)| mask | 1 << v);
        let info = match self.by_mask.get(sched_vars as usize) {
            Some(info) => *info,
            None => MaskInfo::of(&self.ir, sched_vars),
        };
        let reads = reads.union(info.reads);
        // A pair kernel: two placed members, every atom about them alone (so no
        // queueing delay, no history constants), and values shared by all terms.
        let kernel = if self.memo_mode == MemoMode::Shared
            && required == 2
            && self.members.len() - start == 2
            && info.kernel_atoms
        {
            sched_vars
        } else {
            NO_KERNEL
        };
        let solo_other = match info.solo_other {
            Some(other)
                if self.memo_mode == MemoMode::Shared
                    && required == 1
                    && self.members.len() - start == 1 =>
            {
                Some(other)
            }
            _ => None,
        };
        let solo = match solo_other {
            Some(other) => self.solo_kernel_of(binding, sched_vars, other),
            None => NO_KERNEL,
        };
        self.sched_mask.push(sched_vars);
        self.solo_other.push(match solo_other {
            None => NOT_SOLO,
            Some(None) => SOLO_NONE,
            Some(Some(v)) => v,
        });
        self.binds.extend_from_slice(binding);
        self.member_start.push(self.members.len() as u32);
        self.required.push(required as u8);
        self.reads.push(reads);
        self.kernel.push(kernel);
        self.solo.push(solo);
    }

    /// The solo kernel of a context with one schedule ADU (the variable in
    /// `sched_vars`) whose value depends only on its atoms, which read no latency
    /// of it and at most the one `other` variable: the member's variable and the
    /// history row bound to `other` fix every atom as a function of the member's
    /// slot.
    fn solo_kernel_of(&self, binding: &[u32], sched_vars: u32, other: Option<u8>) -> u32 {
        let member_var = sched_vars.trailing_zeros();
        let history = match other.map(|v| binding[v as usize]) {
            None => self.solo_stride - 1,
            Some(r) if r != NO_ROW && r as usize >= self.n => r - self.n as u32,
            Some(_) => return NO_KERNEL,
        };
        member_var
            .checked_mul(self.solo_stride)
            .and_then(|k| k.checked_add(history))
            .filter(|&k| k != NO_KERNEL)
            .unwrap_or(NO_KERNEL)
    }

    /// What the atoms make of a context with the schedule variables in `mask`.
    fn mask_info(&self, mask: u32) -> MaskInfo {
        match self.by_mask.get(mask as usize) {
            Some(info) => *info,
            None => MaskInfo::of(&self.ir, mask),
        }
    }

    fn slot_of(&self, row: u32, assignment: &[Option<usize>]) -> Option<usize> {
        assignment
            .get(row as usize)
            .copied()
            .flatten()
            .filter(|&s| s < self.m)
    }

    /// The atoms of term `t`, with `slot(row)` the slot of each schedule ADU an
    /// atom reads (every such ADU is bound to an ADU variable, so it is placed).
    fn compute_atoms(&mut self, t: usize, slot: impl Fn(usize) -> usize) {
        let n = self.n;
        let rows = &self.binds[t * self.nv..(t + 1) * self.nv];
        // Index of a row's slot in `corr`: schedule slots first, then history.
        let corr_index = |r: usize| {
            if r < n {
                slot(r)
            } else {
                self.m + r - n
            }
        };
        for (i, a) in self.ir.atoms.iter().enumerate() {
            self.atoms[i] = match *a {
                Atom::Prob(v) => {
                    let r = rows[v as usize] as usize;
                    if r < n {
                        self.slot_loss[slot(r)]
                    } else {
                        self.hist_loss[r - n]
                    }
                }
                Atom::Latency(v) => {
                    let r = rows[v as usize] as usize;
                    if r < n {
                        self.pre[r]
                            .queue_delay_ms
                            .saturating_add(self.slot_lat[slot(r)])
                    } else {
                        self.hist_lat[r - n]
                    }
                }
                Atom::Corr(x, y) => {
                    let cx = corr_index(rows[x as usize] as usize);
                    let cy = corr_index(rows[y as usize] as usize);
                    self.corr[cx].pct(&self.corr[cy])
                }
            };
        }
    }

    /// The term's value once its atoms are computed: from the cache or evaluated.
    fn finish(&mut self, term: usize, assignment: &[Option<usize>], cached: bool) -> i64 {
        let key = if cached { self.key(term) } else { None };
        if let Some(k) = &key {
            if let Some(v) = self.memo.get(k) {
                self.memo_hits += 1;
                return v;
            }
            self.memo_misses += 1;
            // Inputs that rarely repeat (latencies, say) make caching cost more
            // than it saves: stop.
            if self.memo_misses >= MEMO_TRIAL && self.memo_hits < self.memo_misses {
                self.memo_mode = MemoMode::Off;
            }
        }
        if self.ir.reads_streams {
            self.compute_streams(assignment);
        }
        self.evaluations += 1;
        let rows = &self.binds[term * self.nv..(term + 1) * self.nv];
        let v = contribution(&self.ir, &self.env(rows));
        if let Some(k) = key {
            self.memo.insert(k, v);
        }
        v
    }

    fn compute_streams(&mut self, assignment: &[Option<usize>]) {
        for (v, s) in self.streams.iter().enumerate() {
            if let Some(s) = s {
                let mut w = s.history;
                for &r in &s.rows {
                    if let Some(slot) = self.slot_of(r, assignment) {
                        w.add_expected_in(
                            self.pre[r as usize].queue_delay_ms,
                            self.slot_lat[slot],
                            self.slot_loss_prob[slot],
                        );
                    }
                }
                self.svals[v] = w.values(s.id, s.fallback.as_ref());
            }
        }
    }

    fn key(&self, t: usize) -> Option<Key> {
        let group = match self.memo_mode {
            MemoMode::Off => return None,
            MemoMode::Shared => 0,
            MemoMode::PerTerm => t as i64 + 1,
        };
        // Word by word, no loop: a copy of unknown length becomes a `memcpy` call
        // whose narrow stores stall the key's wide reload, on the hottest path.
        // Caching is on only for up to 3 atoms.
        let atom = |i: usize| self.atoms.get(i).copied().unwrap_or(0);
        Some([group, atom(0), atom(1), atom(2)])
    }
}

/// Whether two ascending lists share no element.
fn disjoint(a: &[u32], b: &[u32]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return false,
        }
    }
    true
}

/// The stream ids that pass every conjunct of `indep` (variable `v`'s own filter),
/// when each conjunct is built only of `stream_id == literal` tests joined by `||`
/// and `&&` (`stream_id == 0 || stream_id == 3`, the usual filter); `None` when a
/// conjunct reads anything else. A row then passes exactly when its stream id is in
/// the set, which `enumerate` tests without building an environment per row.
pub(crate) fn stream_id_set(indep: &[Bool], v: Var) -> Option<Vec<i64>> {
    fn set(b: &Bool, v: Var) -> Option<Vec<i64>> {
        match b {
            Bool::Cmp(CmpOp::Eq, x, y) => match (&**x, &**y) {
                (Num::Pre(w, PreField::StreamId), Num::Lit(k))
                | (Num::Lit(k), Num::Pre(w, PreField::StreamId))
                    if *w == v =>
                {
                    Some(vec![*k])
                }
                _ => None,
            },
            Bool::Or(x, y) => {
                let mut ids = set(x, v)?;
                ids.extend(set(y, v)?);
                Some(ids)
            }
            Bool::And(x, y) => {
                let (a, b) = (set(x, v)?, set(y, v)?);
                Some(a.into_iter().filter(|k| b.contains(k)).collect())
            }
            _ => None,
        }
    }
    let mut ids = set(indep.first()?, v)?;
    for b in &indep[1..] {
        let more = set(b, v)?;
        ids.retain(|k| more.contains(k));
    }
    ids.sort_unstable();
    ids.dedup();
    Some(ids)
}

/// `prob(h::lost?)` for a history entry: known outcomes are certain.
fn history_loss(h: &HistoryEntry) -> i64 {
    match h.outcome {
        Outcome::Acked { .. } => 0,
        Outcome::Lost => 100,
        Outcome::Pending => h.slot.loss_pct(),
    }
}

/// `expected(h::latency)` for a history entry: the measured latency once acked,
/// otherwise the expectation it was sent with.
fn history_latency(h: &HistoryEntry) -> i64 {
    match h.outcome {
        Outcome::Acked { latency_ms } => round_ms(latency_ms),
        _ => h.adu.queue_delay_ms.saturating_add(h.slot.latency_ms()),
    }
}

impl Reprepare for PreparedHose {
    fn reprepare(&mut self, input: &ScheduleInput<'_>) {
        self.prepare(input);
    }

    fn set_incremental(&mut self, on: bool) {
        PreparedHose::set_incremental(self, on);
    }
}

impl PreparedObjective for PreparedHose {
    fn terms(&self) -> usize {
        self.required.len()
    }

    fn members(&self, term: usize) -> &[u32] {
        let (a, b) = (self.member_start[term], self.member_start[term + 1]);
        &self.members[a as usize..b as usize]
    }

    fn reads(&self, term: usize) -> SlotReads {
        self.reads[term]
    }

    fn bounds(&self, _term: usize) -> (i64, i64) {
        self.ir.bounds
    }

    fn pair_kernel(&self, term: usize) -> Option<u32> {
        Some(self.kernel[term]).filter(|&k| k != NO_KERNEL)
    }

    fn solo_kernel(&self, term: usize) -> Option<u32> {
        Some(self.solo[term]).filter(|&k| k != NO_KERNEL)
    }

    fn solo_kernels(&self) -> usize {
        self.nv.saturating_mul(self.solo_stride as usize)
    }

    fn pair_kernel_by_correlation(&self, k: u32) -> bool {
        // A pair kernel's atoms read only its two members (`kernel_atoms`): if
        // none is a loss, every one is a correlation between them.
        self.mask_info(k).reads == SlotReads::OTHER
    }

    fn solo_kernel_off_channel(&self, k: u32) -> Option<Option<ChannelId>> {
        let member_var = k / self.solo_stride;
        let history = k % self.solo_stride;
        let info = self.mask_info(1u32.checked_shl(member_var)?);
        // A solo kernel reads no latency of its member; a loss atom would read its slot.
        if info.reads.contains(SlotReads::LOSS) || info.solo_other.is_none() {
            return None;
        }
        if !info.reads.contains(SlotReads::OTHER) || history == self.solo_stride - 1 {
            // No correlation, or only of the member with itself (always 100).
            return Some(None);
        }
        // Correlations of the member with one history slot: 0 off its channel,
        // and everywhere once that slot's ADU is acked.
        let c = self.corr.get(self.m + history as usize)?;
        Some((!c.acked).then_some(c.channel))
    }

    fn value(&mut self, term: usize, assignment: &[Option<usize>], cached: bool) -> i64 {
        let (start, end) = (
            self.member_start[term] as usize,
            self.member_start[term + 1] as usize,
        );
        let required = start + self.required[term] as usize;
        let m = self.m;
        let placed = |r: u32| matches!(assignment.get(r as usize), Some(&Some(s)) if s < m);
        if !self.members[start..required].iter().all(|&r| placed(r)) {
            return 0;
        }
        if required == start && !self.members[start..end].iter().any(|&r| placed(r)) {
            return 0;
        }
        self.compute_atoms(term, |r| assignment[r].unwrap_or(0));
        self.finish(term, assignment, cached)
    }

    fn values_in_slots(
        &mut self,
        term: usize,
        assignment: &mut [Option<usize>],
        slots: &[usize],
        cached: bool,
        out: &mut Vec<i64>,
    ) {
        out.clear();
        let (start, end) = (
            self.member_start[term] as usize,
            self.member_start[term + 1] as usize,
        );
        // The fast path covers terms over one schedule ADU that read no stream and
        // no correlation (which depends on the member's slot in other ways).
        let corr = self.ir.atoms.iter().any(|a| matches!(a, Atom::Corr(..)));
        if end - start != 1 || self.ir.reads_streams || corr {
            let a = self.members[start] as usize;
            let saved = assignment[a];
            for &s in slots {
                assignment[a] = Some(s);
                let v = self.value(term, assignment, cached);
                out.push(v);
            }
            assignment[a] = saved;
            return;
        }
        let m = self.m;
        let (Some(&first), true) = (slots.first(), slots.iter().all(|&s| s < m)) else {
            out.resize(slots.len(), 0);
            return;
        };
        // Atoms about history ADUs are the same for every slot: compute all once,
        // then only the member's loss and latency per slot.
        let member = self.members[start] as usize;
        self.compute_atoms(term, |_| first);
        let rows = &self.binds[term * self.nv..(term + 1) * self.nv];
        let queue = self.pre[member].queue_delay_ms;
        let per_slot = self
            .ir
            .atoms
            .iter()
            .enumerate()
            .filter_map(|(i, a)| match *a {
                Atom::Prob(v) if rows[v as usize] as usize == member => Some((i, false)),
                Atom::Latency(v) if rows[v as usize] as usize == member => Some((i, true)),
                _ => None,
            });
        let mut dependent = [(0usize, false); 2];
        let mut count = 0;
        for d in per_slot {
            // Correlation atoms involve other ADUs; at most one loss and one latency
            // atom can be about the member.
            if count < dependent.len() {
                dependent[count] = d;
                count += 1;
            }
        }
        for &s in slots {
            for &(i, latency) in &dependent[..count] {
                self.atoms[i] = if latency {
                    queue.saturating_add(self.slot_lat[s])
                } else {
                    self.slot_loss[s]
                };
            }
            let v = self.finish(term, assignment, cached);
            out.push(v);
        }
    }

    fn evaluations(&self) -> u64 {
        self.evaluations
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_policy::adu::{AduView, Fields};
    use horde_policy::objective::ObjectiveSet;

    fn adu(i: u64) -> AduView {
        AduView {
            id: i,
            stream_id: 0,
            stream_seq: i,
            length: 100,
            queue_delay_ms: 0,
            fields: Fields::new(),
        }
    }

    /// A cycle's input with these ADUs and nothing else.
    fn adus_only<'a>(adus: &'a [AduView], set: &'a ObjectiveSet) -> ScheduleInput<'a> {
        ScheduleInput {
            slots: &[],
            adus,
            history: &[],
            streams: &[],
            objectives: set,
        }
    }

    /// Each filter's candidates by the stream-id set (when it has one) and by the
    /// evaluator are the same rows; `fast` says which filters take the set.
    #[test]
    fn stream_id_filters_pick_the_rows_the_evaluator_picks() {
        let filters = [
            ("stream_id == 3", true),
            ("(stream_id == 0) || (stream_id == 3)", true),
            ("7 == stream_id || stream_id == 2 || stream_id == 2", true),
            (
                "(stream_id == 1 || stream_id == 2) && (stream_id == 2 || stream_id == 5)",
                true,
            ),
            ("stream_id == 1 && stream_id == 2", true),
            (
                "stream_id == 4 || ((stream_id == 1 || stream_id == 2) && stream_id == 2)",
                true,
            ),
            ("stream_id != 3", false),
            ("stream_id == 3 || stream_seq == 4", false),
            ("stream_id <= 2", false),
        ];
        let adus: Vec<AduView> = (0..40)
            .map(|i| AduView {
                stream_id: (i * 7 % 9) as u32,
                ..adu(i)
            })
            .collect();
        let set = ObjectiveSet::new();
        let input = adus_only(&adus, &set);
        for (filter, fast) in filters {
            let src = format!(
                "objective {{ context {{ adu:x {{ {filter} }} }} goal {{ true }} utility {{ x {{ 1 }} }} }}"
            );
            let o = crate::compile(&src).unwrap();
            let p = PreparedHose::new(Arc::clone(&o.ir), &input);
            assert_eq!(p.stream_filters[0].is_some(), fast, "{filter}");
            let VarIr::Adu { indep, .. } = &o.ir.vars[0] else {
                panic!("an ADU variable")
            };
            let by_evaluator: Vec<u32> = (0..adus.len() as u32)
                .filter(|&r| {
                    let rows = [r];
                    indep.iter().all(|b| boolean(b, &p.env(&rows)))
                })
                .collect();
            assert_eq!(p.cands[0], by_evaluator, "{filter}");
        }
    }

    /// The fields of a preparation every term reads.
    fn terms_of(p: &PreparedHose) -> impl PartialEq + std::fmt::Debug {
        (
            p.binds.clone(),
            p.member_start.clone(),
            p.members.clone(),
            p.required.clone(),
            p.reads.clone(),
            p.kernel.clone(),
            p.solo.clone(),
            p.solo_kernels(),
            p.truncated,
        )
    }

    /// X4 over a queue whose stream-0 ADUs and history move to other rows from one
    /// cycle to the next, but keep their counts except every third cycle: the kept
    /// preparation renumbers when the shape repeats, enumerates when it does not,
    /// and always equals a fresh one.
    #[test]
    fn renumbered_contexts_equal_enumerated_ones() {
        let o = crate::thesis("x4").unwrap();
        let set = ObjectiveSet::new();
        let mut kept: Option<PreparedHose> = None;
        let mut history: Vec<HistoryEntry> = Vec::new();
        for cycle in 0..12u64 {
            let extra = u64::from(cycle % 3 == 2);
            let adus: Vec<AduView> = (0..12 + extra)
                .map(|i| AduView {
                    stream_id: ((i + cycle) % 3) as u32,
                    ..adu(100 * cycle + i)
                })
                .collect();
            let input = ScheduleInput {
                history: &history,
                ..adus_only(&adus, &set)
            };
            let fresh = PreparedHose::new(Arc::clone(&o.ir), &input);
            let p = kept.get_or_insert_with(|| PreparedHose::new(Arc::clone(&o.ir), &input));
            p.reprepare(&input);
            assert_eq!(terms_of(p), terms_of(&fresh), "cycle {cycle}");
            assert!(p.terms() > 0);
            history = adus[..4]
                .iter()
                .map(|a| HistoryEntry {
                    adu: a.clone(),
                    slot: TxSlot {
                        channel: ChannelId::new(0),
                        sequence: a.id,
                        loss_probability: 0.1,
                        expected_rtt_ms: 50.0,
                        wait_ms: 0.0,
                        max_size: 1200,
                        cost_per_kb: 0.0,
                        phantom: None,
                        burst_correlation: [0.5; CORRELATION_SPAN],
                    },
                    outcome: Outcome::Pending,
                })
                .collect();
        }
        let renumbered = kept.map_or(0, |p| p.renumbered);
        assert!(
            (4..12).contains(&renumbered),
            "some cycles renumber, some enumerate ({renumbered})"
        );
    }

    #[test]
    fn context_enumeration_is_capped() {
        let o = crate::compile(
            "objective { context { adu:x { true } adu:y { true } adu:z { true } }
               goal { true } utility { x { 1 } } }",
        )
        .unwrap();
        let set = ObjectiveSet::new();
        let run = |n: u64| {
            let adus: Vec<AduView> = (0..n).map(adu).collect();
            let input = adus_only(&adus, &set);
            let p = PreparedHose::new(Arc::clone(&o.ir), &input);
            (p.terms(), p.truncated())
        };
        // 20 * 19 * 18 ordered triples of distinct ADUs.
        assert_eq!(run(20), (6840, false));
        // 50 * 49 * 48 = 117600 > MAX_CONTEXTS.
        assert_eq!(run(50), (MAX_CONTEXTS, true));
    }
}
