//! Each named timer of a session fires at its deadline and not a nanosecond before:
//! `poll_timeout` names the deadline, `handle_timeout` just before it does nothing, and
//! at it the timer's work appears (a datagram or an event).

use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;
use horde_proto::harness::{Harness, PathConfig};
use horde_proto::wire::{self, Packet};
use horde_proto::{
    ChannelConfig, ChannelId, ChannelSpec, CloseReason, ConnectOptions, EndpointConfig, Event,
    ServerConfig, Session, SessionConfig, StreamConfig,
};

const NS: Duration = Duration::from_nanos(1);

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// Packet types of everything the session sends now.
fn drain(s: &mut Session, now: Duration) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut types = Vec::new();
    while s.poll_transmit(now, &mut buf).is_some() {
        types.push(buf[0] & 0x0f);
    }
    types
}

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

/// The session's next deadline: nothing happens just before it, something at it.
/// Returns what was sent at the deadline and the events it produced.
fn fires_at(s: &mut Session, expected: Duration) -> (Vec<u8>, Vec<Event>) {
    let now = expected - NS;
    assert_eq!(s.poll_timeout(now), Some(expected), "the next deadline");
    s.handle_timeout(now);
    assert_eq!(
        drain(s, now),
        Vec::<u8>::new(),
        "nothing sent before {expected:?}"
    );
    assert_eq!(events(s), Vec::new(), "no event before {expected:?}");
    s.handle_timeout(expected);
    let sent = drain(s, expected);
    let ev = events(s);
    assert!(
        !sent.is_empty() || !ev.is_empty(),
        "something happens at {expected:?}"
    );
    (sent, ev)
}

const HELLO: u8 = 1;
const PING: u8 = 5;
const CLOSE: u8 = 6;

fn config() -> SessionConfig {
    SessionConfig {
        hello_interval_ms: 500.0,
        idle_timeout_ms: 10_000.0,
        keepalive_ms: 1_000.0,
        close_timeout_ms: 2_000.0,
        close_retry_ms: 100.0,
        reorder_hold_ms: 50.0,
        ..SessionConfig::default()
    }
}

fn lone_client(config: SessionConfig) -> Session {
    let channel = ChannelSpec {
        local: 0,
        remote: "10.0.1.1:4000".parse().unwrap(),
        config: ChannelConfig::default(),
    };
    Session::connect(config, 5, 1, vec![channel], Vec::new(), Duration::ZERO).unwrap()
}

/// A client and a server connected over the harness, then taken out to be driven by
/// hand, quiet (every ack sent), at the returned time.
fn connected_pair() -> (Session, Session, Duration) {
    connected_pair_with(config())
}

fn connected_pair_with(session: SessionConfig) -> (Session, Session, Duration) {
    let mut net = Harness::new(0);
    net.set_default_path(PathConfig::delay(ms(10)));
    let endpoint = EndpointConfig {
        session,
        ..EndpointConfig::default()
    };
    let client = net.add_node(endpoint.clone(), 1);
    let server = net.add_node(endpoint, 1);
    net.listen(server, 1, ServerConfig::uniform(ChannelConfig::default()));
    let options = ConnectOptions {
        service: 1,
        channels: vec![ChannelSpec {
            local: 0,
            remote: Harness::addr(server, 0),
            config: ChannelConfig::default(),
        }],
        ..ConnectOptions::default()
    };
    let c = net.connect(client, options).unwrap();
    net.run_until(ms(100));
    let s = net.accept(server).unwrap();
    let now = net.now();
    let mut cs = net.remove_session(client, c).unwrap();
    let mut ss = net.remove_session(server, s).unwrap();
    assert!(cs.is_connected() && ss.is_connected());
    assert!(drain(&mut cs, now).is_empty() && drain(&mut ss, now).is_empty());
    events(&mut cs);
    events(&mut ss);
    (cs, ss, now)
}

#[test]
fn hellos_repeat_at_the_hello_interval() {
    let mut s = lone_client(config());
    assert_eq!(drain(&mut s, Duration::ZERO), vec![HELLO]);
    let (sent, _) = fires_at(&mut s, ms(500));
    assert_eq!(sent, vec![HELLO]);
    let (sent, _) = fires_at(&mut s, ms(1000));
    assert_eq!(sent, vec![HELLO]);
}

#[test]
fn a_handshake_nobody_answers_ends_at_the_idle_timeout() {
    let mut s = lone_client(SessionConfig {
        hello_interval_ms: 4_000.0,
        idle_timeout_ms: 3_000.0,
        ..config()
    });
    drain(&mut s, Duration::ZERO);
    let (_, ev) = fires_at(&mut s, ms(3_000));
    assert_eq!(
        ev,
        vec![Event::Closed {
            reason: CloseReason::IdleTimeout
        }]
    );
    assert_eq!(
        s.poll_timeout(ms(3_000)),
        None,
        "a closed session has no timer"
    );
}

