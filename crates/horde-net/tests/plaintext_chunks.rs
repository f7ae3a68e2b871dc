//! Decrypted payloads are cut from 256 KiB chunks. Over real sockets, megabytes of ADUs
//! that the application reads and drops go through a handful of chunks, used again and
//! again (a host that allocated and freed a chunk every few seconds saw its resident
//! memory creep up in a long run).

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::lo;
use horde_crypto::Keypair;
use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, InterfaceConfig};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, Event, StreamConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_read_and_dropped_reuse_a_few_chunks() {
    let ck = Keypair::generate();
    let sk = Keypair::generate();
    let mut scfg = HostConfig::new(sk.clone(), vec![InterfaceConfig::new(lo())]);
    scfg.allowed_peers = vec![*ck.public()];
    let server = Host::bind(scfg).await.unwrap();
    let client = Host::bind(HostConfig::new(ck, vec![InterfaceConfig::new(lo())]))
        .await
        .unwrap();
    let mut listener = server.listen(5);
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
    let (handle, mut client_events) = conn.split();
    let (_h, mut server_events) = accepted.split();

    // 4 MB in 1 s: sixteen chunks' worth.
    const N: u32 = 4000;
    const ADU: usize = 1000;
    let sender = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_micros(250));
        for i in 0..N {
            tick.tick().await;
            let mut p = vec![0u8; ADU];
            p[..4].copy_from_slice(&i.to_le_bytes());
            handle
                .send_adu_nowait(1, Bytes::from(p), Fields::new())
                .unwrap();
        }
        handle
    });
    let mut got = 0usize;
    while got < N as usize {
        match tokio::time::timeout(Duration::from_secs(5), server_events.recv()).await {
            Ok(Some(Event::Received { payload, .. })) => {
                assert_eq!(payload.len(), ADU);
                got += 1;
            }
            Ok(Some(_)) => {}
            other => panic!("delivery stalled after {got} ADUs: {other:?}"),
        }
    }
    let _handle = sender.await.unwrap();
    let mut acked = 0;
    while acked < N {
        match tokio::time::timeout(Duration::from_secs(5), client_events.recv()).await {
            Ok(Some(Event::Ack { .. })) => acked += 1,
            Ok(Some(_)) => {}
            other => panic!("acks stalled after {acked}: {other:?}"),
        }
    }

    let rx = server.stats().await.unwrap();
    assert!(rx.bytes_in > 4_000_000, "{}", rx.bytes_in);
    assert!(
        rx.plaintext_chunks <= 4,
        "receiver: {} chunks allocated, {} reused",
        rx.plaintext_chunks,
        rx.plaintext_chunks_reused
    );
    assert!(rx.plaintext_chunks_reused >= 12, "{rx:?}");
    client.shutdown().await;
    server.shutdown().await;
}
