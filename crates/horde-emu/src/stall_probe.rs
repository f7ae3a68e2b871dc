//! A probe for stalls of the whole machine, to read a run's timing figures against:
//! no release thread can be more punctual than the machine lets any thread be.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Histogram;

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
