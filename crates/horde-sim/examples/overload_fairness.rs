//! Fair shares under overload (`scenarios/overload.toml`): each stream's min-max
//! allocation against what it was sent in every 5 s window (sliding by 1 s), and the
//! audio stream's latency, for every scheduler with and without the scenario's
//! objectives and look-ahead.
//!
//! ```text
//! cargo run --release -p horde-sim --example overload_fairness -- \
//!     [--scenario FILE.toml] [--duration S] [--schedulers rrr,random-walk,directed] \
//!     [--lookaheads 0,200] [--cycle MS]
//! ```
//!
//! One row per run: for each stream, the worst window's sent/due ratio (due: the
//! smaller of the allocation and what the stream offered in the window) and the mean
//! over all windows; then audio's (stream 1) sent/inserted ADUs and mean latency.

use std::path::PathBuf;
use std::time::Duration;

use horde_sim::build::topology;
use horde_sim::engine::Simulation;
use horde_sim::fairness::{allocations, service};
use horde_sim::scenario::Scenario;

const AUDIO: u32 = 1;

fn main() {
    let mut scenario =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/overload.toml");
    let mut duration = None;
    let mut schedulers = vec!["rrr", "random-walk", "directed"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    let mut lookaheads = vec![0.0, 200.0];
    let mut cycle = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let val = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--scenario" => scenario = PathBuf::from(val),
            "--duration" => duration = Some(val.parse::<f64>().expect("--duration S")),
            "--schedulers" => schedulers = val.split(',').map(String::from).collect(),
            "--lookaheads" => {
                lookaheads = val
                    .split(',')
                    .map(|x| x.parse().expect("--lookaheads MS,MS"))
                    .collect()
            }
            "--cycle" => cycle = Some(val.parse::<f64>().expect("--cycle MS")),
            other => panic!("unknown option {other}"),
        }
    }
    let base = Scenario::load(&scenario).unwrap_or_else(|e| panic!("{e}"));
    let alloc = allocations(&base).expect("CBR channels");
    print!("allocations (kbit/s):");
    for (id, a) in &alloc {
        print!(" stream {id} {:.1}", a * 8.0 / 1000.0);
    }
    println!("\n");
    println!(
        "{:<12} {:>5} {:>10} | {:^21} | audio sent / inserted, mean latency",
        "scheduler",
        "look",
        "objectives",
        "per stream: worst 5 s window / mean (sent / due) (kbit/s sent)"
    );
    for kind in &schedulers {
        for &la in &lookaheads {
            for with_objectives in [true, false] {
                let mut s = base.clone();
                s.scheduler.kind = kind.clone();
                s.scheduler.lookahead_ms = la;
                if let Some(c) = cycle {
                    s.scheduler.cycle_ms = c;
                }
                if let Some(d) = duration {
                    s.duration_s = d;
                }
                if !with_objectives {
                    for st in &mut s.streams {
                        st.objectives.clear();
                    }
                }
                let mut sim = Simulation::new(topology(&s).expect("scenario builds"))
                    .expect("simulation starts");
                let report = sim.run(|_| {});
                let rows = service(
                    sim.metrics(),
                    &alloc,
                    Duration::from_secs(5),
                    Duration::from_secs(1),
                    s.duration(),
                );
                let mut line = format!(
                    "{kind:<12} {la:>5} {:>10} |",
                    if with_objectives { "on" } else { "off" }
                );
                for r in &rows {
                    line += &format!(
                        " {}: {:.3} / {:.3} ({:.1})",
                        r.stream,
                        r.worst_ratio,
                        r.mean_ratio,
                        r.sent_rate * 8.0 / 1000.0
                    );
                }
                if let Some(a) = report.streams.iter().find(|r| r.id == AUDIO) {
                    line += &format!(
                        " | {} / {}, {:.0} ms",
                        a.sent,
                        a.inserted,
                        a.latency_ms.mean.unwrap_or(f64::NAN)
                    );
                }
                println!("{line}");
            }
        }
    }
}
