//! Servers behind a stateless UDP load balancer (docs/load-balancing.md): the balancer
//! reads only the server id in each datagram's index, yet every channel of a session
//! reaches the server that holds it, and a client whose servers restarted dials back
//! to the same one.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::lo;
use horde_crypto::{routed_id, Keypair, ServerId, TYPE_INITIATION};
use horde_net::{Connection, Host, HostConfig, InterfaceConfig};
use horde_policy::Fields;
use horde_proto::{Event, StreamConfig};
use tokio::net::UdpSocket;
use tokio::runtime::Runtime;

const SERVICE: u32 = 4;
/// Server ids are one byte here.
const ID_LEN: u8 = 1;
const CLIENTS: usize = 6;
const ADUS: u32 = 40;

/// What the balancer saw, per client source address.
#[derive(Default)]
struct Seen {
    /// The server each transport datagram went to.
    transport: HashMap<SocketAddr, Vec<u16>>,
    /// The id each initiation carried.
    initiations: HashMap<SocketAddr, Vec<u16>>,
}

/// A stateless balancer: a datagram whose id names a live server goes there; any other
/// goes to the server its whole index hashes to. One relay socket per client address and
/// server carries the replies back.
fn balancer(rt: &Runtime, servers: Vec<(u16, SocketAddr)>) -> (SocketAddr, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let log = Arc::clone(&seen);
    let front = rt.block_on(UdpSocket::bind(lo())).unwrap();
    let addr = front.local_addr().unwrap();
    rt.spawn(async move {
        let front = Arc::new(front);
        let mut relays: HashMap<(SocketAddr, u16), Arc<UdpSocket>> = HashMap::new();
        let mut buf = vec![0u8; 65536];
        loop {
            let (n, src) = front.recv_from(&mut buf).await.unwrap();
            let d = &buf[..n];
            let Some(id) = routed_id(d, ID_LEN) else {
                continue;
            };
            let (server, to) = servers
                .iter()
                .find(|(sid, _)| *sid == id)
                .copied()
                .unwrap_or_else(|| {
                    // No live server has that id: spread by the whole index.
                    let index = u32::from_le_bytes(d[1..5].try_into().unwrap());
                    servers[index as usize % servers.len()]
                });
            {
                let mut seen = log.lock().unwrap();
                let list = if d[0] == TYPE_INITIATION {
                    seen.initiations.entry(src).or_default()
                } else {
                    seen.transport.entry(src).or_default()
                };
                list.push(if d[0] == TYPE_INITIATION { id } else { server });
            }
            let relay = match relays.get(&(src, server)) {
                Some(r) => Arc::clone(r),
                None => {
                    let r = Arc::new(UdpSocket::bind(lo()).await.unwrap());
                    r.connect(to).await.unwrap();
                    let (back, front) = (Arc::clone(&r), Arc::clone(&front));
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 65536];
                        loop {
                            // A crashed server's port answers with ICMP, which a
                            // connected socket reports once; the relay outlives it.
                            if let Ok(n) = back.recv(&mut buf).await {
                                let _ = front.send_to(&buf[..n], src).await;
                            }
                        }
                    });
                    relays.insert((src, server), Arc::clone(&r));
                    r
                }
            };
            let _ = relay.send(d).await;
        }
    });
    (addr, seen)
}

/// A server on a runtime of its own (dropping it is a crash), counting what it
/// delivers.
fn server(
    key: &Keypair,
    id: ServerId,
    bind: SocketAddr,
    allowed: Vec<horde_crypto::PublicKey>,
    delivered: Arc<Mutex<u32>>,
) -> (Runtime, SocketAddr) {
    let mut cfg = HostConfig::new(key.clone(), vec![InterfaceConfig::new(bind)]);
    cfg.allowed_peers = allowed;
    cfg.handshakes.server_id = Some(id);
    common::host_process(cfg, SERVICE, move |mut c| {
        let delivered = Arc::clone(&delivered);
        async move {
            while let Some(e) = c.next_event().await {
                if matches!(e, Event::Received { .. }) {
                    *delivered.lock().unwrap() += 1;
                }
            }
        }
    })
}

