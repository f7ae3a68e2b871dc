//! Local search over the terms the assignment solver cannot see (pairs, stream
//! windows, opaque objectives): swap two ADUs' places, move an ADU to a free slot,
//! or trade a placed ADU for an unplaced one. Moves are scored by delta evaluation:
//! the unary part from the matrix, the rest by recomputing only the terms that
//! contain a moved ADU.
//!
//! Each ADU carries a *potential*: how far its higher terms are below their upper
//! bounds. A move cannot gain more than the unary delta plus both ADUs'
//! potentials, so moves without room to gain are skipped unevaluated.

use rand::seq::SliceRandom;
use rand::RngCore;

use super::lazy_table::{LazyTable, UNKNOWN};
use super::model::{Model, NO_KERNEL};
use super::{Assignment, ScheduleInput};
use crate::objective::PreparedSet;
use crate::ChannelId;

#[derive(Debug, Default)]
pub(crate) struct LocalSearch {
    owner: Vec<Option<u32>>,
    unplaced: Vec<u32>,
    cur: Vec<i64>,
    pot: Vec<i128>,
    stamp: Vec<u32>,
    epoch: u32,
    changed: Vec<(u32, i64)>,
    movers: Vec<u32>,
    cands: Vec<(i64, usize)>,
    cands2: Vec<(i64, usize)>,
    partners: Vec<u32>,
    /// "Don't look" bits, inverted: an ADU whose last scan found nothing is not
    /// scanned again until one of its terms changes.
    look: Vec<bool>,
    /// Pair-kernel values, filled as needed: per (kernel, first member's slot,
    /// second's), then the same transposed, so that a moved ADU's terms all read
    /// one row (its own slot) whichever member it is.
    ktab: LazyTable,
    /// Solo-kernel values, filled as needed: per (solo kernel, member's slot).
    stab: LazyTable,
    /// Each slot's channel.
    channel: Vec<ChannelId>,
    /// Per pair kernel read only through correlation: its value for slots on
    /// different channels, once computed.
    off_channel_pair: Vec<i64>,
    /// Per solo kernel with `solo_off_channel`: its value where it is constant,
    /// once computed.
    off_channel_solo: Vec<i64>,
    /// All-unplaced assignment used to evaluate a kernel at a slot pair.
    scratch: Assignment,
    /// Per ADU, its pair-kernel terms with the other member (CSR over `kedges`).
    kstart: Vec<u32>,
    kedges: Vec<KernelEdge>,
    /// Per ADU, its other higher terms (CSR over `gterms`).
    gstart: Vec<u32>,
    gterms: Vec<u32>,
    /// Per ADU, the sum of the current values of its pair-kernel terms, kept in
    /// step on every committed move: a move's kernel gain is then the sum of the
    /// terms' new values less this, with no per-term comparison.
    kcur: Vec<i128>,
    /// Per ADU, how many of its other higher terms are below their upper bound:
    /// an ADU with none adds nothing to the first, unconditional scan of `delta`.
    gbelow: Vec<u32>,
}

/// A pair-kernel term seen from one of its members.
#[derive(Debug, Clone, Copy)]
struct KernelEdge {
    term: u32,
    kernel: u32,
    other: u32,
    /// Whether the member is the term's first (the table's row).
    first: bool,
    /// The kernel reads its slots only through their loss correlation
    /// (`Model::kernel_by_correlation`).
    by_correlation: bool,
    /// Where this member's table starts: the kernel's table if it is the first
    /// member, the transposed one if not.
    table: u32,
}

impl KernelEdge {
    /// Index into the kernel tables of this term with the member in slot `own`
    /// and the other member in slot `other`.
    #[inline]
    fn index(&self, m: usize, own: usize, other: usize) -> usize {
        self.table as usize + own * m + other
    }
}

