//! Haar multi-timescale split (thesis 003 §5.2, after Barford & Plonka) and the scheduler
//! stability metrics of §6.1.4.
//!
//! With 1 s samples, the **fast** component is the level-1 Haar detail, reconstructed:
//! each sample minus the mean of its 2 s block (variations over ~2 s). The **slow**
//! component is the level-5 Haar approximation, reconstructed: the mean of each 32 s
//! block (variations over ~32 s and longer). A trailing partial block is left out.

use crate::discretize::{discretize, Method};
use crate::info::entropy;

/// The two components, each as long as the whole blocks of the input.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// x(n) minus the mean of its 2-sample block.
    pub fast: Vec<f64>,
    /// The mean of its 32-sample block.
    pub slow: Vec<f64>,
}

/// Mean of each `block`-sample block, repeated over the block.
fn block_means(x: &[f64], block: usize) -> Vec<f64> {
    let whole = x.len() / block * block;
    x[..whole]
        .chunks(block)
        .flat_map(|c| {
            let m = c.iter().sum::<f64>() / block as f64;
            std::iter::repeat_n(m, block)
        })
        .collect()
}

/// Split `x` (missing values are taken as 0) into ~2 s and ~32 s components.
pub fn haar_split(x: &[f64]) -> Split {
    let x: Vec<f64> = x
        .iter()
        .map(|v| if v.is_finite() { *v } else { 0.0 })
        .collect();
    let pairs = block_means(&x, 2);
    let fast = x.iter().zip(&pairs).map(|(v, m)| v - m).collect();
    Split {
        fast,
        slow: block_means(&x, 32),
    }
}

/// Burstiness β: mean energy of the fast component over that of the slow one (0 for a
/// constant series; 0 if the slow component has no energy).
pub fn burstiness(x: &[f64]) -> f64 {
    let s = haar_split(x);
    let energy = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>() / v.len().max(1) as f64;
    let slow = energy(&s.slow);
    if slow <= 0.0 {
        0.0
    } else {
        energy(&s.fast) / slow
    }
}

/// Rate entropy μ: entropy in bits of a rate series in `bin_kbps` bins (10 kbit/s in the
/// thesis).
pub fn rate_entropy(rate_kbps: &[f64], bin_kbps: f64) -> f64 {
    entropy(&discretize(rate_kbps, Method::EqualWidth(bin_kbps)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_split_and_metrics() {
        let x: Vec<f64> = (0..64)
            .map(|i| if i % 2 == 0 { 3.0 } else { 1.0 })
            .collect();
        let s = haar_split(&x);
        assert!(s.fast.iter().all(|f| f.abs() == 1.0));
        assert!(s.slow.iter().all(|m| *m == 2.0));
        // Fast energy 1, slow energy 4.
        assert!((burstiness(&x) - 0.25).abs() < 1e-12);
        assert_eq!(burstiness(&[5.0; 64]), 0.0);
        // Two levels, half the time each: 1 bit. One level: 0.
        assert!((rate_entropy(&x, 10.0) - 0.0).abs() < 1e-12);
        let r: Vec<f64> = (0..10).map(|i| if i < 5 { 9.6 } else { 153.6 }).collect();
        assert!((rate_entropy(&r, 10.0) - 1.0).abs() < 1e-12);
        // A 33rd sample does not make a block.
        assert_eq!(haar_split(&[1.0; 33]).slow.len(), 32);
    }
}
