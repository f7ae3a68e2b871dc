//! Horde's side of Table 2 over real sockets: the message endpoint that ships
//! (`horde_net::MessageEndpoint` on an encrypted connection), both hosts in this process
//! on one clock, the sender's channels through `horde-emu` links in real time. Each link
//! is the same `horde-links` model, trace, send queue and delays as the `horde shell` link
//! that NAI-TCP crosses; the UDP emulator stands in for the namespace, so no root is
//! needed. The application is [`super::replay::Replay`]'s: each message at its time with
//! its class's priority and its timer as the deadline, cancelled at its early callback;
//! it counts as delivered when the receiver has it whole within its timer.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use horde_crypto::Keypair;
use horde_emu::{ChannelConfig as EmuChannel, Emulator, EmulatorConfig, Stats};
use horde_links::LinkSpec;
use horde_net::{
    ChannelTarget, ConnectConfig, EndpointConfig, Host, HostConfig, InterfaceConfig,
    MessageEndpoint, MessageNotice,
};
use horde_proto::message::{AdmissionPolicy, MessageError, MessageEvent, MessageId, MessageSpec};
use horde_proto::ChannelConfig;
use tokio::time::Instant;

use super::workloads::{Arrival, Workload};

const SERVICE: u32 = 5;
/// How long the sender may wait for the channels' first rate estimates, which admission
/// needs, before the workload starts anyway.
const FIRST_ESTIMATE_LIMIT: Duration = Duration::from_secs(3);

/// What one workload's run over sockets gave.
pub struct SocketRun {
    /// Per class: messages in the workload, and those delivered by their timer.
    pub counts: Vec<(u64, u64)>,
    /// Bytes the sender offered to the links.
    pub wire_bytes: u64,
    /// Pieces the endpoint copied to its quick channel.
    pub copied_pieces: u64,
}

/// One emulated link: the client-to-server direction and the way back.
pub struct EmuLink {
    pub up: LinkSpec,
    pub down: LinkSpec,
}

/// Replays `arrivals` of `workload` over `links` (trace paths relative to `base_dir`) for
/// `stop` from the workload's start.
pub fn run(
    workload: Workload,
    arrivals: &[Arrival],
    links: &[EmuLink],
    base_dir: &Path,
    seed: u64,
    stop: Duration,
) -> Result<SocketRun> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("start the runtime for Horde's sockets")?;
    runtime.block_on(replay(workload, arrivals, links, base_dir, seed, stop))
}

/// A message the sender follows.
struct Sent {
    class: usize,
    submitted: Instant,
    timer: Duration,
}

