//! The dissertation's two worked examples (§4.4 Tables 4.1/4.2 and §5.3 Tables 5.3/5.4),
//! replayed step by step: every credit, every boost and every queueing delay.
//!
//! Setup of both: I = 10 and every flow starts at 10; a burst of 2, 3 and 5 packets from
//! flows 1–3 arrives at once; each transmission takes one slot and is charged right after.
//! Credit units are read as milliseconds here, so 12.5 is 12,500,000 ns.

use std::time::Duration;

use horde_qdisc::{Chap, ChapConfig, Fifo, FlowKey, Limit, Packet, Qdisc};

fn flow(i: u16) -> FlowKey {
    FlowKey::udp([10, 0, 0, 1], 1000 + i, [10, 0, 0, 2], 5000)
}

fn ms(x: f64) -> i64 {
    (x * 1e6).round() as i64
}

/// One row of the tables: which flow sent, the credits just before its charge (the boosted
/// values when a boost came first), and the credits after its charge.
struct Row {
    boost_to: Option<[f64; 3]>,
    flow: usize,
    after: [f64; 3],
}

fn row(flow: usize, after: [f64; 3]) -> Row {
    Row {
        boost_to: None,
        flow,
        after,
    }
}

fn boosted(boost_to: [f64; 3], flow: usize, after: [f64; 3]) -> Row {
    Row {
        boost_to: Some(boost_to),
        flow,
        after,
    }
}

/// Replays the burst with per-flow costs `costs` (in table units) and checks every row;
/// returns the queueing delay (in slots) of each packet, per flow.
fn replay(costs: [f64; 3], rows: &[Row]) -> [Vec<usize>; 3] {
    let config = ChapConfig {
        increment: Duration::from_millis(10),
        limit: Limit::packets(64),
        ..ChapConfig::default()
    };
    let mut chap: Chap<usize> = Chap::new(config).unwrap();
    let mut drops = Vec::new();
    let t0 = Duration::ZERO;
    for (i, count) in [2, 3, 5].into_iter().enumerate() {
        for _ in 0..count {
            chap.enqueue(Packet::new(flow(i as u16), 1500, t0, i), &mut drops);
        }
    }
    assert!(drops.is_empty());
    let credits = |chap: &Chap<usize>| -> [i64; 3] {
        [0, 1, 2].map(|i| chap.credit(&flow(i)).expect("tracked flow"))
    };
    assert_eq!(credits(&chap), [ms(10.0); 3], "every flow starts at I");

    let mut delays: [Vec<usize>; 3] = Default::default();
    for (slot, expected) in rows.iter().enumerate() {
        let boosts_before = chap.boosts();
        let packet = chap.dequeue(t0, &mut drops).expect("a packet is queued");
        let served = packet.payload;
        assert_eq!(served + 1, expected.flow, "slot {slot}: wrong flow served");
        match expected.boost_to {
            Some(values) => {
                assert_eq!(chap.boosts(), boosts_before + 1, "slot {slot}: one boost");
                assert_eq!(
                    credits(&chap),
                    values.map(ms),
                    "slot {slot}: boosted credits"
                );
            }
            None => assert_eq!(chap.boosts(), boosts_before, "slot {slot}: no boost"),
        }
        chap.charge(&packet.flow, Duration::from_nanos(ms(costs[served]) as u64));
        assert_eq!(
            credits(&chap),
            expected.after.map(ms),
            "slot {slot}: credits"
        );
        delays[served].push(slot);
    }
    assert!(chap.is_empty(), "the burst is fully served");
    delays
}

#[test]
fn equal_costs_example_table_4_1_and_4_2() {
    let delays = replay(
        [5.0, 5.0, 5.0],
        &[
            row(1, [5.0, 10.0, 10.0]),
            row(2, [5.0, 5.0, 10.0]),
            row(3, [5.0, 5.0, 5.0]),
            row(1, [0.0, 5.0, 5.0]),
            row(2, [0.0, 0.0, 5.0]),
            row(3, [0.0, 0.0, 0.0]),
            boosted([10.0, 10.0, 10.0], 2, [10.0, 5.0, 10.0]),
            row(3, [10.0, 5.0, 5.0]),
            // The row the extracted Table 4.1 lost; the delays of Table 4.2 need it.
            row(3, [10.0, 5.0, 0.0]),
            boosted([15.0, 12.5, 10.0], 3, [15.0, 12.5, 5.0]),
        ],
    );
    assert_eq!(delays, [vec![0, 3], vec![1, 4, 6], vec![2, 5, 7, 8, 9]]);
}

#[test]
fn wireless_costs_example_table_5_3_and_5_4() {
    let delays = replay(
        [15.0, 3.0, 5.0],
        &[
            row(1, [-5.0, 10.0, 10.0]),
            row(2, [-5.0, 7.0, 10.0]),
            row(3, [-5.0, 7.0, 5.0]),
            row(2, [-5.0, 4.0, 5.0]),
            row(3, [-5.0, 4.0, 0.0]),
            row(2, [-5.0, 1.0, 0.0]),
            boosted([7.5, 10.5, 10.0], 3, [7.5, 10.5, 5.0]),
            row(1, [-7.5, 10.5, 5.0]),
            row(3, [-7.5, 10.5, 0.0]),
            boosted([6.25, 15.25, 10.0], 3, [6.25, 15.25, 5.0]),
        ],
    );
    assert_eq!(delays, [vec![0, 7], vec![1, 3, 5], vec![2, 4, 6, 8, 9]]);
}

#[test]
fn fifo_gives_the_examples_mean_delay_of_4_5_slots() {
    let mut fifo: Fifo<usize> = Fifo::new(Limit::packets(64)).unwrap();
    let mut drops = Vec::new();
    for (i, count) in [2, 3, 5].into_iter().enumerate() {
        for _ in 0..count {
            fifo.enqueue(
                Packet::new(flow(i as u16), 1500, Duration::ZERO, i),
                &mut drops,
            );
        }
    }
    let mut total = 0;
    let mut slot = 0;
    while fifo.dequeue(Duration::ZERO, &mut drops).is_some() {
        total += slot;
        slot += 1;
    }
    assert_eq!(slot, 10);
    assert_eq!(total as f64 / 10.0, 4.5);
}
