//! Garbage, truncated, replayed and wrongly keyed datagrams sent at a host's socket are
//! dropped and counted, and the session carries on.

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::lo;
use horde_crypto::{DropReason, Keypair};
use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, InterfaceConfig};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, Event, StreamConfig};
use tokio::net::UdpSocket;

/// A relay between client and server that keeps a copy of every client datagram.
async fn tap(server: SocketAddr) -> (SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
    let front = UdpSocket::bind(lo()).await.unwrap();
    let back = UdpSocket::bind(lo()).await.unwrap();
    let addr = front.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let copies = seen.clone();
    tokio::spawn(async move {
        let mut client: Option<SocketAddr> = None;
        let (mut a, mut b) = (vec![0u8; 65536], vec![0u8; 65536]);
        loop {
            tokio::select! {
                Ok((n, from)) = front.recv_from(&mut a) => {
                    client = Some(from);
                    copies.lock().unwrap().push(a[..n].to_vec());
                    let _ = back.send_to(&a[..n], server).await;
                }
                Ok((n, _)) = back.recv_from(&mut b) => {
                    if let Some(c) = client {
                        let _ = front.send_to(&b[..n], c).await;
                    }
                }
            }
        }
    });
    (addr, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_datagrams_are_dropped_counted_and_harmless() {
    let ck = Keypair::generate();
    let sk = Keypair::generate();
    let mut scfg = HostConfig::new(sk.clone(), vec![InterfaceConfig::new(lo())]);
    scfg.allowed_peers = vec![*ck.public()];
    let server = Host::bind(scfg).await.unwrap();
    let server_addr = server.local_addrs()[0];
    let (relay, seen) = tap(server_addr).await;
    let client = Host::bind(HostConfig::new(ck, vec![InterfaceConfig::new(lo())]))
        .await
        .unwrap();
    let mut listener = server.listen(4);
    let conn = client
        .connect(ConnectConfig {
            peer: *sk.public(),
            service: 4,
            channels: vec![ChannelTarget {
                interface: 0,
                remote: relay,
                config: ChannelConfig::default(),
            }],
            handshake_timeout: Duration::from_secs(5),
        })
        .await
        .unwrap();
    let mut accepted = tokio::time::timeout(Duration::from_secs(5), listener.accept())
        .await
        .unwrap()
        .unwrap();
    conn.open_stream(1, StreamConfig::default()).await.unwrap();

    let send_batch = |from: u32| {
        for i in from..from + 50 {
            conn.send_adu_nowait(1, Bytes::from(i.to_be_bytes().to_vec()), Fields::new())
                .unwrap();
        }
    };
    let mut got = BTreeSet::new();
    send_batch(0);
    collect(&mut accepted, &mut got, 50).await;

    // Attack from a socket of our own.
    let attacker = UdpSocket::bind(lo()).await.unwrap();
    let datagrams: Vec<Vec<u8>> = seen.lock().unwrap().clone();
    let transport = datagrams
        .iter()
        .rev()
        .find(|d| d[0] == horde_crypto::TYPE_TRANSPORT)
        .unwrap()
        .clone();
    let before_stats = server.stats().await.unwrap();
    let before = before_stats.dropped.clone();
    // Garbage of every length, and unknown types.
    for n in 0..64 {
        attacker.send_to(&vec![0xAB; n], server_addr).await.unwrap();
    }
    // Truncated copies of a real datagram.
    for n in [1, 4, 8, 12, 20] {
        attacker
            .send_to(&transport[..n], server_addr)
            .await
            .unwrap();
    }
    // Replays of every datagram the client sent (handshake included).
    for d in &datagrams {
        attacker.send_to(d, server_addr).await.unwrap();
    }
    // A forgery: right index, a fresh counter (so it passes the replay window), but
    // nobody's key: the tag cannot verify.
    let mut forged = transport.clone();
    let nonce = u64::from_le_bytes(forged[5..13].try_into().unwrap()) + 1000;
    forged[5..13].copy_from_slice(&nonce.to_le_bytes());
    attacker.send_to(&forged, server_addr).await.unwrap();
    // A stranger's handshake: a well-formed initiation from a key not on the allow-list.
    let stranger = Host::bind(HostConfig::new(
        Keypair::generate(),
        vec![InterfaceConfig::new(lo())],
    ))
    .await
    .unwrap();
    let _ = stranger
        .connect(ConnectConfig {
            peer: *sk.public(),
            service: 4,
            channels: vec![ChannelTarget {
                interface: 0,
                remote: server_addr,
                config: ChannelConfig::default(),
            }],
            handshake_timeout: Duration::from_millis(300),
        })
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let after_stats = server.stats().await.unwrap();
    let after = after_stats.dropped.clone();
    let delta = |r: DropReason| after.get(r) - before.get(r);
    // Garbage and truncated datagrams can belong to no session: the kernel's filter drops
    // them before the driver reads them (or, without one, the driver does).
    let in_kernel = after_stats.kernel_dropped - before_stats.kernel_dropped;
    assert!(
        delta(DropReason::Truncated) + delta(DropReason::UnknownType) + in_kernel >= 64 + 5,
        "{after:?}, {in_kernel} dropped in the kernel"
    );
    // Every replayed transport datagram is dropped (50 small ADUs go in fewer datagrams
    // than 50 now that they are packed).
    let transports = datagrams
        .iter()
        .filter(|d| d[0] == horde_crypto::TYPE_TRANSPORT)
        .count() as u64;
    assert!(
        delta(DropReason::Replayed) + delta(DropReason::TooOld) >= transports,
        "replays of {transports}: {after:?}"
    );
    assert!(delta(DropReason::BadTag) >= 1, "forgery: {after:?}");
    let stranger_stats = stranger.stats().await.unwrap();
    assert!(
        delta(DropReason::NotAllowed) >= 1,
        "stranger: {after:?}, stranger sent {stranger_stats:?}"
    );
    // Replays were not delivered twice.
    let mut dup = BTreeSet::new();
    while let Some(e) = accepted.try_event() {
        if let Event::Received { payload, .. } = e {
            dup.insert(u32::from_be_bytes(payload[..4].try_into().unwrap()));
        }
    }
    assert!(dup.is_empty(), "replayed ADUs delivered again: {dup:?}");

    // The session survives.
    send_batch(50);
    collect(&mut accepted, &mut got, 100).await;
    assert_eq!(got, (0..100).collect());
}

async fn collect(conn: &mut horde_net::Connection, got: &mut BTreeSet<u32>, until: usize) {
    tokio::time::timeout(Duration::from_secs(5), async {
        while got.len() < until {
            if let Some(Event::Received { payload, .. }) = conn.next_event().await {
                got.insert(u32::from_be_bytes(payload[..4].try_into().unwrap()));
            }
        }
    })
    .await
    .expect("ADUs arrive");
}
