//! Keys rotating every 200 ms under a continuous stream over real sockets: nothing is lost,
//! nothing is dropped, and the key phase seen on the wire flips in both directions.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::lo;
use horde_crypto::{Keypair, RekeyPolicy, KEY_PHASE_BIT, TYPE_TRANSPORT};
use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, InterfaceConfig};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, Event, StreamConfig};
use tokio::net::UdpSocket;

/// Counts key phase changes of transport datagrams, per direction.
#[derive(Default)]
struct PhaseFlips {
    up: AtomicU64,
    down: AtomicU64,
}

fn note(last: &mut Option<u8>, datagram: &[u8], flips: &AtomicU64) {
    if datagram
        .first()
        .is_some_and(|t| t & !KEY_PHASE_BIT == TYPE_TRANSPORT)
    {
        let phase = datagram[0] & KEY_PHASE_BIT;
        if last.is_some_and(|p| p != phase) {
            flips.fetch_add(1, Ordering::Relaxed);
        }
        *last = Some(phase);
    }
}

/// A relay between client and server that watches the key phase bit.
async fn relay(server: SocketAddr) -> (SocketAddr, Arc<PhaseFlips>) {
    let front = UdpSocket::bind(lo()).await.unwrap();
    let back = UdpSocket::bind(lo()).await.unwrap();
    let addr = front.local_addr().unwrap();
    let flips = Arc::new(PhaseFlips::default());
    let seen = flips.clone();
    tokio::spawn(async move {
        let mut client: Option<SocketAddr> = None;
        let (mut a, mut b) = (vec![0u8; 65536], vec![0u8; 65536]);
        let (mut up, mut down) = (None, None);
        loop {
            tokio::select! {
                Ok((n, from)) = front.recv_from(&mut a) => {
                    client = Some(from);
                    note(&mut up, &a[..n], &seen.up);
                    let _ = back.send_to(&a[..n], server).await;
                }
                Ok((n, _)) = back.recv_from(&mut b) => {
                    note(&mut down, &b[..n], &seen.down);
                    if let Some(c) = client {
                        let _ = front.send_to(&b[..n], c).await;
                    }
                }
            }
        }
    });
    (addr, flips)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuous_stream_loses_nothing_across_rekeys() {
    let policy = RekeyPolicy::every(Duration::from_millis(200));
    let ck = Keypair::generate();
    let sk = Keypair::generate();
    let mut scfg = HostConfig::new(sk.clone(), vec![InterfaceConfig::new(lo())]);
    scfg.allowed_peers = vec![*ck.public()];
    scfg.rekey = policy;
    let server = Host::bind(scfg).await.unwrap();
    let (via, flips) = relay(server.local_addrs()[0]).await;
    let mut ccfg = HostConfig::new(ck, vec![InterfaceConfig::new(lo())]);
    ccfg.rekey = policy;
    let client = Host::bind(ccfg).await.unwrap();
    let mut listener = server.listen(5);
    let conn = client
        .connect(ConnectConfig {
            peer: *sk.public(),
            service: 5,
            channels: vec![ChannelTarget {
                interface: 0,
                remote: via,
                config: ChannelConfig::default(),
            }],
            handshake_timeout: Duration::from_secs(5),
        })
        .await
        .unwrap();
    let accepted = listener.accept().await.unwrap();
    conn.open_stream(1, StreamConfig::default()).await.unwrap();
    let (handle, mut client_events) = conn.split();
    let (_h, mut server_events) = accepted.split();

    // 2.5 s at 400 ADUs/s: about twelve rotations each way.
    const N: u32 = 1000;
    let sender = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_micros(2500));
        for i in 0..N {
            tick.tick().await;
            handle
                .send_adu_nowait(1, Bytes::from(i.to_le_bytes().to_vec()), Fields::new())
                .unwrap();
        }
        handle
    });
    let mut got = Vec::new();
    while got.len() < N as usize {
        match tokio::time::timeout(Duration::from_secs(3), server_events.recv()).await {
            Ok(Some(Event::Received { payload, .. })) => {
                got.push(u32::from_le_bytes(payload[..4].try_into().unwrap()))
            }
            Ok(Some(_)) => {}
            other => panic!("delivery stalled after {} ADUs: {other:?}", got.len()),
        }
    }
    let _handle = sender.await.unwrap();
    got.sort_unstable();
    got.dedup();
    assert_eq!(got.len(), N as usize, "every ADU exactly once");

    let (mut acked, mut nacked) = (0, 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while acked + nacked < N {
        match tokio::time::timeout_at(deadline, client_events.recv()).await {
            Ok(Some(Event::Ack { .. })) => acked += 1,
            Ok(Some(Event::Nack { .. })) => nacked += 1,
            Ok(Some(_)) => {}
            _ => break,
        }
    }
    assert_eq!((acked, nacked), (N, 0));
    for host in [&server, &client] {
        let dropped = host.stats().await.unwrap().dropped;
        assert_eq!(dropped.total(), 0, "{dropped:?}");
    }
    let (up, down) = (
        flips.up.load(Ordering::Relaxed),
        flips.down.load(Ordering::Relaxed),
    );
    assert!(up >= 8, "client keys rotated {up} times");
    assert!(down >= 8, "server keys rotated {down} times");
    client.shutdown().await;
    server.shutdown().await;
}

