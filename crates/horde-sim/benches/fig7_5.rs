//! Whole-run simulator speed on the thesis's Fig. 7-5 channel set (`scenarios/fig7-5.toml`):
//! six CDMA/GPRS channels with bursty loss and Gaussian delay, CBR slots at each channel's
//! rate, and four always-backlogged elastic bulk streams, for 10 simulated minutes.
//!
//! Run: `cargo bench -p horde-sim --bench fig7_5`. Not a criterion micro-benchmark: it
//! times complete runs (scenario to report) on one thread and prints simulated seconds,
//! wall seconds and their ratio for each, then the best and the median. Goal: at least
//! 200× real time. `--runs N` changes the number of runs (default 3).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use horde_sim::engine::Simulation;
use horde_sim::scenario::Scenario;

const GOAL: f64 = 200.0;

fn main() {
    let mut runs = 3;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--runs" {
            runs = args
                .next()
                .and_then(|n| n.parse().ok())
                .expect("--runs takes a number");
        }
    }

    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/fig7-5.toml");
    let scenario = Scenario::load(&path).expect("scenarios/fig7-5.toml loads");
    let topology = horde_sim::build::topology(&scenario).expect("fig7-5 builds");
    assert_eq!(
        topology.duration,
        Duration::from_secs(600),
        "10 simulated minutes"
    );
    println!(
        "fig7-5: {} channels, {} streams, {} simulated s, {runs} runs",
        topology.channels.len(),
        topology.streams.len(),
        topology.duration.as_secs()
    );

    let mut walls = Vec::new();
    for run in 1..=runs {
        let start = Instant::now();
        let mut sim = Simulation::new(topology.clone()).expect("simulation starts");
        let report = sim.run(|_| {});
        let wall = start.elapsed().as_secs_f64();
        let simulated = report.duration_s;
        let sent: u64 = report.channels.iter().map(|c| c.sent).sum();
        let bytes: u64 = report.channels.iter().map(|c| c.bytes_sent).sum();
        let delivered: u64 = report.streams.iter().map(|s| s.delivered).sum();
        assert!(sent > 0 && delivered > 0, "the run carried traffic");
        println!(
            "run {run}: simulated {simulated:.0} s, wall {wall:.3} s, {:.0}x real time \
             ({sent} data packets of {:.0} bytes on average, {delivered} ADUs delivered)",
            simulated / wall,
            bytes as f64 / sent as f64
        );
        walls.push((wall, simulated));
    }

    walls.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (best, simulated) = walls[0];
    let (median, _) = walls[walls.len() / 2];
    println!(
        "min: wall {best:.3} s, {:.0}x real time; median: wall {median:.3} s, {:.0}x real time \
         (goal {GOAL:.0}x: {})",
        simulated / best,
        simulated / median,
        if simulated / median >= GOAL {
            "met"
        } else {
            "missed"
        }
    );
}
