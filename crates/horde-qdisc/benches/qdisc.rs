//! Enqueue + dequeue cost per packet of each discipline with 10 and with 10,000 active
//! flows (each flow keeps one packet queued; every iteration enqueues one packet for the
//! next flow in turn, dequeues one and charges it 600 µs of airtime).
//!
//! Run: `cargo bench -p horde-qdisc --bench qdisc`. Criterion reports the time per
//! iteration, which is the cost per packet; a summary table in ns/packet, relative to
//! FIFO, is printed at the end.

use std::time::{Duration, Instant};

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use horde_qdisc::{
    Chap, ChapConfig, Fifo, FlowKey, FqCodel, FqCodelConfig, Limit, Packet, Qdisc, QdiscKind, Spq,
    SpqConfig, SpqRule, PROTO_UDP,
};

const FLOW_COUNTS: [usize; 2] = [10, 10_000];
const AIRTIME: Duration = Duration::from_micros(600);
/// Virtual time between iterations: 10,000 queued packets wait 1 ms, below CoDel's target.
const TICK: Duration = Duration::from_nanos(100);

fn flow(i: usize) -> FlowKey {
    let host = [10, 1, (i >> 8) as u8, i as u8];
    if i.is_multiple_of(2) {
        FlowKey::udp([10, 0, 0, 1], 5000, host, 6000)
    } else {
        FlowKey::tcp([10, 0, 0, 1], 443, host, 40_000)
    }
}

fn build(kind: QdiscKind, flows: usize) -> Box<dyn Qdisc<u64>> {
    let limit = Limit::packets(flows + 64);
    match kind {
        QdiscKind::Fifo => Box::new(Fifo::new(limit).unwrap()),
        QdiscKind::Spq => Box::new(
            Spq::new(SpqConfig {
                bands: 2,
                rules: vec![SpqRule {
                    band: 0,
                    protocol: Some(PROTO_UDP),
                    ..SpqRule::default()
                }],
                default_band: 1,
                limit,
            })
            .unwrap(),
        ),
        QdiscKind::Chap => Box::new(
            Chap::new(ChapConfig {
                limit,
                ..ChapConfig::default()
            })
            .unwrap(),
        ),
        QdiscKind::FqCodel => Box::new(FqCodel::new(FqCodelConfig::default()).unwrap()),
    }
}

/// A discipline holding one packet of each of `flows` flows, and the state to keep going.
struct Loaded {
    q: Box<dyn Qdisc<u64>>,
    keys: Vec<FlowKey>,
    next: usize,
    now: Duration,
    drops: Vec<Packet<u64>>,
}

impl Loaded {
    fn new(kind: QdiscKind, flows: usize) -> Loaded {
        let keys: Vec<FlowKey> = (0..flows).map(flow).collect();
        let mut q = build(kind, flows);
        let mut drops = Vec::with_capacity(64);
        for (i, key) in keys.iter().enumerate() {
            q.enqueue(
                Packet::new(*key, 1500, Duration::ZERO, i as u64),
                &mut drops,
            );
        }
        assert!(drops.is_empty(), "{kind}: the prefill was dropped from");
        Loaded {
            q,
            keys,
            next: 0,
            now: Duration::ZERO,
            drops,
        }
    }

    fn step(&mut self) {
        self.now += TICK;
        let key = self.keys[self.next];
        self.next = (self.next + 1) % self.keys.len();
        self.q
            .enqueue(Packet::new(key, 1500, self.now, 0), &mut self.drops);
        let p = self
            .q
            .dequeue(self.now, &mut self.drops)
            .expect("queue is loaded");
        self.q.charge(&p.flow, AIRTIME);
        black_box(p);
        self.drops.clear();
    }
}

fn criterion_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("enqueue_dequeue");
    group.throughput(Throughput::Elements(1));
    for kind in QdiscKind::ALL {
        for flows in FLOW_COUNTS {
            let mut loaded = Loaded::new(kind, flows);
            group.bench_function(BenchmarkId::new(kind.name(), flows), |b| {
                b.iter(|| loaded.step())
            });
        }
    }
    group.finish();
}

/// ns/packet over a fixed number of packets after a warm-up pass over every flow.
fn ns_per_packet(kind: QdiscKind, flows: usize) -> f64 {
    const PACKETS: usize = 2_000_000;
    let mut loaded = Loaded::new(kind, flows);
    for _ in 0..flows.max(10_000) {
        loaded.step();
    }
    let start = Instant::now();
    for _ in 0..PACKETS {
        loaded.step();
    }
    start.elapsed().as_nanos() as f64 / PACKETS as f64
}

fn summary() {
    println!("\nenqueue+dequeue per packet (one packet queued per active flow)");
    println!(
        "{:<10} {:>7} {:>12} {:>9}",
        "qdisc", "flows", "ns/packet", "x fifo"
    );
    for flows in FLOW_COUNTS {
        let anchor = ns_per_packet(QdiscKind::Fifo, flows);
        for kind in QdiscKind::ALL {
            let ns = if kind == QdiscKind::Fifo {
                anchor
            } else {
                ns_per_packet(kind, flows)
            };
            println!(
                "{:<10} {:>7} {:>12.1} {:>9.2}",
                kind.name(),
                flows,
                ns,
                ns / anchor
            );
        }
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    criterion_benches(&mut c);
    c.final_summary();
    summary();
}
