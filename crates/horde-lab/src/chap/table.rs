//! Table 6.10 from the runs, beside the dissertation's figures.

use std::fmt::Write;

use anyhow::{anyhow, Result};
use horde_analyze::quality::{mean_response_time_on_common_pages_ms, PageFetch};
use horde_qdisc::QdiscKind;
use horde_workload::apps::Fec;
use serde::Serialize;

use super::experiment::{RunConfig, RunResult, Scenario, Schedule, TestApp};

/// The disciplines in the table's column order.
pub const DISCIPLINES: [QdiscKind; 4] = [
    QdiscKind::Fifo,
    QdiscKind::Chap,
    QdiscKind::Spq,
    QdiscKind::FqCodel,
];
const FECS: [Fec; 3] = [Fec::None, Fec::Small, Fec::Large];

/// Every run of one seed of Table 6.10: each FEC mode under each discipline.
pub fn configs(seed: u64, schedule: Schedule) -> Vec<RunConfig> {
    FECS.iter()
        .flat_map(|&fec| {
            DISCIPLINES
                .iter()
                .map(move |&d| RunConfig::table_6_10(d, fec, seed, schedule))
        })
        .collect()
}

/// Every run of one seed of Table 6.11: each application against P2P under each
/// discipline.
pub fn p2p_configs(seed: u64, schedule: Schedule) -> Vec<RunConfig> {
    P2P_APPS
        .iter()
        .flat_map(|&app| {
            DISCIPLINES
                .iter()
                .map(move |&d| RunConfig::new(Scenario::P2p(app), d, Fec::None, seed, schedule))
        })
        .collect()
}

const P2P_APPS: [TestApp; 4] = [TestApp::Game, TestApp::Voip, TestApp::Video, TestApp::Web];

/// One row: a metric under each discipline (mean over seeds, and its range).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub app: &'static str,
    pub unit: &'static str,
    /// Higher is better (false for response time).
    pub higher_is_better: bool,
    /// Seeds the figures are over: every seed, except for Web, where a seed counts only
    /// if a page requested in its window completed under every discipline.
    pub seeds: usize,
    /// FIFO, CHAP, SPQ, fq_codel.
    pub mean: [f64; 4],
    pub min: [f64; 4],
    pub max: [f64; 4],
    /// CHAP against FIFO, in % (a reduction for response time).
    pub improvement_pct: f64,
    /// The dissertation's FIFO, CHAP and SPQ, and CHAP's % improvement over FIFO.
    pub dissertation: [f64; 4],
}

#[derive(Debug, Clone, Serialize)]
pub struct Table {
    pub title: String,
    pub seeds: Vec<u64>,
    pub schedule: Schedule,
    pub rows: Vec<Row>,
}

type Paper = (&'static str, &'static str, bool, [f64; 3]);

/// Seed Table 6.10: FIFO, CHAP, SPQ.
const TABLE_6_10: [Paper; 7] = [
    ("Game", "MOS", true, [3.57, 4.27, 4.25]),
    ("VoIP", "MOS", true, [4.31, 4.42, 4.42]),
    ("Video, no FEC", "fps", true, [15.58, 30.0, 30.0]),
    ("Video, small FEC", "fps", true, [17.44, 30.0, 30.0]),
    ("Video, large FEC", "fps", true, [23.16, 30.0, 30.0]),
    ("Web", "ms", false, [113.39, 56.07, 41.85]),
    ("FTP", "Mbit/s", true, [22.95, 22.91, 22.91]),
];

/// Seed §6.9 (Table 6.11 and Figs. 6.22-6.31), read from the text: "about" each value;
/// P2P throughput is "the same under all three" with no figure given.
const TABLE_6_11: [Paper; 5] = [
    ("Game", "MOS", true, [3.0, 4.3, 4.3]),
    ("VoIP", "MOS", true, [3.5, 4.3, 4.3]),
    ("Video, no FEC", "fps", true, [1.0, 12.0, 30.0]),
    ("Web", "ms", false, [530.0, 153.0, 39.0]),
    ("P2P", "Mbit/s", true, [f64::NAN, f64::NAN, f64::NAN]),
];

fn find(
    runs: &[RunResult],
    seed: u64,
    scenario: Scenario,
    d: QdiscKind,
    fec: Fec,
) -> Result<&RunResult> {
    runs.iter()
        .find(|r| {
            r.config.seed == seed
                && r.config.scenario == scenario
                && r.config.discipline == d
                && r.config.fec == fec
        })
        .ok_or_else(|| anyhow!("no run for seed {seed}, {scenario:?}, {d}, FEC {fec:?}"))
}

fn metric(v: Option<f64>, what: &str) -> Result<f64> {
    v.ok_or_else(|| anyhow!("a run has no {what} figure"))
}

/// Web response time of each discipline, over the pages that completed under all of
/// them (seed §6.7.1); NaN when no page did.
fn common_web(runs: &[&RunResult]) -> Vec<f64> {
    let pages: Vec<&[PageFetch]> = runs.iter().map(|r| r.pages.as_slice()).collect();
    mean_response_time_on_common_pages_ms(&pages)
        .unwrap_or_else(|_| vec![f64::NAN; DISCIPLINES.len()])
}

