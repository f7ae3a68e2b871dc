//! The host visits only connections with work (touched ones, and those whose session's
//! deadline passed). A server with several clients is run twice on the same random
//! script, once so and once walking and polling every connection on every call: what
//! it sends, the events it reports and the deadlines it asks for must be the same, step
//! by step.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_crypto::Keypair;
use horde_policy::Fields;
use horde_proto::{ChannelConfig, SessionConfig, StreamConfig};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;

const STEP: Duration = Duration::from_millis(1);
const SERVICE: u32 = 7;
const SERVER_ADDR: &str = "10.0.0.1:1000";

fn keypair(seed: u64) -> Keypair {
    Keypair::generate_with(&mut StdRng::seed_from_u64(seed))
}

fn client_addr(i: usize) -> SocketAddr {
    format!("10.0.1.{}:2000", i + 1).parse().unwrap()
}

struct Node {
    host: Host,
    rng: StdRng,
    addr: SocketAddr,
}

impl Node {
    fn new(key: &Keypair, allowed: &[Keypair], addr: SocketAddr, seed: u64, now: Duration) -> Self {
        let session = SessionConfig {
            keepalive_ms: 150.0,
            idle_timeout_ms: 600.0,
            ..SessionConfig::default()
        };
        let host = Host::new(HostSettings {
            keypair: key.clone(),
            rekey: RekeyPolicy::default(),
            endpoint: EndpointConfig {
                seed,
                session,
                ..EndpointConfig::default()
            },
            accepted_channel: Arc::new(|_| ChannelConfig::default()),
            interfaces: 1,
            seed,
            unix_micros_at_start: 1_000_000 + now.as_micros() as u64,
            responder: ResponderSettings {
                allowed: allowed.iter().map(|k| *k.public()).collect(),
                ..ResponderSettings::default()
            },
        });
        Node {
            host,
            rng: StdRng::seed_from_u64(seed ^ 0x5eed),
            addr,
        }
    }
}

/// What one run's server did, a line per transmit, event and deadline.
type Trace = Vec<String>;

#[derive(Debug, Clone, Copy)]
enum Action {
    /// A client queues a few ADUs.
    Send { client: usize, adus: usize },
    /// Nothing reaches or leaves a client for a while.
    Cut { client: usize, ms: u64 },
    /// A client restarts: a fresh host with the same key connects again.
    Restart { client: usize },
    /// A client closes its connection.
    Close { client: usize },
    /// The server queues a few ADUs to a client.
    Reply { client: usize, adus: usize },
}

fn action(clients: usize) -> impl Strategy<Value = Action> {
    let c = 0..clients;
    prop_oneof![
        4 => (c.clone(), 1..30usize).prop_map(|(client, adus)| Action::Send { client, adus }),
        1 => (c.clone(), 100..1500u64).prop_map(|(client, ms)| Action::Cut { client, ms }),
        1 => c.clone().prop_map(|client| Action::Restart { client }),
        1 => c.clone().prop_map(|client| Action::Close { client }),
        2 => (c, 1..30usize).prop_map(|(client, adus)| Action::Reply { client, adus }),
    ]
}

struct Run {
    now: Duration,
    server: Node,
    clients: Vec<Node>,
    /// The client's connection key, once dialed.
    dialed: Vec<Option<u64>>,
    /// Datagrams on the wire: (to: 0 the server, i + 1 client i; from; bytes).
    wire: Vec<(usize, SocketAddr, Vec<u8>)>,
    /// Until when each client is cut off.
    cut_until: Vec<Duration>,
    /// The server's connections whose stream 2 is open, by key.
    server_streams: Vec<u64>,
    /// The server's accepted connections, by client address.
    accepted: Vec<(u64, SocketAddr)>,
    trace: Trace,
}

