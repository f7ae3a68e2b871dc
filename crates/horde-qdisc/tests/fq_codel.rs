//! fq_codel behaviour: sparse flows first, CoDel against standing queues but not bursts,
//! overflow drops from the fattest queue, DRR byte fairness.

use std::time::Duration;

use horde_qdisc::{FlowKey, FqCodel, FqCodelConfig, Limit, Packet, Qdisc};

fn bulk() -> FlowKey {
    FlowKey::tcp([10, 0, 0, 1], 40_000, [10, 0, 0, 2], 443)
}

fn sparse() -> FlowKey {
    FlowKey::udp([10, 0, 0, 1], 3074, [10, 0, 0, 3], 3074)
}

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

#[test]
fn a_sparse_flow_goes_before_an_established_bulk_flow() {
    let mut q: FqCodel<u32> = FqCodel::new(FqCodelConfig::default()).unwrap();
    assert_ne!(q.queue_of(&bulk()), q.queue_of(&sparse()));
    let mut drops = Vec::new();
    for i in 0..100 {
        q.enqueue(Packet::new(bulk(), 1500, ms(0), i), &mut drops);
    }
    for _ in 0..5 {
        assert_eq!(q.dequeue(ms(1), &mut drops).unwrap().flow, bulk());
    }
    q.enqueue(Packet::new(sparse(), 72, ms(1), 1000), &mut drops);
    let next = q.dequeue(ms(1), &mut drops).unwrap();
    assert_eq!(
        next.payload, 1000,
        "the sparse packet is served next, ahead of 95 bulk packets"
    );
    assert!(drops.is_empty());
}

#[test]
fn drr_shares_bytes_not_packets_between_backlogged_flows() {
    let mut q: FqCodel<()> = FqCodel::new(FqCodelConfig::default()).unwrap();
    let small = FlowKey::udp([10, 0, 0, 9], 1, [10, 0, 0, 2], 2);
    let mut drops = Vec::new();
    for _ in 0..400 {
        q.enqueue(Packet::new(bulk(), 1500, ms(0), ()), &mut drops);
        q.enqueue(Packet::new(small, 300, ms(0), ()), &mut drops);
    }
    let (mut big_bytes, mut small_bytes) = (0u64, 0u64);
    for _ in 0..300 {
        let p = q.dequeue(ms(0), &mut drops).unwrap();
        if p.flow == small {
            small_bytes += u64::from(p.len);
        } else {
            big_bytes += u64::from(p.len);
        }
    }
    let ratio = big_bytes as f64 / small_bytes as f64;
    assert!(
        (0.8..1.25).contains(&ratio),
        "bytes {big_bytes} vs {small_bytes}"
    );
}

/// Offers one 1500-byte packet every `gap_in`, serves one every `gap_out` (a packet is
/// served only when one is queued), for `run`; returns (drops, largest sojourn in the last
/// quarter of the run).
fn run_single_flow(
    gap_in: Duration,
    gap_out: Duration,
    run: Duration,
    burst: usize,
) -> (usize, Duration) {
    let mut q: FqCodel<()> = FqCodel::new(FqCodelConfig::default()).unwrap();
    let mut drops = Vec::new();
    for _ in 0..burst {
        q.enqueue(Packet::new(bulk(), 1500, Duration::ZERO, ()), &mut drops);
    }
    let (mut next_in, mut next_out) = (Duration::ZERO, Duration::ZERO);
    let mut worst_late = Duration::ZERO;
    while next_out < run {
        if !gap_in.is_zero() && next_in <= next_out {
            q.enqueue(Packet::new(bulk(), 1500, next_in, ()), &mut drops);
            next_in += gap_in;
            continue;
        }
        if let Some(p) = q.dequeue(next_out, &mut drops) {
            if next_out > run * 3 / 4 {
                worst_late = worst_late.max(next_out - p.arrival);
            }
        }
        next_out += gap_out;
    }
    (drops.len(), worst_late)
}

#[test]
fn codel_drops_a_standing_queue_and_brings_its_delay_down() {
    // An unresponsive flow offering 10% more than is served, for 8 s: without drops the
    // sojourn would reach about 730 ms. CoDel needs a couple of seconds to raise its drop
    // rate to the excess (the rate grows as sqrt(count) / interval), then holds the delay.
    let (drops, late_sojourn) = run_single_flow(ms(1), Duration::from_micros(1100), ms(8000), 0);
    let excess = 8000 - 8000 * 10 / 11;
    assert!(
        drops > 0,
        "a standing queue above target for more than an interval is dropped from"
    );
    assert!(
        drops <= excess,
        "dropped {drops}, more than the {excess} packets of excess"
    );
    assert!(
        late_sojourn < ms(50),
        "sojourn held down, got {late_sojourn:?}"
    );
}

#[test]
fn codel_does_not_drop_before_an_interval_above_target() {
    // A standing queue of 60 ms builds at once, but it is gone within 90 ms < interval.
    let (drops, _) = run_single_flow(Duration::ZERO, Duration::from_micros(1500), ms(200), 60);
    assert_eq!(drops, 0, "a short burst is not dropped from");
    // The same burst drained too slowly to be gone within an interval is dropped from.
    let (drops, _) = run_single_flow(Duration::ZERO, ms(3), ms(400), 60);
    assert!(
        drops > 0,
        "a burst standing for more than an interval is dropped from"
    );
}

#[test]
fn overflow_drops_the_head_of_the_fattest_queue() {
    let config = FqCodelConfig {
        limit: Limit::packets(10),
        ..FqCodelConfig::default()
    };
    let mut q: FqCodel<u32> = FqCodel::new(config).unwrap();
    let mut drops = Vec::new();
    for i in 0..8 {
        q.enqueue(Packet::new(bulk(), 1500, ms(0), i), &mut drops);
    }
    for i in 100..103 {
        q.enqueue(Packet::new(sparse(), 200, ms(0), i), &mut drops);
    }
    assert_eq!(drops.len(), 1);
    assert_eq!(
        drops[0].flow,
        bulk(),
        "the sparse arrival pushed out a bulk packet"
    );
    assert_eq!(drops[0].payload, 0, "from the head");
    assert_eq!(q.len(), 10);
    assert_eq!(q.bytes(), 7 * 1500 + 3 * 200);
}

#[test]
fn bad_configurations_are_refused() {
    let zero_flows = FqCodelConfig {
        flows: 0,
        ..FqCodelConfig::default()
    };
    let err = FqCodel::<()>::new(zero_flows).unwrap_err().to_string();
    assert!(err.starts_with("fq_codel flows must be"), "{err}");
    let mut bad_codel = FqCodelConfig::default();
    bad_codel.codel.interval = ms(1);
    let err = FqCodel::<()>::new(bad_codel).unwrap_err().to_string();
    assert!(
        err.starts_with("codel interval must be at least the target"),
        "{err}"
    );
}
