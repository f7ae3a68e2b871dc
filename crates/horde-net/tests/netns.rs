//! The channel pool manager over real interfaces.
//!
//! Two network namespaces, A (sender) and B (receiver), joined by two veth pairs:
//!
//! ```text
//!   A: va0 192.0.2.1/30    <-> B: vb0 192.0.2.2/30
//!   A: va1 198.51.100.1/30 <-> B: vb1 198.51.100.2/30
//! ```
//!
//! Both hosts pin a socket to each veth device (`SO_BINDTODEVICE`). The sender streams
//! ADUs over both paths; `va0` is taken down mid-stream: traffic carries on over the other
//! path, the pool manager removes the channel over `va0`; `va0` comes back up: the channel
//! is added again and carries traffic.
//!
//! Needs root (`CAP_NET_ADMIN`, `CAP_SYS_ADMIN` for `setns`). Without root it is skipped
//! with a notice, unless `CI` is set, in which case it fails. Everything it creates lives
//! in its own namespaces (created with unique names, the veths created directly inside
//! them) and is deleted when the test ends, even on panic; the host's own interfaces,
//! addresses and routes are never touched.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use horde_crypto::Keypair;
use horde_net::{
    ChannelTarget, ConnectConfig, Host, HostConfig, HostStats, InterfaceConfig,
    DEFAULT_INTERFACE_POLL,
};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, ChannelId, Event, StreamConfig};
use tokio::sync::oneshot;

mod common;
use common::netns::{delete_namespaces, in_netns, ip, may_run, wait_until_up};

const SERVICE: u32 = 11;
/// One ADU every `SEND_EVERY`: 500 ADUs/s of 200 bytes, about 100 kB/s.
const SEND_EVERY: Duration = Duration::from_millis(2);
const ADU_BYTES: usize = 200;
/// The longest the test may take, set-up included.
const TEST_LIMIT: Duration = Duration::from_secs(20);
/// A pause in acknowledgements longer than this is a stall. On a veth pair the RTT is well
/// under a millisecond; the rest is the pool manager's poll interval plus scheduling
/// slack on a loaded machine.
const MAX_STALL: Duration = Duration::from_millis(300);
/// From `ip link set ... down|up` to the application hearing of it: three poll
/// intervals (the next poll, plus slack for a loaded machine).
fn max_detection() -> Duration {
    DEFAULT_INTERFACE_POLL * 3
}

/// Two namespaces joined by two veth pairs; deleted on drop (which destroys the veths).
struct Topology {
    a: String,
    b: String,
}

impl Topology {
    fn new() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let tag = format!("horde-pool-{}-{nanos}", std::process::id());
        let t = Topology {
            a: format!("{tag}-a"),
            b: format!("{tag}-b"),
        };
        // From here on the guard exists, so a failure below still cleans up.
        ip(&["netns", "add", &t.a]);
        ip(&["netns", "add", &t.b]);
        let (a, b) = (t.a.as_str(), t.b.as_str());
        for ns in [a, b] {
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        // Each pair is created inside A with its peer placed straight into B.
        for (k, a_addr, b_addr) in [
            (0, "192.0.2.1/30", "192.0.2.2/30"),
            (1, "198.51.100.1/30", "198.51.100.2/30"),
        ] {
            let (va, vb) = (format!("va{k}"), format!("vb{k}"));
            ip(&[
                "-n", a, "link", "add", &va, "type", "veth", "peer", "name", &vb, "netns", b,
            ]);
            ip(&["-n", a, "addr", "add", a_addr, "dev", &va]);
            ip(&["-n", b, "addr", "add", b_addr, "dev", &vb]);
            ip(&["-n", a, "link", "set", &va, "up"]);
            ip(&["-n", b, "link", "set", &vb, "up"]);
        }
        wait_until_up(&[(a, "va0"), (a, "va1"), (b, "vb0"), (b, "vb1")]);
        t
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        delete_namespaces(&[&self.a, &self.b]);
    }
}

fn iface(bind: &str, device: &str) -> InterfaceConfig {
    InterfaceConfig {
        bind: bind.parse().unwrap(),
        device: Some(device.to_string()),
    }
}

type Log = Vec<(Duration, Event)>;

struct ReceiverReport {
    log: Log,
    stats: HostStats,
}

struct SenderReport {
    log: Log,
    /// When `va0` was taken down and brought up again.
    down_at: Duration,
    up_at: Duration,
    sent: u64,
    stats: HostStats,
    stats_while_down: HostStats,
}

