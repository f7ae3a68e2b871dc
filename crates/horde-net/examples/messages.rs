//! Messages at four priorities with deadlines over three emulated links whose summed rate
//! halves midway. Prints one JSON line per admitted message: an undelivered one when it
//! meets its fate, a delivered one at the end of the run, with its arrival:
//!
//!     {"id":7,"priority":2,"bytes":30000,"deadline_ms":1500,"fate":"delivered","at_ms":412,"arrived_ms":371}
//!
//! `at_ms` counts from submission to the fate (for `delivered`, the ack of its last
//! piece); `arrived_ms`, for a delivered message, from submission to the receiver having
//! all of it, and `early_ms` when its early callback fired, if it did. Both ends run in
//! this process, on one clock, so `arrived_ms > deadline_ms` is a late delivery. Early
//! callbacks are answered by priority: levels 0–2 continue (the message still tries, and
//! ends `early` if it misses), level 3 is cancelled at once. Refused messages and a
//! summary go to stderr: how many were delivered by their deadline, late after an early
//! callback, and late without one (which the arrival check is meant to prevent).
//!
//!     cargo run --release -p horde-net --example messages [-- --compare]
//!
//! `--compare` first runs the same workload with deadlines checked at hand-over to the
//! session (`DeadlineCheck::Handover`), then as by default, and prints both summaries.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use horde_crypto::Keypair;
use horde_emu::{Emulator, EmulatorConfig};
use horde_net::{
    ChannelTarget, ConnectConfig, DeadlineCheck, EndpointConfig, Host, HostConfig, InterfaceConfig,
    MessageEndpoint, MessageNotice,
};
use horde_proto::message::{Fate, MessageError, MessageEvent, MessageId};
use horde_proto::ChannelConfig;
use tokio::time::Instant;

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
    submitted: Instant,
    early: Option<Duration>,
}

/// How the delivered messages of one run arrived against their deadlines.
#[derive(Debug, Default)]
struct Summary {
    admitted: usize,
    refused: [usize; 4],
    fates: HashMap<Fate, usize>,
    on_time: usize,
    on_time_bytes: usize,
    late_after_early: usize,
    late_without_early: usize,
    withdrawn: u64,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fate = |x| self.fates.get(&x).copied().unwrap_or(0);
        write!(
            f,
            "admitted {}, refused per priority {:?}; delivered {} (by the deadline {}, {} kB; \
             late after an early callback {}, late without one {}), early {}, cancelled {}, \
             expired {}; {} queued pieces withdrawn",
            self.admitted,
            self.refused,
            fate(Fate::Delivered),
            self.on_time,
            self.on_time_bytes / 1000,
            self.late_after_early,
            self.late_without_early,
            fate(Fate::Early),
            fate(Fate::Cancelled),
            fate(Fate::Expired),
            self.withdrawn,
        )
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let compare = match args.next().as_deref() {
        None => false,
        Some("--compare") => true,
        Some(other) => return Err(format!("unknown argument {other:?}; try --compare").into()),
    };
    if compare {
        let handover = run(DeadlineCheck::Handover, false).await?;
        eprintln!("checked at hand-over: {handover}");
        let arrival = run(DeadlineCheck::Arrival, false).await?;
        eprintln!("checked at arrival:   {arrival}");
    } else {
        let summary = run(DeadlineCheck::Arrival, true).await?;
        eprintln!("{summary}");
    }
    Ok(())
}

