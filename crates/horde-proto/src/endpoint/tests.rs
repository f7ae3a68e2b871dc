use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::RandomWalk;

use super::*;
use crate::channel::ChannelConfig;
use crate::session::ChannelSpec;

fn addr(host: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, host], port))
}

fn options(service: u32) -> ConnectOptions {
    ConnectOptions {
        service,
        channels: vec![ChannelSpec {
            local: 0,
            remote: addr(2, 1),
            config: ChannelConfig::default(),
        }],
        ..ConnectOptions::default()
    }
}

/// The first datagram a fresh client session sends: its hello.
fn hello_from(endpoint: &mut Endpoint, service: u32) -> (SessionHandle, Session, Bytes) {
    let (h, mut s) = endpoint.connect(Duration::ZERO, options(service)).unwrap();
    let mut buf = Vec::new();
    s.poll_transmit(Duration::ZERO, &mut buf).unwrap();
    (h, s, Bytes::from(buf))
}

fn server(backlog: usize) -> Endpoint {
    let mut e = Endpoint::new(EndpointConfig {
        seed: 9,
        accept_backlog: backlog,
        scheduler: Some(Arc::new(|| Box::new(RandomWalk::default()))),
        receive_buffer: Some(4096),
        ..EndpointConfig::default()
    });
    e.listen(7, ServerConfig::uniform(ChannelConfig::default()));
    e
}

#[test]
fn issued_connection_ids_are_distinct_and_route_to_their_handles() {
    let mut client = Endpoint::new(EndpointConfig::default());
    let handles: Vec<_> = (0..50)
        .map(|_| client.connect(Duration::ZERO, options(7)).unwrap().0)
        .collect();
    let mut ids: Vec<u64> = handles
        .iter()
        .map(|h| client.conn_id(*h).unwrap())
        .collect();
    assert!(ids.iter().all(|&c| c != 0));
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 50);
    assert_eq!(client.stats().connected, 50);
    // A datagram carrying the third session's id goes to the third handle.
    let (_, _, hello) = hello_from(&mut Endpoint::new(EndpointConfig::default()), 7);
    let mut forged = hello.to_vec();
    forged[1..9].copy_from_slice(&client.conn_id(handles[2]).unwrap().to_be_bytes());
    match client.handle(Duration::ZERO, 0, addr(2, 1), &Bytes::from(forged)) {
        DatagramEvent::Connection(h) => assert_eq!(h, handles[2]),
        other => panic!("expected routing to a known session, got {other:?}"),
    }
}

#[test]
fn a_hello_opens_a_seeded_session_and_its_next_datagrams_route_to_it() {
    let mut client = Endpoint::new(EndpointConfig::default());
    let (_, _, hello) = hello_from(&mut client, 7);
    let mut srv = server(4);
    let new = match srv.handle(Duration::ZERO, 0, addr(1, 1), &hello) {
        DatagramEvent::NewConnection(n) => n,
        other => panic!("expected a new session, got {other:?}"),
    };
    assert!(!new.refused);
    assert!(new.session.is_connected());
    assert_eq!(new.session.service(), 7);
    // Seeded from the endpoint's configuration.
    assert_eq!(new.session.scheduler_name(), "random-walk");
    assert_eq!(srv.accept(), Some(new.handle));
    assert_eq!(srv.accept(), None);
    // A repeated hello is the session's business, not a second session.
    match srv.handle(Duration::ZERO, 0, addr(1, 1), &hello) {
        DatagramEvent::Connection(h) => assert_eq!(h, new.handle),
        other => panic!("expected routing to the accepted session, got {other:?}"),
    }
    assert_eq!(srv.stats().accepted, 1);
    srv.forget(new.handle);
    assert!(srv.is_empty());
    // Forgotten: the same hello now opens a new session under a new handle.
    match srv.handle(Duration::ZERO, 0, addr(1, 1), &hello) {
        DatagramEvent::NewConnection(n) => assert_ne!(n.handle, new.handle),
        other => panic!("expected a new session, got {other:?}"),
    }
}

