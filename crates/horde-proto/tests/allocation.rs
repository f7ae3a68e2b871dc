//! At steady state a scheduling cycle, the encoding of its datagrams and the processing of
//! the acks that come back allocate nothing (default scheduler, objectives injected), with
//! and without packing; nor does a cycle of the objective-driven schedulers (`directed`,
//! `random-walk`) with the thesis objectives X1-X4; with periodic cycles over
//! window-based channels, neither the cycle nor the release of the packets it planned
//! for later slots allocates per period. Counted by a global allocator: deterministic,
//! not timed.

mod cycle_pair;

use cycle_pair::{directed, directed_fast, directed_full, random_walk, rrr, MakeScheduler, Pair};

fn steady_state_allocations(pack_adus: bool, small_adus: bool, lose_every: u64) -> (u64, u64, u64) {
    allocations_with(rrr, 4, pack_adus, small_adus, lose_every)
}

/// Cycle, other and packet counts over 200 cycles after warm-up, `per_channel` real
/// slots per channel and cycle.
fn allocations_with(
    scheduler: MakeScheduler,
    per_channel: usize,
    pack_adus: bool,
    small_adus: bool,
    lose_every: u64,
) -> (u64, u64, u64) {
    let adu_bytes = if small_adus { 60 } else { 1200 };
    let mut pair = Pair::with_packing(per_channel, scheduler, pack_adus, adu_bytes);
    pair.lose_every = lose_every;
    pair.warm();
    let (mut cycle, mut other, mut packets) = (0, 0, 0);
    for _ in 0..200 {
        let s = pair.step();
        assert!(s.ran, "every step runs a cycle");
        cycle += s.cycle_allocs;
        other += s.other_allocs;
        packets += s.packets;
    }
    (cycle, other, packets)
}

#[test]
fn a_cycle_and_its_acks_allocate_nothing_at_steady_state() {
    for (pack, small) in [(false, false), (true, false), (true, true)] {
        let (cycle, other, packets) = steady_state_allocations(pack, small, 0);
        assert!(packets > 0, "the pair sends");
        assert_eq!(
            cycle, 0,
            "cycle allocations (pack {pack}, small ADUs {small})"
        );
        assert_eq!(
            other, 0,
            "encode and ack allocations (pack {pack}, small ADUs {small})"
        );
    }
}

#[test]
fn acks_that_report_holes_allocate_nothing_either() {
    // Every 7th data datagram lost: acks carry further ranges, and ADUs are nacked.
    let (cycle, other, packets) = steady_state_allocations(true, false, 7);
    assert!(packets > 0);
    assert_eq!(cycle, 0, "cycle allocations with losses");
    assert_eq!(other, 0, "encode and ack allocations with losses");
}

#[test]
fn objective_driven_cycles_allocate_nothing_at_steady_state() {
    // 8 real + 8 phantom slots and 16 ADUs a cycle; 32 + 32 with 64 ADUs for directed.
    let cases: [(&str, MakeScheduler, usize); 5] = [
        ("directed", directed, 2),
        ("directed", directed, 8),
        ("directed-full", directed_full, 8),
        ("directed-fast", directed_fast, 8),
        ("random-walk", random_walk, 2),
    ];
    for (name, make, per_channel) in cases {
        for lose_every in [0, 7] {
            let (cycle, other, packets) =
                allocations_with(make, per_channel, true, false, lose_every);
            assert!(packets > 0, "the pair sends ({name})");
            assert_eq!(
                cycle, 0,
                "{name} cycle allocations, {per_channel} slots per channel, losing every {lose_every}"
            );
            assert_eq!(other, 0, "{name} encode and ack allocations");
        }
    }
}

#[test]
fn periodic_cycles_and_their_releases_do_not_allocate_per_period() {
    let cases: [(&str, MakeScheduler); 2] = [("rrr", rrr), ("directed", directed)];
    for (name, make) in cases {
        let mut pair = Pair::periodic(make, 20);
        pair.warm();
        let (mut cycle, mut other, mut release, mut released) = (0, 0, 0, 0);
        let mut cycles = 0;
        for _ in 0..200 {
            let s = pair.step();
            cycles += s.cycles;
            cycle += s.cycle_allocs;
            other += s.other_allocs;
            release += s.release_allocs;
            released += s.released;
        }
        // About a cycle a period: one finds nothing to do now and then.
        assert!(cycles >= 180, "{name}: {cycles} cycles in 200 periods");
        eprintln!("{name}: {cycles} cycles, {released} packets released from the plan");
        // The windows open within the period: packets wait in the plan and go later.
        assert!(released > 0, "{name}: nothing released between cycles");
        assert_eq!(cycle, 0, "{name}: periodic cycle allocations");
        assert_eq!(other, 0, "{name}: encode and ack allocations");
        // Unlike the CBR pairs', these windows move: one that reaches a new high now and
        // then grows a buffer sized by the packets in flight, once, not every period.
        assert!(
            release <= 2,
            "{name}: {release} allocations releasing planned packets in 200 periods"
        );
    }
}

#[test]
fn the_counter_sees_allocations() {
    // The zero above means something only if the counter counts.
    let before = cycle_pair::allocs();
    let v: Vec<u64> = std::hint::black_box(vec![1, 2, 3]);
    assert!(cycle_pair::allocs() > before);
    drop(v);
}
