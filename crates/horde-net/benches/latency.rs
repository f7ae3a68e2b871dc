//! Round trips of small ADUs at a low rate, with the sealing worker on and off.
//!
//!     cargo bench -p horde-net --bench latency [-- PINGS] [ROUNDS]
//!
//! A client with four loopback interfaces (four channels, encrypted) sends one 64-byte
//! ADU, the server echoes it on a stream of its own, and the client sends the next only
//! when the echo has arrived: one datagram in flight each way, the load at which a
//! hand-off to another thread would be pure cost. Each round makes a new pair of hosts
//! with [`HostConfig::seal_worker`] on or off, alternating (on, off, on, off, ...), and
//! prints the median, 90th and 99th percentile round trip and the process CPU time per
//! round trip (both hosts and both applications). Defaults: 2000 pings, 2 rounds each.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use horde_crypto::Keypair;
use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, InterfaceConfig};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, Event, StreamConfig};

const CHANNELS: usize = 4;
const ADU: usize = 64;
/// Round trips before the measured ones: handshake, congestion windows, caches.
const WARM_UP: usize = 200;

/// Echo every ADU back until the client closes; on its own thread and runtime, as a
/// separate process would be.
fn echo_server(
    sk: Keypair,
    allowed: horde_crypto::PublicKey,
    worker: bool,
    ready: mpsc::Sender<SocketAddr>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let lo = "127.0.0.1:0".parse().unwrap();
        let mut cfg = HostConfig::new(sk, vec![InterfaceConfig::new(lo)]);
        cfg.allowed_peers = vec![allowed];
        cfg.seal_worker = worker;
        let server = Host::bind(cfg).await.unwrap();
        let mut listener = server.listen(1);
        ready.send(server.local_addrs()[0]).unwrap();
        let accepted = listener.accept().await.unwrap();
        accepted
            .open_stream(1, StreamConfig::default())
            .await
            .unwrap();
        let (handle, mut events) = accepted.split();
        let fields = Fields::new();
        while let Some(e) = events.recv().await {
            let echoed = match e {
                Event::Received { payload, .. } => {
                    handle.send_adu_nowait(1, payload, fields.clone()).is_ok()
                }
                Event::Closed { .. } => false,
                _ => true,
            };
            if !echoed {
                break;
            }
        }
        server.shutdown().await;
    })
}

/// One round: `pings` measured round trips; returns them sorted and the CPU time.
fn round(worker: bool, pings: usize) -> (Vec<Duration>, Duration) {
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let (ready_tx, ready_rx) = mpsc::channel();
    let client_public = *ck.public();
    let server_public = *sk.public();
    let server = std::thread::Builder::new()
        .name("bench-echo".into())
        .spawn(move || echo_server(sk, client_public, worker, ready_tx))
        .unwrap();
    let to = ready_rx.recv().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = rt.block_on(async move {
        let lo = "127.0.0.1:0".parse().unwrap();
        let mut cfg = HostConfig::new(
            ck,
            (0..CHANNELS).map(|_| InterfaceConfig::new(lo)).collect(),
        );
        cfg.seal_worker = worker;
        let client = Host::bind(cfg).await.unwrap();
        let conn = client
            .connect(ConnectConfig {
                peer: server_public,
                service: 1,
                channels: (0..CHANNELS)
                    .map(|interface| ChannelTarget {
                        interface,
                        remote: to,
                        config: ChannelConfig::default(),
                    })
                    .collect(),
                handshake_timeout: Duration::from_secs(5),
            })
            .await
            .unwrap();
        conn.open_stream(1, StreamConfig::default()).await.unwrap();
        let (handle, mut events) = conn.split();
        let payload = Bytes::from(vec![0x5a; ADU]);
        let fields = Fields::new();
        let mut rtts = Vec::with_capacity(pings);
        let mut cpu = Duration::ZERO;
        for i in 0..WARM_UP + pings {
            if i == WARM_UP {
                cpu = cpu_time();
            }
            let sent = Instant::now();
            handle
                .send_adu_nowait(1, payload.clone(), fields.clone())
                .unwrap();
            loop {
                match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
                    Ok(Some(Event::Received { .. })) => break,
                    Ok(Some(_)) => {}
                    other => panic!("no echo for ping {i}: {other:?}"),
                }
            }
            if i >= WARM_UP {
                rtts.push(sent.elapsed());
            }
        }
        let cpu = cpu_time() - cpu;
        handle.close().unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        client.shutdown().await;
        rtts.sort_unstable();
        (rtts, cpu)
    });
    server.join().unwrap();
    result
}

/// Process CPU time (user + system), all threads.
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn main() {
    let mut numbers = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<usize>().ok());
    let pings = numbers.next().unwrap_or(2000).max(1);
    let rounds = numbers.next().unwrap_or(2).max(1);
    for r in 0..rounds {
        for worker in [true, false] {
            let (rtts, cpu) = round(worker, pings);
            println!(
                "seal worker {:<3} round {}: {pings} round trips of {ADU} B: median {:>6.1} µs  p90 {:>6.1} µs  p99 {:>6.1} µs  max {:>7.1} µs  {:>5.1} µs CPU/round trip",
                if worker { "on" } else { "off" },
                r + 1,
                percentile(&rtts, 0.5),
                percentile(&rtts, 0.9),
                percentile(&rtts, 0.99),
                percentile(&rtts, 1.0),
                cpu.as_secs_f64() * 1e6 / pings as f64,
            );
        }
    }
}
