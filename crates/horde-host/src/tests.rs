//! Two hosts wired back to back in virtual time: every datagram one sends reaches the
//! other at the next step (unless the link is cut), sealed and opened as on a real wire,
//! with the hosts' handshake jobs run inline, as the handshake worker would.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use horde_crypto::Keypair;
use horde_policy::Fields;
use horde_proto::{ChannelConfig, CloseReason, Event, InFlightPolicy, StreamConfig};
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;

const STEP: Duration = Duration::from_millis(1);
const SERVICE: u32 = 7;

fn keypair(seed: u64) -> Keypair {
    Keypair::generate_with(&mut StdRng::seed_from_u64(seed))
}

struct Node {
    host: Host,
    addr: SocketAddr,
    rng: StdRng,
    events: Vec<HostEvent>,
}

impl Node {
    fn new(key: &Keypair, allowed: &[Keypair], addr: &str, seed: u64, now: Duration) -> Node {
        let host = Host::new(HostSettings {
            keypair: key.clone(),
            rekey: RekeyPolicy::default(),
            endpoint: EndpointConfig {
                seed,
                ..EndpointConfig::default()
            },
            accepted_channel: Arc::new(|_| ChannelConfig::default()),
            interfaces: 1,
            seed,
            // A restarted host's initiations must be newer than its last ones.
            unix_micros_at_start: 1_000_000 + now.as_micros() as u64,
            responder: ResponderSettings {
                allowed: allowed.iter().map(|k| *k.public()).collect(),
                ..ResponderSettings::default()
            },
        });
        Node {
            host,
            addr: addr.parse().unwrap(),
            rng: StdRng::seed_from_u64(seed ^ 0x5eed),
            events: Vec::new(),
        }
    }

    fn drain(&mut self, drain: Drain) {
        if drain == Drain::ByEvent {
            while let Some(e) = self.host.poll_event() {
                self.events.push(e);
            }
            return;
        }
        let most = if drain == Drain::OneAtATime {
            1
        } else {
            usize::MAX
        };
        // Drains until one finds nothing: what one leaves, the next takes.
        loop {
            let before = self.events.len();
            while let Some(polled) = self.host.poll_events() {
                match polled {
                    Polled::Host(e) => self.events.push(e),
                    Polled::Conn(events) => {
                        let key = events.key();
                        let events = events
                            .take(most)
                            .map(|event| HostEvent::Conn { key, event });
                        self.events.extend(events);
                    }
                }
            }
            if self.events.len() == before {
                return;
            }
        }
    }

    fn accepted(&self) -> Vec<u64> {
        self.events
            .iter()
            .filter_map(|e| match e {
                HostEvent::Accepted { key, .. } => Some(*key),
                _ => None,
            })
            .collect()
    }

    fn received(&self, conn: u64) -> Vec<Bytes> {
        self.conn_events(conn)
            .into_iter()
            .filter_map(|e| match e {
                Event::Received { payload, .. } => Some(payload.clone()),
                _ => None,
            })
            .collect()
    }

    fn conn_events(&self, conn: u64) -> Vec<&Event> {
        self.events
            .iter()
            .filter_map(|e| match e {
                HostEvent::Conn { key, event } if *key == conn => Some(event),
                _ => None,
            })
            .collect()
    }

    fn removed(&self, conn: u64) -> bool {
        self.events
            .iter()
            .any(|e| matches!(e, HostEvent::Removed { key } if *key == conn))
    }
}

/// How a world drains its hosts' events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drain {
    /// [`Host::poll_event`], one event at a time.
    ByEvent,
    /// [`Host::poll_events`], each connection's events in one go.
    ByConnection,
    /// [`Host::poll_events`], taking at most one event of each connection per drain
    /// (the rest wait for the next).
    OneAtATime,
}

struct World {
    now: Duration,
    drain: Drain,
    nodes: [Node; 2],
    /// Datagrams on the wire: (to node, from address, bytes).
    wire: Vec<(usize, SocketAddr, Vec<u8>)>,
    /// Datagrams to this node are lost.
    cut: Option<usize>,
}

impl World {
    fn new() -> World {
        let (a, b) = (keypair(1), keypair(2));
        let now = Duration::ZERO;
        World {
            now,
            drain: Drain::ByEvent,
            nodes: [
                Node::new(&a, &[], "10.0.0.1:1000", 11, now),
                Node::new(&b, std::slice::from_ref(&a), "10.0.0.2:2000", 22, now),
            ],
            wire: Vec::new(),
            cut: None,
        }
    }

    fn client_key() -> Keypair {
        keypair(1)
    }

    fn server_key() -> Keypair {
        keypair(2)
    }

