//! Messages across a reconnect: the receiver crashes while messages are in flight and
//! comes back on the same address. Every message still ends in exactly one fate, and
//! every message the sender hears was delivered arrived whole at one receiver or the
//! other: a message whose first pieces went to the receiver that crashed is sent again
//! from its first byte.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::lo;
use horde_crypto::{Keypair, PublicKey};
use horde_net::{EndpointConfig, HostConfig, InterfaceConfig, MessageEndpoint, MessageNotice};
use horde_proto::message::{Fate, MessageEvent, MessageId};
use horde_proto::Event;
use tokio::sync::mpsc;

const SERVICE: u32 = 4;
const MESSAGES: usize = 12;
const SIZE: usize = 1 << 20;

/// A receiver host with a message endpoint on a runtime of its own, so that dropping the
/// runtime kills it as a crash would: no Close, sockets gone. Whole messages go to `tx`.
fn receiver_process(
    key: &Keypair,
    bind: SocketAddr,
    allowed: PublicKey,
    tx: mpsc::UnboundedSender<(MessageId, Bytes)>,
) -> (tokio::runtime::Runtime, SocketAddr) {
    let mut cfg = HostConfig::new(key.clone(), vec![InterfaceConfig::new(bind)]);
    cfg.allowed_peers = vec![allowed];
    common::host_process(cfg, SERVICE, move |conn| {
        let tx = tx.clone();
        async move {
            let mut endpoint = MessageEndpoint::new(conn, EndpointConfig::default())
                .await
                .unwrap();
            while let Some(notice) = endpoint.next_notice().await {
                if let MessageNotice::Received(m) = notice {
                    let _ = tx.send((m.id, m.payload));
                }
            }
        }
    })
}

fn payload(i: usize) -> Bytes {
    Bytes::from(
        (0..SIZE)
            .map(|k| (k as u8) ^ (i as u8))
            .collect::<Vec<u8>>(),
    )
}

#[test]
fn every_message_ends_once_and_each_delivered_one_arrives_whole_across_a_receiver_crash() {
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let (got_tx, mut got) = mpsc::unbounded_channel();
    let (old_receiver, addr) = receiver_process(&sk, lo(), *ck.public(), got_tx.clone());

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (host, mut sender, sent, mut arrived) = rt.block_on(async {
        let (host, conn) = common::persistent_client(&ck, &sk, addr, SERVICE).await;
        let sender = MessageEndpoint::new(conn, EndpointConfig::default())
            .await
            .unwrap();
        let sent: HashMap<MessageId, Bytes> = (0..MESSAGES)
            .map(|i| {
                let bytes = payload(i);
                (sender.send(0, None, bytes.clone()).unwrap(), bytes)
            })
            .collect();

        // The receiver crashes once two messages have arrived whole, while the pieces
        // of the next ones are on the way.
        let mut arrived: Vec<(MessageId, Bytes)> = Vec::new();
        while arrived.len() < 2 {
            let m = tokio::time::timeout(Duration::from_secs(10), got.recv())
                .await
                .expect("two messages before the crash")
                .unwrap();
            arrived.push(m);
        }
        (host, sender, sent, arrived)
    });
    old_receiver.shutdown_background();
    // It is back on its address 300 ms later.
    std::thread::sleep(Duration::from_millis(300));
    let (new_receiver, _) = receiver_process(&sk, addr, *ck.public(), got_tx);

    rt.block_on(async {
        let mut fates: HashMap<MessageId, Vec<Fate>> = HashMap::new();
        let mut reconnected = false;
        let end = tokio::time::Instant::now() + Duration::from_secs(30);
        while fates.len() < MESSAGES {
            let notice = tokio::time::timeout_at(end, sender.next_notice())
                .await
                .unwrap_or_else(|_| panic!("fates of only {} messages", fates.len()))
                .expect("the endpoint ended");
            match notice {
                MessageNotice::Sender(MessageEvent::Finished { id, fate, .. }) => {
                    fates.entry(id).or_default().push(fate)
                }
                MessageNotice::Connection(Event::Reconnecting { .. }) => reconnected = true,
                MessageNotice::SendFailed { id, error } => panic!("{id}: {error}"),
                _ => {}
            }
        }
        assert!(reconnected, "the sender never lost its session");
        // Let the last deliveries reach the test, and late fates show up.
        tokio::time::sleep(Duration::from_millis(300)).await;
        while let Ok(m) = got.try_recv() {
            arrived.push(m);
        }
        while let Ok(Some(notice)) =
            tokio::time::timeout(Duration::from_millis(50), sender.next_notice()).await
        {
            if let MessageNotice::Sender(MessageEvent::Finished { id, fate, .. }) = notice {
                fates.entry(id).or_default().push(fate);
            }
        }
        for (id, m) in &fates {
            assert_eq!(m.len(), 1, "message {id}: fates {m:?}");
        }
        let whole: HashMap<MessageId, usize> =
            arrived.iter().fold(HashMap::new(), |mut n, (id, bytes)| {
                assert_eq!(bytes, &sent[id], "message {id} arrived changed");
                *n.entry(*id).or_default() += 1;
                n
            });
        for (id, fate) in &fates {
            assert_eq!(fate, &[Fate::Delivered], "message {id}");
            assert!(
                whole.contains_key(id),
                "message {id} is delivered for the sender but never arrived whole"
            );
        }
        // A message whose last acks died with the old receiver is sent again whole.
        let twice = whole.values().filter(|&&n| n > 1).count();
        eprintln!("{MESSAGES} messages of {SIZE} bytes delivered; {twice} arrived twice");
        host.shutdown().await;
    });
    new_receiver.shutdown_background();
}