/// Table 6.10 over `seeds`. Game, VoIP, Web and FTP come from the runs without FEC, as
/// in the dissertation.
pub fn build_table(seeds: &[u64], schedule: Schedule, runs: &[RunResult]) -> Result<Table> {
    let mut values = vec![vec![[0.0f64; 4]; seeds.len()]; TABLE_6_10.len()];
    for (si, &seed) in seeds.iter().enumerate() {
        let get = |d, fec| find(runs, seed, Scenario::MultiApp, d, fec);
        let none: Vec<&RunResult> = DISCIPLINES
            .iter()
            .map(|&d| get(d, Fec::None))
            .collect::<Result<_>>()?;
        let web = common_web(&none);
        for (di, &d) in DISCIPLINES.iter().enumerate() {
            let r = none[di];
            values[0][si][di] = metric(r.game_mos, "game")?;
            values[1][si][di] = metric(r.voip_mos, "VoIP")?;
            for (k, fec) in FECS.iter().enumerate() {
                values[2 + k][si][di] = metric(get(d, *fec)?.video_fps, "video")?;
            }
            values[5][si][di] = web[di];
            values[6][si][di] = r.ftp_mbps;
        }
    }
    Ok(Table {
        title: "Table 6.10, five applications behind one 802.11g AP".to_string(),
        seeds: seeds.to_vec(),
        schedule,
        rows: rows(&TABLE_6_10, values),
    })
}

/// Table 6.11 over `seeds`: each application in its own run against 10 P2P flows; the
/// P2P row is the mean over the four runs of a discipline.
pub fn build_p2p_table(seeds: &[u64], schedule: Schedule, runs: &[RunResult]) -> Result<Table> {
    let mut values = vec![vec![[0.0f64; 4]; seeds.len()]; TABLE_6_11.len()];
    for (si, &seed) in seeds.iter().enumerate() {
        let get = |app, d| find(runs, seed, Scenario::P2p(app), d, Fec::None);
        let web_runs: Vec<&RunResult> = DISCIPLINES
            .iter()
            .map(|&d| get(TestApp::Web, d))
            .collect::<Result<_>>()?;
        let web = common_web(&web_runs);
        for (di, &d) in DISCIPLINES.iter().enumerate() {
            values[0][si][di] = metric(get(TestApp::Game, d)?.game_mos, "game")?;
            values[1][si][di] = metric(get(TestApp::Voip, d)?.voip_mos, "VoIP")?;
            values[2][si][di] = metric(get(TestApp::Video, d)?.video_fps, "video")?;
            values[3][si][di] = web[di];
            let mut p2p = 0.0;
            for app in P2P_APPS {
                p2p += get(app, d)?.ftp_mbps / P2P_APPS.len() as f64;
            }
            values[4][si][di] = p2p;
        }
    }
    Ok(Table {
        title: "Table 6.11, one application against 10 P2P flows behind one 802.11g AP".to_string(),
        seeds: seeds.to_vec(),
        schedule,
        rows: rows(&TABLE_6_11, values),
    })
}

/// CHAP against FIFO in %: a gain, or a reduction where lower is better.
fn improvement(fifo: f64, chap: f64, higher_is_better: bool) -> f64 {
    if higher_is_better {
        (chap - fifo) / fifo * 100.0
    } else {
        (fifo - chap) / fifo * 100.0
    }
}

/// Rows from `values[row][seed][discipline]`; a seed with NaN (no Web page completed
/// under every discipline) is left out of its row.
fn rows(paper: &[Paper], values: Vec<Vec<[f64; 4]>>) -> Vec<Row> {
    paper
        .iter()
        .zip(values)
        .map(|(&(app, unit, higher_is_better, theirs), per_seed)| {
            let counted: Vec<&[f64; 4]> = per_seed.iter().filter(|v| !v[0].is_nan()).collect();
            let mut mean = [f64::NAN; 4];
            let mut min = [f64::NAN; 4];
            let mut max = [f64::NAN; 4];
            for d in 0..4 {
                let col = counted.iter().map(|v| v[d]);
                mean[d] = col.clone().sum::<f64>() / counted.len() as f64;
                min[d] = col.clone().fold(f64::INFINITY, f64::min);
                max[d] = col.fold(f64::NEG_INFINITY, f64::max);
            }
            Row {
                app,
                unit,
                seeds: counted.len(),
                higher_is_better,
                mean,
                min,
                max,
                improvement_pct: improvement(mean[0], mean[1], higher_is_better),
                dissertation: [
                    theirs[0],
                    theirs[1],
                    theirs[2],
                    improvement(theirs[0], theirs[1], higher_is_better),
                ],
            }
        })
        .collect()
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
            "{} (q = 35, I = 25 ms), seeds {}, measured over {}-{} s",
            self.title,
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
            let label = if r.seeds == self.seeds.len() {
                format!("{} ({})", r.app, r.unit)
            } else {
                format!("{} ({}, {} seeds)", r.app, r.unit, r.seeds)
            };
            let _ = writeln!(
                s,
                "{:<24} {:>w$} {:>w$} {:>w$} {:>w$} {:>7} | {:>13} {:>7} {:>7} {:>7} {:>5}",
                label,
                cell(0),
                cell(1),
                cell(2),
                cell(3),
                pct(r.improvement_pct),
                "",
                fmt(r.dissertation[0], r.unit),
                fmt(r.dissertation[1], r.unit),
                fmt(r.dissertation[2], r.unit),
                pct(r.dissertation[3]),
                w = width
            );
        }
        s
    }
}

fn fmt(v: f64, unit: &str) -> String {
    match unit {
        "ms" if !v.is_nan() => format!("{v:.1}"),
        _ if v.is_nan() => "-".to_string(),
        _ => format!("{v:.2}"),
    }
}

fn pct(v: f64) -> String {
    if v.is_nan() {
        "-".to_string()
    } else {
        format!("{v:+.0}%")
    }
}

fn seeds_label(seeds: &[u64]) -> String {
    match seeds {
        [one] => one.to_string(),
        [first, .., last] => format!("{first}..{last}"),
        [] => "-".to_string(),
    }
}