#[test]
fn a_quiet_session_pings_at_the_keepalive_interval() {
    let (mut c, _, now) = connected_pair();
    // The client last sent at or before `now`; its keepalive comes within a second.
    let at = c.poll_timeout(now).unwrap();
    assert!(at > now && at <= now + ms(1_000), "{at:?}");
    let (sent, _) = fires_at(&mut c, at);
    assert_eq!(sent, vec![PING]);
}

#[test]
fn an_unanswered_close_repeats_at_the_retry_interval_and_gives_up_at_the_deadline() {
    let (mut c, _, now) = connected_pair();
    c.close(now);
    assert_eq!(drain(&mut c, now), vec![CLOSE]);
    let (sent, _) = fires_at(&mut c, now + ms(100));
    assert_eq!(sent, vec![CLOSE]);
    // Repeats every 100 ms until the 2 s deadline.
    let mut t = now + ms(200);
    while t < now + ms(2_000) {
        let (sent, _) = fires_at(&mut c, t);
        assert_eq!(sent, vec![CLOSE]);
        t += ms(100);
    }
    let (_, ev) = fires_at(&mut c, now + ms(2_000));
    assert!(ev.contains(&Event::Closed {
        reason: CloseReason::LocalClose
    }));
}

#[test]
fn a_peer_closed_session_drains_for_the_close_timeout() {
    let (_, mut s, now) = connected_pair();
    let mut close = Vec::new();
    wire::encode(&Packet::Close { conn: s.conn_id() }, &mut close);
    let from = "10.0.0.1:4000".parse().unwrap();
    s.handle_datagram(now, 0, from, Bytes::from(close));
    drain(&mut s, now);
    events(&mut s);
    assert_eq!(s.poll_timeout(now), Some(now + ms(2_000)));
    s.handle_timeout(now + ms(2_000) - NS);
    assert!(
        s.poll_timeout(now + ms(2_000) - NS).is_some(),
        "still draining"
    );
    s.handle_timeout(now + ms(2_000));
    assert_eq!(s.poll_timeout(now + ms(2_000)), None, "drained");
}

#[test]
fn a_held_adu_is_released_after_the_reorder_hold() {
    let (_, mut s, now) = connected_pair();
    let ordered = StreamConfig {
        ordered: true,
        ..StreamConfig::default()
    };
    s.open_stream(3, ordered).unwrap();
    // Stream sequence 1 arrives before 0: held, waiting for the gap.
    let mut data = Vec::new();
    wire::encode(
        &Packet::Data {
            conn: s.conn_id(),
            channel: ChannelId::new(0),
            flags: wire::FLAG_ORDERED,
            seq: 1_000,
            send_ts: 0,
            stream: 3,
            stream_seq: 1,
            payload: Bytes::from_static(b"late"),
        },
        &mut data,
    );
    let from = "10.0.0.1:4000".parse().unwrap();
    s.handle_datagram(now, 0, from, Bytes::from(data));
    assert!(!events(&mut s)
        .iter()
        .any(|e| matches!(e, Event::Received { .. })));
    // The ack goes out at once or after the ack delay; then the hold is what is left.
    let mut t = now;
    loop {
        drain(&mut s, t);
        let next = s.poll_timeout(t).unwrap();
        if next >= now + ms(50) {
            break;
        }
        t = next;
        s.handle_timeout(t);
        assert!(!events(&mut s)
            .iter()
            .any(|e| matches!(e, Event::Received { .. })));
    }
    let (_, ev) = fires_at(&mut s, now + ms(50));
    assert!(ev.iter().any(|e| matches!(
        e,
        Event::Received {
            stream: 3,
            stream_seq: 1,
            ..
        }
    )));
}

#[test]
fn data_nobody_acknowledges_is_probed_at_the_channel_timer() {
    // No keepalive: the channel's own timer is the only one before the idle timeout.
    let (mut c, _, now) = connected_pair_with(SessionConfig {
        keepalive_ms: 0.0,
        ..config()
    });
    c.open_stream(1, StreamConfig::default()).unwrap();
    c.send_adu(now, 1, Bytes::from(vec![1; 300]), Fields::new())
        .unwrap();
    assert!(!drain(&mut c, now).is_empty());
    events(&mut c);
    // The probe timeout sends a ping.
    let at = c.poll_timeout(now).unwrap();
    assert!(at > now && at < now + ms(10_000), "{at:?}");
    let (sent, _) = fires_at(&mut c, at);
    assert!(sent.contains(&PING), "{sent:?}");
}
