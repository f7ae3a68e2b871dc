//! Run many scheduling cycles of one scheduler on the benchmark instances (see
//! `synth::bench`) and print utility and evaluations per cycle; for CPU time per
//! cycle on a shared machine, run it under `perf stat -e task-clock`:
//!
//! ```text
//! cargo build --release -p horde-policy --example cycle_cost
//! perf stat -e task-clock target/release/examples/cycle_cost directed 300
//! ```
//!
//! SCHEDULER is `random-walk`, `random-walk-cached`, `directed`, `directed-fast`
//! (a budget of 1500 spent open first), `directed-open`
//! (the budget that follows the open terms) or `directed-no-search`; CYCLES per instance (10 instances).

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use horde_hose::synth;
use horde_policy::{Assignment, Directed, RandomWalk, Scheduler};

fn scheduler(name: &str) -> Option<Box<dyn Scheduler>> {
    Some(match name {
        "random-walk" => Box::new(RandomWalk::default()),
        "random-walk-cached" => {
            let mut rw = RandomWalk::default();
            rw.cached = true;
            Box::new(rw)
        }
        "directed" => Box::new(Directed::default()),
        "directed-fast" => Box::new(Directed::fast()),
        "directed-open" => {
            let mut d = Directed::default();
            d.search_per_member = Some(12);
            Box::new(d)
        }
        "directed-no-search" => {
            let mut d = Directed::default();
            d.search_budget = 0;
            Box::new(d)
        }
        _ => return None,
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "directed".into());
    let cycles: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(300);
    let Some(mut s) = scheduler(&name) else {
        eprintln!("unknown scheduler {name}");
        std::process::exit(2);
    };
    let instances: Vec<_> = (0..10)
        .map(|seed| synth::bench(&mut ChaCha8Rng::seed_from_u64(seed)))
        .collect();
    let mut out = Assignment::new();
    let (mut utility, mut evaluations) = (0i64, 0u64);
    for inst in &instances {
        let input = inst.input();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..cycles {
            evaluations += s.schedule(&input, &mut rng, &mut out).evaluations;
        }
        utility += inst.objectives.utility(&input, &out);
    }
    let total = cycles * instances.len() as u64;
    println!(
        "{name}: {total} cycles, utility {:.0} and {:.0} evaluations per cycle",
        utility as f64 / instances.len() as f64,
        evaluations as f64 / total as f64
    );
}