impl Run {
    fn new(clients: usize, full_walk: bool) -> Self {
        let keys: Vec<Keypair> = (0..clients).map(|i| keypair(100 + i as u64)).collect();
        let mut server = Node::new(&keypair(1), &keys, SERVER_ADDR.parse().unwrap(), 1, STEP);
        server.host.listen(SERVICE);
        server.host.set_full_walk(full_walk);
        let nodes = (0..clients)
            .map(|i| Node::new(&keys[i], &[], client_addr(i), 10 + i as u64, STEP))
            .collect();
        Run {
            now: STEP,
            server,
            clients: nodes,
            dialed: vec![None; clients],
            wire: Vec::new(),
            cut_until: vec![Duration::ZERO; clients],
            server_streams: Vec::new(),
            accepted: Vec::new(),
            trace: Vec::new(),
        }
    }

    fn dial(&mut self, i: usize) {
        let now = self.now;
        let target = ConnectConfig {
            peer: *keypair(1).public(),
            service: SERVICE,
            channels: vec![ChannelTarget {
                interface: 0,
                remote: SERVER_ADDR.parse().unwrap(),
                config: ChannelConfig::default(),
            }],
            handshake_timeout: Duration::from_secs(5),
        };
        let reconnect = Reconnect {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(300),
            give_up_after: Duration::from_secs(20),
        };
        let key = self.clients[i]
            .host
            .connect(now, target, Some(reconnect), |_| false)
            .unwrap();
        self.dialed[i] = Some(key);
    }

    fn apply(&mut self, a: Action) {
        let now = self.now;
        let send = |stream, adus: usize| {
            (0..adus).map(move |n| ConnOp::Send {
                stream,
                payload: Bytes::from(vec![n as u8; 200 + 37 * n]),
                fields: Fields::new(),
                reply: None,
            })
        };
        match a {
            Action::Send { client, adus } => {
                let Some(key) = self.dialed[client] else {
                    return;
                };
                let host = &mut self.clients[client].host;
                host.handle_command(
                    now,
                    key,
                    ConnOp::OpenStream(1, StreamConfig::default(), Box::new(|_| {})),
                );
                for op in send(1, adus) {
                    host.handle_command(now, key, op);
                }
            }
            Action::Cut { client, ms } => {
                self.cut_until[client] = now + Duration::from_millis(ms);
            }
            Action::Restart { client } => {
                let key = keypair(100 + client as u64);
                let seed = 1000 + now.as_millis() as u64 + client as u64;
                self.clients[client] = Node::new(&key, &[], client_addr(client), seed, now);
                self.dial(client);
            }
            Action::Close { client } => {
                if let Some(key) = self.dialed[client].take() {
                    self.clients[client]
                        .host
                        .handle_command(now, key, ConnOp::Close);
                }
            }
            Action::Reply { client, adus } => {
                let addr = client_addr(client);
                let Some(&(key, _)) = self.accepted.iter().rev().find(|(_, a)| *a == addr) else {
                    return;
                };
                let host = &mut self.server.host;
                if !self.server_streams.contains(&key) {
                    self.server_streams.push(key);
                    host.handle_command(
                        now,
                        key,
                        ConnOp::OpenStream(2, StreamConfig::default(), Box::new(|_| {})),
                    );
                }
                for op in send(2, adus) {
                    host.handle_command(now, key, op);
                }
            }
        }
    }

