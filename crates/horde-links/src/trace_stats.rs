//! Summary statistics of a Mahimahi trace: how fast, how variable, how often silent.
//!
//! The trace is read as it is replayed, repeating with its period `P`: the timeline of
//! one period is `(0, P]`, and an opportunity at 0 is the one at `P` (where the next
//! repetition's 0 lands).

use serde::Serialize;

use crate::trace::Trace;

/// Width of the bins over which capacity variation is measured, in ms.
pub const BIN_MS: u64 = 100;

/// Shortest interval without an opportunity that counts as a gap (outage), in ms.
pub const GAP_MS: u64 = 100;

/// What a trace offers, measured from its opportunities.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceStats {
    /// The period (last timestamp), in seconds.
    pub duration_s: f64,
    /// Delivery opportunities in one period.
    pub opportunities: usize,
    /// Long-run capacity in Mbit/s (10^6 bit/s).
    pub mean_mbps: f64,
    /// Coefficient of variation (population standard deviation / mean) of the capacity
    /// of consecutive [`BIN_MS`] bins `(0, 100]`, `(100, 200]`, …; a partial last bin is
    /// left out. `None` if the period holds fewer than two full bins.
    pub cv_100ms: Option<f64>,
    /// Fraction of the period covered by intervals of at least [`GAP_MS`] between
    /// consecutive opportunities (the wrap-around interval included).
    pub gap_fraction: f64,
    /// Longest interval between consecutive opportunities, in ms.
    pub longest_gap_ms: u64,
}

impl TraceStats {
    /// Measure `trace`.
    pub fn of(trace: &Trace) -> TraceStats {
        let period = trace.period_ms();
        let times = trace.opportunities_ms();
        // An opportunity at 0 is the one at the period; all others are already in order.
        let at_zero = times.partition_point(|&t| t == 0);
        let on_timeline = || {
            times[at_zero..]
                .iter()
                .copied()
                .chain((0..at_zero).map(|_| period))
        };

        let mut longest_gap_ms = 0;
        let mut in_gaps_ms = 0;
        // The interval that wraps from the period into the next repetition ends at the
        // first opportunity after 0.
        let mut previous = 0;
        for t in on_timeline() {
            let gap = t - previous;
            longest_gap_ms = longest_gap_ms.max(gap);
            if gap >= GAP_MS {
                in_gaps_ms += gap;
            }
            previous = t;
        }

        TraceStats {
            duration_s: period as f64 / 1000.0,
            opportunities: times.len(),
            mean_mbps: trace.capacity_bps() / 1e6,
            cv_100ms: bin_cv(on_timeline(), period),
            gap_fraction: in_gaps_ms as f64 / period as f64,
            longest_gap_ms,
        }
    }
}

/// Coefficient of variation of opportunity counts in the full bins of `(0, period]`.
fn bin_cv(times: impl Iterator<Item = u64>, period: u64) -> Option<f64> {
    let bins = (period / BIN_MS) as usize;
    if bins < 2 {
        return None;
    }
    let mut counts = vec![0u64; bins];
    for t in times {
        // t >= 1 here; (0, 100] is bin 0.
        if let Some(count) = counts.get_mut(((t - 1) / BIN_MS) as usize) {
            *count += 1;
        }
    }
    let n = bins as f64;
    let mean = counts.iter().sum::<u64>() as f64 / n;
    if mean == 0.0 {
        return None;
    }
    let variance = counts
        .iter()
        .map(|&c| (c as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    Some(variance.sqrt() / mean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OPPORTUNITY_BYTES;

    const OPPORTUNITY_BITS: f64 = OPPORTUNITY_BYTES as f64 * 8.0;

    fn stats(text: &str) -> TraceStats {
        TraceStats::of(&Trace::parse("t", text).unwrap())
    }

    #[test]
    fn steady_trace_has_no_variation_and_no_gaps() {
        // One opportunity every ms for 1 s: 12 Mbit/s.
        let text: String = (1..=1000).map(|t| format!("{t}\n")).collect();
        let s = stats(&text);
        assert_eq!(s.opportunities, 1000);
        assert_eq!(s.duration_s, 1.0);
        assert!((s.mean_mbps - 1000.0 * OPPORTUNITY_BITS / 1e6).abs() < 1e-9);
        assert_eq!(s.cv_100ms, Some(0.0));
        assert_eq!((s.gap_fraction, s.longest_gap_ms), (0.0, 1));
    }

    #[test]
    fn gaps_include_the_wrap_and_count_only_from_100_ms() {
        // Opportunities at 50, 60, 300 (a 240 ms gap), 399 (99 ms: not a gap), 400;
        // the wrap from 400 to 450 is 50 ms.
        let s = stats("50\n60\n300\n399\n400\n");
        assert_eq!(s.longest_gap_ms, 240);
        assert!((s.gap_fraction - 240.0 / 400.0).abs() < 1e-12);
        // A trace starting late: the wrap-around interval is the first timestamp.
        let s = stats("150\n151\n200\n");
        assert_eq!(s.longest_gap_ms, 150);
        assert!((s.gap_fraction - 150.0 / 200.0).abs() < 1e-12);
    }

    #[test]
    fn bins_are_left_open_and_zero_is_the_period() {
        // Bins (0,100] and (100,200]: 0 counts at 200, 100 in the first bin.
        // Counts 2 and 2: no variation.
        let s = stats("0\n100\n100\n200\n");
        assert_eq!(s.cv_100ms, Some(0.0));
        assert_eq!(s.longest_gap_ms, 100);
        // Counts 3 and 1: mean 2, sd 1.
        let s = stats("1\n2\n3\n200\n");
        assert!((s.cv_100ms.unwrap() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn short_traces_have_no_cv_and_partial_bins_are_dropped() {
        assert_eq!(stats("5\n150\n").cv_100ms, None);
        // Two full bins with 1 each, and a partial bin (200, 250] with 5 left out.
        let s = stats("50\n150\n210\n220\n230\n240\n250\n");
        assert_eq!(s.cv_100ms, Some(0.0));
    }
}
