//! What an outage makes the sender hold on the C heap, per ADU it queues.
//!
//! While every link is down the sender keeps generating: its stream's queue fills to its
//! byte bound (256 KiB, 2,621 ADUs of 100 bytes) and drops the oldest from then on.
//! Each queued ADU used to be a handful of small heap blocks (its payload, its field
//! list and a block per field name). Blocks made meanwhile for longer-lived data land
//! among them, so once the outage's ADUs were freed the heap kept their pages, and a
//! sender's memory stepped up outage after outage (`docs/results.md`, "Soak"). Here the
//! sender's per-ADU path (workload, field list, stamped payload, live statistics) runs
//! through one second of such an outage at 10,000 ADUs/s, and the small blocks still
//! held at its end are counted per ADU held.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use horde_apps::live::Live;
use horde_apps::payloads::PayloadChunks;
use horde_proto::{Event, NackReason};
use horde_workload::{stream_seed, WorkloadSpec};

/// Blocks below this size come from the heap's arenas; from it up, each is a mapping of
/// its own (the threshold `horde` sets), given back to the system when freed.
const MMAP_THRESHOLD: usize = 128 * 1024;

/// Small blocks currently allocated, by every thread of this test binary.
static SMALL_BLOCKS: AtomicI64 = AtomicI64::new(0);

struct Counting;

// SAFETY: every call is passed to the system allocator unchanged; only counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() < MMAP_THRESHOLD {
            SMALL_BLOCKS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() < MMAP_THRESHOLD {
            SMALL_BLOCKS.fetch_sub(1, Ordering::Relaxed);
        }
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (was, is) = (layout.size() < MMAP_THRESHOLD, new_size < MMAP_THRESHOLD);
        SMALL_BLOCKS.fetch_add(i64::from(is) - i64::from(was), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The stream queue's default byte bound, and the ADUs of 100 bytes it holds.
const QUEUE_BYTES: usize = 256 * 1024;
const ADU_BYTES: usize = 100;
/// Most small blocks an ADU held through an outage may cost: its field list (one block;
/// two while it was an `Arc<Vec>`) and a share of the statistics' per-ADU map.
const MAX_BLOCKS_PER_ADU: f64 = 1.5;

/// Stream 1's ADU `seq` pushed out of the full queue.
fn overflowed(seq: u64) -> Event {
    Event::Nack {
        stream: 1,
        adu: seq,
        stream_seq: seq,
        channel: None,
        reason: NackReason::QueueOverflow,
    }
}

#[test]
fn an_outage_s_queued_adus_hold_few_small_heap_blocks() {
    let held_max = QUEUE_BYTES / ADU_BYTES;
    let spec = WorkloadSpec::Cbr {
        kbps: (10_000 * ADU_BYTES * 8) as f64 / 1000.0,
        adu_bytes: ADU_BYTES as u32,
    };
    let mut cbr = spec.build(stream_seed(7, 1), 1200).unwrap();
    let mut payloads = PayloadChunks::default();
    let mut live = Live::default();
    // The queue's own room, made before counting: it is one block that an outage grows
    // once, not a block per ADU.
    let mut queue = VecDeque::with_capacity(held_max + 1);
    let mut out = Vec::with_capacity(64);
    let mut queue_and_drop = |out: &mut Vec<_>, live: &mut Live, queue: &mut VecDeque<_>| {
        for a in out.drain(..) {
            let a: horde_workload::AduSpec = a;
            let seq = live.on_queued(1, a.size);
            let payload = payloads.stamped(a.size as usize, seq, 1_700_000_000_000_000);
            queue.push_back((seq, payload, a.fields));
            if queue.len() > held_max {
                let (seq, _, _) = queue.pop_front().unwrap();
                live.on_sender_event(&overflowed(seq));
            }
        }
    };
    // Warm up: the first 400 ms fill the queue and make the statistics' first blocks.
    let step = Duration::from_millis(1);
    let mut t = Duration::ZERO;
    while t < Duration::from_millis(400) {
        cbr.emit(t, &mut out);
        queue_and_drop(&mut out, &mut live, &mut queue);
        t += step;
    }
    let before = SMALL_BLOCKS.load(Ordering::Relaxed);
    let held_before = queue.len();
    // Drain the queue, as the links coming back would, then one second of outage.
    while let Some((seq, _, _)) = queue.pop_front() {
        live.on_sender_event(&overflowed(seq));
    }
    let empty = SMALL_BLOCKS.load(Ordering::Relaxed);
    while t < Duration::from_millis(1400) {
        cbr.emit(t, &mut out);
        queue_and_drop(&mut out, &mut live, &mut queue);
        t += step;
    }
    let after = SMALL_BLOCKS.load(Ordering::Relaxed);
    let held = queue.len();
    assert_eq!(held, held_max, "the outage filled the queue to its bound");
    assert_eq!(held_before, held_max);
    assert!(
        live.streams[&1].queued >= 13_900,
        "{}",
        live.streams[&1].queued
    );
    let per_adu = (after - empty) as f64 / held as f64;
    eprintln!(
        "{held} ADUs held: {before} small blocks before the drain, {empty} with the queue \
         empty, {after} at the outage's end: {per_adu:.2} per ADU held"
    );
    assert!(
        per_adu <= MAX_BLOCKS_PER_ADU,
        "each ADU an outage holds costs {per_adu:.2} small heap blocks"
    );
    // What the ADUs held when the queue drained is what it gives back.
    assert!(
        (before - empty) as f64 <= MAX_BLOCKS_PER_ADU * held_before as f64,
        "{before} -> {empty}"
    );
}
