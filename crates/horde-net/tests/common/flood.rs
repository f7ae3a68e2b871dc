//! A handshake flood against a live session, over loopback: the attacker, and a measured
//! session between two hosts. Shared by the flood test and the flood benchmark.
//!
//! The attacker sends from 127.0.0.2 (the session runs on 127.0.0.1), paced in 1 ms steps,
//! for a fixed time, and then stops by itself. It answers cookie replies like a real
//! initiator would (its address is real), so the per-source rate limit is exercised too.

#![allow(dead_code)]

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use horde_crypto::{DropCounters, Initiator, Keypair, PublicKey, INITIATION_LEN, TYPE_INITIATION};
use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, InterfaceConfig};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, Event, StreamConfig};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

/// What the attacker sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloodKind {
    /// Well-sized initiations of random bytes (no valid mac1).
    Random,
    /// One captured initiation of an allow-listed key, replayed over and over.
    Replay,
    /// Valid initiations from a key that is not on the allow-list.
    Disallowed,
    /// Initiations in the old format (type 1), of random bytes.
    Legacy,
    /// Transport datagrams (type 3, 113 bytes) to random receiver indices.
    Transport,
    /// Responses (type 2) to random indices.
    Response,
    /// Cookie replies (type 4) to random indices.
    CookieReply,
    /// Random bytes of random length under a type byte Horde does not define.
    Garbage,
    /// Empty datagrams.
    Empty,
}

impl FloodKind {
    /// Floods of initiations, for the handshake path.
    pub const ALL: [FloodKind; 3] = [FloodKind::Random, FloodKind::Replay, FloodKind::Disallowed];
    /// Floods of every other kind, which can belong to no live session.
    pub const DATA_PATH: [FloodKind; 6] = [
        FloodKind::Legacy,
        FloodKind::Transport,
        FloodKind::Response,
        FloodKind::CookieReply,
        FloodKind::Garbage,
        FloodKind::Empty,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FloodKind::Random => "random",
            FloodKind::Replay => "replayed allowed key",
            FloodKind::Disallowed => "disallowed key",
            FloodKind::Legacy => "type 1 (old format)",
            FloodKind::Transport => "type 3, unknown index",
            FloodKind::Response => "type 2, unknown index",
            FloodKind::CookieReply => "type 4, unknown index",
            FloodKind::Garbage => "unknown type",
            FloodKind::Empty => "empty",
        }
    }

    /// The drop reason the receiver counts every datagram of a data-path flood under;
    /// `None`: the data socket's kernel filter drops them (`HostStats::kernel_dropped`).
    pub fn data_path_reason(self) -> Option<horde_crypto::DropReason> {
        match self {
            FloodKind::Legacy => Some(horde_crypto::DropReason::LegacyHandshake),
            _ => None,
        }
    }
}

/// One datagram of a data-path flood into `buf`; returns its length.
fn data_path_datagram(kind: FloodKind, rng: &mut StdRng, buf: &mut [u8]) -> usize {
    use horde_crypto::{
        COOKIE_REPLY_LEN, RESPONSE_LEN, TYPE_COOKIE_REPLY, TYPE_LEGACY_INITIATION, TYPE_RESPONSE,
        TYPE_TRANSPORT,
    };
    let (kind_byte, len) = match kind {
        FloodKind::Legacy => (TYPE_LEGACY_INITIATION, INITIATION_LEN),
        FloodKind::Transport => (TYPE_TRANSPORT, 113),
        FloodKind::Response => (TYPE_RESPONSE, RESPONSE_LEN),
        FloodKind::CookieReply => (TYPE_COOKIE_REPLY, COOKIE_REPLY_LEN),
        // Types 6..=127 are undefined (3 | 0x80 is a transport datagram).
        FloodKind::Garbage => (
            6 + (rng.next_u32() % 122) as u8,
            1 + (rng.next_u32() % 200) as usize,
        ),
        _ => return 0,
    };
    rng.fill_bytes(&mut buf[..len]);
    buf[0] = kind_byte;
    len
}

