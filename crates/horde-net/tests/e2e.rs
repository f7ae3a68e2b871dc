//! Two hosts over real UDP sockets on loopback, with encryption.

mod common;

use common::lo;

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use horde_crypto::Keypair;
use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, InterfaceConfig};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, Event, StreamConfig};

fn host(
    keypair: Keypair,
    interfaces: Vec<InterfaceConfig>,
    allowed: Vec<horde_crypto::PublicKey>,
) -> HostConfig {
    let mut cfg = HostConfig::new(keypair, interfaces);
    cfg.allowed_peers = allowed;
    cfg
}

async fn pair(channels: usize) -> (Host, Host, horde_net::Connection, horde_net::Connection) {
    let ck = Keypair::generate();
    let sk = Keypair::generate();
    let server = Host::bind(host(
        sk.clone(),
        vec![InterfaceConfig::new(lo())],
        vec![*ck.public()],
    ))
    .await
    .unwrap();
    let client = Host::bind(host(
        ck,
        (0..channels).map(|_| InterfaceConfig::new(lo())).collect(),
        vec![],
    ))
    .await
    .unwrap();
    let remotes = vec![server.local_addrs()[0]; channels];
    let (conn, accepted) = common::connect_pair(
        &client,
        &server,
        *sk.public(),
        remotes,
        ChannelConfig::default(),
    )
    .await;
    (client, server, conn, accepted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adus_cross_real_sockets_and_every_one_is_accounted_for() {
    let (client, server, mut conn, mut accepted) = pair(3).await;
    conn.open_stream(1, StreamConfig::default()).await.unwrap();
    // 400-byte ADUs: 500 of them need far more than one channel's initial window, so
    // every channel that works carries some. (Tiny ADUs pack by the dozen into a packet,
    // and one channel's first window could take them all; 200 kB stays within the
    // stream's send queue.)
    for i in 0..500u32 {
        let mut f = Fields::new();
        f.set("n", i64::from(i).into());
        let mut payload = vec![0u8; 400];
        payload[..4].copy_from_slice(&i.to_be_bytes());
        conn.send_adu_nowait(1, Bytes::from(payload), f).unwrap();
    }
    let mut got = BTreeSet::new();
    let recv = async {
        while got.len() < 500 {
            match accepted.next_event().await {
                Some(Event::Received { payload, .. }) => {
                    got.insert(u32::from_be_bytes(payload[..4].try_into().unwrap()));
                }
                Some(_) => {}
                None => break,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), recv)
        .await
        .expect("all ADUs arrive");
    assert_eq!(got, (0..500).collect());

    let mut acked = 0;
    let mut channels = BTreeSet::new();
    let acks = async {
        while acked < 500 {
            match conn.next_event().await {
                Some(Event::Ack { channel, rtt, .. }) => {
                    assert!(rtt < Duration::from_millis(500));
                    channels.insert(channel);
                    acked += 1;
                }
                Some(Event::Nack { .. }) => panic!("no loss on loopback"),
                Some(_) => {}
                None => break,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), acks)
        .await
        .expect("all ADUs acked");
    assert_eq!(channels.len(), 3, "striped over every channel");
    let modes = conn.latency_modes().await.unwrap();
    assert_eq!(modes.len(), 3);
    let stats = server.stats().await.unwrap();
    assert_eq!(stats.dropped.total(), 0);
    client.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_initiators_are_refused() {
    let sk = Keypair::generate();
    let server = Host::bind(host(
        sk.clone(),
        vec![InterfaceConfig::new(lo())],
        vec![*Keypair::generate().public()],
    ))
    .await
    .unwrap();
    let stranger = Host::bind(host(
        Keypair::generate(),
        vec![InterfaceConfig::new(lo())],
        vec![],
    ))
    .await
    .unwrap();
    let _l = server.listen(9);
    let r = stranger
        .connect(ConnectConfig {
            peer: *sk.public(),
            service: 9,
            channels: vec![ChannelTarget {
                interface: 0,
                remote: server.local_addrs()[0],
                config: ChannelConfig::default(),
            }],
            handshake_timeout: Duration::from_millis(1200),
        })
        .await;
    assert!(
        matches!(
            r,
            Err(horde_net::NetError::HandshakeTimeout(
                horde_net::HandshakeSeen {
                    initiations_sent: 1..,
                    cookie_replies: 0,
                    bad_responses: 0,
                }
            ))
        ),
        "{:?}",
        r.err()
    );
    let stats = server.stats().await.unwrap();
    assert!(
        stats.dropped.get(horde_crypto::DropReason::NotAllowed) >= 2,
        "{stats:?}"
    );
}

/// A stream with loss recovery: both ends' counters reach the application through the
/// connection (what the metrics export as recovery overhead); a connection whose streams
/// use none has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_counters_reach_both_ends_and_a_plain_connection_has_none() {
    use horde_proto::recovery::{RecoveryConfig, RecoveryMode};

    let (client, server, conn, mut accepted) = pair(2).await;
    let fec = StreamConfig {
        recovery: RecoveryConfig::new(RecoveryMode::Fec { percent: 25.0 }),
        ..StreamConfig::default()
    };
    conn.open_stream(1, fec).await.unwrap();
    for i in 0..200u32 {
        let mut payload = vec![0u8; 300];
        payload[..4].copy_from_slice(&i.to_be_bytes());
        conn.send_adu_nowait(1, Bytes::from(payload), Fields::new())
            .unwrap();
    }
    let mut got = 0;
    let recv = async {
        while got < 200 {
            match accepted.next_event().await {
                Some(Event::Received { .. }) => got += 1,
                Some(_) => {}
                None => break,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), recv)
        .await
        .expect("all ADUs arrive");
    // Coded ADUs go after the data they cover, some after the last data ADU arrived:
    // read the sender's counts once the last is sent, or after 5 s.
    let end = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut sent = conn.recovery_stats().await.unwrap().expect("sender counts");
    while sent.coded_sent < 45 && tokio::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
        sent = conn.recovery_stats().await.unwrap().expect("sender counts");
    }
    assert_eq!(sent.data_sent, 200);
    // One coded ADU after every four data ADUs.
    assert!((45..=50).contains(&sent.coded_sent), "{sent:?}");
    assert!(
        sent.coded_bytes > 0 && sent.data_bytes >= 200 * 300,
        "{sent:?}"
    );
    let got = accepted
        .recovery_stats()
        .await
        .unwrap()
        .expect("receiver counts");
    // Over two channels a data ADU may be rebuilt before its own copy arrives (then
    // counted again as a duplicate), so count what was delivered.
    assert_eq!(got.delivered, 200, "{got:?}");

    let (plain_client, plain_server, plain, _plain_accepted) = pair(1).await;
    plain.open_stream(1, StreamConfig::default()).await.unwrap();
    assert_eq!(plain.recovery_stats().await.unwrap(), None);
    for host in [client, server, plain_client, plain_server] {
        host.shutdown().await;
    }
}
