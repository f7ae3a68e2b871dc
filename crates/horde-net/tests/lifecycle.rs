//! The connection lifecycle over real sockets on loopback: a restarted peer's new
//! handshake replaces its old session, Close is acknowledged, a persistent connection
//! reconnects to a restarted receiver, a receiver that does not read holds its sender
//! back and reopens its window as soon as it reads, and the accept backlog is bounded.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::lo;
use horde_crypto::{Keypair, PublicKey};
use horde_net::{
    ChannelTarget, ConnectConfig, Connection, Host, HostConfig, InterfaceConfig, Reconnect,
};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, CloseReason, Event, SessionConfig, StreamConfig};

const SERVICE: u32 = 3;

fn server_config(key: &Keypair, bind: SocketAddr, allowed: &[PublicKey]) -> HostConfig {
    let mut cfg = HostConfig::new(key.clone(), vec![InterfaceConfig::new(bind)]);
    cfg.allowed_peers = allowed.to_vec();
    cfg
}

fn target(server: SocketAddr, peer: &Keypair) -> ConnectConfig {
    ConnectConfig {
        peer: *peer.public(),
        service: SERVICE,
        channels: vec![ChannelTarget {
            interface: 0,
            remote: server,
            config: ChannelConfig::default(),
        }],
        handshake_timeout: Duration::from_secs(5),
    }
}

async fn client(key: &Keypair, session: SessionConfig) -> Host {
    let mut cfg = HostConfig::new(key.clone(), vec![InterfaceConfig::new(lo())]);
    cfg.session = session;
    Host::bind(cfg).await.unwrap()
}

async fn accept(listener: &mut horde_net::Listener) -> Connection {
    tokio::time::timeout(Duration::from_secs(5), listener.accept())
        .await
        .expect("a connection within 5 s")
        .unwrap()
}

/// Events until `pred` holds on one of them or `limit` passes; returns all and whether.
async fn until(
    conn: &mut Connection,
    limit: Duration,
    mut pred: impl FnMut(&Event) -> bool,
) -> (Vec<Event>, bool) {
    let end = tokio::time::Instant::now() + limit;
    let mut seen = Vec::new();
    while let Ok(Some(e)) = tokio::time::timeout_at(end, conn.next_event()).await {
        let hit = pred(&e);
        seen.push(e);
        if hit {
            return (seen, true);
        }
    }
    (seen, false)
}

