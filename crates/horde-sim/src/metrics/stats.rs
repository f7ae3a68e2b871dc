//! Summary statistics: the shape every delay distribution is reported in.

use horde_analyze::stats::percentile;
use serde::Serialize;

/// Count, mean and nearest-rank percentiles of a sample set, in the samples' unit.
/// Every statistic is `None` (JSON `null`) when there are no samples.
///
/// The p-th percentile is the nearest-rank one: the smallest sample such that at least
/// p% of the samples are at or below it, i.e. `sorted[ceil(p * n / 100) - 1]`
/// ([`horde_analyze::stats::percentile`]). It is always an observed value, needs no
/// interpolation rule, and is exact.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub count: u64,
    pub mean: Option<f64>,
    pub min: Option<f64>,
    pub p25: Option<f64>,
    pub median: Option<f64>,
    pub p75: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

impl Summary {
    /// Summarise samples already sorted ascending.
    pub fn from_sorted(sorted: &[f64]) -> Summary {
        debug_assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
        let mean = if sorted.is_empty() {
            None
        } else {
            // Summed in ascending order: the same samples always give the same bits.
            Some(sorted.iter().sum::<f64>() / sorted.len() as f64)
        };
        Summary {
            count: sorted.len() as u64,
            mean,
            min: sorted.first().copied(),
            p25: percentile(sorted, 25),
            median: percentile(sorted, 50),
            p75: percentile(sorted, 75),
            p95: percentile(sorted, 95),
            p99: percentile(sorted, 99),
            max: sorted.last().copied(),
        }
    }
}
