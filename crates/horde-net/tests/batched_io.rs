//! The batched I/O path over real loopback sockets: with offload on, bursts leave as UDP
//! GSO messages and arrive as GRO reads; with it off (the fallback), every datagram is
//! its own message but sends and reads are still batched. Either way every ADU arrives
//! intact.

mod common;

use common::lo;

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use horde_crypto::Keypair;
use horde_net::{Host, HostConfig, HostStats, InterfaceConfig};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, Event, StreamConfig};

const ADUS: u32 = 3000;
const SIZE: usize = 1200;

fn payload(i: u32) -> Bytes {
    let mut p = vec![(i % 251) as u8; SIZE];
    p[..4].copy_from_slice(&i.to_be_bytes());
    Bytes::from(p)
}

/// Send a burst over two channels; returns (sender stats, receiver stats).
async fn burst(offload: bool) -> (HostStats, HostStats) {
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let mut scfg = HostConfig::new(sk.clone(), vec![InterfaceConfig::new(lo())]);
    scfg.allowed_peers = vec![*ck.public()];
    scfg.udp_offload = offload;
    let server = Host::bind(scfg).await.unwrap();
    let mut ccfg = HostConfig::new(ck, vec![InterfaceConfig::new(lo()); 2]);
    ccfg.udp_offload = offload;
    let client = Host::bind(ccfg).await.unwrap();
    let remotes = vec![server.local_addrs()[0]; 2];
    let (conn, mut accepted) = common::connect_pair(
        &client,
        &server,
        *sk.public(),
        remotes,
        ChannelConfig::default(),
    )
    .await;
    let stream = StreamConfig {
        max_queue_bytes: 16 << 20,
        ..StreamConfig::default()
    };
    conn.open_stream(1, stream).await.unwrap();
    for i in 0..ADUS {
        conn.send_adu_nowait(1, payload(i), Fields::new()).unwrap();
    }
    let mut got = BTreeSet::new();
    let recv = async {
        while got.len() < ADUS as usize {
            match accepted.next_event().await {
                Some(Event::Received { payload: p, .. }) => {
                    let i = u32::from_be_bytes(p[..4].try_into().unwrap());
                    assert_eq!(p, payload(i), "ADU {i} arrived intact");
                    got.insert(i);
                }
                Some(_) => {}
                None => break,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), recv)
        .await
        .expect("every ADU arrives");
    assert_eq!(got.len(), ADUS as usize);
    let stats = (client.stats().await.unwrap(), server.stats().await.unwrap());
    client.shutdown().await;
    server.shutdown().await;
    stats
}

fn kernel_has_gso() -> bool {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    quinn_udp::UdpSocketState::new((&s).into())
        .map(|st| st.max_gso_segments() > 1)
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_leave_as_gso_messages_and_arrive_as_gro_reads() {
    let (tx, rx) = burst(true).await;
    assert!(
        tx.datagrams_out > 2 * tx.send_calls,
        "sends batched: {tx:?}"
    );
    if kernel_has_gso() {
        assert!(tx.gso_messages > 0, "{tx:?}");
        assert!(rx.gro_reads > 0, "{rx:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_offload_every_datagram_is_a_message_and_still_batched() {
    let (tx, rx) = burst(false).await;
    assert_eq!(tx.gso_messages, 0, "{tx:?}");
    assert_eq!(rx.gro_reads, 0, "{rx:?}");
    assert!(
        tx.datagrams_out > 2 * tx.send_calls,
        "sendmmsg batches: {tx:?}"
    );
    assert!(rx.datagrams_in > rx.recv_calls, "recvmmsg batches: {rx:?}");
}
