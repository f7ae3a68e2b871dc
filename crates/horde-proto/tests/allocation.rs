//! At steady state a scheduling cycle, the encoding of its datagrams and the processing of
//! the acks that come back allocate nothing (default scheduler, objectives injected), with
//! and without packing; nor does a cycle of the objective-driven schedulers (`directed`,
//! `random-walk`) with the thesis objectives X1-X4. Counted by a global allocator:
//! deterministic, not timed.

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
fn the_counter_sees_allocations() {
    // The zero above means something only if the counter counts.
    let before = cycle_pair::allocs();
    let v: Vec<u64> = std::hint::black_box(vec![1, 2, 3]);
    assert!(cycle_pair::allocs() > before);
    drop(v);
}
