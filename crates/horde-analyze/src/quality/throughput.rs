//! Downloads (FTP, P2P): throughput, the bytes received at the destination per second
//! (seed §2.5).

use std::time::Duration;

use super::QualityError;

/// `bytes * 8 / over` in bit/s.
pub fn throughput_bps(bytes: u64, over: Duration) -> Result<f64, QualityError> {
    if over.is_zero() {
        return Err(super::invalid(
            "throughput interval",
            "longer than zero",
            format!("{over:?}"),
        ));
    }
    Ok(bytes as f64 * 8.0 / over.as_secs_f64())
}

/// Throughput in bit/s of the packets received in `[start, end)`, given as (arrival
/// time, bytes) — the dissertation measures over a window (90 s to 270 s, §6.5). No
/// packet in the window is 0 bit/s.
pub fn windowed_throughput_bps(
    arrivals: &[(Duration, u64)],
    start: Duration,
    end: Duration,
) -> Result<f64, QualityError> {
    if end <= start {
        return Err(super::invalid(
            "throughput window",
            "an end after its start",
            format!("{start:?}..{end:?}"),
        ));
    }
    let bytes = arrivals
        .iter()
        .filter(|(t, _)| *t >= start && *t < end)
        .map(|(_, b)| b)
        .sum();
    throughput_bps(bytes, end - start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_points() {
        // 1,500,000 B in 2 s: 12,000,000 bit / 2 s = 6 Mbit/s.
        assert_eq!(
            throughput_bps(1_500_000, Duration::from_secs(2)).unwrap(),
            6e6
        );
        // Window [1 s, 3 s): the packets at 1.0 s (1000 B) and 2.5 s (500 B) count, those
        // at 0.5 s and 3.0 s do not: 1500 * 8 / 2 = 6000 bit/s.
        let s = Duration::from_millis;
        let arr = [
            (s(500), 9999),
            (s(1000), 1000),
            (s(2500), 500),
            (s(3000), 7777),
        ];
        assert_eq!(
            windowed_throughput_bps(&arr, s(1000), s(3000)).unwrap(),
            6000.0
        );
    }

    #[test]
    fn edge_cases() {
        let s = Duration::from_millis;
        assert_eq!(windowed_throughput_bps(&[], s(0), s(10)).unwrap(), 0.0);
        assert!(throughput_bps(10, Duration::ZERO).is_err());
        assert!(windowed_throughput_bps(&[], s(10), s(10)).is_err());
    }
}
