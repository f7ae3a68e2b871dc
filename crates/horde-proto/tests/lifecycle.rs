//! The session lifecycle in virtual time: reliable close, idle timeout and keepalive,
//! handing a dead session's streams to a new one, and receive-side flow control.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;
use horde_proto::{
    ChannelConfig, ChannelSpec, CloseReason, Event, InFlightPolicy, NackReason, Session,
    SessionConfig, StreamConfig,
};

const CLIENT: usize = 0;
const SERVER: usize = 1;
const DELAY: Duration = Duration::from_millis(20);
/// First byte of a `Close` packet: version in the high nibble, type 6.
const CLOSE: u8 = (horde_proto::wire::VERSION << 4) | 6;

fn addr(host: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, host as u8 + 1], 4000))
}

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

type Drop = Box<dyn FnMut(usize, &[u8]) -> bool>;

/// Two sessions, one channel with a fixed delay each way; `drop(to, bytes)` loses
/// datagrams. Events are recorded with the time they came out.
struct Net {
    now: Duration,
    wire: BTreeMap<(Duration, u64), (usize, Bytes)>,
    order: u64,
    drop: Drop,
    hosts: [Option<Session>; 2],
    events: [Vec<(Duration, Event)>; 2],
    server_config: SessionConfig,
    receive_buffer: Option<usize>,
}

impl Net {
    fn new(config: SessionConfig, drop: Drop) -> Self {
        let client = Session::connect(
            config.clone(),
            9,
            1,
            vec![ChannelSpec {
                local: 0,
                remote: addr(SERVER),
                config: ChannelConfig::default(),
            }],
            vec![addr(CLIENT)],
            Duration::ZERO,
        )
        .unwrap();
        Net {
            now: Duration::ZERO,
            wire: BTreeMap::new(),
            order: 0,
            drop,
            hosts: [Some(client), None],
            events: [Vec::new(), Vec::new()],
            server_config: config,
            receive_buffer: None,
        }
    }

    fn client(&mut self) -> &mut Session {
        self.hosts[CLIENT].as_mut().unwrap()
    }

    fn server(&mut self) -> &mut Session {
        self.hosts[SERVER].as_mut().unwrap()
    }

    fn flush(&mut self) {
        let mut buf = Vec::new();
        for host in [CLIENT, SERVER] {
            let Some(s) = self.hosts[host].as_mut() else {
                continue;
            };
            while s.poll_transmit(self.now, &mut buf).is_some() {
                if (self.drop)(1 - host, &buf) {
                    continue;
                }
                self.order += 1;
                self.wire.insert(
                    (self.now + DELAY, self.order),
                    (1 - host, Bytes::copy_from_slice(&buf)),
                );
            }
            while let Some(e) = s.poll_event() {
                self.events[host].push((self.now, e));
            }
        }
    }

    fn run_until(&mut self, end: Duration) {
        self.flush();
        loop {
            let mut t = self.wire.keys().next().map(|k| k.0);
            for s in self.hosts.iter().flatten() {
                if let Some(x) = s.poll_timeout(self.now) {
                    t = Some(t.map_or(x, |t| t.min(x)));
                }
            }
            let Some(t) = t.filter(|&t| t <= end) else {
                break;
            };
            self.now = self.now.max(t);
            while let Some(e) = self.wire.first_entry() {
                if e.key().0 > self.now {
                    break;
                }
                let (to, data) = e.remove();
                let src = addr(1 - to);
                match self.hosts[to].as_mut() {
                    Some(s) => s.handle_datagram(self.now, 0, src, data),
                    None => {
                        let mut s = Session::accept(
                            self.server_config.clone(),
                            self.now,
                            0,
                            src,
                            data,
                            vec![addr(SERVER)],
                            Arc::new(|_| ChannelConfig::default()),
                        )
                        .unwrap();
                        s.set_receive_buffer(self.receive_buffer);
                        self.hosts[to] = Some(s);
                    }
                }
            }
            for s in self.hosts.iter_mut().flatten() {
                s.handle_timeout(self.now);
            }
            self.flush();
        }
        self.now = end;
    }

    fn send(&mut self, stream: u32, n: usize, bytes: usize) {
        let now = self.now;
        for i in 0..n {
            self.client()
                .send_adu(
                    now,
                    stream,
                    Bytes::from(vec![i as u8; bytes]),
                    Fields::new(),
                )
                .unwrap();
        }
    }

    fn closed(&self, host: usize) -> Vec<(Duration, CloseReason)> {
        self.events[host]
            .iter()
            .filter_map(|(t, e)| match e {
                Event::Closed { reason } => Some((*t, *reason)),
                _ => None,
            })
            .collect()
    }

