//! QUIC anchors with quinn over loopback: one bulk stream, and unreliable datagrams.
//! Client and server each run a single-threaded runtime on a thread of their own, as
//! Horde's sender and receiver do. Packets are the UDP datagrams the receiver read.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use quinn::rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
use quinn::{ClientConfig, Endpoint, ServerConfig, TransportConfig, VarInt};

use super::Figures;

#[derive(Clone, Copy, PartialEq)]
pub enum Mode {
    Stream,
    Datagrams,
}

fn transport() -> Arc<TransportConfig> {
    let mut t = TransportConfig::default();
    // Windows far above loopback's bandwidth-delay product, so flow control never binds.
    t.stream_receive_window(VarInt::from_u32(32 << 20));
    t.receive_window(VarInt::from_u32(64 << 20));
    t.send_window(64 << 20);
    t.datagram_receive_buffer_size(Some(32 << 20));
    t.datagram_send_buffer_size(4 << 20);
    Arc::new(t)
}

fn configs() -> (ServerConfig, ClientConfig) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let der: CertificateDer<'static> = cert.cert.der().clone();
    let key = PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der());
    let mut server = ServerConfig::with_single_cert(vec![der.clone()], key.into()).unwrap();
    server.transport_config(transport());
    let mut roots = quinn::rustls::RootCertStore::empty();
    roots.add(der).unwrap();
    let mut client = ClientConfig::with_root_certificates(Arc::new(roots)).unwrap();
    client.transport_config(transport());
    (server, client)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Payload bytes, UDP datagrams read and first-to-last span at the server.
fn serve(
    config: ServerConfig,
    mode: Mode,
    ready: std::sync::mpsc::Sender<SocketAddr>,
) -> (u64, u64, Duration) {
    runtime().block_on(async move {
        let ep = Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap();
        ready.send(ep.local_addr().unwrap()).unwrap();
        let conn = ep.accept().await.unwrap().await.unwrap();
        let (mut bytes, mut first, mut last) = (0u64, None, Instant::now());
        let start_packets;
        match mode {
            Mode::Stream => {
                let mut s = conn.accept_uni().await.unwrap();
                start_packets = conn.stats().udp_rx.datagrams;
                let mut buf = vec![0u8; 64 << 10];
                while let Ok(Some(n)) = s.read(&mut buf).await {
                    first.get_or_insert_with(Instant::now);
                    last = Instant::now();
                    bytes += n as u64;
                }
            }
            Mode::Datagrams => {
                start_packets = conn.stats().udp_rx.datagrams;
                while let Ok(d) = conn.read_datagram().await {
                    first.get_or_insert_with(Instant::now);
                    last = Instant::now();
                    bytes += d.len() as u64;
                }
            }
        }
        let rx = conn.stats().udp_rx;
        let packets = rx.datagrams - start_packets;
        conn.close(0u32.into(), b"done");
        ep.wait_idle().await;
        MEAN_DATAGRAM.store(rx.bytes / rx.datagrams.max(1), Ordering::Relaxed);
        (bytes, packets, first.map_or(Duration::ZERO, |f| last - f))
    })
}

fn send(config: ClientConfig, server: SocketAddr, mode: Mode, seconds: f64, size: usize) {
    runtime().block_on(async move {
        let mut ep = Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        ep.set_default_client_config(config);
        let conn = ep.connect(server, "localhost").unwrap().await.unwrap();
        let end = Instant::now() + Duration::from_secs_f64(seconds);
        match mode {
            Mode::Stream => {
                let mut s = conn.open_uni().await.unwrap();
                let chunk = Bytes::from(vec![0x5au8; 64 << 10]);
                while Instant::now() < end {
                    s.write_chunk(chunk.clone()).await.unwrap();
                }
                s.finish().unwrap();
                let _ = s.stopped().await;
            }
            Mode::Datagrams => {
                let size = size.min(conn.max_datagram_size().unwrap_or(size));
                let payload = Bytes::from(vec![0x5au8; size]);
                while Instant::now() < end {
                    conn.send_datagram_wait(payload.clone()).await.unwrap();
                }
                // Let the last datagrams leave before the close.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        conn.close(0u32.into(), b"done");
        ep.wait_idle().await;
    });
}

/// Mean UDP payload per datagram the last run's receiver saw (handshake included).
static MEAN_DATAGRAM: AtomicU64 = AtomicU64::new(0);

/// Mean UDP payload of the datagrams the last [`run`] received, in bytes.
pub fn mean_datagram() -> u64 {
    MEAN_DATAGRAM.load(Ordering::Relaxed)
}

pub fn run(seconds: f64, mode: Mode, size: usize) -> Figures {
    let (server_config, client_config) = configs();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let cpu0 = super::cpu_time();
    let server = std::thread::spawn(move || serve(server_config, mode, ready_tx));
    let addr = ready_rx.recv().unwrap();
    send(client_config, addr, mode, seconds, size);
    let (bytes, packets, span) = server.join().unwrap();
    Figures::new(packets, bytes, span, super::cpu_time() - cpu0)
}