/// Take events into `log` until `done(log)` or `limit` from now; whether `done` held.
async fn collect_until(
    events: &mut horde_net::EventReceiver,
    log: &mut Log,
    t0: Instant,
    limit: Duration,
    done: impl Fn(&Log) -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if done(log) {
            return true;
        }
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(Event::Received { .. })) | Ok(Some(Event::Throttle { .. })) => {}
            Ok(Some(e)) => log.push((t0.elapsed(), e)),
            Ok(None) | Err(_) => return false,
        }
    }
}

fn acks_on(log: &Log, channel: ChannelId, after: Duration) -> usize {
    log.iter()
        .filter(|(t, e)| *t > after && matches!(e, Event::Ack { channel: c, .. } if *c == channel))
        .count()
}

fn first(log: &Log, want: &Event) -> Option<Duration> {
    log.iter().find(|(_, e)| e == want).map(|(t, _)| *t)
}

/// The longest pause between consecutive times in `times` within `[from, to]`.
fn longest_gap(times: impl Iterator<Item = Duration>, from: Duration, to: Duration) -> Duration {
    let mut last = from;
    let mut worst = Duration::ZERO;
    for t in times.filter(|t| *t >= from && *t <= to) {
        worst = worst.max(t - last);
        last = t;
    }
    worst.max(to.saturating_sub(last))
}

fn summary(log: &Log) -> String {
    let mut acks = [0usize; 4];
    let mut nacks = 0;
    let mut other = Vec::new();
    for (t, e) in log {
        match e {
            Event::Ack { channel, .. } => acks[usize::from(*channel).min(3)] += 1,
            Event::Nack { .. } => nacks += 1,
            e => other.push(format!("{:.3}s {e:?}", t.as_secs_f64())),
        }
    }
    format!("acks per channel {acks:?}, nacks {nacks}, events {other:?}")
}

