//! Run the cycle bench's session pair (`benches/cycle.rs`) for one scheduler and one
//! size only, for profiling a single configuration:
//!
//! ```text
//! cargo build --release -p horde-proto --example session_cycle
//! perf record --call-graph dwarf target/release/examples/session_cycle directed 32 3000
//! ```
//!
//! Arguments: SCHEDULER (`rrr`, `directed`, `directed-full`, `directed-fast`, `directed-open`,
//! `directed-no-search`, `random-walk`), N real (= phantom) slots
//! per cycle (a multiple of 4), CYCLES timed after the warm-up. Prints the median
//! wall-clock and CPU time of one cycle and the allocations per cycle.

#[path = "../tests/cycle_pair/mod.rs"]
mod cycle_pair;

use cycle_pair::{Pair, CHANNELS, SCHEDULERS};

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "directed".into());
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(32);
    let cycles: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let Some(&(_, make)) = SCHEDULERS.iter().find(|(n, _)| *n == name) else {
        let names: Vec<&str> = SCHEDULERS.iter().map(|(n, _)| *n).collect();
        eprintln!("unknown scheduler {name} ({})", names.join(", "));
        std::process::exit(2);
    };
    if n == 0 || !n.is_multiple_of(CHANNELS) || cycles == 0 {
        eprintln!("N must be a positive multiple of {CHANNELS} and CYCLES positive");
        std::process::exit(2);
    }
    let mut pair = Pair::new(n / CHANNELS, make);
    pair.warm();
    let mut wall = Vec::with_capacity(cycles);
    let mut cpu = Vec::with_capacity(cycles);
    let mut allocs = 0;
    for _ in 0..cycles {
        let s = pair.step();
        if !s.ran {
            eprintln!("a step ran no cycle");
            std::process::exit(1);
        }
        wall.push(s.cycle);
        cpu.push(s.cycle_cpu);
        allocs += s.cycle_allocs;
    }
    wall.sort_unstable();
    cpu.sort_unstable();
    let median = |v: &[std::time::Duration]| v[v.len() / 2].as_secs_f64() * 1e6;
    println!(
        "{name} N={n}: {cycles} cycles, median {:.1} µs wall, {:.1} µs CPU, {:.2} allocations per cycle",
        median(&wall),
        median(&cpu),
        allocs as f64 / cycles as f64
    );
}
