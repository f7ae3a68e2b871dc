//! The session lifecycle in virtual time: reliable close, idle timeout and keepalive,
//! handing a dead session's streams to a new one, and receive-side flow control.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;
use horde_proto::harness::{Harness, NodeId, PathConfig};
use horde_proto::{
    ChannelConfig, ChannelSpec, CloseReason, ConnectOptions, EndpointConfig, Event, InFlightPolicy,
    NackReason, ServerConfig, Session, SessionConfig, SessionHandle, StreamConfig,
};

const CLIENT: usize = 0;
const SERVER: usize = 1;
const DELAY: Duration = Duration::from_millis(20);
/// First byte of a `Close` packet: version in the high nibble, type 6.
const CLOSE: u8 = (horde_proto::wire::VERSION << 4) | 6;

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

type Drop = Box<dyn FnMut(usize, &[u8]) -> bool>;

/// Two nodes, one channel with a fixed delay each way; `drop(to, bytes)` loses
/// datagrams. The server's session is the last one it accepted.
struct Net {
    h: Harness,
    nodes: [NodeId; 2],
    client: SessionHandle,
    server: Option<SessionHandle>,
}

impl Net {
    fn new(config: SessionConfig, drop: Drop) -> Self {
        Self::with_receive_buffer(config, drop, None)
    }

    fn with_receive_buffer(
        config: SessionConfig,
        drop: Drop,
        receive_buffer: Option<usize>,
    ) -> Self {
        let mut h = Harness::new(0);
        h.set_default_path(PathConfig::delay(DELAY));
        let client_node = h.add_node(
            EndpointConfig {
                session: config.clone(),
                ..EndpointConfig::default()
            },
            1,
        );
        let server_node = h.add_node(
            EndpointConfig {
                session: config,
                receive_buffer,
                ..EndpointConfig::default()
            },
            1,
        );
        h.listen(
            server_node,
            1,
            ServerConfig::uniform(ChannelConfig::default()),
        );
        let nodes = [client_node, server_node];
        let client = connect_client(&mut h, nodes, 9);
        let mut net = Net {
            h,
            nodes,
            client,
            server: None,
        };
        net.set_drop(drop);
        net
    }

    /// A client session with connection id `conn` (not yet sent anything).
    fn open_client(&mut self, conn: u64) -> SessionHandle {
        connect_client(&mut self.h, self.nodes, conn)
    }

    /// The client's session has ended: a new one takes its streams over, as the
    /// runtime's reconnection does.
    fn hand_over_to_successor(&mut self) {
        let fresh = self.open_client(10);
        let old_handle = std::mem::replace(&mut self.client, fresh);
        let mut old = self
            .h
            .remove_session(self.nodes[CLIENT], old_handle)
            .unwrap();
        let now = self.now();
        self.client().inherit(&mut old, now);
    }

    fn set_drop(&mut self, mut drop: Drop) {
        let client = self.nodes[CLIENT];
        self.h.set_drop_filter(move |s| {
            let to = if s.to == Some(client) { CLIENT } else { SERVER };
            drop(to, s.bytes)
        });
    }

    fn now(&self) -> Duration {
        self.h.now()
    }

    fn client(&mut self) -> &mut Session {
        self.h.session_mut(self.nodes[CLIENT], self.client)
    }

    fn server(&mut self) -> &mut Session {
        let h = self.server.expect("server accepted");
        self.h.session_mut(self.nodes[SERVER], h)
    }

    /// A host's events so far, each with the time it came out.
    fn events(&self, host: usize) -> Vec<(Duration, Event)> {
        let node = self.nodes[host];
        let Some(h) = (if host == CLIENT {
            Some(self.client)
        } else {
            self.server
        }) else {
            return Vec::new();
        };
        let times = self.h.event_times(node, h);
        times
            .iter()
            .copied()
            .zip(self.h.events(node, h).iter().cloned())
            .collect()
    }

    fn run_until(&mut self, end: Duration) {
        self.h.run_until(end);
        while let Some(h) = self.h.accept(self.nodes[SERVER]) {
            self.server = Some(h);
        }
    }

