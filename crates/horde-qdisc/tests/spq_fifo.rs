//! Strict priority order and push-out, and FIFO drop-tail.

use std::time::Duration;

use horde_qdisc::{Fifo, FlowKey, Limit, Packet, Qdisc, Spq, SpqConfig, SpqRule, PROTO_UDP};

fn game() -> FlowKey {
    FlowKey::udp([10, 0, 0, 1], 3074, [10, 0, 0, 2], 3074)
}

fn voip() -> FlowKey {
    FlowKey::udp([10, 0, 0, 1], 5060, [10, 0, 0, 2], 5062)
}

fn ftp() -> FlowKey {
    FlowKey::tcp([10, 0, 0, 1], 20, [10, 0, 0, 2], 50_000)
}

/// Band 0: the game's port; band 1: any other UDP; band 2 (default): the rest.
fn three_bands(limit: Limit) -> Spq<u32> {
    Spq::new(SpqConfig {
        bands: 3,
        rules: vec![
            SpqRule {
                band: 0,
                dst_ports: Some(3074..=3074),
                ..SpqRule::default()
            },
            SpqRule {
                band: 1,
                protocol: Some(PROTO_UDP),
                ..SpqRule::default()
            },
        ],
        default_band: 2,
        limit,
    })
    .unwrap()
}

#[test]
fn spq_serves_higher_bands_first_and_fifo_within_a_band() {
    let mut q = three_bands(Limit::packets(100));
    assert_eq!(q.band_of(&game()), 0);
    assert_eq!(q.band_of(&voip()), 1);
    assert_eq!(q.band_of(&ftp()), 2);
    let mut drops = Vec::new();
    let arrivals = [ftp(), voip(), ftp(), game(), voip(), game(), ftp()];
    for (i, flow) in arrivals.into_iter().enumerate() {
        q.enqueue(Packet::new(flow, 100, Duration::ZERO, i as u32), &mut drops);
    }
    let mut order = Vec::new();
    while let Some(p) = q.dequeue(Duration::ZERO, &mut drops) {
        order.push(p.payload);
    }
    assert_eq!(order, vec![3, 5, 1, 4, 0, 2, 6]);
    assert!(drops.is_empty());
}

#[test]
fn spq_pushes_out_lower_bands_when_full_and_drops_the_lowest_arrival() {
    let mut q = three_bands(Limit::packets(3));
    let mut drops = Vec::new();
    q.enqueue(Packet::new(ftp(), 100, Duration::ZERO, 0), &mut drops);
    q.enqueue(Packet::new(ftp(), 100, Duration::ZERO, 1), &mut drops);
    q.enqueue(Packet::new(voip(), 100, Duration::ZERO, 2), &mut drops);
    q.enqueue(Packet::new(game(), 100, Duration::ZERO, 3), &mut drops);
    assert_eq!(
        drops.iter().map(|p| p.payload).collect::<Vec<_>>(),
        vec![1],
        "ftp's tail"
    );
    q.enqueue(Packet::new(ftp(), 100, Duration::ZERO, 4), &mut drops);
    assert_eq!(
        drops.last().unwrap().payload,
        4,
        "nothing below ftp: the arrival goes"
    );
    assert_eq!(q.len(), 3);
}

#[test]
fn spq_pushes_nothing_out_for_an_arrival_that_cannot_fit_anyway() {
    let mut q = three_bands(Limit::bytes(1000));
    let mut drops = Vec::new();
    q.enqueue(Packet::new(game(), 600, Duration::ZERO, 0), &mut drops);
    q.enqueue(Packet::new(ftp(), 300, Duration::ZERO, 1), &mut drops);
    // 600 (band 0) + 500 > 1000 even without the 300 of ftp: only the arrival goes.
    q.enqueue(Packet::new(voip(), 500, Duration::ZERO, 2), &mut drops);
    assert_eq!(drops.iter().map(|p| p.payload).collect::<Vec<_>>(), vec![2]);
    assert_eq!((q.len(), q.bytes()), (2, 900));
    // 600 + 400 fits once ftp's 300 is pushed out.
    q.enqueue(Packet::new(voip(), 400, Duration::ZERO, 3), &mut drops);
    assert_eq!(
        drops.iter().map(|p| p.payload).collect::<Vec<_>>(),
        vec![2, 1]
    );
    assert_eq!((q.len(), q.bytes()), (2, 1000));
}

#[test]
fn spq_refuses_a_rule_for_a_band_it_does_not_have() {
    let err = Spq::<()>::new(SpqConfig {
        bands: 2,
        rules: vec![SpqRule {
            band: 2,
            ..SpqRule::default()
        }],
        default_band: 1,
        limit: Limit::packets(10),
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "spq rule band must be a band in 0..=1, got 2"
    );
}

#[test]
fn fifo_keeps_order_and_drops_the_tail_at_its_byte_limit() {
    let mut q: Fifo<u32> = Fifo::new(Limit::bytes(3000)).unwrap();
    let mut drops = Vec::new();
    for i in 0..3 {
        q.enqueue(Packet::new(ftp(), 1000, Duration::ZERO, i), &mut drops);
    }
    q.enqueue(Packet::new(game(), 72, Duration::ZERO, 3), &mut drops);
    assert_eq!(drops.iter().map(|p| p.payload).collect::<Vec<_>>(), vec![3]);
    let order: Vec<u32> = std::iter::from_fn(|| q.dequeue(Duration::ZERO, &mut drops))
        .map(|p| p.payload)
        .collect();
    assert_eq!(order, vec![0, 1, 2]);
    assert_eq!(q.bytes(), 0);
}
