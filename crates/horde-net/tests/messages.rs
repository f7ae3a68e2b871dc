//! Messages with priorities and deadlines over three emulated channels on real sockets:
//! the early callback fires before the deadline when the bandwidth drops, a cancel frees
//! what the receiver holds, every message ends in exactly one fate, and bad calls get the
//! core's typed errors.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use horde_emu::LinkSpec;
use horde_net::{EndpointConfig, MessageEndpoint, MessageHandle, MessageNotice};
use horde_proto::message::{Fate, MessageError, MessageEvent, MessageId, MessageSpec};
use horde_proto::ChannelConfig;
use tokio::sync::mpsc;
use tokio::time::{sleep, timeout, Instant};

/// A link whose rate steps from `kbps` to `kbps / divisor` at `drop_s` after the emulator
/// starts.
fn dropping_link(kbps: f64, delay_ms: f64, drop_s: f64, divisor: f64) -> LinkSpec {
    let after = kbps / divisor;
    toml::from_str(&format!(
        "rate = {{ model = \"steps\", steps = [{{ at_s = 0, kbps = {kbps} }}, {{ at_s = {drop_s}, kbps = {after} }}] }}\n\
         delay = {{ model = \"constant\", ms = {delay_ms} }}\nbuffer_bytes = 40000\n"
    ))
    .unwrap()
}

fn payload(id_hint: u8, len: usize) -> Bytes {
    Bytes::from((0..len).map(|i| (i as u8) ^ id_hint).collect::<Vec<u8>>())
}