/// The servers' delivered count once it reaches `expected`, or after 5 s. An ADU is
/// acked when the server's host holds it, a moment before the server's application
/// task counts it, so a sender's last ack can come first.
fn delivered_within(delivered: &[Arc<Mutex<u32>>], expected: u32) -> u32 {
    let total = || delivered.iter().map(|c| *c.lock().unwrap()).sum::<u32>();
    let end = std::time::Instant::now() + Duration::from_secs(5);
    while total() < expected && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    total()
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// A client with two channels, each from its own socket, both to the balancer.
async fn client(key: &Keypair, server_key: &Keypair, front: SocketAddr) -> (Host, Connection) {
    let (host, conn) = common::persistent_client(key, server_key, front, SERVICE).await;
    conn.open_stream(1, StreamConfig::default()).await.unwrap();
    (host, conn)
}

/// Waits for `Connected`, then sends `ADUS` ADUs and waits until they are acked.
async fn connected_then_send(conn: &mut Connection) {
    let end = tokio::time::Instant::now() + Duration::from_secs(8);
    let mut seen_events = Vec::new();
    loop {
        match tokio::time::timeout_at(end, conn.next_event()).await {
            Ok(Some(Event::Connected)) => break,
            Ok(Some(e)) => seen_events.push(e),
            other => panic!("no connection: {other:?}, events before: {seen_events:?}"),
        }
    }
    for i in 0..ADUS {
        conn.send_adu_nowait(1, Bytes::from(vec![i as u8; 500]), Fields::new())
            .unwrap();
    }
    let mut acked = 0;
    while acked < ADUS {
        match tokio::time::timeout_at(end, conn.next_event()).await {
            Ok(Some(Event::Ack { .. })) => acked += 1,
            Ok(Some(_)) => {}
            other => panic!("{acked} of {ADUS} acked: {other:?}"),
        }
    }
}

#[test]
fn every_channel_of_a_session_reaches_its_server_and_redials_return_to_it() {
    let server_key = Keypair::generate();
    let client_keys: Vec<Keypair> = (0..CLIENTS).map(|_| Keypair::generate()).collect();
    let allowed: Vec<_> = client_keys.iter().map(|k| *k.public()).collect();
    let ids = [
        ServerId::new(1, ID_LEN).unwrap(),
        ServerId::new(2, ID_LEN).unwrap(),
    ];
    let delivered: Vec<Arc<Mutex<u32>>> = ids.iter().map(|_| Arc::default()).collect();
    let mut servers: Vec<(Runtime, SocketAddr)> = ids
        .iter()
        .zip(&delivered)
        .map(|(id, d)| server(&server_key, *id, lo(), allowed.clone(), Arc::clone(d)))
        .collect();
    let lb_rt = runtime();
    let (front, seen) = balancer(
        &lb_rt,
        ids.iter()
            .zip(&servers)
            .map(|(id, (_, addr))| (id.id(), *addr))
            .collect(),
    );

    let client_rt = runtime();
    let mut clients = client_rt.block_on(async {
        let mut clients = Vec::new();
        for key in &client_keys {
            let (host, mut conn) = client(key, &server_key, front).await;
            connected_then_send(&mut conn).await;
            clients.push((host, conn));
        }
        clients
    });
    assert_eq!(
        delivered_within(&delivered, ADUS * CLIENTS as u32),
        ADUS * CLIENTS as u32
    );

    // Each client's two channels went to one server, the one that holds its session.
    let home: Vec<u16> = clients
        .iter()
        .map(|(host, _)| {
            let seen = seen.lock().unwrap();
            let servers: Vec<u16> = host
                .local_addrs()
                .iter()
                .flat_map(|a| seen.transport.get(a).cloned().unwrap_or_default())
                .collect();
            assert!(!servers.is_empty());
            assert!(
                servers.iter().all(|s| *s == servers[0]),
                "one session's datagrams went to several servers: {servers:?}"
            );
            servers[0]
        })
        .collect();

    // Both servers crash and come back on the same addresses with the same ids.
    let addrs: Vec<SocketAddr> = servers.iter().map(|(_, a)| *a).collect();
    for (rt, _) in servers.drain(..) {
        rt.shutdown_background();
    }
    std::thread::sleep(Duration::from_millis(1000));
    let before = seen.lock().unwrap().initiations.clone();
    servers = ids
        .iter()
        .zip(&delivered)
        .zip(&addrs)
        .map(|((id, d), a)| server(&server_key, *id, *a, allowed.clone(), Arc::clone(d)))
        .collect();
    client_rt.block_on(async {
        for (_, conn) in &mut clients {
            connected_then_send(conn).await;
        }
    });
    assert_eq!(
        delivered_within(&delivered, 2 * ADUS * CLIENTS as u32),
        2 * ADUS * CLIENTS as u32
    );

    // Each client's new initiations named the server it had, so they went back there.
    let seen = seen.lock().unwrap();
    for ((host, _), home) in clients.iter().zip(&home) {
        let again: Vec<u16> = host
            .local_addrs()
            .iter()
            .flat_map(|a| {
                let old = before.get(a).map_or(0, Vec::len);
                seen.initiations
                    .get(a)
                    .map_or(vec![], |v| v[old..].to_vec())
            })
            .collect();
        assert!(!again.is_empty(), "no initiation after the restart");
        assert!(
            again.iter().all(|id| id == home),
            "redial went to {again:?}, its server was {home}"
        );
    }
    drop(seen);
    client_rt.block_on(async {
        for (host, _) in clients {
            host.shutdown().await;
        }
    });
    for (rt, _) in servers {
        rt.shutdown_background();
    }
    lb_rt.shutdown_background();
}
