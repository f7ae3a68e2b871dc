//! Alignment of irregular samples onto a common grid of 1 s (or any) bins.

/// How the samples falling into one bin become its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduce {
    /// Mean of the samples (RTT, Ec/Io); empty bins are NaN.
    Mean,
    /// Sum of the samples (bytes, packets); empty bins are 0.
    Sum,
}

/// Bin `(time, value)` samples into bins of `width` starting at `start`, `n` bins.
/// Samples outside `[start, start + n * width)` are ignored.
pub fn bin(samples: &[(f64, f64)], start: f64, width: f64, n: usize, how: Reduce) -> Vec<f64> {
    let mut sum = vec![0.0; n];
    let mut count = vec![0u32; n];
    for &(t, v) in samples {
        let k = ((t - start) / width).floor();
        if k >= 0.0 && (k as usize) < n && v.is_finite() {
            sum[k as usize] += v;
            count[k as usize] += 1;
        }
    }
    match how {
        Reduce::Sum => sum,
        Reduce::Mean => sum
            .iter()
            .zip(&count)
            .map(|(s, &c)| if c == 0 { f64::NAN } else { s / f64::from(c) })
            .collect(),
    }
}

/// Bins needed to cover samples up to `end` from `start`.
pub fn bins_to_cover(start: f64, end: f64, width: f64) -> usize {
    (((end - start) / width).floor() as usize) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_second_bins_by_hand() {
        let s = [(0.1, 2.0), (0.9, 4.0), (2.5, 10.0), (7.0, 1.0), (-0.5, 9.0)];
        assert_eq!(bin(&s, 0.0, 1.0, 3, Reduce::Sum), [6.0, 0.0, 10.0]);
        let m = bin(&s, 0.0, 1.0, 3, Reduce::Mean);
        assert_eq!((m[0], m[2]), (3.0, 10.0));
        assert!(m[1].is_nan());
        assert_eq!(bins_to_cover(0.0, 2.5, 1.0), 3);
    }
}
