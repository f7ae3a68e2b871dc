//! Release-time error of the emulator under load: paced 1200-byte UDP traffic from a
//! local sender through constant-rate links to a local sink, first 50 Mbit/s on one link,
//! then 4 links × 20 Mbit/s. Prints achieved throughput and the release-time error
//! (actual send time minus scheduled delivery time) p50/p99/max, beside two references:
//! an anchor timer thread with the same settings run alone at the same packet period, and
//! a 1 ms stall probe running during the scenario.
//!
//! `cargo bench -p horde-emu --bench release_error [-- SECONDS [SPIN_US [RT_PRIORITY|off]]]`

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use horde_emu::{ChannelSetup, Emulator, Histogram, IdealLink, TimerOptions};

mod common;

use common::{rate_link, us};

const PACKET: usize = 1200;

fn scenario(links: usize, mbps: f64, secs: f64, options: TimerOptions) {
    let gap = Duration::from_secs_f64(PACKET as f64 * 8.0 / (mbps * 1e6) / links as f64);
    let floor = anchor(secs, gap, options);
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let channels = (0..links)
        .map(|i| ChannelSetup {
            name: format!("link{i}"),
            listen: "127.0.0.1:0".parse().unwrap(),
            forward_to: sink.local_addr().unwrap(),
            up: rate_link(mbps),
            down: Box::new(IdealLink::new()),
            schedule: Vec::new(),
        })
        .collect();
    let emu = Emulator::start_with(channels, options).unwrap();
    let entries: Vec<_> = emu
        .channels()
        .iter()
        .map(|n| emu.client_addr(n).unwrap())
        .collect();

    let probe_stop = Arc::new(AtomicBool::new(false));
    let probe = spawn_stall_probe(options.realtime_priority, probe_stop.clone());
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
    probe_stop.store(true, Ordering::Relaxed);
    let stalls = probe.join().unwrap();
    let stats = emu.shutdown();
    let err = stats.release_error();
    let dropped: u64 = stats
        .channels
        .iter()
        .map(|c| c.up.dropped_queue + c.up.dropped_other)
        .sum();
    println!(
        "{links} x {mbps:.0} Mbit/s: sent {total}, delivered {} ({dropped} dropped), \
         throughput {:.2} Mbit/s",
        err.count(),
        bytes as f64 * 8.0 / span.as_secs_f64() / 1e6,
    );
    println!(
        "  release error   p50 {:>8.1} us  p99 {:>8.1} us  max {:>8.1} us",
        us(err.quantile(0.5)),
        us(err.quantile(0.99)),
        us(err.max()),
    );
    println!(
        "  anchor (timer)  p50 {:>8.1} us  p99 {:>8.1} us  max {:>8.1} us  (p99 ratio {:.2})",
        us(floor.quantile(0.5)),
        us(floor.quantile(0.99)),
        us(floor.max()),
        us(err.quantile(0.99)) / us(floor.quantile(0.99)).max(0.1),
    );
    println!(
        "  stall probe     p50 {:>8.1} us  p99 {:>8.1} us  max {:>8.1} us  (1 ms timer beside the run)",
        us(stalls.quantile(0.5)),
        us(stalls.quantile(0.99)),
        us(stalls.max()),
    );
}

/// The anchor: a thread with the release thread's settings (timer slack, priority,
/// spin) that only wakes at the same packet period and measures how late it wakes. It
/// shows what the machine itself allows; the emulator's error is reported beside it.
fn anchor(secs: f64, gap: Duration, options: TimerOptions) -> Histogram {
    std::thread::spawn(move || {
        // SAFETY: both calls affect only this thread.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
            if let Some(p) = options.realtime_priority {
                let param = libc::sched_param { sched_priority: p };
                libc::sched_setscheduler(0, libc::SCHED_FIFO, &param);
            }
        }
        let mut h = Histogram::new();
        let start = Instant::now();
        let mut deadline = start;
        while start.elapsed().as_secs_f64() < secs {
            deadline += gap;
            let now = Instant::now();
            if deadline > now + options.spin {
                std::thread::sleep(deadline - options.spin - now);
            }
            while Instant::now() < deadline {
                std::hint::spin_loop();
            }
            h.record(Instant::now() - deadline);
        }
        h
    })
    .join()
    .unwrap()
}

/// The stall probe beside the emulator, real-time if permitted, with the emulator's 1 ns
/// timer slack. Its max shows stalls of the whole machine during the run.
fn spawn_stall_probe(
    priority: Option<i32>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Histogram> {
    common::spawn_stall_probe(stop, move || {
        // SAFETY: both calls affect only this thread.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
            if let Some(p) = priority {
                let param = libc::sched_param { sched_priority: p };
                libc::sched_setscheduler(0, libc::SCHED_FIFO, &param);
            }
        }
    })
}

/// `[SECONDS [SPIN_US [RT_PRIORITY|off]]]`, defaults: 3 s and the emulator's defaults.
fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let secs = args.first().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let mut options = TimerOptions::default();
    if let Some(us) = args.get(1).and_then(|s| s.parse().ok()) {
        options.spin = Duration::from_micros(us);
    }
    match args.get(2).map(String::as_str) {
        Some("off") => options.realtime_priority = None,
        Some(p) => options.realtime_priority = p.parse().ok(),
        None => {}
    }
    println!(
        "release_error: {secs} s per scenario, 1200-byte packets, spin {} us, realtime {:?}, load {}",
        options.spin.as_micros(),
        options.realtime_priority,
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    scenario(1, 50.0, secs, options);
    scenario(4, 20.0, secs, options);
}
