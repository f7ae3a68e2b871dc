//! A sender and a receiver in one process over two loopback channels: open a stream,
//! send ADUs with header fields, steer them with a hose objective, and read events.
//!
//!     cargo run -p horde-net --example telemetry

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_crypto::Keypair;
use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, InterfaceConfig};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, Event, StreamConfig};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let lo = "127.0.0.1:0".parse()?;
    let (sender_key, receiver_key) = (Keypair::generate(), Keypair::generate());

    // The receiver accepts the sender's key and listens on service 7.
    let mut rcfg = HostConfig::new(receiver_key.clone(), vec![InterfaceConfig::new(lo)]);
    rcfg.allowed_peers = vec![*sender_key.public()];
    let receiver = Host::bind(rcfg).await?;
    let mut listener = receiver.listen(7);

    // The sender has two interfaces, one channel on each.
    let sender = Host::bind(HostConfig::new(
        sender_key,
        vec![InterfaceConfig::new(lo), InterfaceConfig::new(lo)],
    ))
    .await?;
    let conn = sender
        .connect(ConnectConfig {
            peer: *receiver_key.public(),
            service: 7,
            channels: (0..2)
                .map(|i| ChannelTarget {
                    interface: i,
                    remote: receiver.local_addrs()[0],
                    config: ChannelConfig::default(),
                })
                .collect(),
            handshake_timeout: Duration::from_secs(5),
        })
        .await?;
    let mut incoming = listener.accept().await.ok_or("no connection")?;

    // A stream capped at 500 kbit/s, and an objective: alarms want low latency.
    conn.open_stream(
        1,
        StreamConfig {
            max_kbps: Some(500.0),
            ..StreamConfig::default()
        },
    )
    .await?;
    let objective = horde_hose::compile(
        r#"objective {
             context { adu:a { (stream_id == 1) && (kind == "alarm") } }
             goal { expected(a::latency) < 100 }
             utility { a { 100 - expected(a::latency) } }
           }"#,
    )
    .map_err(|e| format!("{e:?}"))?;
    conn.inject_objective(Arc::new(objective)).await?;

    for i in 0..20u32 {
        let mut fields = Fields::new();
        fields.set(
            "kind",
            if i % 5 == 0 {
                "alarm".into()
            } else {
                "sample".into()
            },
        );
        conn.send_adu(1, Bytes::from(format!("reading {i}")), fields)
            .await?;
    }

    let mut acked = 0;
    let (handle, mut events) = conn.split();
    while acked < 20 {
        match events.recv().await {
            Some(Event::Ack {
                stream_seq,
                rtt,
                channel,
                ..
            }) => {
                acked += 1;
                println!("ack  seq {stream_seq:2} on channel {channel}, rtt {rtt:?}");
            }
            Some(Event::Nack {
                stream_seq, reason, ..
            }) => println!("nack seq {stream_seq} ({reason:?})"),
            Some(Event::Throttle { rate, .. }) => {
                println!("allocation now {:.0} kbit/s", rate * 8.0 / 1e3)
            }
            Some(_) => {}
            None => break,
        }
    }
    while let Some(e) = incoming.try_event() {
        if let Event::Received { payload, .. } = e {
            println!("received {:?}", String::from_utf8_lossy(&payload));
        }
    }
    for m in handle.latency_modes().await? {
        println!(
            "channel {}: mean RTT {:.2} ms, variance {:.3} ms²",
            m.channel, m.mean_ms, m.variance_ms2
        );
    }
    sender.shutdown().await;
    receiver.shutdown().await;
    Ok(())
}