    fn target(&self) -> ConnectConfig {
        ConnectConfig {
            peer: *Self::server_key().public(),
            service: SERVICE,
            channels: vec![ChannelTarget {
                interface: 0,
                remote: self.nodes[1].addr,
                config: ChannelConfig::default(),
            }],
            handshake_timeout: Duration::from_secs(5),
        }
    }

    /// One step: deliver what is on the wire, run timers, collect transmits and events.
    fn step(&mut self) {
        let now = self.now;
        for (to, from, mut data) in std::mem::take(&mut self.wire) {
            if self.cut == Some(to) {
                continue;
            }
            let n = &mut self.nodes[to];
            n.host.handle_datagram(now, 0, from, &data);
            // The handshake worker's jobs, done inline.
            while let Some(job) = n.host.poll_handshake_job() {
                let outcome = job.run(&mut n.rng);
                n.host.handle_handshake_done(now, outcome);
            }
            data.clear();
        }
        for i in 0..2 {
            let n = &mut self.nodes[i];
            if n.host.poll_timeout(now).is_some_and(|t| t <= now) {
                n.host.handle_timeout(now);
            }
            let mut out = Vec::new();
            while let Some(h) = n.host.poll_handshake_transmit() {
                out.push((h.dst, h.datagram));
            }
            let mut buf = Vec::new();
            while let Some(t) = n.host.poll_transmit(now, &mut buf) {
                let mut sealed = Vec::new();
                let crypto = n.host.crypto_mut(t.conn).expect("keys");
                crypto
                    .seal_append(u8::from(t.channel), &buf, &mut sealed)
                    .unwrap();
                out.push((t.dst, sealed));
                buf.clear();
            }
            n.drain(self.drain);
            let from = n.addr;
            for (dst, d) in out {
                if let Some(to) = self.nodes.iter().position(|n| n.addr == dst) {
                    self.wire.push((to, from, d));
                }
            }
        }
        self.now += STEP;
    }

    fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.step();
        }
    }

    fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&World) -> bool) {
        let end = self.now + limit;
        while !done(self) {
            assert!(self.now < end, "not done within {limit:?}");
            self.step();
        }
    }

    fn op(&mut self, node: usize, key: u64, op: ConnOp) {
        let now = self.now;
        self.nodes[node].host.handle_command(now, key, op);
    }

    fn send(&mut self, key: u64, payload: &'static [u8]) {
        self.op(
            0,
            key,
            ConnOp::Send {
                stream: 1,
                payload: Bytes::from_static(payload),
                fields: Fields::new(),
                reply: None,
            },
        );
    }

    /// A connection from node 0 to node 1, up at both ends, with stream 1 open.
    fn connected(&mut self, reconnect: Option<Reconnect>, stream: StreamConfig) -> (u64, u64) {
        self.nodes[1].host.listen(SERVICE);
        let now = self.now;
        let target = self.target();
        let key = self.nodes[0]
            .host
            .connect(now, target, reconnect, |_| false)
            .unwrap();
        self.run_until(Duration::from_secs(2), |w| {
            w.nodes[0]
                .events
                .iter()
                .any(|e| matches!(e, HostEvent::Connected { key: k, .. } if *k == key))
        });
        let opened = answer_cell();
        self.op(0, key, ConnOp::OpenStream(1, stream, opened.1));
        assert_eq!(opened.0.lock().unwrap().take(), Some(Ok(())));
        // The peer hears of the connection with its first datagram.
        self.send(key, b"first");
        let before = self.nodes[1].accepted().len();
        self.run_until(Duration::from_secs(2), |w| {
            w.nodes[1].accepted().len() > before
        });
        let server = *self.nodes[1].accepted().last().unwrap();
        (key, server)
    }
}

type Cell<T> = Arc<Mutex<Option<T>>>;

fn answer_cell<T: Send + 'static>() -> (Cell<Result<T, HostError>>, Answer<T>) {
    let cell = Arc::new(Mutex::new(None));
    let c = cell.clone();
    (cell, Box::new(move |v| *c.lock().unwrap() = Some(v)))
}

#[test]
fn a_connection_opens_carries_an_adu_and_closes_at_both_ends() {
    let mut w = World::new();
    let (client, server) = w.connected(None, StreamConfig::default());
    w.send(client, b"hello");
    w.run_until(Duration::from_secs(1), |w| {
        w.nodes[1].received(server).len() == 2
    });
    assert_eq!(w.nodes[1].received(server)[1], Bytes::from_static(b"hello"));
    w.op(0, client, ConnOp::Close);
    w.run_until(Duration::from_secs(5), |w| {
        w.nodes[0].removed(client) && w.nodes[1].removed(server)
    });
    assert!(w.nodes[0].host.is_empty() && w.nodes[1].host.is_empty());
    assert!(w.nodes[1].conn_events(server).iter().any(|e| matches!(
        e,
        Event::Closed {
            reason: CloseReason::PeerClosed
        }
    )));
}