    /// (acked, nacked by reason) of the client's ADUs.
    fn outcomes(&self) -> (usize, BTreeMap<String, usize>) {
        let mut acked = 0;
        let mut nacked = BTreeMap::new();
        for (_, e) in &self.events[CLIENT] {
            match e {
                Event::Ack { .. } => acked += 1,
                Event::Nack { reason, .. } => {
                    *nacked.entry(format!("{reason:?}")).or_default() += 1
                }
                _ => {}
            }
        }
        (acked, nacked)
    }
}

fn no_loss() -> Drop {
    Box::new(|_, _| false)
}

fn connected(config: SessionConfig, drop: Drop) -> Net {
    let mut net = Net::new(config, drop);
    net.client()
        .open_stream(1, StreamConfig::default())
        .unwrap();
    net.run_until(ms(200));
    assert!(net.client().is_connected());
    net
}

#[test]
fn close_is_acknowledged_and_every_adu_resolves() {
    let mut net = connected(SessionConfig::default(), no_loss());
    net.send(1, 60, 800);
    net.run_until(ms(230)); // some out, some in flight, some queued
    let at = net.now;
    net.client().close(at);
    net.run_until(ms(3000));
    // Acked within one round trip, long before the 2 s close timeout.
    let closed = net.closed(CLIENT);
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert_eq!(closed[0].1, CloseReason::LocalClose);
    assert!(closed[0].0 - at <= 2 * DELAY + ms(5), "{closed:?}");
    let peer = net.closed(SERVER);
    assert_eq!(peer.len(), 1);
    assert_eq!(peer[0].1, CloseReason::PeerClosed);
    let (acked, nacked) = net.outcomes();
    assert!(acked > 0, "{nacked:?}");
    assert_eq!(acked + nacked.values().sum::<usize>(), 60, "{nacked:?}");
    // Both ends are done: no timers left, so a driver forgets them.
    let now = net.now;
    assert!(net.client().poll_timeout(now).is_none());
    assert!(net.server().poll_timeout(now).is_none());
}

#[test]
fn a_lost_close_is_repeated_until_acknowledged() {
    let mut lost = 0;
    let drop: Drop = Box::new(move |to, b| {
        let first_two = to == SERVER && b[0] == CLOSE && lost < 2;
        lost += usize::from(first_two);
        first_two
    });
    let mut net = connected(SessionConfig::default(), drop);
    let at = net.now;
    net.client().close(at);
    net.run_until(ms(3000));
    let closed = net.closed(CLIENT);
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0].1, CloseReason::LocalClose);
    // The third Close (two retries at 100 ms) got through and was acked.
    let took = closed[0].0 - at;
    assert!(took >= ms(200) && took < ms(400), "{took:?}");
    assert_eq!(net.closed(SERVER)[0].1, CloseReason::PeerClosed);
}

#[test]
fn a_close_nobody_answers_times_out_and_abandons_what_was_in_flight() {
    let mut net = connected(SessionConfig::default(), no_loss());
    net.drop = Box::new(|_, _| true); // the peer is gone
    net.send(1, 10, 500);
    net.run_until(ms(250));
    let at = net.now;
    net.client().close(at);
    net.run_until(ms(5000));
    let closed = net.closed(CLIENT);
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0].1, CloseReason::LocalClose);
    let took = closed[0].0 - at;
    assert!(took >= ms(2000) && took < ms(2100), "{took:?}");
    let (acked, nacked) = net.outcomes();
    assert_eq!(acked, 0);
    assert_eq!(nacked.values().sum::<usize>(), 10, "{nacked:?}");
    assert!(
        nacked.get("Abandoned").copied().unwrap_or(0) > 0,
        "{nacked:?}"
    );
}

#[test]
fn a_silent_peer_times_out_and_a_quiet_one_is_kept_alive() {
    let config = SessionConfig {
        idle_timeout_ms: 1000.0,
        keepalive_ms: 300.0,
        ..SessionConfig::default()
    };
    // Quiet but alive: 10 s without data, keepalives hold both ends open.
    let mut net = connected(config.clone(), no_loss());
    net.run_until(ms(10_000));
    assert!(net.closed(CLIENT).is_empty() && net.closed(SERVER).is_empty());
    assert!(net.client().is_connected());

    // Silent: the client hears nothing after 10 s; it times out a second later.
    net.drop = Box::new(|to, _| to == CLIENT);
    net.send(1, 5, 500);
    net.run_until(ms(20_000));
    let closed = net.closed(CLIENT);
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert_eq!(closed[0].1, CloseReason::IdleTimeout);
    assert!(
        closed[0].0 >= ms(10_900) && closed[0].0 <= ms(11_100),
        "{closed:?}"
    );
    let (_, nacked) = net.outcomes();
    assert_eq!(nacked.values().sum::<usize>(), 5, "{nacked:?}");
}