async fn replay(
    workload: Workload,
    arrivals: &[Arrival],
    links: &[EmuLink],
    base_dir: &Path,
    seed: u64,
    stop: Duration,
) -> Result<SocketRun> {
    let lo: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    let (sender_key, receiver_key) = (Keypair::generate(), Keypair::generate());
    let mut receiver_config = HostConfig::new(receiver_key.clone(), vec![InterfaceConfig::new(lo)]);
    receiver_config.allowed_peers = vec![*sender_key.public()];
    let receiver = Host::bind(receiver_config)
        .await
        .context("bind the receiving host")?;
    let mut listener = receiver.listen(SERVICE);
    let sender = Host::bind(HostConfig::new(
        sender_key,
        links.iter().map(|_| InterfaceConfig::new(lo)).collect(),
    ))
    .await
    .context("bind the sending host")?;
    let server = receiver.local_addrs()[0];
    let names: Vec<String> = (0..links.len()).map(|i| format!("link{i}")).collect();
    let emu = Emulator::start(&EmulatorConfig {
        seed,
        timer: Default::default(),
        channels: links
            .iter()
            .zip(&names)
            .map(|(link, name)| EmuChannel {
                name: name.clone(),
                listen: lo,
                forward_to: server,
                up: link.up.clone(),
                down: Some(link.down.clone()),
                schedule: Vec::new(),
            })
            .collect(),
        base_dir: base_dir.to_path_buf(),
    })
    .context("start the emulated links")?;
    let channels = names
        .iter()
        .enumerate()
        .map(|(interface, name)| {
            Ok(ChannelTarget {
                interface,
                remote: emu
                    .client_addr(name)
                    .context("an emulated link's address")?,
                config: ChannelConfig::default(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let conn = sender
        .connect(ConnectConfig {
            peer: *receiver_key.public(),
            service: SERVICE,
            channels,
            handshake_timeout: Duration::from_secs(10),
        })
        .await
        .context("connect over the emulated links")?;
    let incoming = listener.accept().await.context("accept the connection")?;
    let mut config = EndpointConfig::default();
    config.messages.admission = AdmissionPolicy::ProtectSameLevel;
    let mut endpoint = MessageEndpoint::new(conn, config.clone()).await?;
    let mut peer = MessageEndpoint::new(incoming, config).await?;

    // When the receiver had each whole message.
    let arrived: Arc<Mutex<HashMap<MessageId, Instant>>> = Arc::default();
    let record = arrived.clone();
    let receiving = tokio::spawn(async move {
        while let Some(notice) = peer.next_notice().await {
            if let MessageNotice::Received(m) = notice {
                record
                    .lock()
                    .expect("not poisoned")
                    .insert(m.id, Instant::now());
            }
        }
    });

    let waited = Instant::now();
    while endpoint.estimates().iter().all(|e| e.rate <= 0.0)
        && waited.elapsed() < FIRST_ESTIMATE_LIMIT
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let largest = arrivals.iter().map(|a| a.size).max().unwrap_or(0) as usize;
    let payload = Bytes::from(vec![0u8; largest]);
    let classes = arrivals.iter().map(|a| a.class + 1).max().unwrap_or(0);
    let mut totals = vec![0u64; classes];
    let mut sent: HashMap<MessageId, Sent> = HashMap::new();
    let start = Instant::now();
    let end = start + stop;
    let mut next = 0;
    while Instant::now() < end {
        while let Some(a) = arrivals
            .get(next)
            .filter(|a| start + a.at <= Instant::now())
        {
            totals[a.class] += 1;
            let priority = workload.priority(a.class);
            let submitted = Instant::now();
            let spec = MessageSpec::new(priority, a.size).with_deadline(endpoint.now() + a.timer);
            match endpoint.submit(spec, payload.slice(..a.size as usize)) {
                Ok(id) => {
                    sent.insert(
                        id,
                        Sent {
                            class: a.class,
                            submitted,
                            timer: a.timer,
                        },
                    );
                }
                Err(MessageError::Refused(_)) => {}
                Err(e) => bail!("submit a message: {e}"),
            }
            next += 1;
        }
        let wake = arrivals.get(next).map_or(end, |a| (start + a.at).min(end));
        let notice = tokio::select! {
            n = endpoint.next_notice() => n.context("the connection is gone")?,
            _ = tokio::time::sleep_until(wake) => continue,
        };
        if let MessageNotice::Sender(MessageEvent::Early { id, .. }) = notice {
            // The paper's runs: a message that can no longer make it is dropped.
            // It may have ended meanwhile; then there is nothing left to cancel.
            let _ = endpoint.cancel(id);
        }
    }
    receiving.abort();
    let arrived = arrived.lock().expect("not poisoned");
    let mut delivered = vec![0u64; classes];
    for (id, s) in &sent {
        if arrived
            .get(id)
            .is_some_and(|&at| at.duration_since(s.submitted) <= s.timer)
        {
            delivered[s.class] += 1;
        }
    }
    let wire_bytes = wire_bytes_up(&emu.shutdown());
    Ok(SocketRun {
        counts: totals.into_iter().zip(delivered).collect(),
        wire_bytes,
        copied_pieces: endpoint.copied_pieces(),
    })
}

/// Bytes the sender's side offered to the links, summed over them.
pub fn wire_bytes_up(stats: &Stats) -> u64 {
    stats.channels.iter().map(|c| c.up.offered_bytes).sum()
}