#[test]
fn a_batch_of_adus_is_queued_in_order_with_one_answer_for_the_lot() {
    type Handles = Vec<Result<horde_proto::AduHandle, HostError>>;
    fn batch(stream: u32, payloads: &[&'static [u8]]) -> (Arc<Mutex<Option<Handles>>>, ConnOp) {
        let cell = Arc::new(Mutex::new(None));
        let c = cell.clone();
        let op = ConnOp::SendBatch {
            stream,
            payloads: payloads.iter().map(|p| Bytes::from_static(p)).collect(),
            fields: Fields::new(),
            reply: Box::new(move |v| *c.lock().unwrap() = Some(v)),
        };
        (cell, op)
    }
    let mut w = World::new();
    let (client, server) = w.connected(None, StreamConfig::default());
    let (handles, op) = batch(1, &[b"one", b"two", b"three"]);
    w.op(0, client, op);
    let handles = handles.lock().unwrap().take().expect("answered at once");
    let ids: Vec<u64> = handles.iter().map(|h| h.as_ref().unwrap().id).collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
    let (refused, op) = batch(9, &[b"nowhere", b"at all"]);
    w.op(0, client, op);
    let refused = refused.lock().unwrap().take().expect("answered at once");
    assert_eq!(refused.len(), 2);
    assert!(refused.iter().all(Result::is_err), "stream 9 is not open");
    // Beside the connection's own first ADU; the stream is unordered.
    w.run_until(Duration::from_secs(1), |w| {
        w.nodes[1].received(server).len() == 4
    });
    let mut got = w.nodes[1].received(server);
    got.sort();
    assert_eq!(
        got,
        [&b"first"[..], b"one", b"three", b"two"].map(Bytes::from_static)
    );
}

#[test]
fn a_handshake_nobody_answers_fails_after_its_timeout() {
    let mut w = World::new();
    w.cut = Some(1);
    let target = w.target();
    let key = w.nodes[0]
        .host
        .connect(Duration::ZERO, target, None, |_| false)
        .unwrap();
    w.run_for(Duration::from_millis(4_990));
    assert!(w.nodes[0].events.is_empty());
    w.run_for(Duration::from_millis(20));
    assert!(matches!(
        w.nodes[0].events[..],
        [HostEvent::ConnectFailed {
            key: k,
            error: HostError::HandshakeTimeout(HandshakeSeen {
                initiations_sent: 1..,
                cookie_replies: 0,
                bad_responses: 0,
            })
        }] if k == key
    ));
    assert!(w.nodes[0].host.is_empty());
}

#[test]
fn a_restarted_peer_s_new_session_replaces_its_old_one() {
    let mut w = World::new();
    let (_, old_server) = w.connected(None, StreamConfig::default());
    // The client restarts: same key, fresh state, a later clock.
    w.nodes[0] = Node::new(&World::client_key(), &[], "10.0.0.1:1000", 33, w.now);
    let (client, server) = w.connected(None, StreamConfig::default());
    assert_ne!(server, old_server);
    let b = &w.nodes[1];
    assert!(b.conn_events(old_server).iter().any(|e| matches!(
        e,
        Event::Closed {
            reason: CloseReason::Replaced
        }
    )));
    assert!(b.removed(old_server));
    assert_eq!(b.host.counters().sessions_replaced, 1);
    assert_eq!(b.host.len(), 1);
    w.send(client, b"after");
    w.run_until(Duration::from_secs(1), |w| {
        w.nodes[1].received(server).len() == 2
    });
}

#[test]
fn a_persistent_connection_redials_a_restarted_peer_and_carries_its_unacked_adus() {
    redial_a_restarted_peer(Drain::ByEvent);
}

/// The events of each connection, as the application hears them.
fn by_connection(events: &[HostEvent]) -> BTreeMap<u64, Vec<String>> {
    let mut out: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for e in events {
        let key = match e {
            HostEvent::Connected { key, .. }
            | HostEvent::ConnectFailed { key, .. }
            | HostEvent::Accepted { key, .. }
            | HostEvent::Conn { key, .. }
            | HostEvent::Removed { key } => *key,
        };
        out.entry(key).or_default().push(format!("{e:?}"));
    }
    out
}

#[test]
fn draining_by_connection_gives_the_same_events_in_the_same_order() {
    let reference = redial_a_restarted_peer(Drain::ByEvent);
    let whole = redial_a_restarted_peer(Drain::ByConnection);
    for (a, b) in reference.nodes.iter().zip(&whole.nodes) {
        assert!(a.events.len() >= 5, "the run has events to compare");
        assert_eq!(format!("{:?}", a.events), format!("{:?}", b.events));
    }
    // A drain that stops early leaves the rest of a connection's events for the next
    // one: none is lost, and each connection's come in order.
    let partial = redial_a_restarted_peer(Drain::OneAtATime);
    for (a, b) in reference.nodes.iter().zip(&partial.nodes) {
        assert_eq!(by_connection(&a.events), by_connection(&b.events));
    }
}

/// A persistent connection whose peer goes away and comes back as a new process, and
/// the ADUs sent meanwhile: the world at the end.
fn redial_a_restarted_peer(drain: Drain) -> World {
    let mut w = World::new();
    w.drain = drain;
    let reconnect = Reconnect {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(400),
        give_up_after: Duration::from_secs(30),
    };
    let stream = StreamConfig {
        on_reconnect: InFlightPolicy::Resend,
        ..StreamConfig::default()
    };
    let (client, server) = w.connected(Some(reconnect), stream);
    w.run_for(Duration::from_millis(200));
    // The server goes away; the client finds its peer unreachable and redials.
    w.cut = Some(1);
    w.run_until(Duration::from_secs(20), |w| {
        w.nodes[0]
            .conn_events(client)
            .iter()
            .any(|e| matches!(e, Event::Reconnecting { .. }))
    });
    // What the application sends meanwhile waits in the ended session.
    for p in [&b"kept-1"[..], b"kept-2", b"kept-3"] {
        w.send(client, p);
    }
    w.run_for(Duration::from_millis(300));
    // The server comes back as a new process: same key, no memory of the connection.
    let now = w.now;
    w.nodes[1] = Node::new(
        &World::server_key(),
        &[World::client_key()],
        "10.0.0.2:2000",
        44,
        now,
    );
    w.nodes[1].host.listen(SERVICE);
    w.cut = None;
    w.run_until(Duration::from_secs(10), |w| {
        let b = &w.nodes[1];
        b.accepted().iter().any(|&k| {
            let kept: Vec<Bytes> = b
                .received(k)
                .into_iter()
                .filter(|p| p.starts_with(b"kept"))
                .collect();
            kept == [&b"kept-1"[..], b"kept-2", b"kept-3"]
        })
    });
    let a = w.nodes[0].conn_events(client);
    assert!(a.iter().any(|e| matches!(e, Event::Reconnecting { .. })));
    assert!(
        !w.nodes[0].removed(client),
        "the application keeps its connection"
    );
    assert_eq!(w.nodes[0].host.counters().reconnects, 1);
    let after = a
        .iter()
        .skip_while(|e| !matches!(e, Event::Reconnecting { .. }));
    assert!(
        after.clone().all(|e| !matches!(e, Event::Nack { .. })),
        "no kept ADU is nacked"
    );
    let _ = server;
    w
}

#[test]
fn a_redial_that_never_succeeds_gives_up_and_nacks_what_was_kept() {
    let mut w = World::new();
    let reconnect = Reconnect {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(200),
        give_up_after: Duration::from_secs(2),
    };
    let stream = StreamConfig {
        on_reconnect: InFlightPolicy::Resend,
        ..StreamConfig::default()
    };
    let (client, _) = w.connected(Some(reconnect), stream);
    w.cut = Some(1);
    w.send(client, b"never");
    w.run_until(Duration::from_secs(40), |w| w.nodes[0].removed(client));
    let a = w.nodes[0].conn_events(client);
    assert!(a.iter().any(|e| matches!(e, Event::Reconnecting { .. })));
    assert!(a.iter().any(|e| matches!(e, Event::Nack { .. })));
    assert!(matches!(a.last(), Some(Event::Closed { .. })));
}

#[test]
fn a_completed_handshake_without_a_hello_is_forgotten_after_its_wait() {
    let mut w = World::new();
    w.nodes[1].host.listen(SERVICE);
    let target = w.target();
    w.nodes[0]
        .host
        .connect(Duration::ZERO, target, None, |_| false)
        .unwrap();
    // The responder keeps a secure session as soon as it answers the initiation; from
    // then on nothing reaches it, the hello included.
    w.run_until(Duration::from_secs(1), |w| w.nodes[1].host.len() == 1);
    w.cut = Some(1);
    w.run_for(HELLO_WAIT - Duration::from_millis(10));
    assert_eq!(w.nodes[1].host.len(), 1);
    w.run_until(Duration::from_millis(20), |w| w.nodes[1].host.is_empty());
    assert_eq!(w.nodes[1].host.counters().hello_never_came, 1);
    assert!(w.nodes[1].accepted().is_empty());
}
