//! The look-ahead experiment of the Horde thesis (Qureshi 2005, §7.3, Fig. 7-24): the
//! mean network RTT of the stream with a low-latency objective, over scheduling cycle
//! periods and look-ahead horizons, on the six channels of Fig. 7-5 with no loss and no
//! latency variance (`scenarios/thesis/lookahead.toml`).
//!
//! ```text
//! cargo run --release -p horde-sim --example lookahead_sweep -- \
//!     [--scenario FILE.toml] [--duration S] [--seeds N] \
//!     [--schedulers random-walk,directed] [--cycles 50,100,...] \
//!     [--lookaheads 0,100,...] [--out FILE.csv]
//! ```
//!
//! `--scenario` defaults to `scenarios/thesis/lookahead.toml`;
//! `scenarios/thesis/lookahead-dephased.toml` is the variant whose two CDMA slot clocks
//! are not in step.
//!
//! For each scheduler it prints a table (rows: cycle period, columns: look-ahead) of
//! stream 3's mean `rtt_ms`, averaged over seeds 1..=N, with randomized round robin at
//! each cycle period as the reference, and writes every run as one CSV row.

use std::fmt::Write as _;
use std::path::PathBuf;

use horde_sim::build::topology;
use horde_sim::engine::Simulation;
use horde_sim::metrics::Report;
use horde_sim::scenario::Scenario;

/// The stream the objective (hose/x3-500-rtt.hose) is about.
const STREAM: u32 = 3;

struct Args {
    duration: f64,
    seeds: u64,
    schedulers: Vec<String>,
    cycles: Vec<f64>,
    lookaheads: Vec<f64>,
    out: PathBuf,
    scenario: PathBuf,
}

fn list(s: &str) -> Vec<f64> {
    s.split(',')
        .map(|x| x.trim().parse().expect("a comma-separated list of numbers"))
        .collect()
}

fn args() -> Args {
    let mut a = Args {
        duration: 600.0,
        seeds: 1,
        schedulers: vec!["random-walk".into(), "directed".into()],
        cycles: vec![50.0, 100.0, 200.0, 500.0, 1000.0],
        lookaheads: vec![0.0, 100.0, 200.0, 280.0, 400.0, 600.0, 1000.0],
        out: PathBuf::from("lookahead_sweep.csv"),
        scenario: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../scenarios/thesis/lookahead.toml"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let val = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--duration" => a.duration = val.parse().expect("--duration S"),
            "--seeds" => a.seeds = val.parse().expect("--seeds N"),
            "--schedulers" => a.schedulers = val.split(',').map(str::to_string).collect(),
            "--cycles" => a.cycles = list(&val),
            "--lookaheads" => a.lookaheads = list(&val),
            "--out" => a.out = PathBuf::from(val),
            "--scenario" => a.scenario = PathBuf::from(val),
            other => panic!("unknown option {other}"),
        }
    }
    a
}

fn run(base: &Scenario, kind: &str, cycle: f64, lookahead: f64, seed: u64, dur: f64) -> Report {
    let mut s = base.clone();
    s.scheduler.kind = kind.to_string();
    s.scheduler.cycle_ms = cycle;
    s.scheduler.lookahead_ms = lookahead;
    s.seed = seed;
    s.duration_s = dur;
    let topo = topology(&s).expect("the scenario builds");
    Simulation::new(topo)
        .expect("the simulation starts")
        .run(|_| {})
}

struct Point {
    rtt_mean: f64,
    rtt_median: f64,
    latency_mean: f64,
    cdma2_share: f64,
}

fn point(r: &Report) -> Point {
    let st = r
        .streams
        .iter()
        .find(|s| s.id == STREAM)
        .expect("stream 3 is in the report");
    Point {
        rtt_mean: st.rtt_ms.mean.unwrap_or(f64::NAN),
        rtt_median: st.rtt_ms.median.unwrap_or(f64::NAN),
        latency_mean: st.latency_ms.mean.unwrap_or(f64::NAN),
        cdma2_share: st.channel_share.get("cdma2").copied().unwrap_or(0.0),
    }
}

fn main() {
    let a = args();
    let base =
        Scenario::load(&a.scenario).unwrap_or_else(|e| panic!("{}: {e}", a.scenario.display()));
    let mut csv = String::from(
        "scheduler,cycle_ms,lookahead_ms,seed,rtt_mean_ms,rtt_median_ms,latency_mean_ms,cdma2_share\n",
    );
    let started = std::time::Instant::now();
    let mut mean_over_seeds = |kind: &str, cycle: f64, la: f64| -> f64 {
        let mut sum = 0.0;
        for seed in 1..=a.seeds {
            let p = point(&run(&base, kind, cycle, la, seed, a.duration));
            writeln!(
                csv,
                "{kind},{cycle},{la},{seed},{:.1},{:.1},{:.1},{:.4}",
                p.rtt_mean, p.rtt_median, p.latency_mean, p.cdma2_share
            )
            .unwrap();
            sum += p.rtt_mean;
        }
        sum / a.seeds as f64
    };

    println!(
        "{}: stream {STREAM} mean network RTT (ms), {} simulated s, mean of {} seed(s)\n",
        a.scenario.display(),
        a.duration,
        a.seeds
    );
    let rrr: Vec<f64> = a
        .cycles
        .iter()
        .map(|&c| mean_over_seeds("rrr", c, 0.0))
        .collect();
    for kind in &a.schedulers {
        let mut header = format!("{kind:>11} | cycle \\ look-ahead |");
        for la in &a.lookaheads {
            write!(header, " {la:>6}").unwrap();
        }
        println!("{header} |    rrr");
        println!("{}", "-".repeat(header.len() + 10));
        for (ci, &cycle) in a.cycles.iter().enumerate() {
            let mut row = format!("{:>11} | {cycle:>15} ms  |", "");
            for &la in &a.lookaheads {
                write!(row, " {:>6.1}", mean_over_seeds(kind, cycle, la)).unwrap();
            }
            println!("{row} | {:>6.1}", rrr[ci]);
        }
        println!();
    }
    std::fs::write(&a.out, csv).expect("write the CSV");
    println!(
        "wrote {} ({:.1} s wall clock)",
        a.out.display(),
        started.elapsed().as_secs_f64()
    );
}
