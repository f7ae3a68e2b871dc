//! Table 6.10 from the runs, beside the dissertation's figures.

use std::fmt::Write;

use anyhow::{anyhow, Result};
use horde_analyze::quality::{mean_response_time_on_common_pages_ms, PageFetch};
use horde_qdisc::QdiscKind;
use horde_workload::apps::Fec;
use serde::Serialize;

use super::experiment::{RunConfig, RunResult, Schedule};

/// The disciplines in the table's column order.
pub const DISCIPLINES: [QdiscKind; 4] = [
    QdiscKind::Fifo,
    QdiscKind::Chap,
    QdiscKind::Spq,
    QdiscKind::FqCodel,
];
const FECS: [Fec; 3] = [Fec::None, Fec::Small, Fec::Large];

/// Every run of one seed: each FEC mode under each discipline.
pub fn configs(seed: u64, schedule: Schedule) -> Vec<RunConfig> {
    FECS.iter()
        .flat_map(|&fec| {
            DISCIPLINES
                .iter()
                .map(move |&d| RunConfig::table_6_10(d, fec, seed, schedule))
        })
        .collect()
}

/// One row: a metric under each discipline (mean over seeds, and its range).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub app: &'static str,
    pub unit: &'static str,
    /// Higher is better (false for response time).
    pub higher_is_better: bool,
    /// FIFO, CHAP, SPQ, fq_codel.
    pub mean: [f64; 4],
    pub min: [f64; 4],
    pub max: [f64; 4],
    /// CHAP against FIFO, in % (a reduction for response time).
    pub improvement_pct: f64,
    /// Seed Table 6.10: FIFO, CHAP, SPQ and its % improvement.
    pub dissertation: [f64; 4],
}

#[derive(Debug, Clone, Serialize)]
pub struct Table {
    pub seeds: Vec<u64>,
    pub schedule: Schedule,
    pub rows: Vec<Row>,
}

/// Seed Table 6.10 (FIFO, CHAP, SPQ, % improvement of CHAP over FIFO).
const PAPER: [(&str, &str, bool, [f64; 4]); 7] = [
    ("Game", "MOS", true, [3.57, 4.27, 4.25, 20.0]),
    ("VoIP", "MOS", true, [4.31, 4.42, 4.42, 3.0]),
    ("Video, no FEC", "fps", true, [15.58, 30.0, 30.0, 93.0]),
    ("Video, small FEC", "fps", true, [17.44, 30.0, 30.0, 72.0]),
    ("Video, large FEC", "fps", true, [23.16, 30.0, 30.0, 30.0]),
    ("Web", "ms", false, [113.39, 56.07, 41.85, 51.0]),
    ("FTP", "Mbit/s", true, [22.95, 22.91, 22.91, 0.0]),
];

fn find(runs: &[RunResult], seed: u64, d: QdiscKind, fec: Fec) -> Result<&RunResult> {
    runs.iter()
        .find(|r| r.config.seed == seed && r.config.discipline == d && r.config.fec == fec)
        .ok_or_else(|| anyhow!("no run for seed {seed}, {d}, FEC {fec:?}"))
}

