//! Runs the thesis experiments of `scenarios/thesis/` (the Horde thesis, Qureshi 2005,
//! ch. 7) under each scheduler for several seeds and prints one Markdown table per
//! experiment: per stream, the mean over seeds of its network RTT (`rtt_ms`), latency
//! including queueing (`latency_ms`), loss rate, correlated-loss fraction and channel
//! shares. These are the tables of `docs/results.md`.
//!
//! ```text
//! cargo run --release -p horde-sim --example thesis_tables -- \
//!     [--seeds N] [--duration S] [--only s1,s2,...] [--csv FILE]
//! ```
//!
//! `--csv` also writes every run's per-stream figures, one row per (experiment,
//! scheduler, seed, stream).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use horde_sim::build::topology;
use horde_sim::engine::Simulation;
use horde_sim::metrics::Report;
use horde_sim::scenario::Scenario;

/// (scenario file stem, schedulers to run it under).
const EXPERIMENTS: &[(&str, &[&str])] = &[
    ("s0", &["rrr", "random-walk", "directed"]),
    ("s1", &["random-walk", "directed"]),
    ("s1-queueing", &["random-walk", "directed"]),
    ("s2", &["random-walk", "directed"]),
    ("s3", &["random-walk", "directed"]),
    ("s4", &["random-walk", "directed"]),
    ("s4-150", &["random-walk", "directed"]),
    ("s4-300", &["random-walk", "directed"]),
    ("s4-measured", &["random-walk", "directed"]),
    ("e1", &["rrr", "random-walk", "directed"]),
];

/// One stream's figures from one run.
#[derive(Clone, Default)]
struct Row {
    rtt_mean: f64,
    rtt_median: f64,
    rtt_p25: f64,
    rtt_p75: f64,
    lat_mean: f64,
    lat_median: f64,
    loss: f64,
    corr: f64,
    sent: f64,
    shares: BTreeMap<String, f64>,
}

fn rows(r: &Report) -> Vec<(u32, Row)> {
    let nan = f64::NAN;
    r.streams
        .iter()
        .map(|s| {
            (
                s.id,
                Row {
                    rtt_mean: s.rtt_ms.mean.unwrap_or(nan),
                    rtt_median: s.rtt_ms.median.unwrap_or(nan),
                    rtt_p25: s.rtt_ms.p25.unwrap_or(nan),
                    rtt_p75: s.rtt_ms.p75.unwrap_or(nan),
                    lat_mean: s.latency_ms.mean.unwrap_or(nan),
                    lat_median: s.latency_ms.median.unwrap_or(nan),
                    loss: s.loss_rate.unwrap_or(nan),
                    corr: s.correlated_loss_fraction.unwrap_or(nan),
                    sent: s.sent as f64,
                    shares: s.channel_share.clone(),
                },
            )
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Sample standard deviation (0 for one sample).
fn sd(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

fn main() {
    let mut seeds = 5u64;
    let mut duration = 600.0;
    let mut only: Option<Vec<String>> = None;
    let mut csv_path: Option<PathBuf> = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let val = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--seeds" => seeds = val.parse().expect("--seeds N"),
            "--duration" => duration = val.parse().expect("--duration S"),
            "--only" => only = Some(val.split(',').map(str::to_string).collect()),
            "--csv" => csv_path = Some(PathBuf::from(val)),
            other => panic!("unknown option {other}"),
        }
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/thesis");
    let mut csv = String::from(
        "experiment,scheduler,seed,stream,sent,loss_rate,correlated_loss_fraction,rtt_mean_ms,rtt_median_ms,rtt_p25_ms,rtt_p75_ms,latency_mean_ms,latency_median_ms,shares\n",
    );
    let started = std::time::Instant::now();
    for &(name, kinds) in EXPERIMENTS {
        if only.as_ref().is_some_and(|o| !o.iter().any(|x| x == name)) {
            continue;
        }
        let path = dir.join(format!("{name}.toml"));
        let base = Scenario::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        println!(
            "### {name} ({} simulated s, mean over seeds 1..={seeds}; ± is the sd across seeds)\n",
            duration
        );
        let channels: Vec<String> = base.channels.iter().map(|c| c.name.clone()).collect();
        let mut head = String::from(
            "| scheduler | stream | RTT mean | RTT median | RTT p25–p75 | latency mean | latency median | loss % | corr. loss % |",
        );
        for c in &channels {
            write!(head, " {c} |").unwrap();
        }
        println!("{head}");
        println!("|{}", "---|".repeat(9 + channels.len()));
        for &kind in kinds {
            let mut per_seed: Vec<Vec<(u32, Row)>> = Vec::new();
            for seed in 1..=seeds {
                let mut s = base.clone();
                s.scheduler.kind = kind.to_string();
                s.seed = seed;
                s.duration_s = duration;
                let report = Simulation::new(topology(&s).expect("the scenario builds"))
                    .expect("the simulation starts")
                    .run(|_| {});
                let r = rows(&report);
                for (id, row) in &r {
                    let shares: Vec<String> = row
                        .shares
                        .iter()
                        .map(|(c, v)| format!("{c}={v:.4}"))
                        .collect();
                    writeln!(
                        csv,
                        "{name},{kind},{seed},{id},{},{:.5},{:.5},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{}",
                        row.sent,
                        row.loss,
                        row.corr,
                        row.rtt_mean,
                        row.rtt_median,
                        row.rtt_p25,
                        row.rtt_p75,
                        row.lat_mean,
                        row.lat_median,
                        shares.join(" ")
                    )
                    .unwrap();
                }
                per_seed.push(r);
            }
            for (k, (id, _)) in per_seed[0].iter().enumerate() {
                let col = |f: &dyn Fn(&Row) -> f64| -> Vec<f64> {
                    per_seed.iter().map(|r| f(&r[k].1)).collect()
                };
                let mut line = format!(
                    "| {kind} | {id} | {:.0} ± {:.0} | {:.0} | {:.0}–{:.0} | {:.0} | {:.0} | {:.2} ± {:.2} | {:.2} ± {:.2} |",
                    mean(&col(&|r| r.rtt_mean)),
                    sd(&col(&|r| r.rtt_mean)),
                    mean(&col(&|r| r.rtt_median)),
                    mean(&col(&|r| r.rtt_p25)),
                    mean(&col(&|r| r.rtt_p75)),
                    mean(&col(&|r| r.lat_mean)),
                    mean(&col(&|r| r.lat_median)),
                    100.0 * mean(&col(&|r| r.loss)),
                    100.0 * sd(&col(&|r| r.loss)),
                    100.0 * mean(&col(&|r| r.corr)),
                    100.0 * sd(&col(&|r| r.corr)),
                );
                for c in &channels {
                    let share = mean(&col(&|r| r.shares.get(c).copied().unwrap_or(0.0)));
                    write!(line, " {:.1} |", 100.0 * share).unwrap();
                }
                println!("{line}");
            }
        }
        println!();
    }
    if let Some(p) = csv_path {
        std::fs::write(&p, csv).expect("write the CSV");
        println!("wrote {}", p.display());
    }
    eprintln!("{:.1} s wall clock", started.elapsed().as_secs_f64());
}
