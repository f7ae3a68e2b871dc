//! What the sender's report allocates per interval row once an outage has stretched its
//! latency windows to seconds.
//!
//! Each stream's window is an HDR histogram; with samples of seconds it is over 100 KB.
//! An interval row used to copy every window before reading it: a block that size per
//! stream per second, on the heap among an outage's small blocks, each copy a chance
//! for the heap to step up (`docs/results.md`, "Soak"). Here the rows are made after
//! acks of up to 8 s, and the bytes they allocate are counted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use horde_apps::live::Live;
use horde_apps::report::SendReport;
use horde_proto::{ChannelId, Event};

/// Bytes allocated by every thread of this test binary, and the largest block.
static BYTES: AtomicU64 = AtomicU64::new(0);
static LARGEST: AtomicU64 = AtomicU64::new(0);

struct Counting;

// SAFETY: every call is passed to the system allocator unchanged; only counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        LARGEST.fetch_max(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        LARGEST.fetch_max(new_size as u64, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Most bytes an interval row of two streams and two channels may allocate: the row
/// itself, its names and the counters' marks, a few hundred bytes; a copy of one
/// stretched window alone is over 100 KB.
const MAX_BYTES_PER_ROW: u64 = 8 * 1024;

fn ack(stream: u32, seq: u64, latency: Duration) -> Event {
    Event::Ack {
        stream,
        adu: seq,
        stream_seq: seq,
        channel: ChannelId::new((seq % 2) as u8),
        rtt: latency,
        latency,
    }
}

#[test]
fn an_interval_row_copies_no_latency_window() {
    let names = BTreeMap::from([(1, "cbr".to_string()), (2, "audio".to_string())]);
    let mut report = SendReport::new(names, vec!["a".into(), "b".into()]);
    let mut live = Live::default();
    let mut seq = 0;
    let mut one_second = |live: &mut Live| {
        for stream in [1, 2] {
            for ms in [20, 80, 900, 8_000] {
                live.on_queued(stream, 100);
                live.on_sender_event(&ack(stream, seq, Duration::from_millis(ms)));
                seq += 1;
            }
        }
    };
    // Warm up: the windows and the run's histograms stretch to 8 s, the report's rows
    // and marks get their first blocks.
    for s in 1..=5 {
        one_second(&mut live);
        report.interval(&mut live, Duration::from_secs(s));
    }
    let mut rows_bytes = 0;
    for s in 6..=25 {
        one_second(&mut live);
        let before = BYTES.load(Ordering::Relaxed);
        LARGEST.store(0, Ordering::Relaxed);
        let row = report.interval(&mut live, Duration::from_secs(s));
        assert_eq!(row.streams.len(), 2);
        assert!(row.streams[0].latency_ms.p95.is_some_and(|p| p > 7_000.0));
        rows_bytes += BYTES.load(Ordering::Relaxed) - before;
        let largest = LARGEST.load(Ordering::Relaxed);
        assert!(
            largest < 16 * 1024,
            "a row allocated a block of {largest} bytes"
        );
    }
    let per_row = rows_bytes / 20;
    eprintln!("{per_row} bytes allocated per interval row");
    assert!(
        per_row <= MAX_BYTES_PER_ROW,
        "each interval row allocates {per_row} bytes"
    );
}
