//! The generated traces shipped in `traces/` parse and meet the targets of
//! docs/traces.md, measured from the files themselves.

use std::path::PathBuf;

use horde_links::{Trace, TraceStats};

/// File, the mean it was generated for (Mbit/s).
const SHIPPED: [(&str, f64); 3] = [("cell-a.up", 6.0), ("cell-b.up", 11.0), ("cell-c.up", 2.0)];

fn traces_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../traces")
}

#[test]
fn shipped_traces_parse_and_meet_the_targets() {
    for (file, mean) in SHIPPED {
        let trace = Trace::from_path(&traces_dir().join(file)).unwrap();
        let s = TraceStats::of(&trace);
        assert_eq!(s.duration_s, 60.0, "{file}: {s:?}");
        assert!((s.mean_mbps / mean - 1.0).abs() < 0.10, "{file}: {s:?}");
        let cv = s.cv_100ms.expect("a minute has many 100 ms bins");
        assert!((0.6..=1.2).contains(&cv), "{file}: {s:?}");
        assert!((0.01..=0.20).contains(&s.gap_fraction), "{file}: {s:?}");
        assert!((100..=1500).contains(&s.longest_gap_ms), "{file}: {s:?}");
    }
}
