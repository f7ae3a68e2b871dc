//! Minimum-cost assignment of rows to distinct columns: the shortest augmenting
//! path method (Crouse 2016, as in SciPy's `linear_sum_assignment`), O(rows² x
//! cols) in the worst case, with forbidden pairs. Ties prefer a free column, which
//! ends the path at once; with many identical slots that is most of the speed.

/// Marks a pair that may not be used.
pub(crate) const FORBIDDEN: i64 = i64::MAX;

const INF: i64 = i64::MAX;

/// Reusable buffers.
#[derive(Debug, Default)]
pub(crate) struct Hungarian {
    u: Vec<i64>,
    v: Vec<i64>,
    shortest: Vec<i64>,
    path: Vec<usize>,
    col4row: Vec<usize>,
    row4col: Vec<usize>,
    sr: Vec<bool>,
    sc: Vec<bool>,
}

const NONE: usize = usize::MAX;

impl Hungarian {
    /// Assign every row a distinct column at least total cost. `cost` is row-major
    /// `n x m`, [`FORBIDDEN`] for pairs that may not be used. `out[row]` is the
    /// row's column, or `None` if forbidden pairs leave it none. Needs `n <= m`;
    /// costs must stay far from the i64 limits (callers keep them within ±2^50).
    pub fn solve(&mut self, n: usize, m: usize, cost: &[i64], out: &mut Vec<Option<usize>>) {
        out.clear();
        out.resize(n, None);
        if n == 0 || m == 0 || cost.len() < n * m {
            return;
        }
        fn reset<T: Copy>(v: &mut Vec<T>, len: usize, x: T) {
            v.clear();
            v.resize(len, x);
        }
        reset(&mut self.u, n, 0);
        reset(&mut self.v, m, 0);
        reset(&mut self.shortest, m, INF);
        reset(&mut self.path, m, NONE);
        reset(&mut self.col4row, n, NONE);
        reset(&mut self.row4col, m, NONE);
        reset(&mut self.sr, n, false);
        reset(&mut self.sc, m, false);
        for row in 0..n {
            let Some((sink, min_val)) = self.shortest_path(m, cost, row) else {
                continue; // no reachable column: leave the row out
            };
            // Update the duals of the rows and columns the search settled.
            self.u[row] += min_val;
            for i in 0..n {
                if self.sr[i] && i != row {
                    self.u[i] += min_val - self.shortest[self.col4row[i]];
                }
            }
            for j in 0..m {
                if self.sc[j] {
                    self.v[j] -= min_val - self.shortest[j];
                }
            }
            // Augment along the path.
            let mut j = sink;
            loop {
                let i = self.path[j];
                self.row4col[j] = i;
                std::mem::swap(&mut self.col4row[i], &mut j);
                if i == row {
                    break;
                }
            }
        }
        for (i, &j) in self.col4row.iter().enumerate() {
            if j != NONE {
                out[i] = Some(j);
            }
        }
    }

    /// Dijkstra from `start` over reduced costs until a free column is settled;
    /// returns that column and its distance. Columns are scanned in order, settled
    /// ones skipped: sequential, bounds-check-free loops beat a shrinking list of
    /// remaining columns at these sizes.
    fn shortest_path(&mut self, m: usize, cost: &[i64], start: usize) -> Option<(usize, i64)> {
        let mut min_val = 0i64;
        self.sr.fill(false);
        self.sc.fill(false);
        self.shortest.fill(INF);
        let v = &self.v[..m];
        let shortest = &mut self.shortest[..m];
        let path = &mut self.path[..m];
        let row4col = &self.row4col[..m];
        let sc = &mut self.sc[..m];
        let mut i = start;
        loop {
            self.sr[i] = true;
            let row = &cost[i * m..(i + 1) * m];
            let base = min_val - self.u[i];
            let mut lowest = INF;
            let mut index = NONE;
            for j in 0..m {
                if sc[j] {
                    continue;
                }
                let c = row[j];
                if c != FORBIDDEN {
                    let r = base + c - v[j];
                    if r < shortest[j] {
                        path[j] = i;
                        shortest[j] = r;
                    }
                }
                let sj = shortest[j];
                if sj < lowest || (sj == lowest && sj != INF && row4col[j] == NONE) {
                    lowest = sj;
                    index = j;
                }
            }
            if index == NONE {
                return None;
            }
            min_val = lowest;
            let j = index;
            sc[j] = true;
            if row4col[j] == NONE {
                return Some((j, min_val));
            }
            i = row4col[j];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(cost: &[Vec<Option<i64>>], m: usize) -> i64 {
        fn go(cost: &[Vec<Option<i64>>], i: usize, used: &mut Vec<bool>) -> Option<i64> {
            if i == cost.len() {
                return Some(0);
            }
            let mut best: Option<i64> = None;
            for j in 0..used.len() {
                if used[j] {
                    continue;
                }
                if let Some(c) = cost[i][j] {
                    used[j] = true;
                    if let Some(rest) = go(cost, i + 1, used) {
                        best = Some(best.map_or(c + rest, |b| b.min(c + rest)));
                    }
                    used[j] = false;
                }
            }
            best
        }
        go(cost, 0, &mut vec![false; m]).unwrap()
    }

    #[test]
    fn leaves_out_the_row_that_loses_least() {
        // Four rows, six slots and one "leave out" column (cost 0): the row whose
        // every slot is bad should take it. Two optima tie at -1365.
        let c: Vec<Vec<i64>> = vec![
            vec![-270, 520, -270, 520, 375, 1195, 0],
            vec![-465, 325, -465, 325, 180, 1000, 0],
            vec![-405, 385, -405, 385, 240, 1060, 0],
            vec![-1140, -350, -1140, -350, -495, 325, 0],
        ];
        let flat: Vec<i64> = c.iter().flatten().copied().collect();
        let mut out = Vec::new();
        Hungarian::default().solve(4, 7, &flat, &mut out);
        let total: i64 = out.iter().enumerate().map(|(i, j)| c[i][j.unwrap()]).sum();
        assert_eq!(total, -1365);
    }

    #[test]
    fn matches_brute_force() {
        let mut seed = 12345u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as i64
        };
        let mut h = Hungarian::default();
        for trial in 0..300 {
            let n = 1 + (trial % 5) as usize;
            let m = n + (next() % 3) as usize;
            let cost: Vec<Vec<Option<i64>>> = (0..n)
                .map(|_| {
                    (0..m)
                        .map(|j| {
                            // Column 0 always allowed so a complete assignment exists.
                            if j > 0 && next() % 5 == 0 {
                                None
                            } else {
                                Some(next() % 200 - 100)
                            }
                        })
                        .collect()
                })
                .collect();
            // Keep it solvable: give each row its own always-allowed column.
            let cost: Vec<Vec<Option<i64>>> = cost
                .into_iter()
                .enumerate()
                .map(|(i, mut r)| {
                    if r[i].is_none() {
                        r[i] = Some(50);
                    }
                    r
                })
                .collect();
            let flat: Vec<i64> = cost
                .iter()
                .flatten()
                .map(|c| c.unwrap_or(FORBIDDEN))
                .collect();
            let mut out = Vec::new();
            h.solve(n, m, &flat, &mut out);
            let mut seen = vec![false; m];
            let mut total = 0;
            for (i, j) in out.iter().enumerate() {
                let j = j.expect("assigned");
                assert!(!seen[j]);
                seen[j] = true;
                total += cost[i][j].expect("allowed");
            }
            assert_eq!(total, brute(&cost, m), "trial {trial}");
        }
    }
}