/// The table over `seeds`. Game, VoIP, Web and FTP come from the runs without FEC, as in
/// the dissertation; Web is averaged over the pages that completed under every
/// discipline (seed §6.7.1).
pub fn build_table(seeds: &[u64], schedule: Schedule, runs: &[RunResult]) -> Result<Table> {
    // values[row][seed][discipline]
    let mut values = vec![vec![[0.0f64; 4]; seeds.len()]; PAPER.len()];
    for (si, &seed) in seeds.iter().enumerate() {
        let none: Vec<&RunResult> = DISCIPLINES
            .iter()
            .map(|&d| find(runs, seed, d, Fec::None))
            .collect::<Result<_>>()?;
        let pages: Vec<&[PageFetch]> = none.iter().map(|r| r.pages.as_slice()).collect();
        let web = mean_response_time_on_common_pages_ms(&pages)
            .map_err(|e| anyhow!("seed {seed}: {e}"))?;
        for (di, &d) in DISCIPLINES.iter().enumerate() {
            let r = none[di];
            values[0][si][di] = r.game_mos;
            values[1][si][di] = r.voip_mos;
            for (k, fec) in FECS.iter().enumerate() {
                values[2 + k][si][di] = find(runs, seed, d, *fec)?.video_fps;
            }
            values[5][si][di] = web[di];
            values[6][si][di] = r.ftp_mbps;
        }
    }
    let rows = PAPER
        .iter()
        .zip(values)
        .map(|(&(app, unit, higher_is_better, dissertation), per_seed)| {
            let mut mean = [0.0; 4];
            let mut min = [f64::INFINITY; 4];
            let mut max = [f64::NEG_INFINITY; 4];
            for v in &per_seed {
                for d in 0..4 {
                    mean[d] += v[d] / per_seed.len() as f64;
                    min[d] = min[d].min(v[d]);
                    max[d] = max[d].max(v[d]);
                }
            }
            let (fifo, chap) = (mean[0], mean[1]);
            let improvement_pct = if higher_is_better {
                (chap - fifo) / fifo * 100.0
            } else {
                (fifo - chap) / fifo * 100.0
            };
            Row {
                app,
                unit,
                higher_is_better,
                mean,
                min,
                max,
                improvement_pct,
                dissertation,
            }
        })
        .collect();
    Ok(Table {
        seeds: seeds.to_vec(),
        schedule,
        rows,
    })
}

impl Table {
    /// The table as text: ours (FIFO, CHAP, SPQ, fq_codel, % CHAP over FIFO) beside the
    /// dissertation's (FIFO, CHAP, SPQ, %).
    pub fn render(&self) -> String {
        let mut s = String::new();
        let spread = self.seeds.len() > 1;
        let width = if spread { 22 } else { 8 };
        let _ = writeln!(
            s,
            "Table 6.10, five applications behind one 802.11g AP (q = 35, I = 25 ms), seeds {}, measured over {}-{} s",
            seeds_label(&self.seeds),
            self.schedule.window_start_s,
            self.schedule.window_end_s
        );
        let _ = writeln!(
            s,
            "{:<24} {:>w$} {:>w$} {:>w$} {:>w$} {:>7} | dissertation: {:>7} {:>7} {:>7} {:>5}",
            "app (unit)",
            "FIFO",
            "CHAP",
            "SPQ",
            "fq_codel",
            "% impr",
            "FIFO",
            "CHAP",
            "SPQ",
            "%",
            w = width
        );
        for r in &self.rows {
            let cell = |d: usize| {
                if spread {
                    format!(
                        "{} [{}..{}]",
                        fmt(r.mean[d], r.unit),
                        fmt(r.min[d], r.unit),
                        fmt(r.max[d], r.unit)
                    )
                } else {
                    fmt(r.mean[d], r.unit)
                }
            };
            let _ = writeln!(
                s,
                "{:<24} {:>w$} {:>w$} {:>w$} {:>w$} {:>+6.0}% | {:>13} {:>7} {:>7} {:>7} {:>+4.0}%",
                format!("{} ({})", r.app, r.unit),
                cell(0),
                cell(1),
                cell(2),
                cell(3),
                r.improvement_pct,
                "",
                fmt(r.dissertation[0], r.unit),
                fmt(r.dissertation[1], r.unit),
                fmt(r.dissertation[2], r.unit),
                r.dissertation[3],
                w = width
            );
        }
        s
    }
}

fn fmt(v: f64, unit: &str) -> String {
    match unit {
        "ms" => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

fn seeds_label(seeds: &[u64]) -> String {
    match seeds {
        [one] => one.to_string(),
        [first, .., last] => format!("{first}..{last}"),
        [] => "-".to_string(),
    }
}