/// Where kernel `k` at (first member's slot `s`, second's `t`) is stored, and its
/// transposed copy.
fn kernel_cells(m: usize, kernels: usize, k: u32, s: usize, t: usize) -> (usize, usize) {
    let k = k as usize;
    ((k * m + s) * m + t, ((kernels + k) * m + t) * m + s)
}

/// How many of the best-placed targets each step of a compound move tries.
const COMPOUND_WIDTH: usize = 8;
/// How many partners of an ADU a compound move tries.
const COMPOUND_PARTNERS: usize = 4;

/// Where a move sends ADU `a`: a slot (free or taken by another ADU, who takes
/// `a`'s place), or out of the schedule in exchange for an unplaced ADU.
#[derive(Debug, Clone, Copy)]
enum Target {
    Slot(usize),
    Trade(u32),
}

/// What every step of the search reads, and the work spent so far.
struct Ctx<'m, 's> {
    model: &'m Model,
    set: &'m mut PreparedSet<'s>,
    fits: &'m dyn Fn(usize, usize) -> bool,
    spent: usize,
    budget: usize,
}

fn target(code: usize, m: usize) -> Target {
    if code < m {
        Target::Slot(code)
    } else {
        Target::Trade((code - m) as u32)
    }
}

/// Where the moved ADUs were.
#[derive(Debug, Clone, Copy)]
struct Undo {
    a: usize,
    a_from: Option<usize>,
    b: Option<u32>,
    b_from: Option<usize>,
}

impl LocalSearch {
    #[allow(clippy::too_many_arguments)]
    pub fn improve(
        &mut self,
        model: &Model,
        set: &mut PreparedSet<'_>,
        input: &ScheduleInput<'_>,
        work: &mut Assignment,
        rng: &mut dyn RngCore,
        max_passes: usize,
        open_first: bool,
        per_member: Option<usize>,
        ceiling: usize,
    ) {
        if model.terms.is_empty() {
            return;
        }
        let (n, m) = (model.n, model.m);
        self.owner.clear();
        self.owner.resize(m, None);
        self.unplaced.clear();
        for (a, s) in work.iter().enumerate() {
            match *s {
                Some(s) => self.owner[s] = Some(a as u32),
                None => self.unplaced.push(a as u32),
            }
        }
        self.cur.clear();
        self.pot.clear();
        self.pot.resize(n, 0);
        self.ktab.reset(2 * model.kernels.len() * m * m);
        self.stab.reset(model.solo_kernels * m);
        self.channel.clear();
        self.channel.extend(input.slots.iter().map(|s| s.channel));
        self.off_channel_pair.clear();
        self.off_channel_pair.resize(model.kernels.len(), UNKNOWN);
        self.off_channel_solo.clear();
        self.off_channel_solo.resize(model.solo_kernels, UNKNOWN);
        self.scratch.clear();
        self.scratch.resize(n, None);
        self.split_adjacency(model);
        for h in 0..model.terms.len() {
            let v = self.term_value(model, set, work, h);
            self.cur.push(v);
            let gap = i128::from(model.hi[h]) - i128::from(v);
            for &a in model.members(h) {
                self.pot[a as usize] += gap;
            }
        }
        self.kcur.clear();
        self.kcur.resize(n, 0);
        for h in 0..model.terms.len() {
            if model.kernel[h] != NO_KERNEL {
                for a in model.pair[h] {
                    self.kcur[a as usize] += i128::from(self.cur[h]);
                }
            }
        }
        self.gbelow.clear();
        self.gbelow.resize(n, 0);
        for h in 0..model.terms.len() {
            if model.kernel[h] == NO_KERNEL && self.cur[h] < model.hi[h] {
                for &a in model.members(h) {
                    self.gbelow[a as usize] += 1;
                }
            }
        }
        let spent = model.terms.len();
        self.stamp.clear();
        self.stamp.resize(model.terms.len(), 0);
        self.movers.clear();
        self.movers
            .extend((0..n as u32).filter(|&a| !model.adjacent(a as usize).is_empty()));
        self.movers.shuffle(rng);
        if open_first {
            order_by_potential(&mut self.movers, &self.pot);
        }
        self.look.clear();
        self.look.resize(n, true);
        let fits = |a: usize, s: usize| input.slots[s].max_size >= input.adus[a].length;
        // With a share per member: effort follows the utility still to be had.
        // Only a term below its upper bound can gain, and only by moving one of
        // its members, so after every term's first value the search gets a fixed
        // share per member of each such *open* term, never past the ceiling.
        let budget = match per_member {
            None => ceiling,
            Some(share) => {
                let open: usize = (0..model.terms.len())
                    .filter(|&h| self.cur[h] < model.hi[h])
                    .map(|h| model.members(h).len())
                    .sum();
                ceiling.min(spent.saturating_add(share.saturating_mul(open)))
            }
        };
        let mut ctx = Ctx {
            model,
            set,
            fits: &fits,
            spent,
            budget,
        };
        for _ in 0..max_passes {
            let improved = self.single_pass(&mut ctx, work) || self.compound_pass(&mut ctx, work);
            if !improved || ctx.spent >= ctx.budget {
                return;
            }
        }
    }

