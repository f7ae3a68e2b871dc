//! The sealing worker: transfers over real loopback sockets with AES-GCM on a thread of
//! its own and the sending key rotating many times underway. Every ADU must arrive once
//! and intact, and the receiver must drop nothing (a datagram sealed under the wrong key
//! or with a reused counter would fail its tag or the replay check). Each channel's
//! datagrams must leave in the order they were numbered: a channel whose packets were
//! reordered on loopback would declare some lost and see them acked late. (Across
//! channels the runtime sends per socket, worker or not, so ADUs of one stream may
//! arrive out of order; the streams here are unordered and every ADU is checked.)
//! The hand-off is adaptive: a trickle is sealed on the driver, a bulk transfer partly
//! on the worker, and batches sealed on either interleave on the wire in order.

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
async fn a_bulk_transfer_sealed_on_the_worker_arrives_whole_and_in_channel_order_across_rekeys() {
    // A new sending key every 1000 datagrams: a dozen rotations in this transfer.
    let (client, server, conn, accepted) = worker_pair(1000).await;
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
    expect_adus(&mut server_events, 0, ADUS).await;
    sender.await.unwrap();

    let keys = handle.key_status().await.unwrap().expect("keys");
    assert!(
        keys.send_generation >= 8,
        "the sending key rotated {} times",
        keys.send_generation
    );
    let (cs, ss) = (client.stats().await.unwrap(), server.stats().await.unwrap());
    assert!(
        cs.sealed_off_thread > 0,
        "full batches went to the worker: {}",
        cs.sealed_off_thread
    );
    assert_eq!(ss.dropped.total(), 0, "{:?}", ss.dropped);
    let st = handle.stats().await.unwrap();
    assert_eq!((st.adus_lost, st.adus_dropped), (0, 0));
    every_channel_in_order(&handle).await;
    client.shutdown().await;
    server.shutdown().await;
}

/// A connection between two hosts with the sealing worker on and a key that rotates
/// every `rekey_after_messages` datagrams; stream 1 (unordered) is open on the client.
async fn worker_pair(
    rekey_after_messages: u64,
) -> (Host, Host, horde_net::Connection, horde_net::Connection) {
    let policy = RekeyPolicy {
        rekey_after_messages,
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
    // Unordered: the checks below are per ADU and per channel, not the stream's
    // reordering across channels.
    let stream = StreamConfig {
        ordered: false,
        // Room for a whole burst: none of it is dropped for a full queue.
        max_queue_bytes: 64 << 20,
        ..StreamConfig::default()
    };
    conn.open_stream(1, stream).await.unwrap();
    (client, server, conn, accepted)
}

/// The next `n` ADUs from `events` are `from..from + n`, each once and intact.
async fn expect_adus(events: &mut horde_net::EventReceiver, from: u32, n: u32) {
    let mut seen = vec![false; n as usize];
    let mut got = 0;
    while got < n {
        match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
            Ok(Some(Event::Received { payload, .. })) => {
                let i = u32::from_le_bytes(payload[..4].try_into().unwrap());
                assert!((from..from + n).contains(&i), "ADU {i} not expected now");
                assert!(!seen[(i - from) as usize], "ADU {i} delivered twice");
                assert_eq!(payload, adu(i), "ADU {i} intact");
                seen[(i - from) as usize] = true;
                got += 1;
            }
            Ok(Some(_)) => {}
            other => panic!("delivery stalled after {got} of {n} ADUs: {other:?}"),
        }
    }
}

/// No channel declared a packet lost or saw one acknowledged after it had given up on
/// it: on loopback either means its datagrams left out of order.
async fn every_channel_in_order(handle: &horde_net::ConnectionHandle) {
    for c in handle.channels().await.unwrap() {
        assert_eq!(
            (c.stats.lost, c.stats.late_acked),
            (0, 0),
            "channel {:?}: packets lost, late-acked",
            c.id
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickle_is_sealed_on_the_driver_and_a_burst_on_both_in_channel_order_across_rekeys() {
    const TRICKLE: u32 = 600;
    const BURST: u32 = 6_000;
    let (client, server, conn, accepted) = worker_pair(500).await;
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
        on_worker > 0,
        "full batches of the burst went to the worker: {on_worker} of {BURST}"
    );
    assert!(
        on_driver > 0,
        "and the ends of flushes stayed on the driver"
    );
    let keys = handle.key_status().await.unwrap().expect("keys");
    assert!(
        keys.send_generation >= rotated + 8,
        "the sending key rotated {} times in the burst",
        keys.send_generation - rotated
    );
    let ss = server.stats().await.unwrap();
    assert_eq!(ss.dropped.total(), 0, "{:?}", ss.dropped);
    let st = handle.stats().await.unwrap();
    assert_eq!((st.adus_lost, st.adus_dropped), (0, 0));
    every_channel_in_order(&handle).await;
    client.shutdown().await;
    server.shutdown().await;
}
