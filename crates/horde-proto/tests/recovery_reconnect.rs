//! A recovery stream across a reconnection, in virtual time: the client's session is
//! replaced as the runtime replaces it (a new session inherits the old one's streams and
//! queue), the server accepts the new session and opens its side of the stream again,
//! and traffic goes on both ways. Every recovery mode must keep delivering.

use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;
use horde_proto::harness::{Harness, NodeId, PathConfig};
use horde_proto::{
    ChannelConfig, ChannelSpec, ConnectOptions, EndpointConfig, Event, RecoveryConfig,
    RecoveryMode, ServerConfig, SessionHandle, StreamConfig,
};

const STREAM: u32 = 1;
const ADU: usize = 300;

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

fn stream_config(mode: RecoveryMode) -> StreamConfig {
    StreamConfig {
        recovery: RecoveryConfig::new(mode),
        ..StreamConfig::default()
    }
}

fn connect(h: &mut Harness, client: NodeId, server: NodeId, conn: u64) -> SessionHandle {
    h.connect(
        client,
        ConnectOptions {
            service: 1,
            channels: vec![ChannelSpec {
                local: 0,
                remote: Harness::addr(server, 0),
                config: ChannelConfig::default(),
            }],
            conn_id: Some(conn),
            ..ConnectOptions::default()
        },
    )
    .unwrap()
}

/// ADU `i` of a run tagged `tag`: distinct bytes, so a payload that still carries a
/// recovery frame, or a wrong one, shows up.
fn payload(tag: u8, i: usize) -> Bytes {
    let mut v = vec![tag; ADU];
    v[..8].copy_from_slice(&(i as u64).to_be_bytes());
    Bytes::from(v)
}

fn send(h: &mut Harness, node: NodeId, conn: SessionHandle, tag: u8, n: usize) {
    let now = h.now();
    let s = h.session_mut(node, conn);
    for i in 0..n {
        s.send_adu(now, STREAM, payload(tag, i), Fields::new())
            .unwrap();
    }
}

/// The payloads `conn` on `node` has received on the stream so far.
fn received(h: &Harness, node: NodeId, conn: SessionHandle) -> Vec<Bytes> {
    h.events(node, conn)
        .iter()
        .filter_map(|e| match e {
            Event::Received {
                stream: STREAM,
                payload,
                ..
            } => Some(payload.clone()),
            _ => None,
        })
        .collect()
}

/// How many of `n` payloads tagged `tag` are among `got`, each at most once.
fn count(got: &[Bytes], tag: u8, n: usize) -> usize {
    (0..n).filter(|&i| got.contains(&payload(tag, i))).count()
}

/// The server opens its side of the stream on every session it accepts, as the tunnel
/// server does; returns the last one.
fn accept_all(h: &mut Harness, server: NodeId, mode: RecoveryMode) -> Option<SessionHandle> {
    let mut last = None;
    while let Some(c) = h.accept(server) {
        h.session_mut(server, c)
            .open_stream(STREAM, stream_config(mode))
            .unwrap();
        last = Some(c);
    }
    last
}

/// Run to `until`; returns the session the server accepted meanwhile, if any.
fn run(
    h: &mut Harness,
    server: NodeId,
    mode: RecoveryMode,
    until: Duration,
) -> Option<SessionHandle> {
    let mut accepted = None;
    // Small steps, so the server's stream is open before the client's data arrives.
    while h.now() < until {
        let next = (h.now() + ms(5)).min(until);
        h.run_until(next);
        accepted = accept_all(h, server, mode).or(accepted);
    }
    accepted
}

fn reconnect_and_deliver(mode: RecoveryMode) {
    let mut h = Harness::new(3);
    h.set_default_path(PathConfig::delay(ms(20)));
    let client = h.add_node(EndpointConfig::default(), 1);
    let server = h.add_node(EndpointConfig::default(), 1);
    h.listen(server, 1, ServerConfig::uniform(ChannelConfig::default()));

    let first = connect(&mut h, client, server, 9);
    h.session_mut(client, first)
        .open_stream(STREAM, stream_config(mode))
        .unwrap();
    let served = run(&mut h, server, mode, ms(200)).expect("the first session accepted");
    send(&mut h, client, first, 1, 20);
    send(&mut h, server, served, 2, 20);
    run(&mut h, server, mode, ms(1200));
    assert_eq!(count(&received(&h, server, served), 1, 20), 20, "{mode:?}");
    assert_eq!(count(&received(&h, client, first), 2, 20), 20, "{mode:?}");

    // Queue ADUs the old session never sends, then replace it with a new session that
    // inherits its streams and queue, as the runtime's reconnect does.
    send(&mut h, client, first, 3, 5);
    let second = connect(&mut h, client, server, 10);
    let mut old = h.remove_session(client, first).unwrap();
    let now = h.now();
    h.session_mut(client, second).inherit(&mut old, now);
    assert_eq!(h.session(client, second).queued(STREAM), 5, "{mode:?}");
    let served = run(&mut h, server, mode, ms(1500)).expect("the new session accepted");
    assert_ne!(h.session(client, second).conn_id(), 9);
    send(&mut h, client, second, 4, 20);
    send(&mut h, server, served, 5, 20);
    run(&mut h, server, mode, ms(3000));

    let up = received(&h, server, served);
    let down = received(&h, client, second);
    assert_eq!(count(&up, 3, 5), 5, "{mode:?}: the carried queue, {up:?}");
    assert_eq!(
        count(&up, 4, 20),
        20,
        "{mode:?}: upstream after the reconnect"
    );
    assert_eq!(
        count(&down, 5, 20),
        20,
        "{mode:?}: downstream after the reconnect"
    );
    assert_eq!(up.len(), 25, "{mode:?}: nothing else, nothing twice");
    assert_eq!(down.len(), 20, "{mode:?}: nothing else, nothing twice");
    let stats = h
        .session(client, second)
        .recovery_stats(STREAM)
        .filter(|_| mode != RecoveryMode::None);
    if let Some(s) = stats {
        // The stream's counts cover the connection: 20 in each session.
        assert_eq!(s.data_received, 40, "{mode:?}: {s:?}");
    }
}

#[test]
fn every_recovery_mode_delivers_after_the_session_is_replaced() {
    for mode in [
        RecoveryMode::None,
        RecoveryMode::Retransmit,
        RecoveryMode::Fec { percent: 100.0 },
        RecoveryMode::Oec,
        RecoveryMode::Block { data: 4 },
    ] {
        reconnect_and_deliver(mode);
    }
}