    /// One pass of single moves (first improvement per ADU). Returns whether any
    /// move was taken.
    fn single_pass(&mut self, ctx: &mut Ctx<'_, '_>, work: &mut Assignment) -> bool {
        let m = ctx.model.m;
        let mut improved = false;
        for i in 0..self.movers.len() {
            let a = self.movers[i] as usize;
            if self.pot[a] <= 0 || !self.look[a] {
                continue;
            }
            let mut cands = std::mem::take(&mut self.cands);
            self.candidates(ctx, work, a, &mut cands);
            // Keep only moves whose bound leaves room to gain, best unary first.
            cands.retain(|&(du, code)| {
                let room = self
                    .partner(a, target(code, m))
                    .map_or(0, |b| self.pot[b as usize]);
                i128::from(du) + self.pot[a] + room > 0
            });
            cands.sort_unstable_by_key(|x| std::cmp::Reverse(x.0));
            for &(du, code) in &cands {
                let target = target(code, m);
                let b = self.partner(a, target);
                let undo = self.apply(work, a, target);
                let moved = [Some(a), b.map(|b| b as usize)];
                if self.delta(ctx, work, &moved, i128::from(du)).is_some() {
                    self.commit(ctx, &moved);
                    improved = true;
                    break;
                }
                self.revert(work, undo);
                if ctx.spent >= ctx.budget {
                    break;
                }
            }
            self.cands = cands;
            if !improved {
                self.look[a] = false;
            }
            if ctx.spent >= ctx.budget {
                break;
            }
        }
        improved
    }

