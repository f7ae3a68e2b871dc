//! How close each scheduler gets to the best schedule, over random small instances
//! scored exhaustively.
//!
//! ```text
//! cargo run --release -p horde-policy --example optimality [INSTANCES] [SEED]
//! ```
//!
//! For each instance (2 to 8 slots, 1 to 8 ADUs, one to three thesis objectives;
//! see `synth::small`) the oracle scores every schedule. A scheduler's result is
//! reported as `(utility - worst) / (best - worst)`: 1 is optimal, 0 the worst
//! schedule there is.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use horde_hose::synth;
use horde_policy::scheduler::oracle;
use horde_policy::{Assignment, Directed, RandomWalk, Scheduler};

struct Tally {
    name: &'static str,
    fractions: Vec<f64>,
    optimal: usize,
    evaluations: u64,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let instances: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut schedulers: Vec<Box<dyn Scheduler>> = vec![
        Box::new(RandomWalk::default()),
        Box::new(Directed::default()),
    ];
    let mut tallies: Vec<Tally> = schedulers
        .iter()
        .map(|s| Tally {
            name: s.name(),
            fractions: Vec::new(),
            optimal: 0,
            evaluations: 0,
        })
        .collect();
    let mut schedules = 0u64;
    let mut out = Assignment::new();
    for _ in 0..instances {
        let inst = synth::small(&mut rng);
        let input = inst.input();
        let Some(opt) = oracle::exhaustive(&input) else {
            continue;
        };
        schedules += opt.schedules;
        for (s, t) in schedulers.iter_mut().zip(&mut tallies) {
            let stats = s.schedule(&input, &mut rng, &mut out);
            let u = inst.objectives.utility(&input, &out);
            t.fractions.push(opt.fraction(u));
            t.optimal += usize::from(u == opt.best);
            t.evaluations += stats.evaluations;
        }
    }
    println!(
        "{instances} instances (seed {seed}), {:.0} schedules each on average",
        schedules as f64 / instances as f64
    );
    println!(
        "{:<12} {:>8} {:>8} {:>8} {:>9} {:>12}",
        "scheduler", "mean", "p5", "min", "optimal", "evals/cycle"
    );
    for t in &mut tallies {
        t.fractions.sort_by(f64::total_cmp);
        let n = t.fractions.len().max(1);
        let mean = t.fractions.iter().sum::<f64>() / n as f64;
        println!(
            "{:<12} {:>8.4} {:>8.4} {:>8.4} {:>8.1}% {:>12.1}",
            t.name,
            mean,
            t.fractions[n / 20],
            t.fractions[0],
            100.0 * t.optimal as f64 / n as f64,
            t.evaluations as f64 / n as f64
        );
    }
}
