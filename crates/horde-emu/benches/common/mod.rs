//! What the benches share: the link they load, a probe for stalls of the whole machine, and
//! a unit for printing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::path::Path;

use horde_emu::Histogram;
use horde_links::{DelaySpec, Link, LinkSpec, RateSpec};

/// A thread waking every millisecond without spinning until `stop`, recording how late it
/// wakes: stalls of the whole machine during a run, for reading its figures. `setup` runs
/// first on the probe's own thread (scheduling class, timer slack).
pub fn spawn_stall_probe(
    stop: Arc<AtomicBool>,
    setup: impl FnOnce() + Send + 'static,
) -> std::thread::JoinHandle<Histogram> {
    std::thread::spawn(move || {
        setup();
        let mut h = Histogram::new();
        let mut deadline = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            deadline += Duration::from_millis(1);
            let now = Instant::now();
            if deadline > now {
                std::thread::sleep(deadline - now);
            }
            h.record(Instant::now().saturating_duration_since(deadline));
        }
        h
    })
}

/// A duration in microseconds.
pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A constant-rate link with a 10 ms propagation delay and a 1 MB buffer.
pub fn rate_link(mbps: f64) -> Box<dyn Link> {
    let spec = LinkSpec {
        rate: Some(RateSpec::Constant {
            kbps: mbps * 1000.0,
        }),
        buffer_bytes: Some(1_000_000),
        delay: Some(DelaySpec::Constant { ms: 10.0 }),
        loss: None,
    };
    spec.build(1, Path::new(".")).expect("valid spec")
}
