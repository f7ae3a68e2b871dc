//! Sender-to-receiver throughput through the runtime: 4 channels over unshaped loopback
//! with encryption on, then the same through the emulator with ideal links.
//!
//!     cargo bench -p horde-net --bench throughput [-- SECONDS] [horde]
//!
//! With `horde`, only Horde over loopback runs (for profiling).
//!
//! Horde runs twice over loopback: with 1200-byte ADUs, and with ADUs sized so that its
//! datagrams are as large as quinn's stream datagrams in the same run (quinn's mean UDP
//! payload less Horde's data header and transport overhead).
//!
//! Experiments: `HORDE_BENCH_CHANNELS=1` prints each channel's srtt, rate and losses at the
//! end of a Horde run, and what the receiver dropped for want of buffer;
//! `HORDE_BENCH_CC=cbr:KBPS` gives every channel a constant rate instead of the default
//! congestion controller; `HORDE_BENCH_WINDOW=N` keeps N ADUs unresolved instead of 4096;
//! `HORDE_BENCH_SEAL_WORKER=0` (or `1`) turns both hosts' sealing worker off (on) instead
//! of the default; `HORDE_BENCH_THREADS=1` prints the CPU time each thread of the process
//! used while the sender sent (from `/proc/self/task/*/stat`), and where the sender's
//! datagrams were sealed.
//!
//! Sender and receiver each run on a thread with a single-threaded runtime of its own,
//! as two processes would. Prints goodput (Gbit/s of payload), packets/s, CPU time per
//! packet for the whole process (both ends and, in the emulator run, the emulator), heap
//! allocations per packet, and the ratio of Horde's loopback figure to each anchor
//! measured in the same run: plain UDP with one datagram per syscall, plain UDP with
//! GSO/GRO, a quinn bulk stream, and quinn datagrams.

#[path = "anchors/mod.rs"]
mod anchors;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use horde_crypto::Keypair;
use horde_emu::{Emulator, EmulatorConfig};
use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, InterfaceConfig};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, Event, StreamConfig};

const CHANNELS: usize = 4;
const ADU: usize = 1200;
/// ADUs kept unresolved: enough to fill every window on loopback.
const WINDOW: u64 = 4096;

use anchors::{cpu_time, Figures};

/// The system allocator, counting allocations (process-wide, every thread).
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Which path the channels take.
#[derive(Clone, Copy, PartialEq)]
enum Path {
    Loopback,
    Emulator,
}

/// Receiver end: its own thread and single-threaded runtime, as a separate process would
/// be. Reports (ADUs, bytes, time from first to last arrival).
fn receiver(
    sk: Keypair,
    allowed: horde_crypto::PublicKey,
    ready: mpsc::Sender<SocketAddr>,
    stop: mpsc::Receiver<()>,
) -> (u64, u64, Duration) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let mut cfg = HostConfig::new(
            sk,
            vec![InterfaceConfig::new("127.0.0.1:0".parse().unwrap())],
        );
        cfg.allowed_peers = vec![allowed];
        cfg.seal_worker = seal_worker();
        let server = Host::bind(cfg).await.unwrap();
        let mut listener = server.listen(1);
        ready.send(server.local_addrs()[0]).unwrap();
        let accepted = listener.accept().await.unwrap();
        let (handle, mut events) = accepted.split();
        let watch = std::env::var_os("HORDE_BENCH_CHANNELS").is_some();
        let mut flow_dropped = 0;
        let (mut n, mut bytes) = (0u64, 0u64);
        let (mut first, mut last) = (None, Instant::now());
        loop {
            match tokio::time::timeout(Duration::from_millis(50), events.recv()).await {
                Ok(Some(Event::Received { payload, .. })) => {
                    first.get_or_insert_with(Instant::now);
                    last = Instant::now();
                    n += 1;
                    bytes += payload.len() as u64;
                    // Now and then, not per ADU: the session is gone once the sender closes.
                    if watch && n % 65_536 == 0 {
                        if let Ok(st) = handle.stats().await {
                            flow_dropped = st.flow_dropped;
                        }
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => {
                    if stop.try_recv().is_ok() {
                        break;
                    }
                }
            }
        }
        if watch {
            eprintln!(
                "receiver: at least {flow_dropped} packets dropped by its full receive buffer"
            );
        }
        server.shutdown().await;
        (n, bytes, first.map_or(Duration::ZERO, |f| last - f))
    })
}

