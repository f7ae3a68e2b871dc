//! The sealing worker: transfers over real loopback sockets with AES-GCM on a thread of
//! its own and the sending key rotating many times underway. Every byte must arrive, in
//! order, and the receiver must drop nothing (a datagram sealed under the wrong key or
//! with a reused counter would fail its tag or the replay check). The hand-off is
//! adaptive: a trickle is sealed on the driver, a bulk transfer mostly on the worker,
//! and both kinds of batch interleave on the wire in the order they were numbered.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::lo;
use horde_crypto::{Keypair, RekeyPolicy};
use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, InterfaceConfig};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, Event, StreamConfig};

const ADUS: u32 = 12_000;
const ADU: usize = 1000;

/// ADU `i`: its number, then bytes that depend on it and on their position.
fn adu(i: u32) -> Bytes {
    let mut b = Vec::with_capacity(ADU);
    b.extend_from_slice(&i.to_le_bytes());
    b.extend((4..ADU).map(|k| (i as usize * 31 + k) as u8));
    Bytes::from(b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_transfer_sealed_on_the_worker_arrives_whole_and_in_order_across_rekeys() {
    // A new sending key every 1000 datagrams: a dozen rotations in this transfer.
    let policy = RekeyPolicy {
        rekey_after_messages: 1000,
        ..RekeyPolicy::default()
    };
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let mut scfg = HostConfig::new(sk.clone(), vec![InterfaceConfig::new(lo())]);
    scfg.allowed_peers = vec![*ck.public()];
    scfg.rekey = policy;
    scfg.seal_worker = true;
    let server = Host::bind(scfg).await.unwrap();
    let mut ccfg = HostConfig::new(
        ck,
        vec![InterfaceConfig::new(lo()), InterfaceConfig::new(lo())],
    );
    ccfg.rekey = policy;
    ccfg.seal_worker = true;
    let client = Host::bind(ccfg).await.unwrap();
    let mut listener = server.listen(5);
    let to = server.local_addrs()[0];
    let conn = client
        .connect(ConnectConfig {
            peer: *sk.public(),
            service: 5,
            channels: (0..2)
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
    let accepted = listener.accept().await.unwrap();
    let stream = StreamConfig {
        ordered: true,
        ..StreamConfig::default()
    };
    conn.open_stream(1, stream).await.unwrap();
    let (handle, _client_events) = conn.split();
    let (_h, mut server_events) = accepted.split();

    let sending = handle.clone();
    let sender = tokio::spawn(async move {
        let mut i = 0;
        while i < ADUS {
            sending.writable(1).await.unwrap();
            for _ in 0..64.min(ADUS - i) {
                sending.send_adu_nowait(1, adu(i), Fields::new()).unwrap();
                i += 1;
            }
        }
    });
    let mut next = 0u32;
    while next < ADUS {
        match tokio::time::timeout(Duration::from_secs(5), server_events.recv()).await {
            Ok(Some(Event::Received { payload, .. })) => {
                let got = u32::from_le_bytes(payload[..4].try_into().unwrap());
                assert_eq!(got, next, "in order");
                assert_eq!(payload, adu(next), "ADU {next} intact");
                next += 1;
            }
            Ok(Some(_)) => {}
            other => panic!("delivery stalled after {next} ADUs: {other:?}"),
        }
    }
    sender.await.unwrap();

    let keys = handle.key_status().await.unwrap().expect("keys");
    assert!(
        keys.send_generation >= 8,
        "the sending key rotated {} times",
        keys.send_generation
    );
    let (cs, ss) = (client.stats().await.unwrap(), server.stats().await.unwrap());
    assert!(
        cs.sealed_off_thread > u64::from(ADUS) / 2,
        "most datagrams were sealed on the worker: {}",
        cs.sealed_off_thread
    );
    assert_eq!(ss.dropped.total(), 0, "{:?}", ss.dropped);
    assert_eq!(handle.stats().await.unwrap().adus_lost, 0);
    client.shutdown().await;
    server.shutdown().await;
}

/// A connection between two hosts with the sealing worker on and a key that rotates
/// every 500 datagrams; stream 1 (ordered) is open on the client.
async fn worker_pair() -> (Host, Host, horde_net::Connection, horde_net::Connection) {
    let policy = RekeyPolicy {
        rekey_after_messages: 500,
        ..RekeyPolicy::default()
    };
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let mut scfg = HostConfig::new(sk.clone(), vec![InterfaceConfig::new(lo())]);
    scfg.allowed_peers = vec![*ck.public()];
    scfg.rekey = policy;
    scfg.seal_worker = true;
    let server = Host::bind(scfg).await.unwrap();
    let mut ccfg = HostConfig::new(
        ck,
        vec![InterfaceConfig::new(lo()), InterfaceConfig::new(lo())],
    );
    ccfg.rekey = policy;
    ccfg.seal_worker = true;
    let client = Host::bind(ccfg).await.unwrap();
    let mut listener = server.listen(5);
    let to = server.local_addrs()[0];
    let conn = client
        .connect(ConnectConfig {
            peer: *sk.public(),
            service: 5,
            channels: (0..2)
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
    let accepted = listener.accept().await.unwrap();
    let stream = StreamConfig {
        ordered: true,
        ..StreamConfig::default()
    };
    conn.open_stream(1, stream).await.unwrap();
    (client, server, conn, accepted)
}

/// The next `n` ADUs from `events` are `from..from + n`, whole and in order.
async fn expect_adus(events: &mut horde_net::EventReceiver, from: u32, n: u32) {
    let mut next = from;
    while next < from + n {
        match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
            Ok(Some(Event::Received { payload, .. })) => {
                let got = u32::from_le_bytes(payload[..4].try_into().unwrap());
                assert_eq!(got, next, "in order");
                assert_eq!(payload, adu(next), "ADU {next} intact");
                next += 1;
            }
            Ok(Some(_)) => {}
            other => panic!("delivery stalled after {next} ADUs: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickle_is_sealed_on_the_driver_and_a_burst_on_the_worker_in_order_across_rekeys() {
    const TRICKLE: u32 = 600;
    const BURST: u32 = 6_000;
    let (client, server, conn, accepted) = worker_pair().await;
    let (handle, _client_events) = conn.split();
    let (_h, mut server_events) = accepted.split();

    // One ADU at a time, each delivered before the next leaves: every flush has a
    // datagram or two, and a hand-off would only add two wake-ups.
    for i in 0..TRICKLE {
        handle.send_adu_nowait(1, adu(i), Fields::new()).unwrap();
        expect_adus(&mut server_events, i, 1).await;
    }
    let trickle = client.stats().await.unwrap();
    assert_eq!(
        trickle.sealed_off_thread, 0,
        "a trickle never goes to the worker"
    );
    assert!(
        trickle.sealed_on_driver >= u64::from(TRICKLE),
        "the trickle was sealed on the driver: {}",
        trickle.sealed_on_driver
    );
    let rotated = handle
        .key_status()
        .await
        .unwrap()
        .expect("keys")
        .send_generation;
    assert!(rotated >= 1, "the key rotated during the trickle");

    // Then a burst: full batches go to the worker while it keeps up; the ends of
    // flushes and batches made while it is behind are sealed on the driver, and all of
    // them go out in the order they were numbered.
    let sending = handle.clone();
    let sender = tokio::spawn(async move {
        let mut i = TRICKLE;
        while i < TRICKLE + BURST {
            sending.writable(1).await.unwrap();
            for _ in 0..256.min(TRICKLE + BURST - i) {
                sending.send_adu_nowait(1, adu(i), Fields::new()).unwrap();
                i += 1;
            }
        }
    });
    expect_adus(&mut server_events, TRICKLE, BURST).await;
    sender.await.unwrap();

    let burst = client.stats().await.unwrap();
    let on_worker = burst.sealed_off_thread;
    let on_driver = burst.sealed_on_driver - trickle.sealed_on_driver;
    assert!(
        on_worker > u64::from(BURST) / 4,
        "the burst went mostly to the worker: {on_worker} of {BURST}"
    );
    assert!(on_driver > 0, "and partly stayed on the driver");
    let keys = handle.key_status().await.unwrap().expect("keys");
    assert!(
        keys.send_generation >= rotated + 8,
        "the sending key rotated {} times in the burst",
        keys.send_generation - rotated
    );
    let ss = server.stats().await.unwrap();
    assert_eq!(ss.dropped.total(), 0, "{:?}", ss.dropped);
    assert_eq!(handle.stats().await.unwrap().adus_lost, 0);
    client.shutdown().await;
    server.shutdown().await;
}