fn payload(i: u32) -> Bytes {
    Bytes::from(i.to_be_bytes().repeat(100))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_handshake_from_the_same_key_replaces_the_old_session() {
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let server = Host::bind(server_config(&sk, lo(), &[*ck.public()]))
        .await
        .unwrap();
    let mut listener = server.listen(SERVICE);
    let addr = server.local_addrs()[0];

    // The first incarnation of the client sends, then vanishes without a Close.
    let first = client(&ck, SessionConfig::default()).await;
    let conn = first.connect(target(addr, &sk)).await.unwrap();
    conn.open_stream(1, StreamConfig::default()).await.unwrap();
    conn.send_adu(1, payload(0), Fields::new()).await.unwrap();
    let mut old = accept(&mut listener).await;
    let (_, got) = until(&mut old, Duration::from_secs(3), |e| {
        matches!(e, Event::Received { .. })
    })
    .await;
    assert!(got);
    std::mem::forget(conn); // no Close from the dead process
    drop(first);

    // Its restart, with the same key: the old session ends as replaced.
    let second = client(&ck, SessionConfig::default()).await;
    let conn = second.connect(target(addr, &sk)).await.unwrap();
    conn.open_stream(1, StreamConfig::default()).await.unwrap();
    for i in 0..20 {
        conn.send_adu_nowait(1, payload(i), Fields::new()).unwrap();
    }
    let (seen, ended) = until(&mut old, Duration::from_secs(3), |e| {
        matches!(e, Event::Closed { .. })
    })
    .await;
    assert!(ended, "{seen:?}");
    assert_eq!(
        seen.last(),
        Some(&Event::Closed {
            reason: CloseReason::Replaced
        })
    );
    let mut new = accept(&mut listener).await;
    assert_eq!(new.peer(), Some(ck.public()));
    let mut received = 0;
    let (_, all) = until(&mut new, Duration::from_secs(5), |e| {
        received += usize::from(matches!(e, Event::Received { .. }));
        received == 20
    })
    .await;
    assert!(all, "received {received} of 20 on the new session");
    let stats = server.stats().await.unwrap();
    assert_eq!(stats.sessions_replaced, 1);
    second.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_the_close_to_be_acknowledged() {
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let server = Host::bind(server_config(&sk, lo(), &[*ck.public()]))
        .await
        .unwrap();
    let mut listener = server.listen(SERVICE);
    let host = client(&ck, SessionConfig::default()).await;
    let mut conn = host
        .connect(target(server.local_addrs()[0], &sk))
        .await
        .unwrap();
    conn.open_stream(1, StreamConfig::default()).await.unwrap();
    for i in 0..200 {
        conn.send_adu_nowait(1, payload(i), Fields::new()).unwrap();
    }
    let mut accepted = accept(&mut listener).await;
    // Shut down at once, with ADUs queued and in flight.
    let t = Instant::now();
    host.shutdown().await;
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    let (seen, closed) = until(&mut accepted, Duration::from_secs(1), |e| {
        matches!(e, Event::Closed { .. })
    })
    .await;
    assert!(closed, "{seen:?}");
    assert_eq!(
        seen.last(),
        Some(&Event::Closed {
            reason: CloseReason::PeerClosed
        })
    );
    // Every ADU is accounted for at the sender, and it heard its own close finish.
    let mut resolved = 0;
    let mut end = None;
    while let Some(e) = conn.try_event() {
        match e {
            Event::Ack { .. } | Event::Nack { .. } => resolved += 1,
            Event::Closed { reason } => end = Some(reason),
            _ => {}
        }
    }
    assert_eq!(resolved, 200);
    assert_eq!(end, Some(CloseReason::LocalClose));
    server.shutdown().await;
}

/// A receiver host on a runtime of its own, so that dropping the runtime kills it as a
/// crash would: no Close, sockets gone.
fn receiver_process(
    key: Keypair,
    bind: SocketAddr,
    allowed: PublicKey,
) -> (
    tokio::runtime::Runtime,
    SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<Event>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let (rt, addr) = common::host_process(
        server_config(&key, bind, &[allowed]),
        SERVICE,
        move |mut c| {
            let tx = tx.clone();
            async move {
                while let Some(e) = c.next_event().await {
                    let _ = tx.send(e);
                }
            }
        },
    );
    (rt, addr, rx)
}

#[test]
fn a_persistent_connection_reconnects_to_a_restarted_receiver() {
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let (rt, addr, _) = receiver_process(sk.clone(), lo(), *ck.public());
    let session = SessionConfig {
        idle_timeout_ms: 800.0,
        keepalive_ms: 200.0,
        ..SessionConfig::default()
    };
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (host, mut conn) = client_rt.block_on(async {
        let host = client(&ck, session).await;
        let mut conn = host
            .connect_persistent(target(addr, &sk), Reconnect::default())
            .await
            .unwrap();
        conn.open_stream(1, StreamConfig::default()).await.unwrap();
        let (_, up) = until(&mut conn, Duration::from_secs(3), |e| {
            matches!(e, Event::Connected)
        })
        .await;
        assert!(up);
        (host, conn)
    });

    // The receiver crashes and comes back on the same address a second later.
    rt.shutdown_background();
    std::thread::sleep(Duration::from_millis(1000));
    let (rt, _, mut delivered) = receiver_process(sk.clone(), addr, *ck.public());
    let restarted = Instant::now();
    client_rt.block_on(async {
        let (seen, back) = until(&mut conn, Duration::from_secs(5), |e| {
            matches!(e, Event::Connected)
        })
        .await;
        assert!(back, "{seen:?}");
        assert!(
            seen.iter().any(|e| matches!(e, Event::Reconnecting { .. })),
            "{seen:?}"
        );
        // Data sent after the reconnection reaches the new receiver.
        for i in 0..10 {
            conn.send_adu_nowait(1, payload(i), Fields::new()).unwrap();
        }
        let mut n = 0;
        let end = tokio::time::Instant::now() + Duration::from_secs(3);
        while n < 10 {
            match tokio::time::timeout_at(end, delivered.recv()).await {
                Ok(Some(Event::Received { .. })) => n += 1,
                Ok(Some(_)) => {}
                _ => break,
            }
        }
        assert_eq!(n, 10);
        let resumed = restarted.elapsed();
        eprintln!("delivery resumed {resumed:?} after the receiver restarted");
        assert!(resumed < Duration::from_secs(2), "{resumed:?}");
        assert_eq!(host.stats().await.unwrap().reconnects, 1);
        host.shutdown().await;
    });
    rt.shutdown_background();
}

/// A server host with a 64 KiB receive buffer, a client host connected to it with
/// stream 1 open, and both ends of the connection.
async fn small_buffer_pair() -> (Host, Host, Connection, Connection) {
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let mut cfg = server_config(&sk, lo(), &[*ck.public()]);
    cfg.recv_buffer_bytes = 64 * 1024;
    let server = Host::bind(cfg).await.unwrap();
    let mut listener = server.listen(SERVICE);
    let host = client(&ck, SessionConfig::default()).await;
    let conn = host
        .connect(target(server.local_addrs()[0], &sk))
        .await
        .unwrap();
    conn.open_stream(1, StreamConfig::default()).await.unwrap();
    let accepted = accept(&mut listener).await;
    (server, host, conn, accepted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_does_not_read_holds_its_sender_back() {
    let (server, host, mut conn, accepted) = small_buffer_pair().await;
    // Bulk, as fast as back-pressure lets it, for two seconds; nobody reads.
    let end = tokio::time::Instant::now() + Duration::from_secs(2);
    let mut sent = 0u32;
    let mut blocked = false;
    while tokio::time::Instant::now() < end {
        match tokio::time::timeout_at(end, conn.writable(1)).await {
            Ok(r) => r.unwrap(),
            Err(_) => break, // still not writable: the sender is held back
        }
        for _ in 0..8 {
            conn.send_adu_nowait(1, Bytes::from(vec![7u8; 1000]), Fields::new())
                .unwrap();
            sent += 1;
        }
        while let Some(e) = conn.try_event() {
            blocked |= e == Event::FlowBlocked;
        }
    }
    while let Some(e) = conn.try_event() {
        blocked |= e == Event::FlowBlocked;
    }
    assert!(blocked, "the sender was told");
    let held = tokio::time::timeout(Duration::from_millis(500), conn.writable(1)).await;
    assert!(held.is_err(), "the stream stays unwritable");
    // What waits unread at the receiver is bounded by its buffer. Only the events
    // queued before reading count: reading reopens the window and lets more in.
    let (_, mut events) = accepted.split();
    let mut unread = 0;
    for _ in 0..events.len() {
        if let Ok(Event::Received { payload, .. }) = events.try_recv() {
            unread += payload.len();
        }
    }
    assert!(
        unread > 16 * 1024 && unread <= 64 * 1024,
        "{unread} bytes unread"
    );
    // Loopback carries hundreds of MB in two seconds; the sender got out about what
    // the buffer holds, plus its queue.
    assert!(sent < 1000, "sent {sent} ADUs of 1000 bytes");
    host.shutdown().await;
    server.shutdown().await;
}

/// Reading what lies unread must reopen a shut window at once: the receiver's driver
/// sleeps (its window is shut, no data comes), so it has to be woken by the reading
/// itself rather than by the sender's next zero-window probe, 250 ms later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_reopens_a_shut_window_without_waiting_for_a_probe() {
    let (server, host, mut conn, accepted) = small_buffer_pair().await;
    let (_, mut events) = accepted.split();
    for _ in 0..200 {
        conn.send_adu_nowait(1, Bytes::from(vec![7u8; 1000]), Fields::new())
            .unwrap();
    }
    let (_, blocked) = until(&mut conn, Duration::from_secs(5), |e| {
        *e == Event::FlowBlocked
    })
    .await;
    assert!(blocked, "the window shut");
    // Let what was in flight settle, so that nothing but the reading can wake the
    // receiver before the sender's zero-window probe.
    tokio::time::sleep(Duration::from_millis(30)).await;
    let read_at = Instant::now();
    let mut read = 0;
    while let Ok(e) = events.try_recv() {
        if let Event::Received { payload, .. } = e {
            read += payload.len();
        }
    }
    assert!(read > 16 * 1024, "{read} bytes were waiting");
    let (_, resumed) = until(&mut conn, Duration::from_secs(2), |e| {
        *e == Event::FlowResumed
    })
    .await;
    let waited = read_at.elapsed();
    assert!(resumed, "the window reopened");
    assert!(
        waited < Duration::from_millis(120),
        "reopened {waited:?} after the reading"
    );
    host.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_accept_backlog_are_refused() {
    let (a, b, sk) = (
        Keypair::generate(),
        Keypair::generate(),
        Keypair::generate(),
    );
    let mut cfg = server_config(&sk, lo(), &[*a.public(), *b.public()]);
    cfg.accept_backlog = 1;
    let server = Host::bind(cfg).await.unwrap();
    let _listener = server.listen(SERVICE); // never accepts
    let addr = server.local_addrs()[0];
    let first = client(&a, SessionConfig::default()).await;
    let mut c1 = first.connect(target(addr, &sk)).await.unwrap();
    let (_, up) = until(&mut c1, Duration::from_secs(3), |e| *e == Event::Connected).await;
    assert!(up);
    let second = client(&b, SessionConfig::default()).await;
    let mut c2 = second.connect(target(addr, &sk)).await.unwrap();
    let (seen, closed) = until(&mut c2, Duration::from_secs(3), |e| {
        matches!(e, Event::Closed { .. })
    })
    .await;
    assert!(closed, "{seen:?}");
    assert_eq!(server.stats().await.unwrap().backlog_refused, 1);
    first.shutdown().await;
    second.shutdown().await;
    server.shutdown().await;
}

/// The other reported failure: a sender that died was never noticed and its accepted
/// connection never removed. Now the receiver's idle timeout ends and frees it.
#[test]
fn a_dead_senders_session_times_out_and_is_removed() {
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let sender_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (server, mut accepted) = rt.block_on(async {
        let mut cfg = server_config(&sk, lo(), &[*ck.public()]);
        cfg.session.idle_timeout_ms = 600.0;
        let server = Host::bind(cfg).await.unwrap();
        let mut listener = server.listen(SERVICE);
        let addr = server.local_addrs()[0];
        let (ck, sk) = (ck.clone(), sk.clone());
        sender_rt.spawn(async move {
            let host = client(&ck, SessionConfig::default()).await;
            let conn = host.connect(target(addr, &sk)).await.unwrap();
            conn.open_stream(1, StreamConfig::default()).await.unwrap();
            conn.send_adu(1, payload(1), Fields::new()).await.unwrap();
            std::future::pending::<()>().await;
        });
        (server, accept(&mut listener).await)
    });
    // The sender's process dies: no Close, no keepalives.
    sender_rt.shutdown_background();
    let t = Instant::now();
    rt.block_on(async {
        let (seen, closed) = until(&mut accepted, Duration::from_secs(3), |e| {
            matches!(e, Event::Closed { .. })
        })
        .await;
        assert!(closed, "{seen:?}");
        assert_eq!(
            seen.last(),
            Some(&Event::Closed {
                reason: CloseReason::IdleTimeout
            })
        );
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t.elapsed()
        );
        // Its state is gone: the event stream ends.
        let end = tokio::time::timeout(Duration::from_secs(1), accepted.next_event()).await;
        assert_eq!(end.ok(), Some(None));
        assert_eq!(server.stats().await.unwrap().sessions_removed, 1);
        server.shutdown().await;
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_keeps_its_sessions_to_other_services() {
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let server = Host::bind(server_config(&sk, lo(), &[*ck.public()]))
        .await
        .unwrap();
    let (mut three, mut four) = (server.listen(SERVICE), server.listen(SERVICE + 1));
    let addr = server.local_addrs()[0];
    let host = client(&ck, SessionConfig::default()).await;
    let a = host.connect(target(addr, &sk)).await.unwrap();
    let b = host
        .connect(ConnectConfig {
            service: SERVICE + 1,
            ..target(addr, &sk)
        })
        .await
        .unwrap();
    let (mut a_in, mut b_in) = (accept(&mut three).await, accept(&mut four).await);
    for (c, peer_side) in [(&a, &mut a_in), (&b, &mut b_in)] {
        c.open_stream(1, StreamConfig::default()).await.unwrap();
        c.send_adu(1, payload(9), Fields::new()).await.unwrap();
        let (seen, got) = until(peer_side, Duration::from_secs(3), |e| {
            matches!(e, Event::Received { .. })
        })
        .await;
        assert!(got, "{seen:?}");
    }
    assert_eq!(server.stats().await.unwrap().sessions_replaced, 0);
    // A second connection to the same service does replace the first.
    let _again = host.connect(target(addr, &sk)).await.unwrap();
    let (seen, ended) = until(&mut a_in, Duration::from_secs(3), |e| {
        matches!(e, Event::Closed { .. })
    })
    .await;
    assert!(ended, "{seen:?}");
    assert_eq!(server.stats().await.unwrap().sessions_replaced, 1);
    host.shutdown().await;
    server.shutdown().await;
}

/// Shut down while reconnecting to a receiver that never comes back: every ADU is still
/// accounted for, and the application hears the end.
#[test]
fn shutdown_while_reconnecting_accounts_for_every_adu() {
    let (ck, sk) = (Keypair::generate(), Keypair::generate());
    let (rt, addr, _) = receiver_process(sk.clone(), lo(), *ck.public());
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (host, mut conn) = client_rt.block_on(async {
        // A short idle timeout ends the session even before its channels are known
        // dead (they have no RTT samples yet, so their dead-man timer is long).
        let session = SessionConfig {
            idle_timeout_ms: 1500.0,
            ..SessionConfig::default()
        };
        let host = client(&ck, session).await;
        let conn = host
            .connect_persistent(target(addr, &sk), Reconnect::default())
            .await
            .unwrap();
        conn.open_stream(1, StreamConfig::default()).await.unwrap();
        (host, conn)
    });
    rt.shutdown_background();
    client_rt.block_on(async {
        let (seen, redialing) = until(&mut conn, Duration::from_secs(5), |e| {
            matches!(e, Event::Reconnecting { .. })
        })
        .await;
        assert!(redialing, "{seen:?}");
        for i in 0..10 {
            conn.send_adu_nowait(1, payload(i), Fields::new()).unwrap();
        }
        host.shutdown().await;
        let mut nacked = 0;
        let mut end = None;
        while let Some(e) = conn.next_event().await {
            match e {
                Event::Nack { .. } => nacked += 1,
                Event::Closed { reason } => end = Some(reason),
                _ => {}
            }
        }
        assert_eq!(nacked, 10);
        assert_eq!(end, Some(CloseReason::LocalClose));
    });
}
