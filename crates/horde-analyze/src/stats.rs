//! Distributions and summaries: the fairness gap (003 Eq. 7.1), empirical CDFs, medians
//! and 90% confidence intervals of a mean (Student t).

/// f_gap = (max − min) / min of per-user throughputs; `None` when fewer than one value or
/// the minimum is not positive.
pub fn fairness_gap(throughputs: &[f64]) -> Option<f64> {
    let lo = throughputs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = throughputs
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    (lo.is_finite() && lo > 0.0).then(|| (hi - lo) / lo)
}

/// The empirical CDF: sorted finite values with cumulative probabilities i/n.
pub fn cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    v.into_iter()
        .enumerate()
        .map(|(i, x)| (x, (i + 1) as f64 / n))
        .collect()
}

/// The `q` quantile (nearest rank on finite values); `None` if there are none.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * q.clamp(0.0, 1.0)).round() as usize;
    Some(v[i])
}

/// The nearest-rank `p`-th percentile (`p` in 1..=100) of ascending `sorted` samples:
/// the smallest sample such that at least p% of the samples are at or below it, i.e.
/// `sorted[ceil(p * n / 100) - 1]`. It is always an observed value, needs no
/// interpolation rule, and is exact. `None` if there are no samples.
pub fn percentile(sorted: &[f64], p: u32) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len() as u64;
    // ceil(p * n / 100) in integers, so p = 50 of 10 samples is rank 5, not 5.000001.
    let rank = (u64::from(p.clamp(1, 100)) * n).div_ceil(100);
    Some(sorted[(rank.max(1) - 1) as usize])
}

/// A mean and the half-width of its 90% confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanCi {
    /// Sample mean.
    pub mean: f64,
    /// Half-width: the interval is `mean ± half`.
    pub half: f64,
    /// Finite values used.
    pub n: usize,
}

/// Mean with a two-sided 90% Student-t interval (the thesis's plots, 003 §4); `None` for
/// fewer than two finite values.
pub fn mean_ci90(values: &[f64]) -> Option<MeanCi> {
    let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let n = v.len();
    if n < 2 {
        return None;
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some(MeanCi {
        mean,
        half: t95(n - 1) * (var / n as f64).sqrt(),
        n,
    })
}

/// The 0.95 quantile of Student's t with `df` degrees of freedom.
fn t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771,
        1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706,
        1.703, 1.701, 1.699, 1.697,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        // Beyond 30, a first-order expansion around the normal quantile.
        _ => 1.644_854 + (1.644_854f64.powi(3) + 1.644_854) / (4.0 * df as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_values() {
        assert_eq!(fairness_gap(&[10.0, 30.0, 20.0]), Some(2.0));
        assert_eq!(fairness_gap(&[5.0, 5.0]), Some(0.0));
        assert_eq!(fairness_gap(&[0.0, 5.0]), None);
        assert_eq!(
            cdf(&[3.0, 1.0, f64::NAN, 2.0, 4.0]),
            [(1.0, 0.25), (2.0, 0.5), (3.0, 0.75), (4.0, 1.0)]
        );
        assert_eq!(quantile(&[5.0, 1.0, 3.0], 0.5), Some(3.0));
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&v, 25), Some(3.0));
        assert_eq!(percentile(&v, 50), Some(5.0));
        assert_eq!(percentile(&v, 75), Some(8.0));
        assert_eq!(percentile(&v, 95), Some(10.0));
        assert_eq!(percentile(&v, 100), Some(10.0));
        assert_eq!(percentile(&[4.0], 1), Some(4.0));
        assert_eq!(percentile(&[], 50), None);
        // 95 % of 20 is rank 19 exactly, where float arithmetic would round up to 20.
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&v, 95), Some(19.0));
        // 1..=5: mean 3, s = 1.5811, t(4) = 2.132: half = 2.132 * 1.5811 / sqrt 5 = 1.5075.
        let ci = mean_ci90(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!(ci.mean, 3.0);
        assert!((ci.half - 1.5075).abs() < 1e-3, "{ci:?}");
        assert!(mean_ci90(&[1.0]).is_none());
        assert!((t95(1000) - 1.6464).abs() < 1e-3);
    }
}
