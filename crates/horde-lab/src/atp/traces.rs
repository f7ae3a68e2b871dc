//! The bandwidth traces of the ATP experiments, as Mahimahi traces for `horde-links`.
//!
//! The paper's synthetic trace survives only as landmarks (0–200 KB/s over five minutes,
//! a zero-bandwidth region approached around 138–148 s, 50 KB/s from 180 to 210 s, the
//! estimate below 64 KB/s from about 120 s and jumping from 48 to 140 KB/s after about
//! 220 s); [`synthetic`] is one step profile through them. Its real 802.11b trace is
//! lost; [`cellular`] stands in with Horde's cellular-like generator.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use horde_links::cellular::{self, CellularParams};
use horde_links::{DelaySpec, LinkSpec, RateSpec, Trace, OPPORTUNITY_BYTES};
use serde::Serialize;

/// One kilobyte as the experiments count it (the paper does not say; 1000 bytes).
pub const KB: f64 = 1000.0;

/// How long every trace lasts: the paper's five minutes.
pub const TRACE_S: u64 = 300;

/// (from second, KB/s) steps of the synthetic trace, each until the next.
pub const SYNTHETIC_STEPS: [(u64, f64); 8] = [
    (0, 200.0),
    (60, 150.0),
    (100, 100.0),
    (120, 48.0),
    (140, 0.0),
    (180, 50.0),
    (210, 140.0),
    (240, 200.0),
];

/// Which trace a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceKind {
    /// The synthetic 0–200 KB/s trace of the paper's §5 (reconstructed).
    Synthetic,
    /// A cellular-like trace from `horde_links::cellular` with the given seed.
    Cellular,
}

impl TraceKind {
    /// Its name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            TraceKind::Synthetic => "synthetic",
            TraceKind::Cellular => "cellular",
        }
    }
}

/// The mean of the cellular-like trace, Mbit/s: 200 KB/s, about what the paper's
/// application used over its real trace (54 MB in a few minutes), so that the four modes
/// (25 to 500 KB/s) are all in play.
pub const CELLULAR_MEAN_MBPS: f64 = 1.6;

/// The synthetic trace: per second, `SYNTHETIC_STEPS`' rate in 1500-byte opportunities
/// spread evenly over the second.
pub fn synthetic() -> Trace {
    synthetic_faster(1).expect("1 divides every step")
}

/// Speed-ups [`synthetic_faster`] accepts: those that divide every step's time.
pub const SPEEDUPS: [u64; 4] = [1, 2, 5, 10];

/// The synthetic trace `speedup` times shorter: the same rates, each for a `speedup`-th of
/// its time (`TRACE_S / speedup` seconds in all). `speedup` is one of [`SPEEDUPS`].
pub fn synthetic_faster(speedup: u64) -> Result<Trace> {
    if !SPEEDUPS.contains(&speedup) {
        anyhow::bail!("the speed-up must be one of {SPEEDUPS:?}, got {speedup}");
    }
    let seconds = TRACE_S / speedup;
    let mut lines = Vec::new();
    for second in 0..seconds {
        let rate = synthetic_rate(second * speedup);
        let n = (rate * KB / f64::from(OPPORTUNITY_BYTES)).round() as u64;
        for k in 0..n {
            lines.push(second * 1000 + 1 + k * 1000 / n);
        }
    }
    // The last line is the period, so the trace lasts exactly its length.
    lines.push(seconds * 1000);
    let text: String = lines.iter().map(|ms| format!("{ms}\n")).collect();
    Ok(Trace::parse("synthetic", &text).expect("a well-formed generated trace"))
}

/// The synthetic trace's rate in KB/s during `second`.
pub fn synthetic_rate(second: u64) -> f64 {
    SYNTHETIC_STEPS
        .iter()
        .rev()
        .find(|(from, _)| *from <= second)
        .map_or(0.0, |(_, rate)| *rate)
}

/// A cellular-like trace of `TRACE_S` seconds, mean [`CELLULAR_MEAN_MBPS`], from `seed`.
pub fn cellular(seed: u64) -> Result<Trace> {
    cellular::generate(
        &CellularParams::with_mean_mbps(CELLULAR_MEAN_MBPS),
        TRACE_S * 1000,
        seed,
    )
    .context("generate the cellular-like trace")
}

/// The traces of one command, written as files that link specs can name; the directory
/// is removed when this is dropped.
pub struct TraceFiles {
    dir: PathBuf,
}

impl TraceFiles {
    /// Writes the synthetic trace and the cellular one of `seed` into a fresh directory
    /// under the system's temporary directory.
    pub fn write(seed: u64) -> Result<Self> {
        let dir =
            std::env::temp_dir().join(format!("horde-lab-atp-{}-{}", std::process::id(), seed));
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let files = TraceFiles { dir };
        for (kind, trace) in [
            (TraceKind::Synthetic, synthetic()),
            (TraceKind::Cellular, cellular(seed)?),
        ] {
            let path = files.path(kind);
            let mut out = std::fs::File::create(&path)
                .with_context(|| format!("create {}", path.display()))?;
            trace
                .write_mahimahi(&mut out)
                .with_context(|| format!("write {}", path.display()))?;
        }
        Ok(files)
    }

    /// The file of `kind`.
    pub fn path(&self, kind: TraceKind) -> PathBuf {
        self.dir.join(format!("{}.trace", kind.name()))
    }

    /// Writes another trace beside them, as `name.trace`, and returns its path.
    pub fn add(&self, name: &str, trace: &Trace) -> Result<PathBuf> {
        let path = self.dir.join(format!("{name}.trace"));
        let mut out =
            std::fs::File::create(&path).with_context(|| format!("create {}", path.display()))?;
        trace
            .write_mahimahi(&mut out)
            .with_context(|| format!("write {}", path.display()))?;
        Ok(path)
    }

    /// The directory the files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The sender's uplink over `kind`: the trace's rate behind a drop-tail send queue of
    /// `buffer_bytes` (the paper's shaping sat at the sender), no loss, no delay (the
    /// propagation delay is added by the caller, so that a packet leaving this link has
    /// left the sender's interface).
    pub fn uplink(&self, kind: TraceKind, buffer_bytes: u64) -> LinkSpec {
        uplink(self.path(kind), buffer_bytes)
    }
}

/// The sender's uplink over the trace at `path` (see [`TraceFiles::uplink`]).
pub fn uplink(path: PathBuf, buffer_bytes: u64) -> LinkSpec {
    LinkSpec {
        rate: Some(RateSpec::Trace { path }),
        buffer_bytes: Some(buffer_bytes),
        loss: None,
        delay: None::<DelaySpec>,
        qdisc: None,
    }
}

impl Drop for TraceFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_synthetic_trace_follows_its_steps() {
        let trace = synthetic();
        assert_eq!(trace.period_ms(), TRACE_S * 1000);
        let bytes = |from: u64, to: u64| {
            (trace.capacity_bytes_until(std::time::Duration::from_secs(to))
                - trace.capacity_bytes_until(std::time::Duration::from_secs(from)))
                as f64
                / (to - from) as f64
                / KB
        };
        assert!((bytes(0, 60) - 200.0).abs() < 2.0, "{}", bytes(0, 60));
        assert_eq!(bytes(145, 175), 0.0);
        assert!((bytes(180, 210) - 50.0).abs() < 2.0, "{}", bytes(180, 210));
    }
}
