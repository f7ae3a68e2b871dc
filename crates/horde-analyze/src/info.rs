//! Entropy, mutual information and the thesis's asymmetric normalised mutual information
//! I_N(X;Y) = I(X;Y) / H(X) (003 Eq. 5.4), swept over lags (Eq. 5.6), with a shuffled-series
//! null baseline. Plug-in estimates in bits.
//!
//! Lag convention: at lag `L`, `y(n)` is paired with `x(n - L)`, i.e. `x` shifted `L`
//! samples into the past. Pairs where either value is missing are left out.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn h(counts: &[u32], total: f64) -> f64 {
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / total;
            -p * p.log2()
        })
        .sum()
}

/// Entropy of a symbol sequence (missing values left out), in bits.
pub fn entropy(x: &[Option<u32>]) -> f64 {
    let k = x.iter().flatten().max().map_or(0, |m| *m as usize + 1);
    let mut c = vec![0u32; k];
    let mut n = 0.0;
    for s in x.iter().flatten() {
        c[*s as usize] += 1;
        n += 1.0;
    }
    if n == 0.0 {
        0.0
    } else {
        h(&c, n)
    }
}

/// Joint counting for one pair of sequences at one lag, reusing buffers.
struct Counter {
    kx: usize,
    ky: usize,
    joint: Vec<u32>,
    cx: Vec<u32>,
    cy: Vec<u32>,
}

/// H(X), H(Y), H(X,Y) of the lagged pairs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Entropies {
    /// H(X) over the pairs.
    pub hx: f64,
    /// H(Y) over the pairs.
    pub hy: f64,
    /// H(X, Y).
    pub hxy: f64,
    /// Number of pairs.
    pub pairs: usize,
}

impl Entropies {
    /// I(X;Y) = H(X) + H(Y) - H(X,Y).
    pub fn mi(&self) -> f64 {
        (self.hx + self.hy - self.hxy).max(0.0)
    }

    /// I(X;Y) / H(X); 0 when X carries no information.
    pub fn nmi(&self) -> f64 {
        if self.hx <= 0.0 {
            0.0
        } else {
            self.mi() / self.hx
        }
    }
}

impl Counter {
    fn new(x: &[Option<u32>], y: &[Option<u32>]) -> Counter {
        let k = |s: &[Option<u32>]| s.iter().flatten().max().map_or(1, |m| *m as usize + 1);
        let (kx, ky) = (k(x), k(y));
        Counter {
            kx,
            ky,
            joint: vec![0; kx * ky],
            cx: vec![0; kx],
            cy: vec![0; ky],
        }
    }

    fn at(&mut self, x: &[Option<u32>], y: &[Option<u32>], lag: usize) -> Entropies {
        self.joint.fill(0);
        self.cx.fill(0);
        self.cy.fill(0);
        let mut n = 0u32;
        let len = x.len().min(y.len());
        for i in lag..len {
            if let (Some(a), Some(b)) = (x[i - lag], y[i]) {
                let (a, b) = (a as usize, b as usize);
                self.joint[a * self.ky + b] += 1;
                self.cx[a] += 1;
                self.cy[b] += 1;
                n += 1;
            }
        }
        let _ = self.kx;
        if n == 0 {
            return Entropies {
                hx: 0.0,
                hy: 0.0,
                hxy: 0.0,
                pairs: 0,
            };
        }
        let t = f64::from(n);
        Entropies {
            hx: h(&self.cx, t),
            hy: h(&self.cy, t),
            hxy: h(&self.joint, t),
            pairs: n as usize,
        }
    }
}

/// The entropies of `x(n - lag)` and `y(n)`.
pub fn lagged(x: &[Option<u32>], y: &[Option<u32>], lag: usize) -> Entropies {
    Counter::new(x, y).at(x, y, lag)
}

/// Mutual information of `x` and `y` at lag 0, in bits.
pub fn mutual_information(x: &[Option<u32>], y: &[Option<u32>]) -> f64 {
    lagged(x, y, 0).mi()
}

/// One row of a lag sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LagNmi {
    /// The lag, in samples.
    pub lag: usize,
    /// I_N(X;Y;lag).
    pub nmi: f64,
    /// The null baseline at this lag: the 95th percentile of I_N over shuffles of `x`
    /// (0 when no shuffles were asked for).
    pub null: f64,
}

