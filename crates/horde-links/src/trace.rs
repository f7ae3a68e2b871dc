//! Mahimahi (`mm-link`) packet-delivery traces.
//!
//! A trace is a text file with one millisecond timestamp per non-empty line. Each line is
//! one delivery opportunity of [`OPPORTUNITY_BYTES`] bytes at that time; the same
//! timestamp may appear several times (several opportunities in the same millisecond).
//! Timestamps are non-decreasing integers. The trace repeats forever with period equal to
//! its last timestamp, so opportunity `i` of a trace with `n` lines and period `P` happens
//! at `(i / n) * P + t[i % n]` ms.

use std::path::Path;
use std::time::Duration;

use horde_config::input::Kind;

use crate::error::TraceError;

/// Bytes that one delivery opportunity can carry (one MTU-sized packet in `mm-link`).
pub const OPPORTUNITY_BYTES: u32 = 1500;

/// Largest timestamp accepted, in ms (about 35 years); keeps all time arithmetic exact.
const MAX_TIMESTAMP_MS: u64 = 1 << 40;

/// Longest excerpt of a bad line quoted in an error message, in characters.
const MAX_QUOTE_CHARS: usize = 40;

const NANOS_PER_MS: u128 = 1_000_000;

/// A parsed Mahimahi trace: the delivery opportunities of one period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// Non-decreasing; non-empty; the last entry is the period and is positive.
    opportunities_ms: Vec<u64>,
}

impl Trace {
    /// Parse trace text. `name` is used in error messages (`name:line: message`).
    pub fn parse(name: &str, text: &str) -> Result<Trace, TraceError> {
        Trace::parse_bytes(name, text.as_bytes())
    }

    /// Parse raw trace bytes, which need not be valid UTF-8 (bad lines are reported).
    pub fn parse_bytes(name: &str, bytes: &[u8]) -> Result<Trace, TraceError> {
        let error = |line: usize, message: String| TraceError::Parse {
            file: name.to_owned(),
            line,
            message,
        };
        let mut opportunities_ms = Vec::new();
        let mut last_line = 0;
        for (index, raw) in bytes.split(|&b| b == b'\n').enumerate() {
            let line = index + 1;
            let field = raw.trim_ascii();
            if field.is_empty() {
                continue;
            }
            if !field.iter().all(u8::is_ascii_digit) {
                return Err(error(
                    line,
                    format!("expected a millisecond timestamp, found {}", quote(field)),
                ));
            }
            // All ASCII digits, so this only fails on overflow.
            let ms = std::str::from_utf8(field)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .filter(|&ms| ms <= MAX_TIMESTAMP_MS)
                .ok_or_else(|| {
                    error(
                        line,
                        format!(
                            "timestamp {} is too large (at most {MAX_TIMESTAMP_MS} ms)",
                            quote(field)
                        ),
                    )
                })?;
            if let Some(&previous) = opportunities_ms.last() {
                if ms < previous {
                    return Err(error(
                        line,
                        format!("timestamps must be non-decreasing, but {ms} follows {previous}"),
                    ));
                }
            }
            opportunities_ms.push(ms);
            last_line = line;
        }
        match opportunities_ms.last() {
            None => Err(TraceError::Empty {
                file: name.to_owned(),
            }),
            Some(0) => Err(error(
                last_line,
                "the last timestamp is 0, so the trace has no period to repeat with".to_owned(),
            )),
            Some(_) => Ok(Trace { opportunities_ms }),
        }
    }

    /// Read and parse a trace file; errors name the file as `path` displays.
    pub fn from_path(path: &Path) -> Result<Trace, TraceError> {
        let name = path.display().to_string();
        match horde_config::input::read(path, Kind::LINK_TRACE) {
            Ok(bytes) => Trace::parse_bytes(&name, &bytes),
            Err(source) => Err(TraceError::Io { file: name, source }),
        }
    }

    /// A trace from timestamps already known to be valid (non-empty, non-decreasing,
    /// positive last entry, within range).
    pub(crate) fn from_sorted(opportunities_ms: Vec<u64>) -> Trace {
        debug_assert!(opportunities_ms.windows(2).all(|w| w[0] <= w[1]));
        debug_assert!(opportunities_ms
            .last()
            .is_some_and(|&p| p > 0 && p <= MAX_TIMESTAMP_MS));
        Trace { opportunities_ms }
    }

