//! One scheduling cycle with 32 real + 32 phantom slots, 64 ADUs of four streams,
//! 16 history entries and the thesis objectives X1, X2, X3 and X4 compiled from
//! hose, for the random-walk scheduler (k = 25) and the directed one.
//!
//! ```text
//! cargo bench -p horde-policy --bench scheduler
//! ```
//!
//! Before timing, it prints evaluations and utility per cycle over a set of
//! instances, so the time figures come with what they bought.

use criterion::{criterion_group, criterion_main, Criterion};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use horde_hose::synth;
use horde_policy::{Assignment, Directed, RandomWalk, Scheduler};

const INSTANCES: u64 = 20;

fn report() {
    let mut rows: Vec<(&str, Box<dyn Scheduler>)> = vec![
        ("random-walk k=25", Box::new(RandomWalk::default())),
        ("random-walk k=25, cached", {
            let mut rw = RandomWalk::default();
            rw.cached = true;
            Box::new(rw)
        }),
        ("directed", Box::new(Directed::default())),
        ("directed, fast", Box::new(Directed::fast())),
    ];
    println!("\nper cycle, mean over {INSTANCES} bench instances (X1-X4, 32+32 slots, 64 ADUs):");
    println!(
        "{:<26} {:>12} {:>12}",
        "scheduler", "evaluations", "utility"
    );
    let mut out = Assignment::new();
    for (name, s) in rows.iter_mut() {
        let (mut evals, mut utility) = (0u64, 0i64);
        for seed in 0..INSTANCES {
            let inst = synth::bench(&mut ChaCha8Rng::seed_from_u64(seed));
            let input = inst.input();
            let stats = s.schedule(
                &input,
                &mut ChaCha8Rng::seed_from_u64(1000 + seed),
                &mut out,
            );
            evals += stats.evaluations;
            utility += inst.objectives.utility(&input, &out);
        }
        println!(
            "{:<26} {:>12.0} {:>12.0}",
            name,
            evals as f64 / INSTANCES as f64,
            utility as f64 / INSTANCES as f64
        );
    }
}

fn cycle(c: &mut Criterion) {
    report();
    let inst = synth::bench(&mut ChaCha8Rng::seed_from_u64(0));
    let input = inst.input();
    let mut group = c.benchmark_group("cycle_32+32_slots_64_adus_x1-x4");
    let mut out = Assignment::new();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut rw = RandomWalk::default();
    group.bench_function("random-walk", |b| {
        b.iter(|| rw.schedule(&input, &mut rng, &mut out))
    });
    let mut d = Directed::default();
    group.bench_function("directed", |b| {
        b.iter(|| d.schedule(&input, &mut rng, &mut out))
    });
    // The fixed part of a directed cycle: preparation, utility matrix, assignment.
    let mut fixed = Directed::default();
    fixed.search_budget = 0;
    group.bench_function("directed-no-search", |b| {
        b.iter(|| fixed.schedule(&input, &mut rng, &mut out))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2))
        .sample_size(30);
    targets = cycle
}
criterion_main!(benches);