/// I_N(X;Y;L) for L in `0..=max_lag`, with a null from `shuffles` random permutations of
/// `x` (seeded, so repeatable). A permutation keeps the marginal distribution of X and
/// destroys any dependence, so the null is what the estimator reports for independent
/// series of this length and alphabet.
pub fn nmi_sweep(
    x: &[Option<u32>],
    y: &[Option<u32>],
    max_lag: usize,
    shuffles: usize,
    seed: u64,
) -> Vec<LagNmi> {
    let mut c = Counter::new(x, y);
    let lags = max_lag + 1;
    let mut rows: Vec<LagNmi> = (0..lags)
        .map(|lag| LagNmi {
            lag,
            nmi: c.at(x, y, lag).nmi(),
            null: 0.0,
        })
        .collect();
    if shuffles == 0 {
        return rows;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut perm = x.to_vec();
    let mut null = vec![Vec::with_capacity(shuffles); lags];
    for _ in 0..shuffles {
        perm.shuffle(&mut rng);
        for (lag, v) in null.iter_mut().enumerate() {
            v.push(c.at(&perm, y, lag).nmi());
        }
    }
    for (row, mut v) in rows.iter_mut().zip(null) {
        v.sort_by(f64::total_cmp);
        let i = ((v.len() as f64 - 1.0) * 0.95).round() as usize;
        row.null = v[i];
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discretize::{discretize, Method};
    use rand::Rng;

    fn sym(v: &[u32]) -> Vec<Option<u32>> {
        v.iter().map(|&s| Some(s)).collect()
    }

    #[test]
    fn hand_computed_values() {
        // Two equiprobable symbols: 1 bit; four: 2 bits.
        assert!((entropy(&sym(&[0, 1, 0, 1])) - 1.0).abs() < 1e-12);
        assert!((entropy(&sym(&[0, 1, 2, 3])) - 2.0).abs() < 1e-12);
        // p = (1/2, 1/4, 1/4): 1.5 bits.
        assert!((entropy(&sym(&[0, 0, 1, 2])) - 1.5).abs() < 1e-12);
        // Y = X: I = H(X), NMI = 1. Y independent (every pair once): I = 0.
        let x = sym(&[0, 0, 1, 1]);
        assert!((mutual_information(&x, &x) - 1.0).abs() < 1e-12);
        assert!(mutual_information(&x, &sym(&[0, 1, 0, 1])).abs() < 1e-12);
        // Asymmetry: X = (0,1,2,3), Y = X / 2 = (0,0,1,1). I = 1 bit;
        // I/H(X) = 0.5 but I/H(Y) = 1.
        let x = sym(&[0, 1, 2, 3]);
        let y = sym(&[0, 0, 1, 1]);
        assert!((lagged(&x, &y, 0).nmi() - 0.5).abs() < 1e-12);
        assert!((lagged(&y, &x, 0).nmi() - 1.0).abs() < 1e-12);
        // Lag: y(n) = x(n - 1) gives NMI 1 at lag 1.
        let x = sym(&[0, 1, 1, 0, 1, 0, 0, 1]);
        let mut y = vec![Some(0)];
        y.extend_from_slice(&x[..7]);
        let e = lagged(&x, &y, 1);
        assert_eq!(e.pairs, 7);
        assert!((e.nmi() - 1.0).abs() < 1e-12);
        // Missing values are skipped.
        let e = lagged(&[Some(0), None, Some(1)], &[Some(0), Some(1), Some(1)], 0);
        assert_eq!(e.pairs, 2);
    }

    #[test]
    fn synthetic_check_peaks_at_lags_3_and_7_above_the_null() {
        // Thesis 003 §5.1.5: Z(n) = 5 X(n-3) + 2 X(n-7) + Y(n), X and Y random.
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let n = 5000;
        let x: Vec<f64> = (0..n).map(|_| rng.gen::<f64>()).collect();
        let y: Vec<f64> = (0..n).map(|_| rng.gen::<f64>()).collect();
        let z: Vec<f64> = (0..n)
            .map(|i| {
                let past = |d: usize| if i >= d { x[i - d] } else { 0.5 };
                5.0 * past(3) + 2.0 * past(7) + y[i]
            })
            .collect();
        let xs = discretize(&x, Method::EqualWidth(1.0 / 8.0));
        let zs = discretize(&z, Method::EqualWidth(8.0 / 8.0));
        let rows = nmi_sweep(&xs, &zs, 12, 50, 1);
        let mut order: Vec<&LagNmi> = rows.iter().collect();
        order.sort_by(|a, b| b.nmi.total_cmp(&a.nmi));
        assert_eq!((order[0].lag, order[1].lag), (3, 7), "{rows:?}");
        // Clearly above the null, and above every other lag.
        for top in &order[..2] {
            assert!(top.nmi > 3.0 * top.null, "{top:?}");
            assert!(top.nmi > 3.0 * order[2].nmi, "{top:?} vs {:?}", order[2]);
        }
    }

    #[test]
    fn null_is_near_zero_for_independent_series_and_bounds_them() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let x: Vec<Option<u32>> = (0..1200).map(|_| Some(rng.gen_range(0..8))).collect();
        let y: Vec<Option<u32>> = (0..1200).map(|_| Some(rng.gen_range(0..8))).collect();
        let rows = nmi_sweep(&x, &y, 10, 40, 2);
        for r in &rows {
            assert!(r.null > 0.0 && r.null < 0.05, "{r:?}");
        }
        // At most a lag or two of eleven may poke above a 95% null by chance.
        assert!(rows.iter().filter(|r| r.nmi > r.null).count() <= 3);
    }
}