/// The receiver's whole messages, read on a task of their own.
fn collect_received(mut endpoint: MessageEndpoint) -> mpsc::UnboundedReceiver<(MessageId, Bytes)> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(notice) = endpoint.next_notice().await {
            if let MessageNotice::Received(m) = notice {
                if tx.send((m.id, m.payload)).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// The sender's events, with the time each was read.
struct Sender {
    endpoint: MessageEndpoint,
    early: HashMap<MessageId, (Duration, Duration)>,
    fates: HashMap<MessageId, Vec<Fate>>,
}

impl Sender {
    /// Reads events until `done` holds or `limit` passes.
    async fn until(&mut self, limit: Duration, mut done: impl FnMut(&Self) -> bool) -> bool {
        let end = Instant::now() + limit;
        while !done(self) {
            let Ok(Some(notice)) = timeout(
                end.saturating_duration_since(Instant::now()),
                self.endpoint.next_notice(),
            )
            .await
            else {
                return false;
            };
            match notice {
                MessageNotice::Sender(MessageEvent::Early {
                    id, at, deadline, ..
                }) => {
                    self.early.insert(id, (at, deadline));
                }
                MessageNotice::Sender(MessageEvent::Finished { id, fate, .. }) => {
                    self.fates.entry(id).or_default().push(fate);
                }
                MessageNotice::SendFailed { id, error } => panic!("{id}: {error}"),
                _ => {}
            }
        }
        true
    }
}

async fn wait_receiver_empty(receiver: &MessageHandle, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if receiver.partial_messages() == 0 && receiver.held_bytes() == 0 {
            return true;
        }
        sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bandwidth_drop_fires_early_callbacks_cancels_free_the_receiver_and_fates_are_single() {
    const DROP_S: f64 = 4.0;
    let links = [
        (
            "a",
            dropping_link(2000.0, 20.0, DROP_S, 4.0),
            common::link(100_000.0, 20.0, 0.0),
        ),
        (
            "b",
            dropping_link(1500.0, 40.0, DROP_S, 4.0),
            common::link(100_000.0, 40.0, 0.0),
        ),
        (
            "c",
            dropping_link(1000.0, 60.0, DROP_S, 4.0),
            common::link(100_000.0, 60.0, 0.0),
        ),
    ];
    let s = common::setup(&links, ChannelConfig::default()).await;
    let emu = s.emu.as_ref().unwrap();
    let sender = MessageEndpoint::new(s.conn, EndpointConfig::default())
        .await
        .unwrap();
    let receiver = MessageEndpoint::new(s.accepted, EndpointConfig::default())
        .await
        .unwrap();
    let receiver_handle = receiver.handle();
    let mut received = collect_received(receiver);
    let mut sender = Sender {
        endpoint: sender,
        early: HashMap::new(),
        fates: HashMap::new(),
    };

    // A bulk message without deadline keeps the channels busy so that their rate
    // estimates grow to what the links carry.
    let bulk_bytes = payload(7, 3_000_000);
    let bulk = sender.endpoint.send(7, None, bulk_bytes).unwrap();
    let mut small = Vec::new();
    let mut refused = 0;
    while emu.elapsed() < Duration::from_secs_f64(DROP_S - 0.5) {
        for priority in 0..4u8 {
            let bytes = payload(priority, 3_000);
            let within = Duration::from_millis(400 + 200 * u64::from(priority));
            match sender.endpoint.send(priority, Some(within), bytes.clone()) {
                Ok(id) => small.push((id, bytes)),
                Err(MessageError::Refused(_)) => refused += 1,
                Err(e) => panic!("{e}"),
            }
        }
        sender.until(Duration::from_millis(100), |_| false).await;
    }

    // A message that needs half its time at the links' rate (or at the estimates', if
    // they are lower), until the rate drops to a quarter half a second later.
    let estimated: f64 = sender.endpoint.estimates().iter().map(|e| e.rate).sum();
    assert!(estimated > 0.0, "the channels' rates are known");
    let links_rate = (2000.0 + 1500.0 + 1000.0) * 1000.0 / 8.0;
    let capacity = estimated.min(links_rate);
    let window = Duration::from_millis(3000);
    let big_len = (capacity * window.as_secs_f64() * 0.5) as usize;
    let big = sender
        .endpoint
        .send(0, Some(window), payload(0, big_len))
        .unwrap_or_else(|e| panic!("{big_len} bytes at {capacity} B/s: {e}"));
    let big_deadline = sender.endpoint.status(big).unwrap().deadline.unwrap();
    assert!(
        sender
            .until(Duration::from_secs(6), |s| s.early.contains_key(&big)
                || s.fates.contains_key(&big))
            .await,
        "no event for the big message"
    );
    let (at, deadline) = *sender
        .early
        .get(&big)
        .unwrap_or_else(|| panic!("no early callback; fate {:?}", sender.fates.get(&big)));
    assert_eq!(deadline, big_deadline);
    assert!(at < deadline, "early at {at:?}, deadline {deadline:?}");
    assert!(
        emu.elapsed() > Duration::from_secs_f64(DROP_S),
        "fired after the drop"
    );

    // The application gives up on it and on the bulk message: both end once, and the
    // receiver frees what it held of them.
    assert!(receiver_handle.partial_messages() > 0);
    sender.endpoint.cancel(big).unwrap();
    sender.endpoint.cancel(bulk).unwrap();
    assert!(
        sender
            .until(Duration::from_secs(2), |s| s.fates.contains_key(&big)
                && s.fates.contains_key(&bulk))
            .await
    );
    assert_eq!(sender.fates[&big], [Fate::Early]);
    assert_eq!(sender.fates[&bulk], [Fate::Cancelled]);
    assert_eq!(
        sender.endpoint.cancel(big),
        Err(MessageError::AlreadyFinished {
            id: big,
            fate: Fate::Early
        })
    );
    assert!(
        wait_receiver_empty(&receiver_handle, Duration::from_secs(5)).await,
        "receiver still holds {} bytes of {} messages",
        receiver_handle.held_bytes(),
        receiver_handle.partial_messages()
    );

    // Every small message ends exactly once; the delivered ones arrived whole.
    assert!(
        sender
            .until(Duration::from_secs(5), |s| small
                .iter()
                .all(|(id, _)| s.fates.contains_key(id)))
            .await,
        "some messages never ended"
    );
    sender.until(Duration::from_millis(300), |_| false).await;
    let mut delivered = 0;
    for (id, _) in &small {
        assert_eq!(sender.fates[id].len(), 1, "{id}: {:?}", sender.fates[id]);
        delivered += usize::from(sender.fates[id][0] == Fate::Delivered);
    }
    assert!(
        delivered > 0,
        "none of {} small messages delivered",
        small.len()
    );
    let mut arrived = HashMap::new();
    while let Ok((id, bytes)) = received.try_recv() {
        assert!(arrived.insert(id, bytes).is_none(), "{id} arrived twice");
    }
    for (id, bytes) in &small {
        if sender.fates[id][0] == Fate::Delivered {
            assert_eq!(
                arrived.get(id),
                Some(bytes),
                "{id} delivered but not received"
            );
        }
    }
    if let Some((id, _)) = small
        .iter()
        .find(|(id, _)| sender.fates[id][0] == Fate::Delivered)
    {
        assert_eq!(
            sender.endpoint.cancel(*id),
            Err(MessageError::AlreadyDelivered(*id))
        );
    }
    eprintln!(
        "small: {} admitted ({delivered} delivered), {refused} refused; big {big_len} B early at {at:?} for {deadline:?}",
        small.len()
    );
    s.client.shutdown().await;
    s.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_calls_get_the_cores_typed_errors() {
    let links = [(
        "a",
        common::link(2000.0, 20.0, 0.0),
        common::link(2000.0, 20.0, 0.0),
    )];
    let s = common::setup(&links, ChannelConfig::default()).await;
    let endpoint = MessageEndpoint::new(s.conn, EndpointConfig::default())
        .await
        .unwrap();
    let data = Bytes::from_static(b"abc");
    assert_eq!(
        endpoint.send(8, None, data.clone()),
        Err(MessageError::InvalidPriority {
            priority: 8,
            levels: 8
        })
    );
    let now = endpoint.now();
    let past = MessageSpec::new(0, 3).with_deadline(now.saturating_sub(Duration::from_millis(1)));
    assert!(matches!(
        endpoint.submit(past, data.clone()),
        Err(MessageError::DeadlineInPast { .. })
    ));
    assert!(matches!(
        endpoint.submit(MessageSpec::new(0, 4), data.clone()),
        Err(MessageError::InvalidConfig {
            what: "message size",
            ..
        })
    ));
    assert_eq!(
        endpoint.cancel(MessageId(99)),
        Err(MessageError::UnknownMessage(MessageId(99)))
    );
    assert!(matches!(
        endpoint.send(0, Some(Duration::from_micros(1)), payload(1, 1_000_000)),
        Err(MessageError::Refused(_))
    ));
    let mut config = EndpointConfig::default();
    config.messages.piece_size = 0;
    let other = s.accepted;
    assert!(matches!(
        MessageEndpoint::new(other, config).await,
        Err(horde_net::NetError::Message(MessageError::InvalidConfig {
            what: "piece_size",
            ..
        }))
    ));
    s.client.shutdown().await;
    s.server.shutdown().await;
}
