//! Messages against plain ADU streams, over 4 encrypted channels on unshaped loopback, in
//! one run:
//!
//!     cargo bench -p horde-net --bench message_throughput [-- TOTAL_MB] [--sizes=1024,65536]
//!
//! * Throughput: 1 KB, 64 KB and 10 MB messages (priority 0, no deadline) through a
//!   [`MessageEndpoint`] at each end, TOTAL_MB (default 200: long enough that the
//!   start-up does not weigh) of each, with about 8 MB submitted and not yet delivered at
//!   any time. The anchor is the same bytes as 1200-byte ADUs on a plain stream of the
//!   same kind of connection, with 4096 ADUs unresolved. Each row gives goodput (from the
//!   first submit until the sender hears that the last message was delivered),
//!   messages/s, process CPU per message and per byte, and goodput as a share of the
//!   anchor's. `--sizes=` runs only the rows named, without the memory rows.
//! * Sender memory: one 100 MB message submitted from memory, then one read from a file
//!   a piece at a time ([`MessageHandle::submit_source`]), each in a fresh process of
//!   this bench; the growth of its peak RSS over the transfer. Both ends run in that
//!   process and the receiver holds the whole message until its last piece, so both
//!   rows include its 100 MB; the difference is the sender's copy.
//!
//! Both hosts share one two-worker tokio runtime, so the CPU figures are both ends'.
//! `HORDE_BENCH_QUEUE_AHEAD_MS=N` sets the endpoints' [`EndpointConfig::queue_ahead`]
//! (default 30 ms): how much sending beyond the round trip the sender keeps unacknowledged.

#[path = "anchors/cpu.rs"]
mod cpu;

use std::time::{Duration, Instant};

use bytes::Bytes;
use cpu::cpu_time;
use horde_crypto::Keypair;
use horde_net::{
    ChannelTarget, ConnectConfig, Connection, EndpointConfig, Host, HostConfig, InterfaceConfig,
    MessageEndpoint, MessageHandle, MessageNotice,
};
use horde_policy::Fields;
use horde_proto::message::{Fate, MessageEvent, MessageId, MessageSpec};
use horde_proto::{ChannelConfig, Event, StreamConfig};

const CHANNELS: usize = 4;
const ADU: usize = 1200;
/// Bytes submitted and not yet delivered that the message rows keep.
const MESSAGE_WINDOW: u64 = 8 << 20;
/// ADUs unresolved that the stream anchor keeps.
const ADU_WINDOW: u64 = 4096;
const BIG: usize = 100 << 20;

/// Two hosts over loopback and one connection between them.
struct Pair {
    client: Host,
    server: Host,
    conn: Connection,
    accepted: Connection,
}

async fn pair() -> Pair {
    let lo = "127.0.0.1:0".parse().unwrap();
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let mut scfg = HostConfig::new(sk.clone(), vec![InterfaceConfig::new(lo)]);
    scfg.allowed_peers = vec![*ck.public()];
    let server = Host::bind(scfg).await.unwrap();
    let mut listener = server.listen(1);
    let remote = server.local_addrs()[0];
    let client = Host::bind(HostConfig::new(
        ck,
        (0..CHANNELS).map(|_| InterfaceConfig::new(lo)).collect(),
    ))
    .await
    .unwrap();
    let conn = client
        .connect(ConnectConfig {
            peer: *sk.public(),
            service: 1,
            channels: (0..CHANNELS)
                .map(|interface| ChannelTarget {
                    interface,
                    remote,
                    config: ChannelConfig::default(),
                })
                .collect(),
            handshake_timeout: Duration::from_secs(5),
        })
        .await
        .unwrap();
    let accepted = listener.accept().await.unwrap();
    Pair {
        client,
        server,
        conn,
        accepted,
    }
}

/// What one row measured.
struct Row {
    label: String,
    messages: u64,
    bytes: u64,
    wall: Duration,
    cpu: Duration,
}

impl Row {
    fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.wall.as_secs_f64() / 1e9
    }
}

/// A receiver that counts whole messages and checks their sizes.
fn count_received(mut endpoint: MessageEndpoint) -> tokio::task::JoinHandle<(u64, u64)> {
    tokio::spawn(async move {
        let (mut n, mut bytes) = (0, 0);
        while let Some(notice) = endpoint.next_notice().await {
            if let MessageNotice::Received(m) = notice {
                n += 1;
                bytes += m.payload.len() as u64;
            }
        }
        (n, bytes)
    })
}