#[test]
fn a_successor_takes_over_queued_and_resendable_adus() {
    let config = SessionConfig {
        idle_timeout_ms: 500.0,
        ..SessionConfig::default()
    };
    let mut net = Net::new(config.clone(), no_loss());
    net.client().set_successor_expected(true);
    net.client()
        .open_stream(1, StreamConfig::default())
        .unwrap();
    let resend = StreamConfig {
        on_reconnect: InFlightPolicy::Resend,
        ..StreamConfig::default()
    };
    net.client().open_stream(2, resend).unwrap();
    net.run_until(ms(200));
    net.send(1, 3, 400);
    net.run_until(ms(400));
    // The peer dies with ADUs of both streams in flight and more queued.
    net.drop = Box::new(|_, _| true);
    net.send(1, 4, 400);
    let now = net.now;
    for i in 0..4u8 {
        net.client()
            .send_adu(now, 2, Bytes::from(vec![i; 400]), Fields::new())
            .unwrap();
    }
    net.run_until(ms(2000));
    assert_eq!(net.closed(CLIENT)[0].1, CloseReason::IdleTimeout);
    let (acked, nacked) = net.outcomes();
    assert_eq!(acked, 3);
    // Stream 1's in-flight ADUs are nacked; stream 2's wait for the successor.
    assert_eq!(nacked.get("Abandoned").copied(), Some(4), "{nacked:?}");

    let mut old = net.hosts[CLIENT].take().unwrap();
    let mut fresh = Session::connect(
        config,
        10,
        1,
        vec![ChannelSpec {
            local: 0,
            remote: addr(SERVER),
            config: ChannelConfig::default(),
        }],
        vec![addr(CLIENT)],
        net.now,
    )
    .unwrap();
    fresh.inherit(&mut old, net.now);
    assert_eq!(fresh.queued(2), 4);
    net.hosts = [Some(fresh), None];
    net.drop = no_loss();
    net.events = [Vec::new(), Vec::new()];
    net.run_until(ms(4000));
    let got: Vec<(u32, u64)> = net.events[SERVER]
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Received {
                stream, stream_seq, ..
            } => Some((*stream, *stream_seq)),
            _ => None,
        })
        .collect();
    // Sequence numbers carry on from the old session.
    assert!(got.contains(&(2, 0)) && got.contains(&(2, 3)), "{got:?}");
    assert!(!got.iter().any(|&(s, q)| s == 1 && q < 3), "{got:?}");
    let (acked, _) = net.outcomes();
    assert_eq!(acked, 4, "stream 2's four ADUs, resent");
}

#[test]
fn a_receiver_that_does_not_read_stalls_the_sender_in_bounded_memory() {
    let mut net = Net::new(SessionConfig::default(), no_loss());
    net.receive_buffer = Some(40_000);
    net.client()
        .open_stream(
            1,
            StreamConfig {
                max_queue_bytes: 1 << 20,
                ..StreamConfig::default()
            },
        )
        .unwrap();
    net.run_until(ms(200));
    net.send(1, 400, 1000); // 400 kB for a 40 kB buffer
    net.run_until(ms(5000));
    let unread = net.server().unread_bytes();
    assert!(unread > 20_000 && unread <= 40_000, "unread {unread}");
    assert!(net.client().flow_blocked());
    let (q, st, sst) = (
        net.client().queued(1),
        net.client().stats(),
        net.server().stats(),
    );
    assert!(q > 300, "the rest waits at the sender: {q} {st:?} {sst:?}");
    assert!(!net.client().writable(1).unwrap());
    let blocked = net.events[CLIENT]
        .iter()
        .any(|(_, e)| matches!(e, Event::FlowBlocked));
    assert!(blocked);

    // The application reads everything: the window opens and the rest arrives.
    for _ in 0..40 {
        let now = net.now;
        let unread = net.server().unread_bytes();
        net.server().consumed(now, unread);
        let next = net.now + ms(100);
        net.run_until(next);
    }
    let received = net.events[SERVER]
        .iter()
        .filter(|(_, e)| matches!(e, Event::Received { .. }))
        .count();
    let (_, nacked) = net.outcomes();
    let lost = nacked.get("Lost").copied().unwrap_or(0);
    assert_eq!(received + lost, 400, "{nacked:?}");
    assert!(received >= 380, "received {received}, {nacked:?}");
    assert!(net.events[CLIENT]
        .iter()
        .any(|(_, e)| matches!(e, Event::FlowResumed)));
    assert_eq!(
        nacked.get(&format!("{:?}", NackReason::QueueOverflow)),
        None
    );
}