/// Where the flood goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aim {
    /// The session's receiver.
    Host,
    /// A control: another UDP port on the same address, read by a thread that discards
    /// everything. What the session loses then is what the flood costs the machine (the
    /// sender, the kernel's loopback path), not what it costs Horde.
    Sink,
}

/// How a live session is flooded beyond kind and rate.
#[derive(Debug, Clone, Copy)]
pub struct FloodOptions {
    pub aim: Aim,
    /// Pin the attacker's thread to this CPU (`sched_setaffinity`).
    pub attacker_cpu: Option<usize>,
    /// Pin the sink's thread to this CPU.
    pub sink_cpu: Option<usize>,
    /// The receiver reads initiations on a socket of their own (the default); false: on
    /// the data socket, checked by the driver.
    pub separate_socket: bool,
}

impl Default for FloodOptions {
    fn default() -> Self {
        Self {
            aim: Aim::Host,
            attacker_cpu: None,
            sink_cpu: None,
            separate_socket: true,
        }
    }
}

/// CPU seconds the calling thread has used.
pub fn thread_cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// CPU seconds used so far by each of this process's live threads, by thread id, with
/// the thread's name (Linux `/proc/self/task/*/stat`; empty elsewhere).
pub fn cpu_by_thread() -> std::collections::BTreeMap<String, (String, f64)> {
    let mut by_tid = std::collections::BTreeMap::new();
    // SAFETY: sysconf only reads a constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return by_tid;
    };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // "tid (name) state ppid ...": utime and stime are the 14th and 15th fields.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let field = |i: usize| {
            rest.get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let tid = task.file_name().to_string_lossy().into_owned();
        by_tid.insert(tid, (name, (field(11) + field(12)) / ticks));
    }
    by_tid
}

/// CPU seconds per thread name used between two [`cpu_by_thread`] snapshots by the
/// threads alive at the second.
pub fn cpu_between(
    before: &std::collections::BTreeMap<String, (String, f64)>,
    after: &std::collections::BTreeMap<String, (String, f64)>,
) -> std::collections::BTreeMap<String, f64> {
    let mut by_name = std::collections::BTreeMap::new();
    for (tid, (name, t)) in after {
        let t0 = before.get(tid).map_or(0.0, |(_, t0)| *t0);
        *by_name.entry(name.clone()).or_insert(0.0) += t - t0;
    }
    by_name
}