    /// Write the trace in Mahimahi format: one timestamp per line.
    pub fn write_mahimahi(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        for ms in &self.opportunities_ms {
            writeln!(out, "{ms}")?;
        }
        Ok(())
    }

    /// The opportunities of one period, in ms from the start of the period.
    pub fn opportunities_ms(&self) -> &[u64] {
        &self.opportunities_ms
    }

    /// The repeat period in ms (the last timestamp).
    pub fn period_ms(&self) -> u64 {
        *self
            .opportunities_ms
            .last()
            .expect("a trace is never empty")
    }

    /// Long-run capacity in bits per second.
    pub fn capacity_bps(&self) -> f64 {
        self.opportunities_ms.len() as f64 * f64::from(OPPORTUNITY_BYTES) * 8.0 * 1000.0
            / self.period_ms() as f64
    }

    /// Bytes the trace can carry from its start to `until` (every opportunity at or
    /// before it, over all repetitions).
    pub fn capacity_bytes_until(&self, until: Duration) -> u64 {
        self.first_opportunity_after(until) * u64::from(OPPORTUNITY_BYTES)
    }

    /// Time of opportunity `index` (counting from 0 over all repetitions).
    pub(crate) fn opportunity_time(&self, index: u64) -> Duration {
        let n = self.opportunities_ms.len() as u64;
        let cycle = index / n;
        let offset = self.opportunities_ms[(index % n) as usize];
        Duration::from_millis(
            cycle
                .saturating_mul(self.period_ms())
                .saturating_add(offset),
        )
    }

    /// Index of the first opportunity strictly after `now`.
    ///
    /// An opportunity at exactly `now` is already spent, as in `mm-link`, which burns every
    /// opportunity up to the current millisecond before queueing an arriving packet.
    pub(crate) fn first_opportunity_after(&self, now: Duration) -> u64 {
        let n = self.opportunities_ms.len() as u128;
        let period_ns = u128::from(self.period_ms()) * NANOS_PER_MS;
        let now_ns = now.as_nanos();
        let mut cycle = now_ns / period_ns;
        let into_cycle = now_ns - cycle * period_ns;
        let mut index = self
            .opportunities_ms
            .partition_point(|&ms| u128::from(ms) * NANOS_PER_MS <= into_cycle)
            as u128;
        if index == n {
            cycle += 1;
            index = 0;
        }
        u64::try_from(cycle * n + index).unwrap_or(u64::MAX)
    }
}