/// Waits for one message's fate; every fate but `Delivered` ends the bench.
async fn next_delivered(sender: &mut MessageEndpoint) -> MessageId {
    loop {
        match sender.next_notice().await.expect("the connection ended") {
            MessageNotice::Sender(MessageEvent::Finished { id, fate, .. }) => {
                assert_eq!(fate, Fate::Delivered, "message {id}");
                return id;
            }
            MessageNotice::SendFailed { id, error } => panic!("message {id}: {error}"),
            _ => {}
        }
    }
}

/// The endpoints' settings: the defaults, with `HORDE_BENCH_QUEUE_AHEAD_MS` if set.
fn endpoint_config() -> EndpointConfig {
    let mut config = EndpointConfig::default();
    if let Some(ms) = std::env::var("HORDE_BENCH_QUEUE_AHEAD_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.queue_ahead = Duration::from_millis(ms);
    }
    config
}

async fn messages(size: usize, total: u64) -> Row {
    let p = pair().await;
    let config = endpoint_config();
    let mut sender = MessageEndpoint::new(p.conn, config.clone()).await.unwrap();
    let received = count_received(MessageEndpoint::new(p.accepted, config).await.unwrap());
    let count = (total / size as u64).max(1);
    let payload = Bytes::from(vec![0x5a; size]);
    let (cpu0, start) = (cpu_time(), Instant::now());
    let (mut submitted, mut delivered) = (0u64, 0u64);
    while delivered < count {
        while submitted < count
            && (submitted - delivered) * (size as u64) < MESSAGE_WINDOW.max(size as u64)
        {
            sender.send(0, None, payload.clone()).unwrap();
            submitted += 1;
        }
        next_delivered(&mut sender).await;
        delivered += 1;
    }
    let (wall, cpu) = (start.elapsed(), cpu_time() - cpu0);
    drop(sender);
    p.client.shutdown().await;
    p.server.shutdown().await;
    let (n, bytes) = received.await.unwrap();
    assert_eq!(
        (n, bytes),
        (count, count * size as u64),
        "what the receiver got"
    );
    Row {
        label: format!("messages of {}", human(size)),
        messages: count,
        bytes: count * size as u64,
        wall,
        cpu,
    }
}

async fn stream(total: u64) -> Row {
    let p = pair().await;
    p.conn
        .open_stream(
            1,
            StreamConfig {
                max_queue_bytes: 64 << 20,
                ..StreamConfig::default()
            },
        )
        .await
        .unwrap();
    let (handle, mut events) = p.conn.split();
    let (_, mut incoming) = p.accepted.split();
    let receiver = tokio::spawn(async move {
        let mut bytes = 0u64;
        while let Some(e) = incoming.recv().await {
            if let Event::Received { payload, .. } = e {
                bytes += payload.len() as u64;
            }
        }
        bytes
    });
    let count = total / ADU as u64;
    let payload = Bytes::from(vec![0x5a; ADU]);
    let fields = Fields::new();
    let (cpu0, start) = (cpu_time(), Instant::now());
    let (mut sent, mut acked) = (0u64, 0u64);
    while acked < count {
        while sent < count && sent - acked < ADU_WINDOW {
            handle
                .send_adu_nowait(1, payload.clone(), fields.clone())
                .unwrap();
            sent += 1;
        }
        match events.recv().await.expect("the connection ended") {
            Event::Ack { .. } => acked += 1,
            Event::Nack { .. } => panic!("an ADU was lost over loopback"),
            _ => {}
        }
    }
    let (wall, cpu) = (start.elapsed(), cpu_time() - cpu0);
    p.client.shutdown().await;
    p.server.shutdown().await;
    let bytes = receiver.await.unwrap();
    assert_eq!(bytes, count * ADU as u64, "what the receiver got");
    Row {
        label: format!("anchor: a stream of {ADU}-byte ADUs"),
        messages: count,
        bytes,
        wall,
        cpu,
    }
}

