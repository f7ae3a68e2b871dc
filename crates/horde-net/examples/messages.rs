//! Messages at four priorities with deadlines over three emulated links whose summed rate
//! halves midway. Prints one JSON line per admitted message when it meets its fate:
//!
//!     {"id":7,"priority":2,"bytes":30000,"deadline_ms":1500,"fate":"delivered","at_ms":412}
//!
//! `at_ms` counts from submission. Early callbacks are answered by priority: levels 0–2
//! continue (the message still tries, and ends `early` if it misses), level 3 is cancelled
//! at once. Refused messages and a summary go to stderr.
//!
//!     cargo run --release -p horde-net --example messages

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use horde_crypto::Keypair;
use horde_emu::{Emulator, EmulatorConfig};
use horde_net::{
    ChannelTarget, ConnectConfig, EndpointConfig, Host, HostConfig, InterfaceConfig,
    MessageEndpoint, MessageNotice,
};
use horde_proto::message::{Fate, MessageError, MessageEvent, MessageId};
use horde_proto::ChannelConfig;

/// (name, kbit/s before and after the drop, one-way delay ms).
const LINKS: [(&str, f64, f64, f64); 3] = [
    ("wifi", 2000.0, 1000.0, 15.0),
    ("lte", 1500.0, 750.0, 40.0),
    ("sat", 1000.0, 500.0, 120.0),
];
const DROP_AT_S: f64 = 8.0;
const SEND_FOR: Duration = Duration::from_secs(14);
const ROUND: Duration = Duration::from_millis(250);
/// (bytes, deadline ms) per priority 0..4, one of each per round: about 490 kB/s offered
/// against 560 kB/s of links before the drop and 280 kB/s after it.
const CLASSES: [(usize, u64); 4] = [
    (2_000, 300),
    (10_000, 600),
    (30_000, 1_500),
    (80_000, 4_000),
];

struct Sent {
    priority: u8,
    bytes: usize,
    deadline_ms: u64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let lo = "127.0.0.1:0".parse()?;
    let (sender_key, receiver_key) = (Keypair::generate(), Keypair::generate());
    let mut rcfg = HostConfig::new(receiver_key.clone(), vec![InterfaceConfig::new(lo)]);
    rcfg.allowed_peers = vec![*sender_key.public()];
    let receiver = Host::bind(rcfg).await?;
    let mut listener = receiver.listen(7);
    let sender = Host::bind(HostConfig::new(
        sender_key,
        LINKS.iter().map(|_| InterfaceConfig::new(lo)).collect(),
    ))
    .await?;

    // Each link through the emulator: the uplink's rate steps down at DROP_AT_S.
    let server = receiver.local_addrs()[0];
    let toml: String = LINKS
        .iter()
        .map(|(name, before, after, delay)| {
            format!(
                "[[channels]]\nname = \"{name}\"\nlisten = \"127.0.0.1:0\"\nforward_to = \"{server}\"\n\
                 up = {{ rate = {{ model = \"steps\", steps = [{{ at_s = 0, kbps = {before} }}, {{ at_s = {DROP_AT_S}, kbps = {after} }}] }}, \
                 delay = {{ model = \"constant\", ms = {delay} }}, buffer_bytes = 40000 }}\n\
                 down = {{ delay = {{ model = \"constant\", ms = {delay} }} }}\n"
            )
        })
        .collect();
    let emu_cfg = EmulatorConfig::from_toml(
        &format!("seed = 1\n{toml}"),
        "messages",
        &PathBuf::from("."),
    )?;
    let emu = Emulator::start(&emu_cfg)?;

    let conn = sender
        .connect(ConnectConfig {
            peer: *receiver_key.public(),
            service: 7,
            channels: LINKS
                .iter()
                .enumerate()
                .map(|(interface, (name, ..))| {
                    Ok(ChannelTarget {
                        interface,
                        remote: emu.client_addr(name).ok_or("no emulated link")?,
                        config: ChannelConfig::default(),
                    })
                })
                .collect::<Result<_, &str>>()?,
            handshake_timeout: Duration::from_secs(5),
        })
        .await?;
    let incoming = listener.accept().await.ok_or("no connection")?;
    let mut endpoint = MessageEndpoint::new(conn, EndpointConfig::default()).await?;
    let mut peer = MessageEndpoint::new(incoming, EndpointConfig::default()).await?;
    let received = tokio::spawn(async move {
        let mut count = 0usize;
        while let Some(notice) = peer.next_notice().await {
            if matches!(notice, MessageNotice::Received(_)) {
                count += 1;
            }
        }
        count
    });

    // Admission needs the channels' rates: wait for the first estimates.
    while endpoint.estimates().iter().all(|e| e.rate <= 0.0) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut sent: HashMap<MessageId, Sent> = HashMap::new();
    let mut refused = [0usize; 4];
    let mut fates: HashMap<Fate, usize> = HashMap::new();
    let start = tokio::time::Instant::now();
    let mut next_round = start;
    let mut sending = true;
    while sending || sent.len() > fates.values().sum::<usize>() {
        if sending && tokio::time::Instant::now() >= next_round {
            for (priority, &(bytes, deadline_ms)) in CLASSES.iter().enumerate() {
                let payload = Bytes::from(vec![priority as u8; bytes]);
                let within = Duration::from_millis(deadline_ms);
                match endpoint.send(priority as u8, Some(within), payload) {
                    Ok(id) => {
                        sent.insert(
                            id,
                            Sent {
                                priority: priority as u8,
                                bytes,
                                deadline_ms,
                            },
                        );
                    }
                    Err(MessageError::Refused(_)) => refused[priority] += 1,
                    Err(e) => return Err(e.into()),
                }
            }
            next_round += ROUND;
            sending = start.elapsed() < SEND_FOR;
        }
        let wait = next_round.max(tokio::time::Instant::now() + Duration::from_millis(1));
        let notice = tokio::select! {
            n = endpoint.next_notice() => n.ok_or("connection gone")?,
            _ = tokio::time::sleep_until(wait) => continue,
        };
        match notice {
            MessageNotice::Sender(MessageEvent::Early { id, .. }) => {
                if sent.get(&id).is_some_and(|m| m.priority == 3) {
                    endpoint.cancel(id)?;
                } else {
                    endpoint.resume(id)?;
                }
            }
            MessageNotice::Sender(MessageEvent::Finished {
                id,
                fate,
                at,
                submitted,
            }) => {
                *fates.entry(fate).or_default() += 1;
                if let Some(m) = sent.get(&id) {
                    println!(
                        "{{\"id\":{},\"priority\":{},\"bytes\":{},\"deadline_ms\":{},\"fate\":\"{fate}\",\"at_ms\":{}}}",
                        id.0,
                        m.priority,
                        m.bytes,
                        m.deadline_ms,
                        (at - submitted).as_millis()
                    );
                }
            }
            MessageNotice::SendFailed { id, error } => eprintln!("{id}: {error}"),
            _ => {}
        }
    }
    eprintln!(
        "admitted {}, refused per priority {refused:?}, fates {fates:?}, rate drop at {DROP_AT_S} s",
        sent.len()
    );
    drop(endpoint);
    sender.shutdown().await;
    receiver.shutdown().await;
    eprintln!("the receiver got {} whole messages", received.await?);
    Ok(())
}
