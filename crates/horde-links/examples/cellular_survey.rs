//! How the cellular trace generator's statistics spread over seeds: for each mean rate,
//! the minimum, 1st percentile, median, 99th percentile and maximum of the realised mean
//! (relative to the requested one), the CV at 100 ms bins and the time in gaps over
//! 60 s traces. docs/traces.md quotes its output.
//!
//!     cargo run --release -p horde-links --example cellular_survey -- [SEEDS]   # default 300

use horde_links::cellular::{generate, CellularParams};
use horde_links::TraceStats;

fn main() {
    let seeds: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("SEEDS must be a whole number"))
        .unwrap_or(300);
    println!("{seeds} traces of 60 s per mean; min / p1 / median / p99 / max");
    for mean in [2.0, 6.0, 12.0] {
        let params = CellularParams::with_mean_mbps(mean);
        let (mut ratio, mut cv, mut gaps) = (Vec::new(), Vec::new(), Vec::new());
        for seed in 0..seeds {
            let s = TraceStats::of(&generate(&params, 60_000, seed).expect("valid parameters"));
            ratio.push(s.mean_mbps / mean);
            cv.push(s.cv_100ms.expect("60 s has 600 bins"));
            gaps.push(s.gap_fraction * 100.0);
        }
        println!("mean {mean:>4} Mbit/s");
        println!("  realised/requested mean  {}", spread(&mut ratio, 3));
        println!("  CV at 100 ms             {}", spread(&mut cv, 2));
        println!("  % of time in gaps        {}", spread(&mut gaps, 1));
    }
}

fn spread(xs: &mut [f64], decimals: usize) -> String {
    xs.sort_by(f64::total_cmp);
    let at = |q: f64| xs[((q * (xs.len() - 1) as f64).round()) as usize];
    [0.0, 0.01, 0.5, 0.99, 1.0]
        .iter()
        .map(|&q| format!("{:.decimals$}", at(q)))
        .collect::<Vec<_>>()
        .join(" / ")
}