    /// Moves of two ADUs at once: `a`, then a partner from one of `a`'s terms that
    /// is below its bound. Gets off plateaus single moves cannot leave, such as a
    /// pair that pays only once both are placed, or a stream average that crosses
    /// its threshold only when two ADUs move. Returns at the first improvement.
    fn compound_pass(&mut self, ctx: &mut Ctx<'_, '_>, work: &mut Assignment) -> bool {
        let m = ctx.model.m;
        for i in 0..self.movers.len() {
            let a = self.movers[i] as usize;
            if self.pot[a] <= 0 {
                continue;
            }
            self.partners.clear();
            for &h in ctx.model.adjacent(a) {
                if self.cur[h as usize] >= ctx.model.hi[h as usize] {
                    continue;
                }
                for &c in ctx.model.members(h as usize) {
                    if c as usize != a
                        && !self.partners.contains(&c)
                        && self.partners.len() < COMPOUND_PARTNERS
                    {
                        self.partners.push(c);
                    }
                }
            }
            if self.partners.is_empty() {
                continue;
            }
            let mut first = std::mem::take(&mut self.cands);
            self.candidates(ctx, work, a, &mut first);
            first.sort_unstable_by_key(|x| std::cmp::Reverse(x.0));
            first.truncate(COMPOUND_WIDTH);
            let partners = std::mem::take(&mut self.partners);
            let mut found = false;
            'outer: for &(du1, code1) in &first {
                let t1 = target(code1, m);
                let b1 = self.partner(a, t1);
                let undo1 = self.apply(work, a, t1);
                for &c in &partners {
                    let c = c as usize;
                    let mut second = std::mem::take(&mut self.cands2);
                    self.candidates(ctx, work, c, &mut second);
                    second.sort_unstable_by_key(|x| std::cmp::Reverse(x.0));
                    second.truncate(COMPOUND_WIDTH);
                    for &(du2, code2) in &second {
                        let t2 = target(code2, m);
                        let b2 = self.partner(c, t2);
                        let undo2 = self.apply(work, c, t2);
                        let moved = [
                            Some(a),
                            b1.map(|b| b as usize),
                            Some(c),
                            b2.map(|b| b as usize),
                        ];
                        let du = i128::from(du1) + i128::from(du2);
                        if self.delta(ctx, work, &moved, du).is_some() {
                            self.commit(ctx, &moved);
                            found = true;
                            self.cands2 = second;
                            break 'outer;
                        }
                        self.revert(work, undo2);
                        if ctx.spent >= ctx.budget {
                            self.cands2 = second;
                            self.revert(work, undo1);
                            break 'outer;
                        }
                    }
                    self.cands2 = second;
                }
                self.revert(work, undo1);
            }
            self.cands = first;
            self.partners = partners;
            if found {
                return true;
            }
            if ctx.spent >= ctx.budget {
                return false;
            }
        }
        false
    }

    /// Every place `a` could go, with the change in unary utility.
    fn candidates(
        &self,
        ctx: &Ctx<'_, '_>,
        work: &Assignment,
        a: usize,
        out: &mut Vec<(i64, usize)>,
    ) {
        let (model, fits) = (ctx.model, ctx.fits);
        let m = model.m;
        out.clear();
        match work[a] {
            Some(s) => {
                for t in (0..m).filter(|&t| t != s && fits(a, t)) {
                    let mut du = model.u(a, t).saturating_sub(model.u(a, s));
                    if let Some(b) = self.owner[t] {
                        let b = b as usize;
                        if !fits(b, s) {
                            continue;
                        }
                        du = du.saturating_add(model.u(b, s).saturating_sub(model.u(b, t)));
                    }
                    out.push((du, t));
                }
                for &b in &self.unplaced {
                    let b = b as usize;
                    if fits(b, s) {
                        let du = model.u(b, s).saturating_sub(model.u(a, s));
                        out.push((du, m + b));
                    }
                }
            }
            None => {
                for t in (0..m).filter(|&t| fits(a, t)) {
                    if let Some(b) = self.owner[t] {
                        let du = model.u(a, t).saturating_sub(model.u(b as usize, t));
                        out.push((du, t));
                    }
                }
            }
        }
    }

    fn partner(&self, a: usize, target: Target) -> Option<u32> {
        match target {
            Target::Slot(t) => self.owner[t].filter(|&b| b as usize != a),
            Target::Trade(b) => Some(b),
        }
    }

    /// Apply a move; returns what [`LocalSearch::revert`] needs.
    fn apply(&mut self, work: &mut Assignment, a: usize, target: Target) -> Undo {
        let b = self.partner(a, target);
        let undo = Undo {
            a,
            a_from: work[a],
            b,
            b_from: b.and_then(|b| work[b as usize]),
        };
        let (a_to, b_to) = match target {
            Target::Slot(t) => (Some(t), undo.a_from),
            Target::Trade(_) => (None, undo.a_from),
        };
        self.put(work, undo.a, undo.a_from, undo.b, undo.b_from, a_to, b_to);
        undo
    }

    fn revert(&mut self, work: &mut Assignment, u: Undo) {
        let a_now = work[u.a];
        let b_now = u.b.and_then(|b| work[b as usize]);
        self.put(work, u.a, a_now, u.b, b_now, u.a_from, u.b_from);
    }

    /// Move `a` from `a_from` to `a_to` and `b` from `b_from` to `b_to`, keeping
    /// the slot owners and the unplaced list in step.
    #[allow(clippy::too_many_arguments)]
    fn put(
        &mut self,
        work: &mut Assignment,
        a: usize,
        a_from: Option<usize>,
        b: Option<u32>,
        b_from: Option<usize>,
        a_to: Option<usize>,
        b_to: Option<usize>,
    ) {
        for s in [a_from, b_from].into_iter().flatten() {
            self.owner[s] = None;
        }
        work[a] = a_to;
        if let Some(s) = a_to {
            self.owner[s] = Some(a as u32);
        }
        if let Some(b) = b {
            work[b as usize] = b_to;
            if let Some(s) = b_to {
                self.owner[s] = Some(b);
            }
        }
        let moved = [(a as u32, a_from, a_to)]
            .into_iter()
            .chain(b.map(|b| (b, b_from, b_to)));
        for (x, from, to) in moved {
            match (from.is_some(), to.is_some()) {
                (true, false) => self.unplaced.push(x),
                (false, true) => self.unplaced.retain(|&y| y != x),
                _ => {}
            }
        }
    }

    /// Split each ADU's higher terms into pair-kernel terms, scored from the
    /// kernel tables, and the rest, scored by the objectives.
    fn split_adjacency(&mut self, model: &Model) {
        let n = model.n;
        self.kstart.clear();
        self.kedges.clear();
        self.gstart.clear();
        self.gterms.clear();
        self.kstart.push(0);
        self.gstart.push(0);
        for a in 0..n {
            for &h in model.adjacent(a) {
                let k = model.kernel[h as usize];
                if k == NO_KERNEL {
                    self.gterms.push(h);
                } else {
                    let [p, q] = model.pair[h as usize];
                    let first = p as usize == a;
                    let half = if first { 0 } else { model.kernels.len() };
                    self.kedges.push(KernelEdge {
                        term: h,
                        kernel: k,
                        other: if first { q } else { p },
                        first,
                        by_correlation: model.kernel_by_correlation[k as usize],
                        table: ((half + k as usize) * model.m * model.m) as u32,
                    });
                }
            }
            self.kstart.push(self.kedges.len() as u32);
            self.gstart.push(self.gterms.len() as u32);
        }
    }

    /// Change in higher-term value from the moves just applied to `moved`, or
    /// `None` as soon as it is clear the move cannot beat `-du`.
    ///
    /// Pair-kernel terms are table lookups and are scored first, all of them. Of
    /// the other terms, those already at their upper bound can only lose, so the
    /// terms below it are evaluated first: if even their gain cannot pay for `du`, the move is
    /// rejected without evaluating the rest. While the rest are evaluated the
    /// running gain can only fall, so the move is rejected the moment it stops
    /// paying.
    fn delta(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        work: &Assignment,
        moved: &[Option<usize>],
        du: i128,
    ) -> Option<i128> {
        self.epoch = self.epoch.wrapping_add(1);
        let epoch = self.epoch;
        self.changed.clear();
        let mut gain = self.kernel_gain(ctx, work, moved);
        for below_bound in [true, false] {
            for &x in moved.iter().flatten() {
                if below_bound && self.gbelow[x] == 0 {
                    continue;
                }
                let (lo, hi) = (self.gstart[x] as usize, self.gstart[x + 1] as usize);
                for i in lo..hi {
                    let h = self.gterms[i];
                    let hu = h as usize;
                    if self.stamp[hu] == epoch || (self.cur[hu] < ctx.model.hi[hu]) != below_bound {
                        continue;
                    }
                    self.stamp[hu] = epoch;
                    let v = self.general_value(ctx.model, ctx.set, work, hu, x);
                    ctx.spent += 1;
                    gain += i128::from(v) - i128::from(self.cur[hu]);
                    self.changed.push((h, v));
                    if !below_bound && du + gain <= 0 {
                        return None;
                    }
                }
            }
            if du + gain <= 0 {
                return None;
            }
        }
        self.kernel_changes(ctx.model, work, moved);
        Some(gain)
    }

    /// The change in pair-kernel terms from the moves just applied to `moved`,
    /// each term counted once (a term of two moved ADUs is scored from the first).
    /// Charges one unit of budget per term.
    fn kernel_gain(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        work: &Assignment,
        moved: &[Option<usize>],
    ) -> i128 {
        let mut gain = 0i128;
        let (distinct, n) = distinct_moved(moved);
        for (i, &x) in distinct[..n].iter().enumerate() {
            let earlier = &distinct[..i];
            gain -= self.kcur[x];
            let (lo, hi) = (self.kstart[x] as usize, self.kstart[x + 1] as usize);
            let Some(own) = work[x] else {
                // Unplaced: every kernel term of `x` is 0.
                for e in &self.kedges[lo..hi] {
                    if earlier.contains(&(e.other as usize)) {
                        gain += i128::from(self.cur[e.term as usize]);
                    } else {
                        ctx.spent += 1;
                    }
                }
                continue;
            };
            let mut k = lo;
            while k < hi {
                // Known values in a plain loop over borrowed tables; an unknown
                // one leaves it to be computed (which needs `self` mutably).
                let (missing, spent) =
                    self.scan_known_kernels(ctx.model.m, work, earlier, own, &mut k, hi, &mut gain);
                ctx.spent += spent;
                if let Some((e, t)) = missing {
                    let (s, t) = if e.first { (own, t) } else { (t, own) };
                    gain += i128::from(self.fill_kernel(ctx.model, ctx.set, e.kernel, s, t));
                    k += 1;
                }
            }
        }
        gain
    }

    /// Add to `gain` the kernel terms of edges `*k..hi` of an ADU in slot `own`
    /// whose values are known, stopping at the first whose value is not (returned
    /// with its other member's slot, `*k` left on it). Returns the budget units
    /// charged: one per term scored here.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn scan_known_kernels(
        &self,
        m: usize,
        work: &Assignment,
        earlier: &[usize],
        own: usize,
        k: &mut usize,
        hi: usize,
        gain: &mut i128,
    ) -> (Option<(KernelEdge, usize)>, usize) {
        let (kedges, channel, off, cur) = (
            &self.kedges[..],
            &self.channel[..],
            &self.off_channel_pair[..],
            &self.cur[..],
        );
        let own_channel = channel[own];
        let mut spent = 0;
        while *k < hi {
            let e = kedges[*k];
            if !earlier.is_empty() && earlier.contains(&(e.other as usize)) {
                // Scored with the earlier ADU, whose sum also held its old value.
                *gain += i128::from(cur[e.term as usize]);
                *k += 1;
                continue;
            }
            spent += 1;
            let Some(t) = work[e.other as usize] else {
                *k += 1;
                continue;
            };
            let mut v = UNKNOWN;
            if e.by_correlation && channel[t] != own_channel {
                v = off[e.kernel as usize];
            }
            if v == UNKNOWN {
                v = self.ktab.get(e.index(m, own, t));
            }
            if v == UNKNOWN {
                return (Some((e, t)), spent);
            }
            *gain += i128::from(v);
            *k += 1;
        }
        (None, spent)
    }

    /// Record the pair-kernel terms of `moved` whose value the applied moves
    /// change (every value they need was made known by `kernel_gain`).
    fn kernel_changes(&mut self, model: &Model, work: &Assignment, moved: &[Option<usize>]) {
        let (distinct, n) = distinct_moved(moved);
        for (i, &x) in distinct[..n].iter().enumerate() {
            let earlier = &distinct[..i];
            let (lo, hi) = (self.kstart[x] as usize, self.kstart[x + 1] as usize);
            for e in &self.kedges[lo..hi] {
                if earlier.contains(&(e.other as usize)) {
                    continue;
                }
                let v = match (work[x], work[e.other as usize]) {
                    (Some(s), Some(t)) => self.known_kernel(model, e, s, t),
                    _ => 0,
                };
                if v != self.cur[e.term as usize] {
                    self.changed.push((e.term, v));
                }
            }
        }
    }

    /// The value of edge `e`'s kernel with its member in slot `own` and the other
    /// in slot `other`, if known: for slots on different channels, the kernel's one
    /// value there once computed (read instead of a table cell, so those cells are
    /// never filled one by one); else its table cell, which may be [`UNKNOWN`].
    #[inline]
    fn known_kernel(&self, model: &Model, e: &KernelEdge, own: usize, other: usize) -> i64 {
        let k = e.kernel as usize;
        if self.channel[own] != self.channel[other] && model.kernel_by_correlation[k] {
            let v = self.off_channel_pair[k];
            if v != UNKNOWN {
                return v;
            }
        }
        self.ktab.get(e.index(model.m, own, other))
    }

    /// Compute and store kernel `k` at slots `(s, t)`. A kernel read only
    /// through correlation has one value for all slot pairs on different
    /// channels: it is computed for the first such pair, and `known_kernel`
    /// reads it for the others.
    fn fill_kernel(
        &mut self,
        model: &Model,
        set: &mut PreparedSet<'_>,
        k: u32,
        s: usize,
        t: usize,
    ) -> i64 {
        let ku = k as usize;
        let off_channel = model.kernel_by_correlation[ku] && self.channel[s] != self.channel[t];
        let v = match off_channel.then(|| self.off_channel_pair[ku]) {
            Some(v) if v != UNKNOWN => v,
            _ => {
                let v = kernel_value(model, set, &mut self.scratch, k, s, t);
                if off_channel {
                    self.off_channel_pair[ku] = v;
                }
                v
            }
        };
        let (i, j) = kernel_cells(model.m, model.kernels.len(), k, s, t);
        self.ktab.set(i, v);
        self.ktab.set(j, v);
        v
    }

    /// Value of higher term `h` under `work`: from the kernel table when the term
    /// is a pair kernel (computing the entry once), else from the objective.
    fn term_value(
        &mut self,
        model: &Model,
        set: &mut PreparedSet<'_>,
        work: &Assignment,
        h: usize,
    ) -> i64 {
        let k = model.kernel[h];
        if k == NO_KERNEL {
            let x = model.members(h)[0] as usize;
            return self.general_value(model, set, work, h, x);
        }
        let [a, b] = model.pair[h];
        let (Some(s), Some(t)) = (work[a as usize], work[b as usize]) else {
            return 0;
        };
        let m = model.m;
        let v = self
            .ktab
            .get(kernel_cells(m, model.kernels.len(), k, s, t).0);
        if v == UNKNOWN {
            self.fill_kernel(model, set, k, s, t)
        } else {
            v
        }
    }

    /// Value of higher term `h`, which is not a pair kernel and has `x` among its
    /// members, under `work`. A solo-kernel term is a function of `x`'s slot
    /// alone, read from (or computed once into) the solo table; any other term
    /// asks its objective.
    #[inline]
    fn general_value(
        &mut self,
        model: &Model,
        set: &mut PreparedSet<'_>,
        work: &Assignment,
        h: usize,
        x: usize,
    ) -> i64 {
        let k = model.solo[h];
        let (o, t) = model.terms[h];
        if k == NO_KERNEL {
            return set.get(o as usize).value(t as usize, work, true);
        }
        let Some(s) = work[x] else {
            return 0;
        };
        let cell = k as usize * model.m + s;
        match self.stab.get(cell) {
            UNKNOWN => {
                let ku = k as usize;
                let constant = match model.solo_off_channel.get(ku) {
                    Some(Some(None)) => true,
                    Some(Some(Some(c))) => self.channel[s] != *c,
                    _ => false,
                };
                let v = match constant.then(|| self.off_channel_solo[ku]) {
                    Some(v) if v != UNKNOWN => v,
                    _ => {
                        let v = set.get(o as usize).value(t as usize, work, true);
                        if constant {
                            self.off_channel_solo[ku] = v;
                        }
                        v
                    }
                };
                self.stab.set(cell, v);
                v
            }
            v => v,
        }
    }

    /// Keep the move just evaluated: its terms' new values, the potentials, and
    /// fresh looks for everyone whose terms changed.
    fn commit(&mut self, ctx: &Ctx<'_, '_>, moved: &[Option<usize>]) {
        for &x in moved.iter().flatten() {
            self.look[x] = true;
        }
        for &(h, v) in &self.changed {
            let hu = h as usize;
            let was_below = self.cur[hu] < ctx.model.hi[hu];
            let d = i128::from(v) - i128::from(self.cur[hu]);
            self.cur[hu] = v;
            let below = v < ctx.model.hi[hu];
            if ctx.model.kernel[hu] != NO_KERNEL {
                for a in ctx.model.pair[hu] {
                    self.kcur[a as usize] += d;
                }
            }
            if ctx.model.kernel[hu] == NO_KERNEL && below != was_below {
                for &x in ctx.model.members(hu) {
                    if below {
                        self.gbelow[x as usize] += 1;
                    } else {
                        self.gbelow[x as usize] -= 1;
                    }
                }
            }
            for &x in ctx.model.members(h as usize) {
                self.pot[x as usize] -= d;
                if d != 0 {
                    self.look[x as usize] = true;
                }
            }
        }
    }
}