/// Quote a (possibly non-UTF-8) excerpt of a line for an error message.
fn quote(field: &[u8]) -> String {
    let text = String::from_utf8_lossy(field);
    let mut excerpt: String = text.chars().take(MAX_QUOTE_CHARS).collect();
    if text.chars().count() > MAX_QUOTE_CHARS {
        excerpt.push('…');
    }
    format!("{excerpt:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_err(text: &str) -> String {
        Trace::parse("up.trace", text).unwrap_err().to_string()
    }

    #[test]
    fn parses_lines_whitespace_and_crlf() {
        let trace = Trace::parse("t", "1\r\n\n  2 \n2\n\t10\n\n").unwrap();
        assert_eq!(trace.opportunities_ms(), &[1, 2, 2, 10]);
        assert_eq!(trace.period_ms(), 10);
        // Four opportunities of 1500 B every 10 ms = 4.8 Mbit/s.
        assert_eq!(trace.capacity_bps(), 4_800_000.0);
        // Up to and including 20 ms: 1, 2, 2, 10, 11, 12, 12, 20.
        assert_eq!(
            trace.capacity_bytes_until(Duration::from_millis(20)),
            8 * 1500
        );
    }

    #[test]
    fn error_names_file_and_line() {
        assert_eq!(
            parse_err("1\n2\n3\n4\n5\n6\n12a\n"),
            r#"up.trace:7: expected a millisecond timestamp, found "12a""#
        );
        assert_eq!(
            parse_err("5\n\n-3\n"),
            r#"up.trace:3: expected a millisecond timestamp, found "-3""#
        );
        assert_eq!(
            parse_err("5\n1.5\n"),
            r#"up.trace:2: expected a millisecond timestamp, found "1.5""#
        );
    }

    #[test]
    fn rejects_decreasing_timestamps() {
        assert_eq!(
            parse_err("1\n12\n10\n"),
            "up.trace:3: timestamps must be non-decreasing, but 10 follows 12"
        );
    }

    #[test]
    fn rejects_empty_and_zero_period() {
        assert_eq!(
            parse_err(""),
            "up.trace: empty trace: expected one millisecond timestamp per line"
        );
        assert!(matches!(
            Trace::parse("t", " \n\r\n\n"),
            Err(TraceError::Empty { .. })
        ));
        assert_eq!(
            parse_err("0\n\n0\n\n"),
            "up.trace:3: the last timestamp is 0, so the trace has no period to repeat with"
        );
    }

    #[test]
    fn rejects_huge_timestamps_and_quotes_briefly() {
        let msg = parse_err("1\n99999999999999999999999\n");
        assert!(msg.starts_with("up.trace:2: timestamp \"99999999999999999999999\" is too large"));
        let msg = parse_err(&format!("1\n{}\n", (1u64 << 41)));
        assert!(msg.starts_with("up.trace:2: timestamp"), "{msg}");
        let long = "x".repeat(500);
        let msg = parse_err(&long);
        assert!(msg.len() < 120, "{msg}");
        assert!(msg.contains('…'));
    }

    #[test]
    fn reports_non_utf8_bytes() {
        let err = Trace::parse_bytes("bin", b"1\n\xff\xfe\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "bin:2: expected a millisecond timestamp, found \"\u{fffd}\u{fffd}\""
        );
    }

    #[test]
    fn reads_files_and_reports_missing_ones() {
        let path = std::env::temp_dir().join(format!("horde-links-{}.trace", std::process::id()));
        std::fs::write(&path, "3\n6\n").unwrap();
        let trace = Trace::from_path(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(trace.opportunities_ms(), &[3, 6]);
        let err = Trace::from_path(&path).unwrap_err();
        assert!(matches!(err, TraceError::Io { .. }));
        assert!(err.to_string().starts_with(&path.display().to_string()));
    }

    #[test]
    fn opportunities_repeat_with_the_period() {
        let trace = Trace::parse("t", "0\n4\n10\n").unwrap();
        let times: Vec<u64> = (0..7)
            .map(|i| trace.opportunity_time(i).as_millis() as u64)
            .collect();
        assert_eq!(times, [0, 4, 10, 10, 14, 20, 20]);
    }

    #[test]
    fn first_opportunity_is_strictly_after_now() {
        let trace = Trace::parse("t", "0\n4\n10\n").unwrap();
        let ms = Duration::from_millis;
        assert_eq!(trace.first_opportunity_after(Duration::ZERO), 1);
        assert_eq!(trace.first_opportunity_after(ms(3)), 1);
        assert_eq!(trace.first_opportunity_after(ms(4)), 2);
        assert_eq!(
            trace.first_opportunity_after(ms(4) + Duration::from_nanos(1)),
            2
        );
        // Both opportunities at 10 ms (end of period 0, start of period 1) are spent at 10.
        assert_eq!(trace.first_opportunity_after(ms(10)), 4);
        assert_eq!(trace.first_opportunity_after(ms(9)), 2);
        assert_eq!(trace.first_opportunity_after(ms(25)), 8);
        for t in 0..100u64 {
            let now = Duration::from_micros(t * 370);
            let i = trace.first_opportunity_after(now);
            assert!(trace.opportunity_time(i) > now);
            assert!(i == 0 || trace.opportunity_time(i - 1) <= now);
        }
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = Trace::parse_bytes("fuzz", &bytes);
        }

        #[test]
        fn arbitrary_strings_never_panic(text in "[0-9 \r\n\t+a-]{0,64}|\\PC{0,64}") {
            if let Err(e) = Trace::parse("fuzz", &text) {
                prop_assert!(e.to_string().starts_with("fuzz:"));
            }
        }

        #[test]
        fn valid_traces_round_trip(mut ms in proptest::collection::vec(0u64..100_000, 1..50)) {
            ms.sort_unstable();
            prop_assume!(*ms.last().unwrap() > 0);
            let text: String = ms.iter().map(|m| format!("{m}\n")).collect();
            let trace = Trace::parse("t", &text).unwrap();
            prop_assert_eq!(trace.opportunities_ms(), &ms[..]);
        }
    }
}