#[test]
fn hellos_the_endpoint_cannot_serve_are_refused_by_reason() {
    let mut client = Endpoint::new(EndpointConfig::default());
    let (_, _, hello) = hello_from(&mut client, 8);
    let mut srv = server(4);
    let now = Duration::ZERO;
    assert!(matches!(
        srv.handle(now, 0, addr(1, 1), &hello),
        DatagramEvent::Dropped(AcceptError::UnknownService(8))
    ));
    let mut old = hello.to_vec();
    old[0] = (1 << 4) | (old[0] & 0x0f);
    assert!(matches!(
        srv.handle(now, 0, addr(1, 1), &Bytes::from(old)),
        DatagramEvent::Dropped(AcceptError::UnsupportedVersion { peer: 1, ours })
            if ours == crate::wire::VERSION
    ));
    assert!(matches!(
        srv.handle(now, 0, addr(1, 1), &Bytes::from_static(&[0x30, 1])),
        DatagramEvent::Dropped(AcceptError::Malformed(_))
    ));
    // A well-formed ping of an unknown session.
    let mut ping = Vec::new();
    crate::wire::encode(
        &crate::wire::Packet::Ping {
            conn: 5,
            channel: ChannelId::new(0),
            seq: 1,
            send_ts: 0,
        },
        &mut ping,
    );
    assert!(matches!(
        srv.handle(now, 0, addr(1, 1), &Bytes::from(ping)),
        DatagramEvent::Dropped(AcceptError::NotAHello)
    ));
    let stats = srv.stats();
    assert_eq!(
        (
            stats.unknown_service,
            stats.version_refused,
            stats.unroutable
        ),
        (1, 1, 2)
    );
    assert_eq!(stats.accepted, 0);
}

#[test]
fn a_full_backlog_refuses_with_a_close_instead_of_silence() {
    let mut client = Endpoint::new(EndpointConfig::default());
    let mut srv = server(1);
    let now = Duration::ZERO;
    let (_, _, first) = hello_from(&mut client, 7);
    let (_, _, second) = hello_from(&mut client, 7);
    let DatagramEvent::NewConnection(a) = srv.handle(now, 0, addr(1, 1), &first) else {
        panic!("first hello accepted")
    };
    let DatagramEvent::NewConnection(mut b) = srv.handle(now, 0, addr(1, 1), &second) else {
        panic!("second hello answered")
    };
    assert!(!a.refused && b.refused);
    assert!(b.session.is_closed());
    assert_eq!(srv.stats().backlog_refused, 1);
    assert_eq!(srv.accept(), Some(a.handle));
    assert_eq!(srv.accept(), None);
    // The refused session answers with a Close (packet type 6).
    let mut buf = Vec::new();
    let mut types = Vec::new();
    while let Some(_t) = b.session.poll_transmit(now, &mut buf) {
        types.push(buf[0] & 0x0f);
    }
    assert!(types.contains(&6), "types sent: {types:?}");
    // Taking the first frees the backlog for the next.
    let (_, _, third) = hello_from(&mut client, 7);
    let DatagramEvent::NewConnection(c) = srv.handle(now, 0, addr(1, 1), &third) else {
        panic!("third hello answered")
    };
    assert!(!c.refused);
}

#[test]
fn fixed_seeds_and_ids_are_honoured_and_drawn_ones_follow_the_endpoint_seed() {
    let draw = |seed| {
        let mut e = Endpoint::new(EndpointConfig {
            seed,
            ..EndpointConfig::default()
        });
        let (h, _) = e.connect(Duration::ZERO, options(1)).unwrap();
        e.conn_id(h).unwrap()
    };
    assert_eq!(draw(3), draw(3));
    assert_ne!(draw(3), draw(4));
    let mut e = Endpoint::new(EndpointConfig::default());
    let (h, s) = e
        .connect(
            Duration::ZERO,
            ConnectOptions {
                conn_id: Some(77),
                seed: Some(5),
                ..options(1)
            },
        )
        .unwrap();
    assert_eq!((s.conn_id(), e.conn_id(h)), (77, Some(77)));
}