/// Put the ADUs with the most utility still open (the largest potential) first,
/// keeping the shuffled order among equals. The budget rarely lasts a whole pass, so
/// this decides which ADUs are searched at all. A stable sort of a few dozen indices
/// sorts on the stack: no allocation.
fn order_by_potential(movers: &mut [u32], pot: &[i128]) {
    movers.sort_by_key(|&a| std::cmp::Reverse(pot[a as usize]));
}

/// Kernel `k` at slots `(s, t)`: any term with this kernel gives it with its
/// members at `s` and `t`. `scratch` is an all-unplaced assignment and is left so.
fn kernel_value(
    model: &Model,
    set: &mut PreparedSet<'_>,
    scratch: &mut Assignment,
    k: u32,
    s: usize,
    t: usize,
) -> i64 {
    let (o, rep) = model.kernels[k as usize];
    let [ra, rb] = model.kernel_pair[k as usize];
    let (ra, rb) = (ra as usize, rb as usize);
    scratch[ra] = Some(s);
    scratch[rb] = Some(t);
    let v = set.get(o as usize).value(rep as usize, scratch, true);
    scratch[ra] = None;
    scratch[rb] = None;
    v
}

/// The distinct ADUs of `moved` (a move touches at most four), in order: a kernel
/// term of two moved ADUs is scored from the first of them.
fn distinct_moved(moved: &[Option<usize>]) -> ([usize; 4], usize) {
    let mut distinct = [usize::MAX; 4];
    let mut n = 0;
    for &x in moved.iter().flatten().take(distinct.len()) {
        if !distinct[..n].contains(&x) {
            distinct[n] = x;
            n += 1;
        }
    }
    (distinct, n)
}

#[cfg(test)]
mod tests {
    use super::order_by_potential;

    #[test]
    fn movers_go_largest_potential_first_and_ties_keep_the_shuffle() {
        let pot = [5, 9, 5, 0, -3];
        let mut movers = [3, 1, 2, 0, 4];
        order_by_potential(&mut movers, &pot);
        assert_eq!(movers, [1, 2, 0, 3, 4]);
        let mut shuffled_otherwise = [0, 4, 3, 2, 1];
        order_by_potential(&mut shuffled_otherwise, &pot);
        assert_eq!(shuffled_otherwise, [1, 0, 2, 3, 4]);
    }
}