/// Pins the calling thread to one CPU; false if the kernel refused (e.g. no such CPU).
pub fn pin_current_thread(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; pid 0 is this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// A thread that reads a UDP socket and throws every datagram away (the control target).
pub struct Sink {
    pub addr: SocketAddr,
    thread: std::thread::JoinHandle<(u64, f64)>,
    stop: Arc<AtomicBool>,
}

impl Sink {
    pub fn start(cpu: Option<usize>) -> Sink {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind the sink");
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("flood-sink".into())
            .spawn(move || {
                if let Some(c) = cpu {
                    pin_current_thread(c);
                }
                let mut buf = [0u8; 2048];
                let mut read = 0u64;
                while !stop_flag.load(Ordering::Relaxed) {
                    if socket.recv_from(&mut buf).is_ok() {
                        read += 1;
                    }
                }
                (read, thread_cpu_seconds())
            })
            .expect("spawn the sink");
        Sink { addr, thread, stop }
    }

    /// Stops the thread; returns how many datagrams it read.
    pub fn join(self) -> (u64, f64) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// A running flood; [`Flood::join`] returns how many datagrams it sent.
pub struct Flood {
    thread: std::thread::JoinHandle<(u64, f64)>,
    stop: Arc<AtomicBool>,
}

impl Flood {
    /// Starts sending `kind` at `rate` datagrams/s to `target` for `seconds`.
    /// `allowed` is an allow-listed key (for replays), `responder` the target's public key.
    pub fn start(
        kind: FloodKind,
        target: SocketAddr,
        responder: PublicKey,
        allowed: &Keypair,
        rate: u32,
        seconds: f64,
        cpu: Option<usize>,
    ) -> Flood {
        let mut rng = StdRng::seed_from_u64(0xF100D);
        let stranger = Keypair::generate_with(&mut rng);
        let identity = match kind {
            FloodKind::Disallowed => stranger,
            _ => allowed.clone(),
        };
        // Timestamp 1: older than any real handshake, as a captured one would be.
        let mut initiator = Initiator::new(&identity, &responder, 0xBAD, 1, &mut rng);
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("flood-attacker".into())
            .spawn(move || {
                if let Some(c) = cpu {
                    pin_current_thread(c);
                }
                let socket = UdpSocket::bind("127.0.0.2:0").expect("bind 127.0.0.2");
                socket.set_nonblocking(true).unwrap();
                let mut random = vec![0u8; INITIATION_LEN];
                let mut other = vec![0u8; 256];
                let mut reply = [0u8; 256];
                let start = Instant::now();
                let end = start + Duration::from_secs_f64(seconds);
                let mut sent = 0u64;
                let mut fresh = 0u32;
                while Instant::now() < end && !stop_flag.load(Ordering::Relaxed) {
                    // Cookie replies make the replayed and disallowed initiations carry mac2.
                    while let Ok((n, _)) = socket.recv_from(&mut reply) {
                        let _ = initiator.read_cookie_reply(&reply[..n]);
                    }
                    let due = (start.elapsed().as_secs_f64() * f64::from(rate)) as u64;
                    while sent < due {
                        let bytes: &[u8] = match kind {
                            FloodKind::Random => {
                                rng.fill_bytes(&mut random);
                                random[0] = TYPE_INITIATION;
                                &random
                            }
                            FloodKind::Replay => initiator.initiation(),
                            FloodKind::Legacy
                            | FloodKind::Transport
                            | FloodKind::Response
                            | FloodKind::CookieReply
                            | FloodKind::Garbage
                            | FloodKind::Empty => {
                                let n = data_path_datagram(kind, &mut rng, &mut other);
                                &other[..n]
                            }
                            FloodKind::Disallowed => {
                                // A new handshake now and then, as a real peer would make.
                                fresh += 1;
                                if fresh.is_multiple_of(1000) {
                                    initiator = Initiator::new(
                                        &identity,
                                        &responder,
                                        0xBAD,
                                        u64::from(fresh),
                                        &mut rng,
                                    );
                                }
                                initiator.initiation()
                            }
                        };
                        let _ = socket.send_to(bytes, target);
                        sent += 1;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                (sent, thread_cpu_seconds())
            })
            .expect("spawn the attacker");
        Flood { thread, stop }
    }

    pub fn join(self) -> (u64, f64) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// What the live session saw.
#[derive(Debug, Clone)]
pub struct LiveReport {
    pub sent: u64,
    pub delivered: u64,
    pub acked: u64,
    /// ADUs delivered in each 250 ms window of the run.
    pub delivered_per_window: Vec<u64>,
    /// Acks in each 250 ms window.
    pub acked_per_window: Vec<u64>,
    /// One-way latency of every delivered ADU, ms.
    pub latencies_ms: Vec<f64>,
    pub seconds: f64,
    pub server_drops: DropCounters,
    pub flood_sent: u64,
    /// Datagrams the control sink read (0 when the flood aimed at the host).
    pub sink_read: u64,
    /// CPU seconds per thread name over the run (runtime workers, handshake workers) of
    /// the threads alive at its end.
    pub cpu: std::collections::BTreeMap<String, f64>,
    /// CPU seconds of the attacker's and the sink's threads.
    pub attacker_cpu: f64,
    pub sink_cpu: f64,
    /// The receiving host's counters at the end of the run.
    pub server_stats: horde_net::HostStats,
    /// How long a second client, connecting halfway through the run, took to connect
    /// (`None`: it did not connect within 5 s).
    pub late_connect: Option<Duration>,
}

impl LiveReport {
    pub fn goodput_kbps(&self, adu_bytes: usize) -> f64 {
        self.delivered as f64 * adu_bytes as f64 * 8.0 / 1000.0 / self.seconds
    }

    pub fn p95_ms(&self) -> f64 {
        let mut v = self.latencies_ms.clone();
        v.sort_by(f64::total_cmp);
        v.get(((v.len() as f64 * 0.95) as usize).min(v.len().saturating_sub(1)))
            .copied()
            .unwrap_or(f64::NAN)
    }
}

pub const WINDOW: Duration = Duration::from_millis(250);

/// An emulated link for the session's channel: rate (kbit/s) and one-way delay (ms), both
/// ways. The flood does not go through it: it hits the receiver's socket directly.
#[derive(Debug, Clone, Copy)]
pub struct EmulatedLink {
    pub kbps: f64,
    pub delay_ms: f64,
}

/// Runs a session from 127.0.0.1 to 127.0.0.1 sending `adus_per_second` ADUs of
/// `adu_bytes` for `seconds`, with `flood` (kind, datagrams/s) against the receiver
/// during the whole run, directly or over an emulated `link`. Both hosts run on the
/// caller's runtime.
pub async fn live_session(
    link: Option<EmulatedLink>,
    flood: Option<(FloodKind, u32)>,
    adus_per_second: u32,
    adu_bytes: usize,
    seconds: f64,
) -> LiveReport {
    live_session_with(
        link,
        flood,
        FloodOptions::default(),
        adus_per_second,
        adu_bytes,
        seconds,
    )
    .await
}

/// [`live_session`] with the flood aimed and pinned as `options` say.
pub async fn live_session_with(
    link: Option<EmulatedLink>,
    flood: Option<(FloodKind, u32)>,
    options: FloodOptions,
    adus_per_second: u32,
    adu_bytes: usize,
    seconds: f64,
) -> LiveReport {
    let client_key = Keypair::generate();
    let server_key = Keypair::generate();
    let lo: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut server_cfg = HostConfig::new(server_key.clone(), vec![InterfaceConfig::new(lo)]);
    // The second key is a client that connects halfway through the flood.
    let late_key = Keypair::generate();
    server_cfg.allowed_peers = vec![*client_key.public(), *late_key.public()];
    server_cfg.handshakes.separate_socket = options.separate_socket;
    let server = Host::bind(server_cfg).await.unwrap();
    let client = Host::bind(HostConfig::new(
        client_key.clone(),
        vec![InterfaceConfig::new(lo)],
    ))
    .await
    .unwrap();
    let target = server.local_addrs()[0];
    let emulator = link.map(|l| {
        let spec = format!(
            "rate = {{ model = \"constant\", kbps = {} }}\ndelay = {{ model = \"constant\", ms = {} }}\nbuffer_bytes = 200000",
            l.kbps, l.delay_ms
        );
        let toml = format!(
            "seed = 1\n[[channels]]\nname = \"cell\"\nlisten = \"127.0.0.1:0\"\nforward_to = \"{target}\"\nup = {{}}\n"
        );
        let mut cfg = horde_emu::EmulatorConfig::from_toml(&toml, "flood", std::path::Path::new("."))
            .unwrap();
        let spec: horde_emu::LinkSpec = toml::from_str(&spec).unwrap();
        cfg.channels[0].up = spec.clone();
        cfg.channels[0].down = Some(spec);
        horde_emu::Emulator::start(&cfg).unwrap()
    });
    let remote = emulator
        .as_ref()
        .map_or(target, |e| e.client_addr("cell").unwrap());
    let mut listener = server.listen(7);
    let conn = client
        .connect(ConnectConfig {
            peer: *server_key.public(),
            service: 7,
            channels: vec![ChannelTarget {
                interface: 0,
                remote,
                config: ChannelConfig::default(),
            }],
            handshake_timeout: Duration::from_secs(5),
        })
        .await
        .unwrap();
    let accepted = tokio::time::timeout(Duration::from_secs(5), listener.accept())
        .await
        .unwrap()
        .unwrap();
    conn.open_stream(1, StreamConfig::default()).await.unwrap();
    let (handle, mut client_events) = conn.split();
    let (_server_handle, mut server_events) = accepted.split();

    let sink = (flood.is_some() && options.aim == Aim::Sink).then(|| Sink::start(options.sink_cpu));
    let flood_target = sink.as_ref().map_or(target, |s| s.addr);
    let attack = flood.map(|(kind, rate)| {
        Flood::start(
            kind,
            flood_target,
            *server_key.public(),
            &client_key,
            rate,
            seconds,
            options.attacker_cpu,
        )
    });

    let cpu_before = cpu_by_thread();
    let epoch = Instant::now();
    let windows = (seconds / WINDOW.as_secs_f64()).ceil() as usize + 8;
    let receiver = tokio::spawn(async move {
        let mut delivered = 0u64;
        let mut per_window = vec![0u64; windows];
        let mut latencies = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(seconds + 1.0);
        while let Ok(Some(e)) = tokio::time::timeout_at(deadline, server_events.recv()).await {
            if let Event::Received { payload, .. } = e {
                let now = epoch.elapsed();
                let sent_ns = u64::from_le_bytes(payload[..8].try_into().unwrap());
                latencies.push((now.as_nanos() as f64 - sent_ns as f64) / 1e6);
                delivered += 1;
                let w = (now.as_secs_f64() / WINDOW.as_secs_f64()) as usize;
                per_window[w.min(windows - 1)] += 1;
            }
        }
        (delivered, per_window, latencies)
    });
    let acks = tokio::spawn(async move {
        let mut acked = 0u64;
        let mut per_window = vec![0u64; windows];
        let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(seconds + 1.0);
        while let Ok(Some(e)) = tokio::time::timeout_at(deadline, client_events.recv()).await {
            if matches!(e, Event::Ack { .. } | Event::LateAck { .. }) {
                acked += 1;
                let w = (epoch.elapsed().as_secs_f64() / WINDOW.as_secs_f64()) as usize;
                per_window[w.min(windows - 1)] += 1;
            }
        }
        (acked, per_window)
    });

    // A second client connects halfway through, while the flood is on.
    let server_public = *server_key.public();
    let late = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs_f64(seconds / 2.0)).await;
        let host = Host::bind(HostConfig::new(late_key, vec![InterfaceConfig::new(lo)]))
            .await
            .unwrap();
        let started = Instant::now();
        let result = host
            .connect(ConnectConfig {
                peer: server_public,
                service: 8,
                channels: vec![ChannelTarget {
                    interface: 0,
                    remote: target,
                    config: ChannelConfig::default(),
                }],
                handshake_timeout: Duration::from_secs(5),
            })
            .await;
        let took = started.elapsed();
        host.shutdown().await;
        result.ok().map(|_| took)
    });

    let total = (f64::from(adus_per_second) * seconds) as u64;
    let mut ticker =
        tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(adus_per_second)));
    let mut payload = vec![0x5Au8; adu_bytes.max(8)];
    for _ in 0..total {
        ticker.tick().await;
        payload[..8].copy_from_slice(&(epoch.elapsed().as_nanos() as u64).to_le_bytes());
        handle
            .send_adu_nowait(1, Bytes::copy_from_slice(&payload), Fields::new())
            .unwrap();
    }
    let cpu = cpu_between(&cpu_before, &cpu_by_thread());
    let (flood_sent, attacker_cpu) = attack.map_or((0, 0.0), Flood::join);
    let (sink_read, sink_cpu) = sink.map_or((0, 0.0), Sink::join);
    let late_connect = late.await.unwrap();
    let (delivered, delivered_per_window, latencies_ms) = receiver.await.unwrap();
    let (acked, acked_per_window) = acks.await.unwrap();
    let server_stats = server.stats().await.unwrap();
    let server_drops = server_stats.dropped.clone();
    client.shutdown().await;
    server.shutdown().await;
    LiveReport {
        sent: total,
        delivered,
        acked,
        delivered_per_window,
        acked_per_window,
        latencies_ms,
        seconds,
        server_drops,
        flood_sent,
        sink_read,
        cpu,
        attacker_cpu,
        sink_cpu,
        server_stats,
        late_connect,
    }
}