/// The growth of the process's peak RSS while one 100 MB message is delivered.
async fn big_message(from_file: bool) -> (u64, Duration) {
    let path = std::env::temp_dir().join(format!("horde-bench-message-{}", std::process::id()));
    if from_file {
        std::fs::write(&path, vec![0x5a; BIG]).unwrap();
    }
    let p = pair().await;
    let config = endpoint_config();
    let mut sender = MessageEndpoint::new(p.conn, config.clone()).await.unwrap();
    let received = count_received(MessageEndpoint::new(p.accepted, config).await.unwrap());
    reset_peak_rss();
    let base = peak_rss();
    let start = Instant::now();
    let handle: MessageHandle = sender.handle();
    if from_file {
        let file = std::io::BufReader::new(std::fs::File::open(&path).unwrap());
        handle
            .submit_source(MessageSpec::new(0, BIG as u64), Box::new(file))
            .unwrap();
    } else {
        handle.send(0, None, Bytes::from(vec![0x5a; BIG])).unwrap();
    }
    next_delivered(&mut sender).await;
    let took = start.elapsed();
    let grown = peak_rss().saturating_sub(base);
    drop(sender);
    p.client.shutdown().await;
    p.server.shutdown().await;
    let (n, bytes) = received.await.unwrap();
    assert_eq!((n, bytes), (1, BIG as u64), "what the receiver got");
    if from_file {
        let _ = std::fs::remove_file(&path);
    }
    (grown, took)
}

/// Resets the kernel's peak-RSS mark of this process (`clear_refs` 5).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The process's peak RSS in bytes (`VmHWM`).
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn human(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{} MB", b >> 20),
        b if b >= 1 << 10 => format!("{} KB", b >> 10),
        b => format!("{b} B"),
    }
}

/// Runs one big-message case in a fresh process of this bench, so that neither case
/// finds the heap the other left behind; returns its printed line.
fn big_message_in_child(case: &str) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .arg(format!("--big-message={case}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{case}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if let Some(case) = args.iter().find_map(|a| a.strip_prefix("--big-message=")) {
        let from_file = case == "file";
        let (grown, took) = rt.block_on(big_message(from_file));
        println!(
            "one {} message {}: peak RSS +{:.1} MB, delivered in {:.2} s",
            human(BIG),
            if from_file {
                "read from a file"
            } else {
                "from memory"
            },
            grown as f64 / (1 << 20) as f64,
            took.as_secs_f64()
        );
        return;
    }
    let total_mb: u64 = args.iter().find_map(|a| a.parse().ok()).unwrap_or(200);
    let total = total_mb << 20;
    // `--sizes=1024,65536` runs only those message rows (beside the anchor), and not the
    // memory rows: a narrower run to profile.
    let only: Option<Vec<usize>> =
        args.iter()
            .find_map(|a| a.strip_prefix("--sizes="))
            .map(|list| {
                list.split(',')
                    .map(|n| n.parse().expect("--sizes takes message sizes in bytes"))
                    .collect()
            });
    let memory_rows = only.is_none();
    rt.block_on(async {
        let anchor = stream(total).await;
        let mut rows = Vec::new();
        for size in only.unwrap_or(vec![1 << 10, 64 << 10, 10 << 20]) {
            rows.push(messages(size, total).await);
        }
        println!(
            "{CHANNELS} channels over loopback, {total_mb} MB per row; CPU is both ends' (one process)"
        );
        println!(
            "{:<34} {:>9} {:>9} {:>12} {:>14} {:>12} {:>10}",
            "row", "count", "Gbit/s", "msgs/s", "CPU µs/msg", "CPU ns/byte", "of anchor"
        );
        for r in std::iter::once(&anchor).chain(&rows) {
            println!(
                "{:<34} {:>9} {:>9.3} {:>12.0} {:>14.1} {:>12.2} {:>9.2}×",
                r.label,
                r.messages,
                r.gbps(),
                r.messages as f64 / r.wall.as_secs_f64(),
                r.cpu.as_secs_f64() * 1e6 / r.messages as f64,
                r.cpu.as_secs_f64() * 1e9 / r.bytes as f64,
                r.gbps() / anchor.gbps(),
            );
        }
    });
    if !memory_rows {
        return;
    }
    for case in ["memory", "file"] {
        println!("{}", big_message_in_child(case));
    }
}
