//! A live session with and without a handshake flood against its receiver.
//!
//!     cargo bench -p horde-net --bench flood [-- RATE SECONDS [loopback|emulated] [--pin] [--shared-socket] [--data-path]]
//!
//! Both hosts run on one two-worker runtime over loopback; the session sends 1000-byte ADUs
//! at 1000/s (8 Mbit/s). The attacker sends from 127.0.0.2 at RATE datagrams/s (default
//! 50,000) for the whole run: random initiations, one replayed initiation of the allowed
//! key, or initiations from a key that is not allowed (the last two answer cookie replies).
//! Prints goodput and p95 one-way latency of each run and their ratios to the run without
//! a flood, measured in the same process (targets: goodput >= 90 %, p95 <= 2x).
//!
//! The row `control: other port` sends the same random flood at the same rate to another
//! UDP port of 127.0.0.1, where a thread reads and discards it: what the session loses
//! there is the flood's cost to the machine (the attacker's sends and the kernel's loopback
//! path on two cores), not Horde's. With `--pin` the runtime's workers (and the threads
//! they start, such as the handshake worker) run on CPU 0 and the attacker on CPU 1.
//! With `--shared-socket` the receiver reads initiations on its data socket and the driver
//! checks them (`HandshakeSettings::separate_socket` off), as before they had their own.
//! With `--data-path` the floods are of the kinds that can belong to no live session
//! instead: old-format initiations (type 1), transport datagrams, responses and cookie
//! replies to unknown indices, undefined types and empty datagrams (try RATE 150000).

#[path = "../tests/common/flood.rs"]
mod flood;

use flood::{live_session_with, pin_current_thread, Aim, EmulatedLink, FloodKind, FloodOptions};

const ADU: usize = 1000;
const ADUS_PER_SECOND: u32 = 1000;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let rate: u32 = args.first().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let seconds: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5.0);
    // Optional: only the paths whose name starts with this word (both by default).
    let only = args.get(2).cloned().unwrap_or_default();
    let pin = std::env::args().any(|a| a == "--pin");
    let shared_socket = std::env::args().any(|a| a == "--shared-socket");
    let kinds: &[FloodKind] = if std::env::args().any(|a| a == "--data-path") {
        &FloodKind::DATA_PATH
    } else {
        &FloodKind::ALL
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            if pin {
                pin_current_thread(0);
            }
        })
        .build()
        .unwrap();
    let mut options = FloodOptions {
        separate_socket: !shared_socket,
        ..FloodOptions::default()
    };
    if pin {
        options.attacker_cpu = Some(1);
        options.sink_cpu = Some(0);
    }
    println!(
        "live session: {ADUS_PER_SECOND} ADUs/s of {ADU} B for {seconds} s; flood {rate}/s{}",
        if pin {
            "; runtime pinned to CPU 0, attacker to CPU 1"
        } else {
            ""
        }
    );
    println!(
        "initiations read on {}",
        if shared_socket {
            "the data socket, by the driver"
        } else {
            "a handshake socket, by the handshake worker"
        }
    );
    println!(
        "{:<22} {:>10} {:>12} {:>9} {:>8} {:>7} {:>9}  receiver drops",
        "flood", "sent", "goodput kb/s", "p95 ms", "goodput", "p95", "delivered"
    );
    for (path, link) in [
        ("loopback", None),
        (
            "emulated 20 Mbit/s, 10 ms",
            Some(EmulatedLink {
                kbps: 20_000.0,
                delay_ms: 10.0,
            }),
        ),
    ] {
        if !path.starts_with(only.as_str()) {
            continue;
        }
        println!("-- path: {path}");
        run(&rt, link, rate, seconds, options, kinds);
    }
}

fn run(
    rt: &tokio::runtime::Runtime,
    link: Option<EmulatedLink>,
    rate: u32,
    seconds: f64,
    options: FloodOptions,
    kinds: &[FloodKind],
) {
    let session = |flood: Option<(FloodKind, u32)>, options: FloodOptions| {
        rt.block_on(live_session_with(
            link,
            flood,
            options,
            ADUS_PER_SECOND,
            ADU,
            seconds,
        ))
    };
    let base = session(None, options);
    let (g0, p0) = (base.goodput_kbps(ADU), base.p95_ms());
    let row = |name: &str, r: &flood::LiveReport| {
        let (g, p) = (r.goodput_kbps(ADU), r.p95_ms());
        println!(
            "{:<22} {:>10} {:>12.0} {:>9.2} {:>7.1}% {:>6.2}x {:>4}/{:<4}  {}",
            name,
            r.flood_sent,
            g,
            p,
            100.0 * g / g0,
            p / p0,
            r.delivered,
            r.sent,
            if r.sink_read > 0 {
                format!("sink read {}", r.sink_read)
            } else {
                format!(
                    "{:?}, {} read by the handshake worker, {} dropped by the kernel filter",
                    r.server_drops,
                    r.server_stats.handshake_datagrams_in,
                    r.server_stats.kernel_dropped
                )
            }
        );
    };
    row("none", &base);
    let mut reports = vec![("none", base.clone())];
    let control = session(
        Some((FloodKind::Random, rate)),
        FloodOptions {
            aim: Aim::Sink,
            ..options
        },
    );
    row("control: other port", &control);
    reports.push(("control: other port", control));
    for &kind in kinds {
        let r = session(Some((kind, rate)), options);
        row(kind.name(), &r);
        reports.push((kind.name(), r));
    }
    // Where the CPU went during each run, in % of one core (Linux thread names; the
    // runtime's workers run the drivers and the applications of both hosts).
    println!(
        "{:<22} {:>12} {:>12} {:>12} {:>12}",
        "cpu % of one core", "runtime", "handshake", "attacker", "sink"
    );
    for (name, r) in &reports {
        let pct = |thread: &str| 100.0 * r.cpu.get(thread).copied().unwrap_or(0.0) / r.seconds;
        println!(
            "{:<22} {:>12.1} {:>12.1} {:>12.1} {:>12.1}",
            name,
            pct("tokio-rt-worker"),
            pct("horde-handshake"),
            100.0 * r.attacker_cpu / r.seconds,
            100.0 * r.sink_cpu / r.seconds
        );
    }
}