/// A session accepted by a host that has been up longer than the reject-after time: its
/// first key's age counts from the handshake, not from the host's start. (Found by the
/// soak test: a receiver up for more than 180 s refused every new session's data as
/// `key_expired`, so restarted senders reconnected every few seconds and delivered nothing.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_older_than_the_key_lifetime_accepts_new_sessions() {
    let policy = RekeyPolicy::every(Duration::from_millis(1000));
    let ck = Keypair::generate();
    let sk = Keypair::generate();
    let mut scfg = HostConfig::new(sk.clone(), vec![InterfaceConfig::new(lo())]);
    scfg.allowed_peers = vec![*ck.public()];
    scfg.rekey = policy;
    let server = Host::bind(scfg).await.unwrap();
    let mut ccfg = HostConfig::new(ck, vec![InterfaceConfig::new(lo())]);
    ccfg.rekey = policy;
    let client = Host::bind(ccfg).await.unwrap();
    let mut listener = server.listen(5);
    // Both hosts are now older than the 1.5 s reject-after time.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let conn = client
        .connect(ConnectConfig {
            peer: *sk.public(),
            service: 5,
            channels: vec![ChannelTarget {
                interface: 0,
                remote: server.local_addrs()[0],
                config: ChannelConfig::default(),
            }],
            handshake_timeout: Duration::from_secs(5),
        })
        .await
        .unwrap();
    let accepted = listener.accept().await.unwrap();
    conn.open_stream(1, StreamConfig::default()).await.unwrap();
    let (handle, _client_events) = conn.split();
    let (_h, mut server_events) = accepted.split();
    // 200 ADUs over half a second: within one key generation of the sender.
    const N: u32 = 200;
    let sender = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_micros(2500));
        for i in 0..N {
            tick.tick().await;
            handle
                .send_adu_nowait(1, Bytes::from(i.to_le_bytes().to_vec()), Fields::new())
                .unwrap();
        }
        handle
    });
    let mut got = 0;
    while got < N {
        match tokio::time::timeout(Duration::from_millis(400), server_events.recv()).await {
            Ok(Some(Event::Received { .. })) => got += 1,
            Ok(Some(_)) => {}
            other => panic!("delivery stalled after {got} ADUs: {other:?}"),
        }
    }
    let _handle = sender.await.unwrap();
    let dropped = server.stats().await.unwrap().dropped;
    assert_eq!(dropped.total(), 0, "{dropped:?}");
    client.shutdown().await;
    server.shutdown().await;
}
