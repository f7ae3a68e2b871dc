//! CHAP's flow table: keying, expiry, the table bound, charging and configuration errors.

use std::time::Duration;

use horde_qdisc::{Chap, ChapConfig, FlowKey, FlowKeyMode, Limit, Packet, Qdisc, QdiscError};

const I_NS: i64 = 25_000_000;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn send(chap: &mut Chap<()>, flow: FlowKey, at: Duration, airtime: Duration) {
    let mut drops = Vec::new();
    chap.enqueue(Packet::new(flow, 1500, at, ()), &mut drops);
    let p = chap.dequeue(at, &mut drops).expect("just queued");
    assert_eq!(p.flow, flow);
    chap.charge(&p.flow, airtime);
}

#[test]
fn idle_flows_expire_after_their_protocols_timeout_and_come_back_at_i() {
    let mut chap: Chap<()> = Chap::new(ChapConfig::default()).unwrap();
    let udp = FlowKey::udp([10, 0, 0, 1], 5000, [10, 0, 0, 2], 6000);
    let tcp = FlowKey::tcp([10, 0, 0, 1], 5000, [10, 0, 0, 2], 6000);
    send(&mut chap, udp, secs(0), Duration::from_millis(10));
    send(&mut chap, tcp, secs(0), Duration::from_millis(10));
    assert_eq!(chap.credit(&udp), Some(I_NS - 10_000_000));
    assert_eq!(chap.flow_count(), 2);

    // 120 s of idleness is not yet more than 120 s.
    let mut drops = Vec::new();
    assert!(chap.dequeue(secs(120), &mut drops).is_none());
    assert_eq!(chap.flow_count(), 2);
    assert!(chap.dequeue(secs(121), &mut drops).is_none());
    assert_eq!(chap.credit(&udp), None, "the UDP flow is forgotten");
    assert!(chap.credit(&tcp).is_some(), "the TCP flow has an hour");

    // Back with a fresh credit of I; a charge for a forgotten flow is ignored.
    chap.charge(&udp, Duration::from_millis(5));
    send(&mut chap, udp, secs(200), Duration::ZERO);
    assert_eq!(chap.credit(&udp), Some(I_NS));

    assert!(chap.dequeue(secs(3601), &mut drops).is_none());
    assert!(
        chap.credit(&tcp).is_none(),
        "the TCP flow is forgotten after an hour"
    );
    assert_eq!(chap.flow_count(), 0, "the UDP flow went again too");
}

#[test]
fn a_backlogged_flow_never_expires() {
    let mut chap: Chap<()> = Chap::new(ChapConfig::default()).unwrap();
    let udp = FlowKey::udp([10, 0, 0, 1], 5000, [10, 0, 0, 2], 6000);
    let mut drops = Vec::new();
    chap.enqueue(Packet::new(udp, 100, secs(0), ()), &mut drops);
    let other = FlowKey::udp([10, 0, 0, 3], 5000, [10, 0, 0, 2], 6000);
    chap.enqueue(Packet::new(other, 100, secs(500), ()), &mut drops);
    assert!(chap.credit(&udp).is_some());
    assert_eq!(chap.len(), 2);
}

#[test]
fn host_pair_mode_merges_ports_five_tuple_mode_does_not() {
    let a = FlowKey::tcp([10, 0, 0, 1], 1111, [10, 0, 0, 2], 80);
    let b = FlowKey::tcp([10, 0, 0, 1], 2222, [10, 0, 0, 2], 80);
    for (mode, flows) in [(FlowKeyMode::FiveTuple, 2), (FlowKeyMode::HostPair, 1)] {
        let config = ChapConfig {
            key_mode: mode,
            ..ChapConfig::default()
        };
        let mut chap: Chap<()> = Chap::new(config).unwrap();
        send(&mut chap, a, secs(0), Duration::from_millis(4));
        send(&mut chap, b, secs(0), Duration::from_millis(4));
        assert_eq!(chap.flow_count(), flows, "{mode:?}");
        let expected = if flows == 1 {
            I_NS - 8_000_000
        } else {
            I_NS - 4_000_000
        };
        assert_eq!(chap.credit(&b), Some(expected), "{mode:?}");
    }
}

#[test]
fn a_full_flow_table_forgets_the_longest_idle_flow_first() {
    let config = ChapConfig {
        max_flows: 3,
        ..ChapConfig::default()
    };
    let mut chap: Chap<()> = Chap::new(config).unwrap();
    let flow = |i: u16| FlowKey::tcp([10, 0, 0, 1], i, [10, 0, 0, 2], 80);
    for i in 0..3 {
        send(
            &mut chap,
            flow(i),
            secs(u64::from(i)),
            Duration::from_millis(1),
        );
    }
    send(&mut chap, flow(3), secs(10), Duration::from_millis(1));
    assert_eq!(chap.flow_count(), 3);
    assert!(
        chap.credit(&flow(0)).is_none(),
        "flow 0 was idle the longest"
    );
    assert!(chap.credit(&flow(1)).is_some());

    // With every tracked flow backlogged there is nothing to forget: the newcomer is dropped.
    let mut drops = Vec::new();
    for i in 1..4 {
        chap.enqueue(Packet::new(flow(i), 100, secs(11), ()), &mut drops);
    }
    chap.enqueue(Packet::new(flow(9), 100, secs(11), ()), &mut drops);
    assert_eq!(drops.len(), 1);
    assert_eq!(drops[0].flow, flow(9));
}

#[test]
fn a_byte_limit_head_drops_until_the_queue_fits() {
    let config = ChapConfig {
        limit: Limit::bytes(3000),
        ..ChapConfig::default()
    };
    let mut chap: Chap<u32> = Chap::new(config).unwrap();
    let bulk = FlowKey::tcp([10, 0, 0, 1], 1, [10, 0, 0, 2], 80);
    let small = FlowKey::udp([10, 0, 0, 1], 2, [10, 0, 0, 2], 53);
    let mut drops = Vec::new();
    chap.enqueue(Packet::new(bulk, 1500, secs(0), 0), &mut drops);
    let p = chap.dequeue(secs(0), &mut drops).unwrap();
    chap.charge(&p.flow, Duration::from_millis(20)); // bulk now has fewer credits
    chap.enqueue(Packet::new(bulk, 1500, secs(0), 1), &mut drops);
    chap.enqueue(Packet::new(bulk, 1500, secs(0), 2), &mut drops);
    assert!(drops.is_empty());
    chap.enqueue(Packet::new(small, 200, secs(0), 3), &mut drops);
    assert_eq!(drops.iter().map(|p| p.payload).collect::<Vec<_>>(), vec![1]);
    assert_eq!(chap.bytes(), 1700);
}

#[test]
fn bad_configurations_are_refused_with_the_parameter_named() {
    let cases: [(ChapConfig, &str); 4] = [
        (
            ChapConfig {
                limit: Limit::packets(1),
                ..ChapConfig::default()
            },
            "chap limit must be at least 2 packets, got 1",
        ),
        (
            ChapConfig {
                limit: Limit {
                    packets: None,
                    bytes: None,
                },
                ..ChapConfig::default()
            },
            "chap limit must be a bound in packets or in bytes",
        ),
        (
            ChapConfig {
                increment: Duration::ZERO,
                ..ChapConfig::default()
            },
            "chap increment must be",
        ),
        (
            ChapConfig {
                max_flows: 0,
                ..ChapConfig::default()
            },
            "chap max_flows must be",
        ),
    ];
    for (config, message) in cases {
        let err: QdiscError = Chap::<()>::new(config).unwrap_err();
        assert!(err.to_string().starts_with(message), "{err}");
    }
}