/// Sender end on the calling thread's own runtime; returns after `seconds`.
fn sender(
    ck: Keypair,
    peer: horde_crypto::PublicKey,
    remotes: Vec<SocketAddr>,
    seconds: f64,
    adu: usize,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let lo = "127.0.0.1:0".parse().unwrap();
        let mut cfg = HostConfig::new(ck, (0..CHANNELS).map(|_| InterfaceConfig::new(lo)).collect());
        cfg.seal_worker = seal_worker();
        let client = Host::bind(cfg).await.unwrap();
        let conn = client
            .connect(ConnectConfig {
                peer,
                service: 1,
                channels: remotes
                    .iter()
                    .enumerate()
                    .map(|(i, r)| ChannelTarget {
                        interface: i,
                        remote: *r,
                        config: channel_config(adu),
                    })
                    .collect(),
                handshake_timeout: Duration::from_secs(5),
            })
            .await
            .unwrap();
        conn.open_stream(
            1,
            StreamConfig {
                max_queue_bytes: 64 << 20,
                ..StreamConfig::default()
            },
        )
        .await
        .unwrap();
        let (handle, mut events) = conn.split();
        let payload = Bytes::from(vec![0x5a; adu]);
        // One empty field set shared by every ADU: cloning it is a reference count.
        let fields = Fields::new();
        let (mut sent, mut resolved) = (0u64, 0u64);
        let window = std::env::var("HORDE_BENCH_WINDOW")
            .ok()
            .and_then(|w| w.parse().ok())
            .unwrap_or(WINDOW);
        let threads0 = thread_cpu();
        let end = Instant::now() + Duration::from_secs_f64(seconds);
        while Instant::now() < end {
            while sent - resolved < window {
                handle
                    .send_adu_nowait(1, payload.clone(), fields.clone())
                    .unwrap();
                sent += 1;
            }
            match tokio::time::timeout(Duration::from_millis(100), events.recv()).await {
                Ok(Some(Event::Ack { .. } | Event::Nack { .. })) => resolved += 1,
                Ok(Some(_)) | Err(_) => {}
                Ok(None) => break,
            }
            while let Ok(e) = events.try_recv() {
                if matches!(e, Event::Ack { .. } | Event::Nack { .. }) {
                    resolved += 1;
                }
            }
        }
        if std::env::var_os("HORDE_BENCH_THREADS").is_some() {
            print_thread_cpu(&threads0, &thread_cpu(), seconds);
            let st = client.stats().await.unwrap();
            eprintln!(
                "sender: {} datagrams sealed on the worker, {} on the driver (worker on), {} sent in {} sendmmsg",
                st.sealed_off_thread, st.sealed_on_driver, st.datagrams_out, st.send_calls
            );
        }
        if std::env::var_os("HORDE_BENCH_CHANNELS").is_some() {
            for c in handle.channels().await.unwrap() {
                eprintln!(
                    "channel {:?}: srtt {:?} ms, rate {:.0} Mbit/s, loss {:.4}, sent {}, acked {}, lost {} ({} congestion, {} late-acked), probe timeouts {}",
                    c.id,
                    c.srtt_ms,
                    c.rate_bytes_per_s * 8e-6,
                    c.loss,
                    c.stats.packets_sent,
                    c.stats.acked,
                    c.stats.lost,
                    c.stats.lost_congestion,
                    c.stats.late_acked,
                    c.stats.probe_timeouts
                );
            }
        }
        handle.close().unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        client.shutdown().await;
    });
}

/// Both hosts' [`HostConfig::seal_worker`]: the default unless `HORDE_BENCH_SEAL_WORKER`
/// says `0` or `1`.
fn seal_worker() -> bool {
    match std::env::var("HORDE_BENCH_SEAL_WORKER").as_deref() {
        Ok("0") => false,
        Ok("1") => true,
        _ => horde_net::default_seal_worker(),
    }
}

/// Per thread of this process: id, name and CPU seconds (user + system) so far.
fn thread_cpu() -> Vec<(u32, String, f64)> {
    // SAFETY: sysconf only reads a constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // "tid (name) state ppid ...": utime and stime are the 14th and 15th fields.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let tid = stat[..open].trim().parse().unwrap_or(0);
        let name = stat[open + 1..close].to_string();
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let field = |i: usize| {
            rest.get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        out.push((tid, name, (field(11) + field(12)) / ticks));
    }
    out.sort_unstable_by_key(|t| t.0);
    out
}

/// What each thread used between two snapshots, as a share of one core over `seconds`.
fn print_thread_cpu(before: &[(u32, String, f64)], after: &[(u32, String, f64)], seconds: f64) {
    let pid = std::process::id();
    for (tid, name, cpu) in after {
        let was = before.iter().find(|t| t.0 == *tid).map_or(0.0, |t| t.2);
        let used = cpu - was;
        if used <= 0.0 {
            continue;
        }
        let role = if *tid == pid {
            " (sender: driver and application)"
        } else {
            ""
        };
        eprintln!(
            "thread {tid} {name}{role}: {used:.2} s CPU, {:.0}% of a core",
            100.0 * used / seconds
        );
    }
}

/// The channels' configuration: the default, with packets large enough for `adu`, or
/// with `HORDE_BENCH_CC=cbr:KBPS` a constant rate (experiments).
fn channel_config(adu: usize) -> ChannelConfig {
    let mut c = ChannelConfig::default();
    c.mtu = c.mtu.max(adu as u32);
    if let Some(kbps) = std::env::var("HORDE_BENCH_CC")
        .ok()
        .and_then(|v| v.strip_prefix("cbr:").and_then(|k| k.parse().ok()))
    {
        c.congestion = horde_proto::CcConfig::Cbr {
            kbps,
            burst_ms: 2.0,
        };
    }
    c
}