    /// One step of every node: datagrams delivered, due timers run, everything sent
    /// and every event drained. The server's part goes into the trace.
    fn step(&mut self) {
        let now = self.now;
        for (to, from, data) in std::mem::take(&mut self.wire) {
            let client = if to == 0 {
                self.clients.iter().position(|c| c.addr == from)
            } else {
                Some(to - 1)
            };
            if client.is_some_and(|c| self.cut_until[c] > now) {
                continue;
            }
            let n = if to == 0 {
                &mut self.server
            } else {
                &mut self.clients[to - 1]
            };
            n.host.handle_datagram(now, 0, from, &data);
            while let Some(job) = n.host.poll_handshake_job() {
                let outcome = job.run(&mut n.rng);
                n.host.handle_handshake_done(now, outcome);
            }
        }
        for i in 0..=self.clients.len() {
            let n = if i == 0 {
                &mut self.server
            } else {
                &mut self.clients[i - 1]
            };
            let trace = i == 0;
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
                if trace {
                    self.trace.push(format!(
                        "{now:?} tx conn {} to {} {:?} seq {:?} {} bytes",
                        t.conn,
                        t.dst,
                        t.channel,
                        t.seq,
                        sealed.len()
                    ));
                }
                out.push((t.dst, sealed));
            }
            while let Some(e) = n.host.poll_event() {
                if trace {
                    if let HostEvent::Accepted { key, .. } = &e {
                        let addr = n
                            .host
                            .session(*key)
                            .and_then(|p| p.channels().iter().next().map(|c| c.remote()));
                        if let Some(addr) = addr {
                            self.accepted.push((*key, addr));
                        }
                    }
                    self.trace.push(format!("{now:?} event {e:?}"));
                }
            }
            if trace {
                let next = n.host.poll_timeout(now);
                self.trace.push(format!("{now:?} next {next:?}"));
            }
            let from = n.addr;
            for (dst, d) in out {
                let to = if dst == self.server.addr {
                    Some(0)
                } else {
                    self.clients
                        .iter()
                        .position(|c| c.addr == dst)
                        .map(|c| c + 1)
                };
                if let Some(to) = to {
                    self.wire.push((to, from, d));
                }
            }
        }
        self.now += STEP;
    }

    fn play(mut self, script: &[(u64, Action)], steps: u64) -> Trace {
        for i in 0..self.clients.len() {
            self.dial(i);
        }
        for s in 0..steps {
            for &(_, a) in script.iter().filter(|(at, _)| *at == s) {
                self.apply(a);
            }
            self.step();
        }
        self.trace
    }
}

/// Where two traces first part, for the failure message.
fn first_difference(a: &Trace, b: &Trace) -> Option<(usize, String, String)> {
    let n = a.len().max(b.len());
    (0..n).find_map(|i| {
        let (x, y) = (a.get(i).cloned(), b.get(i).cloned());
        (x != y).then(|| (i, x.unwrap_or_default(), y.unwrap_or_default()))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn the_host_walking_touched_connections_does_what_a_full_walk_does(
        clients in 2..6usize,
        script in prop::collection::vec((0..2500u64, action(5)), 0..40),
    ) {
        let script: Vec<(u64, Action)> = script
            .into_iter()
            .filter(|(_, a)| match *a {
                Action::Send { client, .. }
                | Action::Cut { client, .. }
                | Action::Restart { client }
                | Action::Close { client }
                | Action::Reply { client, .. } => client < clients,
            })
            .collect();
        let steps = 3000;
        let incremental = Run::new(clients, false).play(&script, steps);
        let full = Run::new(clients, true).play(&script, steps);
        // The run must have done something worth comparing.
        prop_assert!(incremental.iter().any(|l| l.contains(" tx ")));
        if let Some((i, a, b)) = first_difference(&incremental, &full) {
            prop_assert!(false, "line {i}: incremental `{a}`, full walk `{b}`");
        }
    }
}

#[test]
fn an_idle_server_visits_no_connection_between_keepalives() {
    let mut run = Run::new(4, false);
    for i in 0..4 {
        run.dial(i);
    }
    for s in 0..400 {
        if s == 10 {
            for c in 0..4 {
                run.apply(Action::Send { client: c, adus: 2 });
            }
        }
        run.step();
    }
    // All connected and quiet: each connection is one session deadline, nothing is
    // touched, and the next deadline is a keepalive's or an ack's, not now.
    let host = &run.server.host;
    assert_eq!(host.len(), 4);
    assert_eq!(host.timers.len(), 4);
    assert!(host.touched.transmit().is_empty());
    let next = host.poll_timeout(run.now).expect("keepalives are due");
    assert!(next > run.now, "next deadline {next:?} at {:?}", run.now);
    // Its deadline comes, and the connection it belongs to answers.
    let before = run.trace.len();
    while run.now <= next {
        run.step();
    }
    assert!(run.trace[before..].iter().any(|l| l.contains(" tx ")));
}
