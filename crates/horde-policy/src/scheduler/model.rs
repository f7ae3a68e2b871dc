//! The objectives' structure for one cycle, as the directed scheduler builds it and
//! its local search reads it: unary utilities, higher terms, kernels and adjacency.

use crate::objective::PreparedSet;
use crate::ChannelId;

/// Marks a higher term that is not a pair kernel.
pub const NO_KERNEL: u32 = u32::MAX;

/// Solo kernels are tabulated per slot only up to this many cells in all.
const MAX_SOLO_CELLS: usize = 1 << 18;

/// The objectives' structure for one cycle.
#[derive(Debug, Default)]
pub(crate) struct Model {
    pub n: usize,
    pub m: usize,
    /// Unary utility, row-major `n x m`.
    pub u: Vec<i64>,
    /// ADUs with at least one unary term (rows of the assignment problem).
    pub unary_adu: Vec<bool>,
    /// Higher terms as (objective, term).
    pub terms: Vec<(u32, u32)>,
    /// Upper bound of each higher term.
    pub hi: Vec<i64>,
    /// Per higher term: index into `kernels` if it is a pair kernel, else `NO_KERNEL`.
    pub kernel: Vec<u32>,
    /// Per higher term: its two members, when it is a pair kernel.
    pub pair: Vec<[u32; 2]>,
    /// Distinct pair kernels: (objective, a term that has it).
    pub kernels: Vec<(u32, u32)>,
    /// Per distinct pair kernel: (objective, its kernel id).
    pub kernel_ids: Vec<(u32, u32)>,
    /// Per distinct pair kernel: the members of the term in `kernels`.
    pub kernel_pair: Vec<[u32; 2]>,
    /// Per distinct pair kernel: it reads its slots only through their loss
    /// correlation, so every pair of slots on different channels has one value.
    pub kernel_by_correlation: Vec<bool>,
    /// Per higher term: its row in the solo-kernel table if its value is a
    /// function of its one member's slot shared with other terms, else `NO_KERNEL`.
    pub solo: Vec<u32>,
    /// Rows of the solo-kernel table (one per objective's solo kernel id).
    pub solo_kernels: usize,
    /// Per row of the solo-kernel table: where it is constant
    /// ([`crate::objective::PreparedObjective::solo_kernel_off_channel`]).
    pub solo_off_channel: Vec<Option<Option<ChannelId>>>,
    /// For each ADU, the higher terms it is a member of (CSR).
    pub adj_start: Vec<u32>,
    pub adj: Vec<u32>,
    /// For each higher term, its members (CSR).
    pub members_start: Vec<u32>,
    pub members: Vec<u32>,
}

impl Model {
    /// Empty for `n` ADUs and `m` slots, keeping the memory.
    pub fn clear(&mut self, n: usize, m: usize) {
        self.n = n;
        self.m = m;
        self.u.clear();
        self.u.resize(n * m, 0);
        self.unary_adu.clear();
        self.unary_adu.resize(n, false);
        self.terms.clear();
        self.hi.clear();
        self.kernel.clear();
        self.pair.clear();
        self.kernels.clear();
        self.kernel_ids.clear();
        self.kernel_pair.clear();
        self.kernel_by_correlation.clear();
        self.solo.clear();
        self.solo_off_channel.clear();
        self.solo_kernels = 0;
        self.adj_start.clear();
        self.adj.clear();
        self.members_start.clear();
        self.members_start.push(0);
        self.members.clear();
    }

    /// Fill `solo` and `solo_kernels`: each objective's solo kernels take the
    /// next rows of the table, as long as it stays small.
    pub fn find_solo_kernels(&mut self, set: &mut PreparedSet<'_>) {
        self.solo.clear();
        self.solo.resize(self.terms.len(), NO_KERNEL);
        self.solo_kernels = 0;
        self.solo_off_channel.clear();
        let mut h = 0;
        for oi in 0..set.len() {
            let o = set.get(oi);
            let base = self.solo_kernels;
            let rows = o.solo_kernels();
            let fits = base.saturating_add(rows).saturating_mul(self.m) <= MAX_SOLO_CELLS;
            if fits {
                self.solo_kernels += rows;
                self.solo_off_channel
                    .extend((0..rows as u32).map(|k| o.solo_kernel_off_channel(k)));
            }
            while h < self.terms.len() && self.terms[h].0 as usize == oi {
                if fits && self.members(h).len() == 1 {
                    if let Some(k) = o.solo_kernel(self.terms[h].1 as usize) {
                        if (k as usize) < rows {
                            self.solo[h] = (base + k as usize) as u32;
                        }
                    }
                }
                h += 1;
            }
        }
    }

    /// No solo kernels: every higher term is scored by its objective.
    pub fn without_solo_kernels(&mut self) {
        self.solo.clear();
        self.solo.resize(self.terms.len(), NO_KERNEL);
        self.solo_kernels = 0;
        self.solo_off_channel.clear();
    }

    pub fn u(&self, a: usize, s: usize) -> i64 {
        self.u[a * self.m + s]
    }

    pub fn adjacent(&self, a: usize) -> &[u32] {
        &self.adj[self.adj_start[a] as usize..self.adj_start[a + 1] as usize]
    }

    pub fn members(&self, h: usize) -> &[u32] {
        &self.members[self.members_start[h] as usize..self.members_start[h + 1] as usize]
    }
}