/// Runs the workload once with `check`; prints a JSON line per message if `lines`.
async fn run(check: DeadlineCheck, lines: bool) -> Result<Summary, Box<dyn std::error::Error>> {
    let config = EndpointConfig {
        deadline_check: check,
        ..EndpointConfig::default()
    };
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
    let mut endpoint = MessageEndpoint::new(conn, config.clone()).await?;
    let mut peer = MessageEndpoint::new(incoming, config).await?;
    // When the receiver had each whole message.
    let arrivals: Arc<Mutex<HashMap<MessageId, Instant>>> = Arc::default();
    let arrived = arrivals.clone();
    let received = tokio::spawn(async move {
        while let Some(notice) = peer.next_notice().await {
            if let MessageNotice::Received(m) = notice {
                arrived.lock().unwrap().insert(m.id, Instant::now());
            }
        }
    });

    // Admission needs the channels' rates: wait for the first estimates.
    while endpoint.estimates().iter().all(|e| e.rate <= 0.0) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut sent: HashMap<MessageId, Sent> = HashMap::new();
    let mut summary = Summary::default();
    let mut delivered = Vec::new();
    let start = Instant::now();
    let mut next_round = start;
    let mut sending = true;
    while sending || sent.len() > summary.fates.values().sum::<usize>() {
        if sending && Instant::now() >= next_round {
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
                                submitted: Instant::now(),
                                early: None,
                            },
                        );
                    }
                    Err(MessageError::Refused(_)) => summary.refused[priority] += 1,
                    Err(e) => return Err(e.into()),
                }
            }
            next_round += ROUND;
            sending = start.elapsed() < SEND_FOR;
        }
        let wait = next_round.max(Instant::now() + Duration::from_millis(1));
        let notice = tokio::select! {
            n = endpoint.next_notice() => n.ok_or("connection gone")?,
            _ = tokio::time::sleep_until(wait) => continue,
        };
        match notice {
            MessageNotice::Sender(MessageEvent::Early { id, .. }) => {
                let Some(m) = sent.get_mut(&id) else {
                    continue;
                };
                m.early = Some(m.submitted.elapsed());
                let answer = if m.priority == 3 {
                    endpoint.cancel(id)
                } else {
                    endpoint.resume(id)
                };
                // The message may have met its fate since the callback: its pieces were
                // all out, and the receiver had them after all.
                match answer {
                    Ok(())
                    | Err(MessageError::AlreadyDelivered(_))
                    | Err(MessageError::AlreadyFinished { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            MessageNotice::Sender(MessageEvent::Finished {
                id,
                fate,
                at,
                submitted,
            }) => {
                *summary.fates.entry(fate).or_default() += 1;
                if fate == Fate::Delivered {
                    delivered.push((id, (at - submitted).as_millis()));
                } else if let Some(m) = sent.get(&id).filter(|_| lines) {
                    println!(
                        "{}",
                        json_line(id, m, fate, (at - submitted).as_millis(), None)
                    );
                }
            }
            MessageNotice::SendFailed { id, error } => eprintln!("{id}: {error}"),
            _ => {}
        }
    }
    summary.admitted = sent.len();
    summary.withdrawn = endpoint.withdrawn_pieces();
    // A delivered message's last ack comes after the receiver had it.
    let arrivals = arrivals.lock().unwrap().clone();
    for (id, at_ms) in delivered {
        let m = &sent[&id];
        let arrived = arrivals
            .get(&id)
            .ok_or(format!("{id} delivered but not received"))?
            .duration_since(m.submitted);
        if arrived <= Duration::from_millis(m.deadline_ms) {
            summary.on_time += 1;
            summary.on_time_bytes += m.bytes;
        } else if m.early.is_some() {
            summary.late_after_early += 1;
        } else {
            summary.late_without_early += 1;
        }
        if lines {
            println!(
                "{}",
                json_line(id, m, Fate::Delivered, at_ms, Some(arrived))
            );
        }
    }
    drop(endpoint);
    sender.shutdown().await;
    receiver.shutdown().await;
    received.await?;
    Ok(summary)
}

fn json_line(
    id: MessageId,
    m: &Sent,
    fate: Fate,
    at_ms: u128,
    arrived: Option<Duration>,
) -> String {
    let mut line = format!(
        "{{\"id\":{},\"priority\":{},\"bytes\":{},\"deadline_ms\":{},\"fate\":\"{fate}\",\"at_ms\":{at_ms}",
        id.0, m.priority, m.bytes, m.deadline_ms
    );
    if let Some(arrived) = arrived {
        line += &format!(",\"arrived_ms\":{}", arrived.as_millis());
    }
    if let Some(early) = m.early {
        line += &format!(",\"early_ms\":{}", early.as_millis());
    }
    line + "}"
}
