//! Release-time error of the emulator under load: paced 1200-byte UDP traffic from a
//! local sender through constant-rate links to a local sink, first 50 Mbit/s on one link,
//! then 4 links × 20 Mbit/s. Prints achieved throughput and the release-time error
//! (actual send time minus scheduled delivery time) p50/p99/max.
//!
//! `cargo bench -p horde-emu --bench release_error [-- SECONDS [SPIN_US]]`

use std::collections::VecDeque;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use horde_emu::{ChannelSetup, Emulator, IdealLink, TimerOptions, DEFAULT_SPIN_US};
use horde_links::{Delivery, Link, LinkStats, Verdict};

const PACKET: usize = 1200;

struct RateLink {
    ns_per_byte: f64,
    busy_until: Duration,
    queue: VecDeque<(u64, Duration, u32)>,
    stats: LinkStats,
}

impl RateLink {
    fn new(kbps: f64) -> Self {
        Self {
            ns_per_byte: 8e6 / kbps,
            busy_until: Duration::ZERO,
            queue: VecDeque::new(),
            stats: LinkStats::default(),
        }
    }
}

impl Link for RateLink {
    fn enqueue(&mut self, now: Duration, id: u64, size: u32) -> Verdict {
        self.stats.offered += 1;
        let start = self.busy_until.max(now);
        self.busy_until = start + Duration::from_nanos((f64::from(size) * self.ns_per_byte) as u64);
        self.queue.push_back((id, self.busy_until, size));
        Verdict::Queued
    }
    fn next_delivery(&self) -> Option<Duration> {
        self.queue.front().map(|q| q.1)
    }
    fn deliver(&mut self, now: Duration, out: &mut Vec<Delivery>) {
        while let Some(&(id, at, size)) = self.queue.front() {
            if at > now {
                break;
            }
            self.queue.pop_front();
            self.stats.delivered += 1;
            self.stats.bytes_delivered += u64::from(size);
            out.push(Delivery { id, at });
        }
    }
    fn stats(&self) -> LinkStats {
        self.stats
    }
}

fn scenario(links: usize, mbps: f64, secs: f64, spin: Duration, rt: Option<i32>) {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let channels = (0..links)
        .map(|i| ChannelSetup {
            name: format!("link{i}"),
            listen: "127.0.0.1:0".parse().unwrap(),
            forward_to: sink.local_addr().unwrap(),
            up: Box::new(RateLink::new(mbps * 1000.0)),
            down: Box::new(IdealLink::new()),
            schedule: Vec::new(),
        })
        .collect();
    let emu = Emulator::start_with(
        channels,
        TimerOptions {
            spin,
            realtime_priority: rt,
            ..TimerOptions::default()
        },
    )
    .unwrap();
    let entries: Vec<_> = emu
        .channels()
        .iter()
        .map(|n| emu.client_addr(n).unwrap())
        .collect();

    let done = Arc::new(AtomicBool::new(false));
    let sink_done = done.clone();
    let sink_thread = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut bytes = 0u64;
        let mut first = None;
        let mut last = Instant::now();
        while !sink_done.load(Ordering::Relaxed) {
            if let Ok(n) = sink.recv(&mut buf) {
                last = Instant::now();
                first.get_or_insert(last);
                bytes += n as u64;
            }
        }
        (bytes, first.map(|f| last - f).unwrap_or_default())
    });

    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    let gap = Duration::from_secs_f64(PACKET as f64 * 8.0 / (mbps * 1e6) / links as f64);
    let total = (secs / gap.as_secs_f64()) as u64;
    let payload = [0u8; PACKET];
    let start = Instant::now();
    for i in 0..total {
        let due = start + gap * i as u32;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        sender
            .send_to(&payload, entries[i as usize % links])
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    done.store(true, Ordering::Relaxed);
    let (bytes, span) = sink_thread.join().unwrap();
    let stats = emu.shutdown();
    let err = stats.release_error();
    let dropped: u64 = stats
        .channels
        .iter()
        .map(|c| c.up.dropped_queue + c.up.dropped_other)
        .sum();
    println!(
        "{links} x {mbps:>4.0} Mbit/s, spin {:>3} us, rt {rt:?}: sent {total} pkts, delivered {} ({dropped} dropped), \
         throughput {:.2} Mbit/s; release error p50 {:.1} us, p99 {:.1} us, max {:.1} us",
        spin.as_micros(),
        err.count(),
        bytes as f64 * 8.0 / span.as_secs_f64() / 1e6,
        err.quantile(0.5).as_secs_f64() * 1e6,
        err.quantile(0.99).as_secs_f64() * 1e6,
        err.max().as_secs_f64() * 1e6,
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let secs = args.first().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let spin = Duration::from_micros(
        args.get(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(DEFAULT_SPIN_US),
    );
    let rt = args.get(2).and_then(|s| s.parse().ok());
    scenario(1, 50.0, secs, spin, rt);
    scenario(4, 20.0, secs, spin, rt);
}
