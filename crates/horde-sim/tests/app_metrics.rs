//! What the application sees, measured end to end by the simulator: one-way and
//! in-order delivery delay, delivered goodput per interval, and metrics whose memory
//! does not grow with the run's length.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use horde_links::{DelaySpec, LinkSpec, LossSpec, RateSpec};
use horde_policy::RandomizedRoundRobin;
use horde_proto::{CcConfig, ChannelConfig, SessionConfig, StreamConfig};
use horde_sim::engine::{ChannelSetup, Simulation, StreamSetup, Topology};
use horde_sim::workload::WorkloadSpec;

/// Counts live heap bytes, so a test can see what a run keeps.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The tests in this file run one at a time, so that one's allocations do not show in
/// another's count.
static SERIAL: Mutex<()> = Mutex::new(());

const FAST_MS: f64 = 50.0;
const SLOW_MS: f64 = 200.0;

fn channel(name: &str, kbps: f64, delay_ms: f64, loss: f64) -> ChannelSetup {
    ChannelSetup {
        name: name.into(),
        a: 0,
        b: 1,
        config: ChannelConfig {
            mtu: 800,
            congestion: CcConfig::Cbr {
                kbps: kbps * 0.95,
                burst_ms: 100.0,
            },
            ..ChannelConfig::default()
        },
        up: LinkSpec {
            rate: Some(RateSpec::Constant { kbps }),
            buffer_bytes: Some(64_000),
            loss: (loss > 0.0).then_some(LossSpec::Bernoulli { p: loss }),
            delay: Some(DelaySpec::Constant { ms: delay_ms }),
            qdisc: None,
        },
        down: LinkSpec::default(),
    }
}

/// Two channels with constant one-way delays, a 200 kbit/s stream, 2 % loss.
fn topology(secs: u64) -> Topology {
    Topology {
        hosts: vec!["a".into(), "b".into()],
        channels: vec![
            channel("fast", 200.0, FAST_MS, 0.02),
            channel("slow", 100.0, SLOW_MS, 0.02),
        ],
        streams: vec![StreamSetup {
            id: 3,
            from: 0,
            to: 1,
            config: StreamConfig::default(),
            workload: WorkloadSpec::Cbr {
                kbps: 200.0,
                adu_bytes: 700,
            },
            objectives: vec![],
        }],
        session: SessionConfig::default(),
        scheduler: Arc::new(|| Box::new(RandomizedRoundRobin::default())),
        seed: 11,
        duration: Duration::from_secs(secs),
        base_dir: PathBuf::from("."),
    }
}

#[test]
fn delays_are_at_least_the_links_and_in_order_at_least_one_way() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut sim = Simulation::new(topology(30)).unwrap();
    sim.set_goodput_interval(Duration::from_millis(500));
    let r = sim.run(|_| {});
    let s = &r.streams[0];
    assert!(s.delivered > 500 && s.lost > 0, "{s:?}");
    let one_way = &s.one_way_delay_ms;
    let in_order = &s.in_order_delay_ms;
    assert_eq!(one_way.count, s.delivered);
    // Nothing beats the fastest link's propagation delay.
    assert!(one_way.min.unwrap() >= FAST_MS, "{one_way:?}");
    // The slow link carries some ADUs, so the tail sees its delay.
    assert!(one_way.p99.unwrap() >= SLOW_MS, "{one_way:?}");
    // Waiting for earlier ADUs only adds delay.
    assert!(in_order.count > 0 && in_order.count <= one_way.count);
    for (o, i) in [
        (one_way.min, in_order.min),
        (one_way.mean, in_order.mean),
        (one_way.median, in_order.median),
        (one_way.p95, in_order.p95),
        (one_way.p99, in_order.p99),
    ] {
        assert!(i.unwrap() >= o.unwrap() * 0.999, "{one_way:?} {in_order:?}");
    }
    // Fast ADUs overtaking slow ones wait for them: head-of-line blocking is visible.
    assert!(in_order.mean.unwrap() > one_way.mean.unwrap() + 1.0);
    // The insertion-to-ack latency is a round trip: longer than one way.
    assert!(s.latency_ms.mean.unwrap() > one_way.mean.unwrap());

    // Goodput: 60 half-second intervals whose bits add up to the whole run's.
    assert_eq!(r.goodput_interval_s, 0.5);
    let series = &s.delivered_goodput_series_kbps;
    assert_eq!(series.len(), 60);
    let bits: f64 = series.iter().map(|k| k * 0.5).sum();
    assert!((bits - s.delivered_goodput_kbps * 30.0).abs() < 1e-6);
    assert_eq!(
        s.delivered_bytes,
        s.delivered * 700,
        "every ADU carries 700 bytes"
    );
    assert!(
        s.delivered_goodput_kbps > 150.0 && s.delivered_goodput_kbps <= 200.0,
        "{}",
        s.delivered_goodput_kbps
    );
    assert_eq!(r.unmatched_events, 0);
}

/// Live heap bytes a finished run keeps, and what its metrics hold.
fn held_after(secs: u64) -> (isize, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    let mut sim = Simulation::new(topology(secs)).unwrap();
    let report = sim.run(|_| {});
    drop(report);
    let heap = LIVE.load(Ordering::Relaxed) - before;
    (heap, sim.metrics().held_records())
}

#[test]
fn memory_held_does_not_grow_with_simulated_time() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (heap_60, records_60) = held_after(60);
    let (heap_600, records_600) = held_after(600);
    println!("60 s: {heap_60} B, {records_60} records; 600 s: {heap_600} B, {records_600} records");
    // 30 s of settled ADUs are kept for late events, whatever the run's length.
    assert!(
        records_600 <= records_60 + records_60 / 5,
        "{records_60} -> {records_600}"
    );
    // Ten times the simulated time, lost packets included, and the same memory (give or
    // take the longer goodput series and histograms stretched by a rarer long delay).
    assert!(heap_600 < heap_60 + heap_60 / 10, "{heap_60} -> {heap_600}");
}
