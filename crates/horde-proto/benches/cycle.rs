//! One scheduling cycle of a live session: N real + N phantom slots over 4 channels, 2N
//! ADUs of 4 streams queued, the thesis objectives X1-X4 injected, in a client-server
//! pair driven in virtual time (acks flow back, so the channels stay in steady state).
//!
//! ```text
//! cargo bench -p horde-proto --bench cycle
//! ```
//!
//! It prints a scaling table (N = 8, 16, 32, 64, 128) with the time (wall clock and
//! the thread's CPU time, which a busy machine does not stretch) and the heap
//! allocations of one cycle, for the default scheduler (`rrr`) and the objective-driven
//! ones (`directed`, `directed-full` with every cycle's preparation rebuilt in full (the
//! same schedules at the cost before contexts were kept across cycles), `directed-fast`
//! with a budget of 1500 spent open first,
//! `directed-open` with the budget that follows the open terms, `directed-no-search`
//! with no search budget (what every directed cycle pays before it searches),
//! `random-walk` with k = 25), and the allocations of everything else
//! a sender does per cycle (encoding the cycle's datagrams, processing the acks); then
//! a periodic-cycle table (10 ms cycles over AIMD channels: the cycle, and the release
//! of the packets it planned for later slots); then criterion times the N = 32 cycle.
//! Only the `poll_transmit` call that runs the cycle is timed; the pair's own network
//! (copying datagrams into `Bytes`) is outside every figure.
//!
//! A counting global allocator counts every `alloc`, `alloc_zeroed` and `realloc`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};

#[path = "../tests/cycle_pair/mod.rs"]
mod cycle_pair;

use cycle_pair::{Pair, CHANNELS, SCHEDULERS, STREAMS};

fn table() {
    const CYCLES: u32 = 100;
    println!(
        "\none cycle, N real + N phantom slots on {CHANNELS} channels, 2N ADUs of {STREAMS} streams, X1-X4; \
         median of {CYCLES} cycles after warm-up"
    );
    println!(
        "{:>4} {:>11} {:>11} {:>11} {:>13} {:>13} {:>14}",
        "N",
        "scheduler",
        "time/cycle",
        "cpu/cycle",
        "allocs/cycle",
        "packets/cycle",
        "other allocs"
    );
    for n in [8usize, 16, 32, 64, 128] {
        for (name, make) in SCHEDULERS {
            let mut pair = Pair::new(n / CHANNELS, make);
            pair.warm();
            let mut times = Vec::with_capacity(CYCLES as usize);
            let mut cpu = Vec::with_capacity(CYCLES as usize);
            let (mut cycle_allocs, mut other, mut packets) = (0, 0, 0);
            for _ in 0..CYCLES {
                let s = pair.step();
                assert!(s.ran, "every step runs a cycle");
                times.push(s.cycle);
                cpu.push(s.cycle_cpu);
                cycle_allocs += s.cycle_allocs;
                other += s.other_allocs;
                packets += s.packets;
            }
            times.sort_unstable();
            cpu.sort_unstable();
            let per = |x: u64| x as f64 / f64::from(CYCLES);
            println!(
                "{:>4} {:>11} {:>9.1} µs {:>9.1} µs {:>13.2} {:>13.1} {:>14.2}",
                n,
                name,
                times[times.len() / 2].as_secs_f64() * 1e6,
                cpu[cpu.len() / 2].as_secs_f64() * 1e6,
                per(cycle_allocs),
                per(packets),
                per(other),
            );
        }
    }
    println!();
}

/// Periodic cycles over AIMD channels ([`Pair::periodic`]): the cycle's thread CPU and
/// allocations, and what releasing the packets it planned for later slots costs over
/// the rest of the period.
fn periodic_table() {
    const PERIODS: u32 = 100;
    println!(
        "periodic 10 ms cycles over {CHANNELS} AIMD channels (one datagram in 20 lost), \
         median of {PERIODS} periods after warm-up"
    );
    println!(
        "{:>11} {:>11} {:>13} {:>16} {:>21}",
        "scheduler", "cpu/cycle", "allocs/cycle", "released/period", "release allocs/period"
    );
    for (name, make) in SCHEDULERS {
        let mut pair = Pair::periodic(make, 20);
        pair.warm();
        let mut cpu = Vec::with_capacity(PERIODS as usize);
        let (mut cycle_allocs, mut released, mut release_allocs) = (0, 0, 0);
        for _ in 0..PERIODS {
            let s = pair.step();
            cpu.push(s.cycle_cpu);
            cycle_allocs += s.cycle_allocs;
            released += s.released;
            release_allocs += s.release_allocs;
        }
        cpu.sort_unstable();
        let per = |x: u64| x as f64 / f64::from(PERIODS);
        println!(
            "{:>11} {:>8.1} µs {:>13.2} {:>16.1} {:>21.2}",
            name,
            cpu[cpu.len() / 2].as_secs_f64() * 1e6,
            per(cycle_allocs),
            per(released),
            per(release_allocs),
        );
    }
    println!();
}

fn cycle(c: &mut Criterion) {
    table();
    periodic_table();
    let mut group = c.benchmark_group("session_cycle_32+32_slots_64_adus_x1-x4");
    for (name, make) in SCHEDULERS {
        let mut pair = Pair::new(32 / CHANNELS, make);
        pair.warm();
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let s = pair.step();
                        assert!(s.ran, "every step runs a cycle");
                        s.cycle
                    })
                    .sum()
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = cycle
}
criterion_main!(benches);