#[test]
fn a_path_that_goes_down_is_removed_and_re_added_when_it_returns() {
    if !may_run("netns") {
        return;
    }
    let t0 = Instant::now();
    let topo = Topology::new();
    let (sk, ck) = (Keypair::generate(), Keypair::generate());
    let (sender_public, receiver_public) = (*ck.public(), *sk.public());

    // Receiver in B.
    let (addr_tx, addr_rx) = std_mpsc::channel::<Vec<SocketAddr>>();
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let receiver = in_netns(&topo.b, move || async move {
        let mut cfg = HostConfig::new(
            sk,
            vec![iface("192.0.2.2:0", "vb0"), iface("198.51.100.2:0", "vb1")],
        );
        cfg.allowed_peers = vec![sender_public];
        let host = Host::bind(cfg).await.unwrap();
        let mut listener = host.listen(SERVICE);
        addr_tx.send(host.local_addrs().to_vec()).unwrap();
        let mut conn = tokio::time::timeout(Duration::from_secs(5), listener.accept())
            .await
            .expect("the sender connects")
            .unwrap();
        let mut log = Log::new();
        let deadline = tokio::time::sleep(TEST_LIMIT);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                e = conn.next_event() => match e {
                    // Keep arrivals without their payload.
                    Some(Event::Received { stream, stream_seq, channel, .. }) => log.push((
                        t0.elapsed(),
                        Event::Received { stream, stream_seq, channel, payload: Bytes::new() },
                    )),
                    Some(e) => log.push((t0.elapsed(), e)),
                    None => break,
                },
                _ = &mut stop_rx => break,
                _ = &mut deadline => break,
            }
        }
        let stats = host.stats().await.unwrap();
        host.shutdown().await;
        ReceiverReport { log, stats }
    });
    let remote = addr_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the receiver binds");

    // Sender in A.
    let a = topo.a.clone();
    let sender = in_netns(&topo.a, move || async move {
        let host = Host::bind(HostConfig::new(
            ck,
            vec![iface("192.0.2.1:0", "va0"), iface("198.51.100.1:0", "va1")],
        ))
        .await
        .unwrap();
        let conn = host
            .connect(ConnectConfig {
                peer: receiver_public,
                service: SERVICE,
                channels: (0..2)
                    .map(|i| ChannelTarget {
                        interface: i,
                        remote: remote[i],
                        config: ChannelConfig::default(),
                    })
                    .collect(),
                handshake_timeout: Duration::from_secs(5),
            })
            .await
            .expect("handshake over the veth pairs");
        let (handle, mut events) = conn.split();
        handle
            .open_stream(1, StreamConfig::default())
            .await
            .unwrap();

        // A steady stream until told to stop.
        let stop = Arc::new(AtomicBool::new(false));
        let pump = {
            let (handle, stop) = (handle.clone(), stop.clone());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(SEND_EVERY);
                let mut sent = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    let mut payload = vec![0u8; ADU_BYTES];
                    payload[..8].copy_from_slice(&sent.to_be_bytes());
                    handle
                        .send_adu_nowait(1, Bytes::from(payload), Fields::new())
                        .unwrap();
                    sent += 1;
                }
                sent
            })
        };
        let link = |state: &'static str| {
            let a = a.clone();
            async move {
                tokio::task::spawn_blocking(move || ip(&["-n", &a, "link", "set", "va0", state]))
                    .await
                    .unwrap()
            }
        };
        let mut log = Log::new();

        // Both paths carry traffic.
        let both = collect_until(&mut events, &mut log, t0, Duration::from_secs(3), |l| {
            acks_on(l, ChannelId::new(0), Duration::ZERO) >= 20
                && acks_on(l, ChannelId::new(1), Duration::ZERO) >= 20
        })
        .await;
        assert!(both, "both paths carry acks: {}", summary(&log));

        // Path 0 goes down: the pool manager removes its channel; path 1 carries on.
        let down_at = t0.elapsed();
        link("down").await;
        let removed = collect_until(&mut events, &mut log, t0, Duration::from_secs(3), |l| {
            l.iter().any(|(_, e)| {
                *e == Event::ChannelDown {
                    channel: ChannelId::new(0),
                }
            })
        })
        .await;
        assert!(removed, "channel 0 reported down: {}", summary(&log));
        // A second of traffic over path 1 alone.
        let removed_at = t0.elapsed();
        collect_until(&mut events, &mut log, t0, Duration::from_secs(1), |_| false).await;
        let stats_while_down = host.stats().await.unwrap();

        // Path 0 comes back: its channel is added again and carries traffic.
        let up_at = t0.elapsed();
        link("up").await;
        let back = collect_until(&mut events, &mut log, t0, Duration::from_secs(4), |l| {
            l.iter()
                .rev()
                .find_map(|(t, e)| match e {
                    Event::ChannelUp { channel } if *t > removed_at => Some(*channel),
                    _ => None,
                })
                .is_some_and(|id| acks_on(l, id, up_at) >= 50)
        })
        .await;
        assert!(
            back,
            "channel re-added and carrying acks: {}",
            summary(&log)
        );

        // Stop, and let everything in flight be acked or nacked.
        stop.store(true, Ordering::Relaxed);
        let sent = pump.await.unwrap();
        let settled = collect_until(&mut events, &mut log, t0, Duration::from_secs(3), |l| {
            let resolved = l
                .iter()
                .filter(|(_, e)| matches!(e, Event::Ack { .. } | Event::Nack { .. }))
                .count();
            resolved as u64 >= sent
        })
        .await;
        assert!(
            settled,
            "all {sent} ADUs acked or nacked: {}",
            summary(&log)
        );
        let stats = host.stats().await.unwrap();
        host.shutdown().await;
        SenderReport {
            log,
            down_at,
            up_at,
            sent,
            stats,
            stats_while_down,
        }
    });

    let s = sender.join().expect("sender");
    let _ = stop_tx.send(());
    let r = receiver.join().expect("receiver");
    let log = &s.log;
    eprintln!(
        "netns: sent {} ADUs; sender {}; sender stats {:?}; receiver stats {:?}",
        s.sent,
        summary(log),
        s.stats,
        r.stats
    );

    // The pool manager, not the channel's own dead-man timer (at least 1 s), took path 0
    // out, promptly.
    let removed_at = first(
        log,
        &Event::ChannelDown {
            channel: ChannelId::new(0),
        },
    )
    .unwrap();
    assert!(
        removed_at - s.down_at <= max_detection(),
        "removal took {:?}",
        removed_at - s.down_at
    );
    assert_eq!(s.stats_while_down.interfaces_open, vec![false, true]);
    assert_eq!(s.stats_while_down.interfaces_down, 1);
    assert_eq!(s.stats_while_down.channels_removed, 1);
    // The veth peer lost its carrier: the receiver's pool manager closed its socket too.
    assert_eq!(r.stats.interfaces_down, 1, "{:?}", r.stats);
    assert_eq!(r.stats.interfaces_up, 1, "{:?}", r.stats);

    // Path 0 came back as a channel again (the lowest free id: 0 once more).
    let (readded_at, id) = log
        .iter()
        .find_map(|(t, e)| match e {
            Event::ChannelUp { channel } if *t > removed_at => Some((*t, *channel)),
            _ => None,
        })
        .unwrap();
    assert_eq!(id, ChannelId::new(0));
    assert!(
        readded_at - s.up_at <= max_detection(),
        "re-adding took {:?}",
        readded_at - s.up_at
    );
    assert_eq!(s.stats.interfaces_up, 1);
    assert_eq!(s.stats.channels_restored, 1);
    assert_eq!(s.stats.interfaces_open, vec![true, true]);
    // While it was out, nothing was acked on it.
    let between = log
        .iter()
        .filter(|(t, e)| {
            *t > removed_at
                && *t < readded_at
                && matches!(e, Event::Ack { channel, .. } if *channel == ChannelId::new(0))
        })
        .count();
    assert_eq!(between, 0);
    assert!(acks_on(log, id, readded_at) >= 50);

    // No stall: acknowledgements kept coming across the failure and the return.
    let end = log
        .iter()
        .rev()
        .find(|(_, e)| matches!(e, Event::Ack { .. }))
        .unwrap()
        .0;
    let from = s.down_at;
    let ack_times = log
        .iter()
        .filter(|(_, e)| matches!(e, Event::Ack { .. }))
        .map(|(t, _)| *t);
    let to = end.min(s.up_at + Duration::from_secs(1));
    let stall = longest_gap(ack_times, from, to);
    assert!(stall <= MAX_STALL, "acks paused for {stall:?}");
    // The receiver saw the same: arrivals never paused, path 1 carried on, and path 0
    // delivered again once it was back.
    let arrivals = r
        .log
        .iter()
        .filter(|(_, e)| matches!(e, Event::Received { .. }))
        .map(|(t, _)| *t);
    let gap = longest_gap(arrivals, from, to);
    assert!(gap <= MAX_STALL, "arrivals paused for {gap:?}");
    let received_on = |ch: ChannelId, after: Duration| {
        r.log
            .iter()
            .filter(|(t, e)| {
                *t > after && matches!(e, Event::Received { channel, .. } if *channel == ch)
            })
            .count()
    };
    assert!(received_on(ChannelId::new(1), removed_at) > 100);
    assert!(received_on(id, readded_at) >= 50);
    // The receiver's application heard path 0 go and come back.
    let r_down = first(
        &r.log,
        &Event::ChannelDown {
            channel: ChannelId::new(0),
        },
    )
    .expect("receiver: down");
    let r_up = r
        .log
        .iter()
        .find(|(t, e)| *t > r_down && *e == Event::ChannelUp { channel: id })
        .map(|(t, _)| *t);
    assert!(r_up.is_some(), "receiver: channel {id} back");

    // Losses are confined to path 0 around the failure. Path 1 is not affected by it;
    // its loss timeout on a veth is only about 14 ms, though, so a busy machine that
    // stalls a thread for longer can make it declare the odd spurious loss.
    let lost_on_1 = log
        .iter()
        .filter(|(_, e)| {
            matches!(
                e,
                Event::Nack {
                    channel: Some(c),
                    ..
                } if *c == ChannelId::new(1)
            )
        })
        .count();
    assert!(
        (lost_on_1 as u64) <= s.sent / 50,
        "{lost_on_1} of {} ADUs lost on path 1",
        s.sent
    );
    let nacked = log
        .iter()
        .filter(|(_, e)| matches!(e, Event::Nack { .. }))
        .count();
    assert!(
        (nacked as u64) < s.sent / 10,
        "{nacked} of {} ADUs lost",
        s.sent
    );

    assert!(
        t0.elapsed() < TEST_LIMIT,
        "the test took {:?}",
        t0.elapsed()
    );
    eprintln!(
        "netns: removal after {:?}, re-added after {:?}, longest ack pause {stall:?}, longest arrival pause {gap:?}, {nacked} ADUs lost ({lost_on_1} on path 1), {:?} in all",
        removed_at - s.down_at,
        readded_at - s.up_at,
        t0.elapsed()
    );
}
