//! Sender-to-receiver throughput through the runtime: 4 channels over unshaped loopback
//! with encryption on, then the same through the emulator with ideal links.
//!
//!     cargo bench -p horde-net --bench throughput [-- SECONDS]
//!
//! Prints goodput (Gbit/s of ADU payload), packets/s, and CPU time per packet for the
//! whole process (both ends and, in the second run, the emulator).

use std::path::PathBuf;
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

async fn run(seconds: f64, through_emulator: bool) {
    let lo = "127.0.0.1:0".parse().unwrap();
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let mut scfg = HostConfig::new(sk.clone(), vec![InterfaceConfig::new(lo)]);
    scfg.allowed_peers = vec![*ck.public()];
    let server = Host::bind(scfg).await.unwrap();
    let mut listener = server.listen(1);
    let emu = through_emulator.then(|| {
        let toml: String = (0..CHANNELS)
            .map(|i| format!("[[channels]]\nname = \"c{i}\"\nlisten = \"127.0.0.1:0\"\nforward_to = \"{}\"\nup = {{}}\n", server.local_addrs()[0]))
            .collect();
        Emulator::start(&EmulatorConfig::from_toml(&toml, "bench", &PathBuf::from(".")).unwrap()).unwrap()
    });
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
                .map(|i| ChannelTarget {
                    interface: i,
                    remote: match &emu {
                        Some(e) => e.client_addr(&format!("c{i}")).unwrap(),
                        None => server.local_addrs()[0],
                    },
                    config: ChannelConfig::default(),
                })
                .collect(),
            handshake_timeout: Duration::from_secs(5),
        })
        .await
        .unwrap();
    let accepted = listener.accept().await.unwrap();
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
    let (_, mut rx_events) = accepted.split();
    let receiver = tokio::spawn(async move {
        let (mut n, mut bytes) = (0u64, 0u64);
        let mut first: Option<Instant> = None;
        let mut last = Instant::now();
        while let Some(e) = rx_events.recv().await {
            if let Event::Received { payload, .. } = e {
                first.get_or_insert_with(Instant::now);
                last = Instant::now();
                n += 1;
                bytes += payload.len() as u64;
            }
        }
        (n, bytes, first.map(|f| last - f))
    });

    let payload = Bytes::from(vec![0x5a; ADU]);
    let (mut sent, mut resolved) = (0u64, 0u64);
    let cpu0 = cpu_time();
    let wall0 = Instant::now();
    let end = wall0 + Duration::from_secs_f64(seconds);
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
    let cpu = cpu_time() - cpu0;
    handle.close().unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    client.shutdown().await;
    server.shutdown().await;
    let (n, bytes, span) = receiver.await.unwrap();
    if let Some(e) = emu {
        e.shutdown();
    }
    let secs = span.unwrap_or_default().as_secs_f64().max(1e-9);
    println!(
        "{:<28} {:>7.3} Gbit/s  {:>9.0} packets/s  {:>6.2} µs CPU/packet  ({} ADUs of {} B in {:.2} s)",
        if through_emulator { "4 channels, via emulator" } else { "4 channels, loopback" },
        bytes as f64 * 8.0 / secs / 1e9,
        n as f64 / secs,
        cpu.as_secs_f64() * 1e6 / n.max(1) as f64,
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run(seconds, false));
    rt.block_on(run(seconds, true));
}
