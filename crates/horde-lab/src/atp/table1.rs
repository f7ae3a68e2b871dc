//! Table 1 of the ATP paper (§4.4): the adaptive application with bandwidth notifications
//! only and with callbacks plus priorities, at poll delays of 1 s and 3 s, on the
//! synthetic trace and on a cellular-like one, beside the paper's figures.

use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use super::adaptive::{Ablation, Adaptive, Scheme};
use super::host::{Host, HostConfig, RunStats};
use super::traces::{TraceFiles, TraceKind, TRACE_S};

/// One bytes-to-MB conversion for the whole table (the paper's MB; 10^6 bytes here).
const MB: f64 = 1e6;

/// The paper's Table 1 row for a scheme and poll delay: MB per level, total, bw.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PaperRow {
    /// MB delivered at levels 1 to 4.
    pub levels: [f64; 4],
    /// Their sum as printed.
    pub total: f64,
    /// Bandwidth used, MB.
    pub bw: f64,
}

/// The paper's figures (over its real 802.11b trace).
pub fn paper(scheme: Scheme, poll_delay: u32) -> Option<PaperRow> {
    let row = |levels, total, bw| Some(PaperRow { levels, total, bw });
    match (scheme, poll_delay) {
        (Scheme::Bandwidth, 1) => row([5.6, 18.7, 9.7, 7.4], 41.5, 44.0),
        (Scheme::Callbacks, 1) => row([6.2, 19.9, 12.2, 10.2], 48.5, 54.1),
        (Scheme::Bandwidth, 3) => row([5.8, 14.5, 6.9, 3.2], 30.4, 32.4),
        (Scheme::Callbacks, 3) => row([6.6, 18.2, 9.4, 8.9], 43.1, 47.6),
        _ => None,
    }
}

/// What one run is.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Config {
    /// The trace.
    pub trace: TraceKind,
    /// How the application adapts.
    pub scheme: Scheme,
    /// A feature turned off, or none.
    pub ablation: Ablation,
    /// The estimator's poll delay, seconds.
    pub poll_delay: u32,
    /// Whether the advertised estimate is capped by the measured link rate (Horde's
    /// endpoint) or probes upwards without it (ATP's Fig. 3).
    pub capped: bool,
}

impl Config {
    /// The estimate's label: only the modal scheme listens to it.
    pub fn estimate_name(&self) -> &'static str {
        match (self.scheme, self.capped) {
            (Scheme::Callbacks, _) => "-",
            (Scheme::Bandwidth, true) => "capped",
            (Scheme::Bandwidth, false) => "probing",
        }
    }
}

/// The table's configurations: both traces, both poll delays, the modal scheme with the
/// capped and the probing estimate, and callbacks plus priorities; with `ablations`, each
/// scheme again with a feature off.
pub fn configs(ablations: bool) -> Vec<Config> {
    let mut out = Vec::new();
    for trace in [TraceKind::Synthetic, TraceKind::Cellular] {
        for poll_delay in [1, 3] {
            let base = Config {
                trace,
                scheme: Scheme::Bandwidth,
                ablation: Ablation::None,
                poll_delay,
                capped: true,
            };
            out.push(base);
            out.push(Config {
                capped: false,
                ..base
            });
            out.push(Config {
                scheme: Scheme::Callbacks,
                ..base
            });
        }
    }
    if ablations {
        let ablated: Vec<Config> = out
            .iter()
            .flat_map(|c| {
                match (c.scheme, c.capped) {
                    (Scheme::Bandwidth, true) => vec![Ablation::NoNotifications],
                    (Scheme::Bandwidth, false) => vec![],
                    (Scheme::Callbacks, _) => vec![Ablation::NoPriorities, Ablation::NoTimers],
                }
                .into_iter()
                .map(|ablation| Config { ablation, ..*c })
            })
            .collect();
        out.extend(ablated);
    }
    out
}

/// One run's row.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// What ran.
    pub config: Config,
    /// MB delivered by the deadline at levels 1 to 4.
    pub levels: [f64; 4],
    /// Their sum.
    pub total: f64,
    /// MB that left the send queue: every piece with its header, delivered or not, and
    /// the rate probes.
    pub bw: f64,
    /// Messages refused by admission control, per level.
    pub refused: [u64; 4],
    /// Messages ended after an early callback, per level.
    pub early: [u64; 4],
    /// Bandwidth notifications heard.
    pub notifications: u64,
    /// Seconds spent in each mode (the modal scheme; callbacks stay in mode 4).
    pub mode_seconds: [u64; 4],
    /// The paper's row for this scheme and poll delay.
    pub paper: Option<PaperRow>,
}

/// Runs one configuration over `traces`.
pub fn run(config: Config, traces: &TraceFiles) -> Result<(Row, RunStats)> {
    let duration = Duration::from_secs(TRACE_S);
    let host_config = HostConfig {
        cap_estimate: config.capped,
        ..HostConfig::atp(config.poll_delay, duration)
    };
    let link = traces
        .uplink(config.trace, host_config.buffer_bytes)
        .build(0, traces.dir())
        .with_context(|| format!("the {} link", config.trace.name()))?;
    let mut app = Adaptive::new(config.scheme, config.ablation, duration);
    let stats = Host::new(host_config, link)?.run(&mut app)?;
    Ok((row(config, &stats), stats))
}

fn row(config: Config, stats: &RunStats) -> Row {
    let per_level = |f: &dyn Fn(usize) -> u64| -> [u64; 4] {
        std::array::from_fn(|l| if l < stats.classes.len() { f(l) } else { 0 })
    };
    let delivered = per_level(&|l| stats.classes[l].delivered_bytes);
    let levels = delivered.map(|b| b as f64 / MB);
    let mut mode_seconds = [0; 4];
    for s in &stats.seconds {
        if (1..=4).contains(&s.mode) {
            mode_seconds[usize::from(s.mode - 1)] += 1;
        }
    }
    Row {
        config,
        levels,
        total: delivered.iter().sum::<u64>() as f64 / MB,
        bw: stats.wire_bytes as f64 / MB,
        refused: per_level(&|l| stats.classes[l].refused),
        early: per_level(&|l| stats.classes[l].early),
        notifications: stats.notifications,
        mode_seconds,
        paper: if config.ablation == Ablation::None {
            paper(config.scheme, config.poll_delay)
        } else {
            None
        },
    }
}

/// The rows as a text table.
pub fn render(rows: &[Row]) -> String {
    let mut out = String::from(
        "Table 1 (ATP §4.4): MB delivered by the 1 s deadline per level, their total, and MB sent\n\
         trace      scheme     estimate poll off               L1    L2    L3    L4  total     bw | paper: total     bw\n",
    );
    for r in rows {
        let paper = r
            .paper
            .map_or("-".to_string(), |p| format!("{:5.1} {:6.1}", p.total, p.bw));
        out.push_str(&format!(
            "{:<10} {:<10} {:<8} {:>2} s {:<16} {:5.1} {:5.1} {:5.1} {:5.1} {:6.1} {:6.1} |        {paper}\n",
            r.config.trace.name(),
            r.config.scheme.name(),
            r.config.estimate_name(),
            r.config.poll_delay,
            r.config.ablation.name(),
            r.levels[0],
            r.levels[1],
            r.levels[2],
            r.levels[3],
            r.total,
            r.bw,
        ));
    }
    out
}