/// Horde over `path`; the figures and the heap allocations per delivered packet.
fn run(seconds: f64, path: Path, adu: usize) -> (Figures, f64) {
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let (ready_tx, ready_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel();
    let client_public = *ck.public();
    let server_public = *sk.public();
    let rx = std::thread::Builder::new()
        .name("bench-receiver".into())
        .spawn(move || receiver(sk, client_public, ready_tx, stop_rx))
        .unwrap();
    let server_addr = ready_rx.recv().unwrap();
    let emu = (path == Path::Emulator).then(|| {
        let toml: String = (0..CHANNELS)
            .map(|i| format!("[[channels]]\nname = \"c{i}\"\nlisten = \"127.0.0.1:0\"\nforward_to = \"{server_addr}\"\nup = {{}}\n"))
            .collect();
        Emulator::start(&EmulatorConfig::from_toml(&toml, "bench", &PathBuf::from(".")).unwrap()).unwrap()
    });
    let remotes: Vec<SocketAddr> = (0..CHANNELS)
        .map(|i| match &emu {
            Some(e) => e.client_addr(&format!("c{i}")).unwrap(),
            None => server_addr,
        })
        .collect();
    let cpu0 = cpu_time();
    let allocs0 = ALLOCATIONS.load(Ordering::Relaxed);
    sender(ck, server_public, remotes, seconds, adu);
    let cpu = cpu_time() - cpu0;
    let allocs = ALLOCATIONS.load(Ordering::Relaxed) - allocs0;
    let _ = stop_tx.send(()); // the receiver may already have seen the close
    let (n, bytes, span) = rx.join().unwrap();
    if let Some(e) = emu {
        e.shutdown();
    }
    (
        Figures::new(n, bytes, span, cpu),
        allocs as f64 / n.max(1) as f64,
    )
}

fn line(name: &str, f: &Figures, extra: &str) {
    println!(
        "{name:<34} {:>7.3} Gbit/s  {:>9.0} packets/s  {:>6.2} µs CPU/packet  {extra}",
        f.gbps(),
        f.pps(),
        f.cpu_us_per_packet(),
    );
}

fn main() {
    let seconds: f64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(5.0);
    if std::env::args().any(|a| a == "horde") {
        let (f, allocs) = run(seconds, Path::Loopback, ADU);
        line(
            "Horde, 4 channels, loopback",
            &f,
            &format!("{allocs:.2} allocations/packet"),
        );
        return;
    }
    let anchor_secs = seconds.min(3.0);
    let udp_single = anchors::udp::one_per_syscall(anchor_secs, ADU);
    let udp_gso = anchors::udp::gso(anchor_secs, ADU);
    let quinn_stream = anchors::quic::run(anchor_secs, anchors::quic::Mode::Stream, ADU);
    let quinn_datagram = anchors::quic::mean_datagram();
    let quinn_datagrams = anchors::quic::run(anchor_secs, anchors::quic::Mode::Datagrams, ADU);
    let anchors = [
        ("plain UDP, 1 datagram/syscall", udp_single),
        ("plain UDP, GSO/GRO", udp_gso),
        ("quinn, 1 bulk stream", quinn_stream),
        ("quinn, datagrams", quinn_datagrams),
    ];
    for (name, f) in &anchors {
        line(name, f, "(anchor)");
    }
    let (horde, allocs) = run(seconds, Path::Loopback, ADU);
    let ratios = |h: &Figures| -> String {
        anchors
            .iter()
            .map(|(name, f)| {
                format!(
                    "{:.2}x {name} ({:.2}x its packets/s)",
                    h.gbps() / f.gbps().max(1e-12),
                    h.pps() / f.pps().max(1e-12)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    line(
        "Horde, 4 channels, loopback",
        &horde,
        &format!(
            "{allocs:.2} allocations/packet  ({} ADUs of {ADU} B in {:.2} s)",
            horde.packets,
            horde.span.as_secs_f64()
        ),
    );
    println!("  goodput ratios: {}", ratios(&horde));
    // The same datagram size as quinn's stream packets: Horde's data header and the
    // transport overhead come off quinn's mean UDP payload.
    let overhead = horde_proto::wire::DATA_HEADER_LEN + horde_crypto::TRANSPORT_OVERHEAD;
    let sized = (quinn_datagram as usize).saturating_sub(overhead).max(ADU);
    let (big, allocs) = run(seconds, Path::Loopback, sized);
    line(
        &format!("Horde, ADU {sized} B ({quinn_datagram} B datagrams)"),
        &big,
        &format!("{allocs:.2} allocations/packet"),
    );
    println!("  goodput ratios: {}", ratios(&big));
    let (emu, allocs) = run(seconds, Path::Emulator, ADU);
    line(
        "Horde, 4 channels, via emulator",
        &emu,
        &format!("{allocs:.2} allocations/packet"),
    );
}