    fn send(&mut self, stream: u32, n: usize, bytes: usize) {
        let now = self.now();
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
        self.events(host)
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
        for (_, e) in &self.events(CLIENT) {
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

fn connect_client(h: &mut Harness, nodes: [NodeId; 2], conn: u64) -> SessionHandle {
    h.connect(
        nodes[CLIENT],
        ConnectOptions {
            service: 1,
            channels: vec![ChannelSpec {
                local: 0,
                remote: Harness::addr(nodes[SERVER], 0),
                config: ChannelConfig::default(),
            }],
            conn_id: Some(conn),
            ..ConnectOptions::default()
        },
    )
    .unwrap()
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
    let at = net.now();
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
    let now = net.now();
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
    let at = net.now();
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
    net.set_drop(Box::new(|_, _| true)); // the peer is gone
    net.send(1, 10, 500);
    net.run_until(ms(250));
    let at = net.now();
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
    net.set_drop(Box::new(|to, _| to == CLIENT));
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
    net.set_drop(Box::new(|_, _| true));
    net.send(1, 4, 400);
    let now = net.now();
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

    net.hand_over_to_successor();
    assert_eq!(net.client().queued(2), 4);
    net.set_drop(no_loss());
    net.run_until(ms(4000));
    let got: Vec<(u32, u64)> = net
        .events(SERVER)
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

/// Voice (160 B every 20 ms, `max_kbps` exactly its rate) next to an upload that keeps
/// a 2 Mbit/s path busy, as voice next to bulk. The session may hand its streams to a
/// successor.
struct VoiceBesideUpload {
    net: Net,
    /// When the next frame is due.
    at: Duration,
}

impl VoiceBesideUpload {
    fn new() -> Self {
        let config = SessionConfig {
            idle_timeout_ms: 500.0,
            ..SessionConfig::default()
        };
        let mut net = Net::new(config, no_loss());
        net.client().set_successor_expected(true);
        let voice = StreamConfig {
            max_kbps: Some(64.0),
            ..StreamConfig::default()
        };
        net.client().open_stream(1, voice).unwrap();
        let (client, server) = (net.nodes[CLIENT], net.nodes[SERVER]);
        net.h.set_path(
            Harness::addr(client, 0),
            Harness::addr(server, 0),
            PathConfig {
                rate_kbps: Some(2000.0),
                ..PathConfig::delay(DELAY)
            },
        );
        net.client()
            .open_stream(2, StreamConfig::default())
            .unwrap();
        Self { net, at: ms(200) }
    }

    /// Talks until `end`; returns the fewest and the most frames voice had queued
    /// meanwhile, each seen just before a frame.
    fn talk_until(&mut self, end: Duration) -> (usize, usize) {
        let (mut least, mut most) = (usize::MAX, 0);
        while self.at < end {
            let net = &mut self.net;
            net.run_until(self.at);
            let queued = net.client().queued(1);
            (least, most) = (least.min(queued), most.max(queued));
            net.send(1, 1, 160);
            let bulk = net.client().queued(2);
            net.send(2, 40usize.saturating_sub(bulk), 1000);
            self.at += ms(20);
        }
        (least, most)
    }
}

/// A stream held below the fair share goes first while it has credit, whatever the
/// upload beside it is owed.
#[test]
fn a_stream_at_its_rate_cap_next_to_an_upload_does_not_queue() {
    let mut call = VoiceBesideUpload::new();
    // The upload is behind its allocation all along (the allocator counts capacity the
    // path does not carry). Ranked on that shortfall, voice queued until its own credit
    // matched it: 4 frames (80 ms) from 2.4 s on.
    let (_, most) = call.talk_until(ms(8000));
    assert!(most <= 1, "voice had {most} frames queued");
}

/// The peer of a call beside an upload vanishes for long enough that the session times
/// out and a successor takes the queue over: the successor sends the backlog as the path
/// allows, then keeps up. Were the carried queue to wait for the new session's
/// allocation to refill, the stream could never send faster than it queues, and the
/// outage would stay in its queue as a standing delay for as long as it talked.
#[test]
fn a_stream_at_its_rate_cap_sends_the_backlog_a_reconnection_left() {
    let mut call = VoiceBesideUpload::new();
    assert!(call.talk_until(ms(1000)).0 <= 2);
    // The peer goes silent for 1.5 s: the session times out with the talk queued.
    call.net.set_drop(Box::new(|_, _| true));
    call.talk_until(ms(2500));
    let net = &mut call.net;
    assert_eq!(net.closed(CLIENT)[0].1, CloseReason::IdleTimeout);
    net.hand_over_to_successor();
    let backlog = net.client().queued(1);
    assert!(backlog >= 40, "{backlog} frames carried");
    net.set_drop(no_loss());
    // Within a second of the reconnection the backlog is gone (5 frames left at
    // 0.5 s); held to the allocation it stayed and grew (75 to 80).
    let (least, _) = call.talk_until(ms(3500));
    assert!(
        least * 4 <= backlog,
        "{least} frames at least in the second after {backlog} were carried"
    );
    // And it stays gone: once caught up, voice queued again until its credit matched
    // the upload's shortfall, 23 frames (460 ms) from 4.6 s on.
    let (_, most) = call.talk_until(ms(8000));
    assert!(
        most <= 2,
        "voice had {most} frames queued after catching up"
    );
}

#[test]
fn a_receiver_that_does_not_read_stalls_the_sender_in_bounded_memory() {
    let mut net = Net::with_receive_buffer(SessionConfig::default(), no_loss(), Some(40_000));
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
    let blocked = net
        .events(CLIENT)
        .iter()
        .any(|(_, e)| matches!(e, Event::FlowBlocked));
    assert!(blocked);

    // The application reads everything: the window opens and the rest arrives.
    for _ in 0..40 {
        let now = net.now();
        let unread = net.server().unread_bytes();
        net.server().consumed(now, unread);
        let next = net.now() + ms(100);
        net.run_until(next);
    }
    let received = net
        .events(SERVER)
        .iter()
        .filter(|(_, e)| matches!(e, Event::Received { .. }))
        .count();
    let (_, nacked) = net.outcomes();
    let lost = nacked.get("Lost").copied().unwrap_or(0);
    assert_eq!(received + lost, 400, "{nacked:?}");
    assert!(received >= 380, "received {received}, {nacked:?}");
    assert!(net
        .events(CLIENT)
        .iter()
        .any(|(_, e)| matches!(e, Event::FlowResumed)));
    assert_eq!(
        nacked.get(&format!("{:?}", NackReason::QueueOverflow)),
        None
    );
}

/// First byte of a `Window` packet: version in the high nibble, type 9.
const WINDOW: u8 = (horde_proto::wire::VERSION << 4) | 9;

/// ADUs the server's application was handed, in order of arrival, by stream sequence.
fn received_seqs(net: &Net) -> Vec<u64> {
    net.events(SERVER)
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Received { stream_seq, .. } => Some(*stream_seq),
            _ => None,
        })
        .collect()
}

/// A client with 400 kB queued for a server with a 40 kB receive buffer whose
/// application does not read.
fn stalled_sender(drop: Drop) -> Net {
    let mut net = Net::with_receive_buffer(SessionConfig::default(), drop, Some(40_000));
    net.client()
        .open_stream(
            1,
            StreamConfig {
                max_queue_bytes: 1 << 20,
                ordered: true,
                ..StreamConfig::default()
            },
        )
        .unwrap();
    net.run_until(ms(200));
    net.send(1, 400, 1000);
    net
}

/// Read what is unread every `every` until `end`.
fn read_until(net: &mut Net, end: Duration, every: Duration) {
    while net.now() < end {
        let now = net.now();
        let unread = net.server().unread_bytes();
        net.server().consumed(now, unread);
        let next = net.now() + every;
        net.run_until(next);
    }
}

#[test]
fn a_sender_never_overruns_the_receivers_advertised_buffer() {
    let mut net = stalled_sender(no_loss());
    net.run_until(ms(3000));
    // The sender filled the buffer and stopped: nothing was dropped for lack of room,
    // nothing declared lost, and its probes (pings) did not overrun it either.
    let unread = net.server().unread_bytes();
    assert!(unread > 35_000 && unread <= 40_000, "unread {unread}");
    assert_eq!(net.server().stats().flow_dropped, 0);
    assert!(net.client().flow_blocked());
    assert!(
        net.client().queued(1) >= 350,
        "the rest waits at the sender"
    );
    assert!(net
        .events(CLIENT)
        .iter()
        .any(|(_, e)| matches!(e, Event::FlowBlocked)));

    // The application reads: every ADU arrives, in order, none lost or dropped.
    read_until(&mut net, ms(6000), ms(20));
    assert_eq!(received_seqs(&net), (0..400).collect::<Vec<u64>>());
    let (acked, nacked) = net.outcomes();
    assert_eq!((acked, nacked.len()), (400, 0), "{nacked:?}");
    assert_eq!(net.server().stats().flow_dropped, 0);
    assert!(!net.client().flow_blocked());
}

#[test]
fn a_sender_whose_window_updates_are_lost_probes_for_them() {
    let cut = std::rc::Rc::new(std::cell::Cell::new(false));
    let cutting = cut.clone();
    let mut net = stalled_sender(Box::new(move |to, b| {
        to == CLIENT && b.first() == Some(&WINDOW) && cutting.get()
    }));
    net.run_until(ms(1000));
    assert!(net.client().flow_blocked(), "the first limit got through");
    assert_eq!(net.server().unread_bytes(), 40_000);
    // From now on every update is lost; the application reads everything.
    cut.set(true);
    let now = net.now();
    let unread = net.server().unread_bytes();
    net.server().consumed(now, unread);
    net.run_until(ms(1500));
    assert!(net.client().flow_blocked(), "no update got through");
    // The updates get through again: the sender's next probe (a ping every 250 ms
    // while blocked) is answered with the limit, and it resumes.
    cut.set(false);
    net.run_until(ms(1800));
    let resumed: Vec<Duration> = net
        .events(CLIENT)
        .iter()
        .filter(|(_, e)| matches!(e, Event::FlowResumed))
        .map(|(t, _)| *t)
        .collect();
    assert!(
        resumed.len() == 1 && resumed[0] > ms(1500),
        "resumed after a probe, not before: {resumed:?}"
    );
    read_until(&mut net, ms(5000), ms(20));
    assert_eq!(received_seqs(&net), (0..400).collect::<Vec<u64>>());
    let (acked, nacked) = net.outcomes();
    assert_eq!((acked, nacked.len()), (400, 0), "{nacked:?}");
    assert_eq!(net.server().stats().flow_dropped, 0);
}
