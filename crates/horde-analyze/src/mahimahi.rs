//! Mahimahi traces (one line per 1500-byte delivery opportunity, in ms) as per-second
//! capacity series, so a user's own cellular traces go through the same analysis.

use std::path::Path;

use crate::error::AnalyzeError;

/// Bytes per delivery opportunity.
const OPPORTUNITY_BYTES: f64 = 1500.0;

/// Capacity of each whole second of the trace, kbit/s.
pub fn read_capacity_kbps(path: &Path) -> Result<Vec<f64>, AnalyzeError> {
    let name = path.display().to_string();
    let text = horde_config::input::read_to_string(path, horde_config::input::Kind::LINK_TRACE)
        .map_err(|source| AnalyzeError::Io {
            file: name.clone(),
            source,
        })?;
    capacity_kbps(&name, &text)
}

/// [`read_capacity_kbps`] on text; `name` labels errors.
pub fn capacity_kbps(name: &str, text: &str) -> Result<Vec<f64>, AnalyzeError> {
    let mut per_s: Vec<f64> = Vec::new();
    let mut last = 0u64;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let err = |message: String| AnalyzeError::Trace {
            file: name.to_string(),
            line: i + 1,
            message,
        };
        let ms: u64 = line
            .parse()
            .map_err(|_| err(format!("`{line}` is not a whole number of milliseconds")))?;
        if ms < last {
            return Err(err(format!(
                "{ms} ms comes after {last} ms: timestamps must not decrease"
            )));
        }
        last = ms;
        let s = (ms / 1000) as usize;
        if per_s.len() <= s {
            per_s.resize(s + 1, 0.0);
        }
        per_s[s] += OPPORTUNITY_BYTES * 8.0 / 1e3;
    }
    if per_s.is_empty() {
        return Err(AnalyzeError::Trace {
            file: name.to_string(),
            line: 1,
            message: "empty trace".into(),
        });
    }
    // The last second is partial unless the trace ends on its boundary.
    if last % 1000 != 999 && per_s.len() > 1 {
        per_s.pop();
    }
    Ok(per_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_second_capacity_by_hand() {
        // Two opportunities in second 0 (24 kbit), one in second 1, then a partial second.
        let c = capacity_kbps("t", "0\n500\n1200\n2100\n").unwrap();
        assert_eq!(c, [24.0, 12.0]);
        let e = capacity_kbps("t", "5\nx\n").unwrap_err().to_string();
        assert_eq!(e, "t:2: `x` is not a whole number of milliseconds");
        let e = capacity_kbps("t", "5\n3\n").unwrap_err().to_string();
        assert!(e.starts_with("t:2: 3 ms comes after 5 ms"), "{e}");
        assert!(capacity_kbps("t", "\n").is_err());
    }
}
