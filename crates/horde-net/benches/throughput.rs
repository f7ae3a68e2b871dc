//! Sender-to-receiver throughput through the runtime: 4 channels over unshaped loopback
//! with encryption on, then the same through the emulator with ideal links.
//!
//!     cargo bench -p horde-net --bench throughput [-- SECONDS]
//!
//! Sender and receiver each run on a thread with a single-threaded runtime of its own,
//! as two processes would. Prints goodput (Gbit/s of ADU payload), packets/s, CPU time
//! per packet for the whole process (both ends and, in the second run, the emulator),
//! and the ratio to an anchor measured in the same run: plain UDP between two threads
//! on loopback, no protocol, no encryption.

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

fn cpu_time() -> Duration {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

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
        let server = Host::bind(cfg).await.unwrap();
        let mut listener = server.listen(1);
        ready.send(server.local_addrs()[0]).unwrap();
        let accepted = listener.accept().await.unwrap();
        let (_, mut events) = accepted.split();
        let (mut n, mut bytes) = (0u64, 0u64);
        let (mut first, mut last) = (None, Instant::now());
        loop {
            match tokio::time::timeout(Duration::from_millis(50), events.recv()).await {
                Ok(Some(Event::Received { payload, .. })) => {
                    first.get_or_insert_with(Instant::now);
                    last = Instant::now();
                    n += 1;
                    bytes += payload.len() as u64;
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
        server.shutdown().await;
        (n, bytes, first.map_or(Duration::ZERO, |f| last - f))
    })
}

/// Sender end on the calling thread's own runtime; returns after `seconds`.
fn sender(ck: Keypair, peer: horde_crypto::PublicKey, remotes: Vec<SocketAddr>, seconds: f64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let lo = "127.0.0.1:0".parse().unwrap();
        let client = Host::bind(HostConfig::new(
            ck,
            (0..CHANNELS).map(|_| InterfaceConfig::new(lo)).collect(),
        ))
        .await
        .unwrap();
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
                        config: ChannelConfig::default(),
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
        let payload = Bytes::from(vec![0x5a; ADU]);
        let (mut sent, mut resolved) = (0u64, 0u64);
        let end = Instant::now() + Duration::from_secs_f64(seconds);
        while Instant::now() < end {
            while sent - resolved < WINDOW {
                handle
                    .send_adu_nowait(1, payload.clone(), Fields::new())
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
        handle.close().unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        client.shutdown().await;
    });
}

/// The anchor: plain UDP on loopback, one sender thread and one receiver thread, no
/// protocol and no encryption, 1200-byte datagrams. Returns packets per second.
fn raw_udp_anchor(seconds: f64) -> f64 {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = rx.local_addr().unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let receiver = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let (mut n, mut first, mut last) = (0u64, None, Instant::now());
        while rx.recv(&mut buf).is_ok() {
            first.get_or_insert_with(Instant::now);
            last = Instant::now();
            n += 1;
        }
        n as f64 / first.map_or(1e-9, |f: Instant| (last - f).as_secs_f64().max(1e-9))
    });
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let payload = [0x5au8; ADU];
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < end {
        for _ in 0..64 {
            // A full receive buffer drops datagrams; the receiver counts what arrived.
            let _ = tx.send_to(&payload, to);
        }
    }
    receiver.join().unwrap()
}

fn run(seconds: f64, path: Path, anchor_pps: f64) {
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let (ready_tx, ready_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel();
    let client_public = *ck.public();
    let server_public = *sk.public();
    let rx = std::thread::spawn(move || receiver(sk, client_public, ready_tx, stop_rx));
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
    sender(ck, server_public, remotes, seconds);
    let cpu = cpu_time() - cpu0;
    let _ = stop_tx.send(()); // the receiver may already have seen the close
    let (n, bytes, span) = rx.join().unwrap();
    if let Some(e) = emu {
        e.shutdown();
    }
    let secs = span.as_secs_f64().max(1e-9);
    println!(
        "{:<28} {:>7.3} Gbit/s  {:>9.0} packets/s  {:>6.2} µs CPU/packet  {:>5.2}x anchor  ({} ADUs of {} B in {:.2} s)",
        if path == Path::Emulator { "4 channels, via emulator" } else { "4 channels, loopback" },
        bytes as f64 * 8.0 / secs / 1e9,
        n as f64 / secs,
        cpu.as_secs_f64() * 1e6 / n.max(1) as f64,
        n as f64 / secs / anchor_pps,
        n,
        ADU,
        secs
    );
}

fn main() {
    let seconds: f64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(5.0);
    let anchor = raw_udp_anchor(seconds.min(3.0));
    println!(
        "{:<28} {:>7.3} Gbit/s  {:>9.0} packets/s  (anchor: plain UDP, one socket pair, no encryption)",
        "raw UDP, loopback",
        anchor * ADU as f64 * 8.0 / 1e9,
        anchor
    );
    run(seconds, Path::Loopback, anchor);
    run(seconds, Path::Emulator, anchor);
}
