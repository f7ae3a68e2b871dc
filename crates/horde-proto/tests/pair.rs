//! Two sessions over an in-memory network with per-channel delay and scripted loss,
//! driven in virtual time exactly as a real driver would drive them.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;
use horde_proto::harness::{Harness, NodeId, PathConfig};
use horde_proto::{
    CcConfig, ChannelConfig, ChannelId, ChannelSpec, ConnectOptions, EndpointConfig, Event,
    NackReason, ServerConfig, Session, SessionConfig, SessionError, SessionHandle, StreamConfig,
};

const CLIENT: usize = 0;
const SERVER: usize = 1;

/// A client and a server node of the harness, one path per channel (channel i runs
/// between interface i of each), and the client's session.
struct Net {
    h: Harness,
    nodes: [NodeId; 2],
    conn: SessionHandle,
    /// Datagrams the client sent that carried ADUs, and the ADUs in them.
    data_datagrams: Rc<Cell<u64>>,
    adus_in_datagrams: Rc<Cell<u64>>,
}

impl Net {
    /// Drop the n-th data-bearing datagram on the client->server direction of channel c
    /// when `drop(c, n)`.
    fn new(delays_ms: &[u64], cc: CcConfig, drop: Box<dyn FnMut(u8, u64) -> bool>) -> Self {
        Self::with_config(delays_ms, cc, drop, SessionConfig::default())
    }

    fn with_config(
        delays_ms: &[u64],
        cc: CcConfig,
        mut drop: Box<dyn FnMut(u8, u64) -> bool>,
        config: SessionConfig,
    ) -> Self {
        let mut h = Harness::new(0);
        let ifaces = delays_ms.len() as u16;
        let endpoint = EndpointConfig {
            session: config,
            ..EndpointConfig::default()
        };
        let client = h.add_node(endpoint.clone(), ifaces);
        let server = h.add_node(endpoint, ifaces);
        h.listen(
            server,
            7,
            ServerConfig {
                aliases: Some(vec![Harness::addr(server, 0)]),
                ..ServerConfig::uniform(ChannelConfig {
                    mtu: 600,
                    ..ChannelConfig::default()
                })
            },
        );
        for (i, &d) in delays_ms.iter().enumerate() {
            let i = i as u16;
            h.set_link(
                (client, i),
                (server, i),
                PathConfig::delay(Duration::from_millis(d)),
            );
        }
        let data_datagrams = Rc::new(Cell::new(0));
        let adus_in_datagrams = Rc::new(Cell::new(0));
        let (datagrams, adus) = (data_datagrams.clone(), adus_in_datagrams.clone());
        let sent_per_channel = RefCell::new(vec![0u64; delays_ms.len()]);
        h.set_drop_filter(move |s| {
            if s.from != client {
                return false;
            }
            let t = s.transmit;
            if !t.adus.is_empty() {
                datagrams.set(datagrams.get() + 1);
                adus.set(adus.get() + t.adus.len() as u64);
            }
            // Channel i starts on interface i; a channel added later may get another
            // id, so datagrams are counted by interface.
            if s.bytes.len() <= 40 {
                return false;
            }
            let mut sent = sent_per_channel.borrow_mut();
            let n = sent[t.local as usize];
            sent[t.local as usize] += 1;
            drop(u8::from(t.channel), n)
        });
        let channels = (0..ifaces)
            .map(|i| ChannelSpec {
                local: i,
                remote: Harness::addr(server, i),
                config: ChannelConfig {
                    mtu: 600,
                    congestion: cc.clone(),
                    ..ChannelConfig::default()
                },
            })
            .collect();
        let conn = h
            .connect(
                client,
                ConnectOptions {
                    service: 7,
                    channels,
                    conn_id: Some(42),
                    ..ConnectOptions::default()
                },
            )
            .unwrap();
        Net {
            h,
            nodes: [client, server],
            conn,
            data_datagrams,
            adus_in_datagrams,
        }
    }

    fn addr(&self, host: usize, iface: u16) -> SocketAddr {
        Harness::addr(self.nodes[host], iface)
    }

    fn now(&self) -> Duration {
        self.h.now()
    }

    fn client(&mut self) -> &mut Session {
        self.h.session_mut(self.nodes[CLIENT], self.conn)
    }

    /// The session the server accepted.
    fn server(&mut self) -> &mut Session {
        let server = self.nodes[SERVER];
        let h = *self.h.handles(server).first().expect("server accepted");
        self.h.session_mut(server, h)
    }

    fn events(&self, host: usize) -> &[Event] {
        let node = self.nodes[host];
        match host {
            CLIENT => self.h.events(node, self.conn),
            _ => match self.h.handles(node).first() {
                Some(&h) => self.h.events(node, h),
                None => &[],
            },
        }
    }

    /// Set the one-way delay of channel (interface) `i`, both directions, for datagrams
    /// sent from now on.
    fn set_delay(&mut self, i: u16, d: Duration) {
        let (c, s) = (self.nodes[CLIENT], self.nodes[SERVER]);
        self.h.set_link((c, i), (s, i), PathConfig::delay(d));
    }

    fn run_until(&mut self, end: Duration) {
        self.h.run_until(end);
    }

    fn flush(&mut self) {
        self.h.flush();
    }
}

fn send_n(net: &mut Net, stream: u32, n: u64, spacing_ms: u64, start: Duration) {
    for i in 0..n {
        let t = start + Duration::from_millis(i * spacing_ms);
        net.run_until(t);
        let mut f = Fields::new();
        f.set(
            "frame_type",
            if i % 10 == 0 { "I".into() } else { "P".into() },
        );
        net.client()
            .send_adu(t, stream, Bytes::from(vec![i as u8; 400]), f)
            .unwrap();
    }
}

#[test]
fn handshake_exchanges_aliases_and_delivers_everything() {
    let mut net = Net::new(&[20, 50, 80], CcConfig::default(), Box::new(|_, _| false));
    net.client()
        .open_stream(1, StreamConfig::default())
        .unwrap();
    net.run_until(Duration::from_millis(500));
    assert!(net.client().is_connected());
    let server_addr = net.addr(SERVER, 0);
    assert_eq!(net.client().remote_aliases(), &[server_addr]);
    assert_eq!(net.server().remote_aliases().len(), 3);
    send_n(&mut net, 1, 300, 5, Duration::from_millis(500));
    net.run_until(Duration::from_secs(10));

    let received: Vec<u64> = net
        .events(SERVER)
        .iter()
        .filter_map(|e| match e {
            Event::Received { stream_seq, .. } => Some(*stream_seq),
            _ => None,
        })
        .collect();
    assert_eq!(received.len(), 300);
    let mut sorted = received.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..300).collect::<Vec<_>>());

    let mut channels_used = [0u32; 3];
    let mut acks = 0;
    for e in net.events(CLIENT) {
        if let Event::Ack {
            channel,
            rtt,
            latency,
            ..
        } = e
        {
            acks += 1;
            channels_used[usize::from(*channel)] += 1;
            // RTT is twice the one-way delay of the channel, plus at most the ack delay.
            let one_way = [20, 50, 80][usize::from(*channel)];
            let ms = rtt.as_secs_f64() * 1e3;
            assert!(
                ms >= 2.0 * one_way as f64 - 0.01 && ms <= 2.0 * one_way as f64 + 1.5,
                "rtt {ms} on {channel}"
            );
            assert!(latency >= rtt);
        }
    }
    assert_eq!(acks, 300);
    assert!(
        channels_used.iter().all(|&n| n > 0),
        "striped over all channels: {channels_used:?}"
    );
}

#[test]
fn losses_are_nacked_and_every_adu_is_accounted_for() {
    // Drop every 7th data datagram on channel 1.
    let mut net = Net::new(
        &[30, 30],
        CcConfig::Cbr {
            kbps: 400.0,
            burst_ms: 50.0,
        },
        Box::new(|c, n| c == 1 && n % 7 == 3),
    );
    net.client()
        .open_stream(1, StreamConfig::default())
        .unwrap();
    net.run_until(Duration::from_millis(200));
    send_n(&mut net, 1, 400, 10, Duration::from_millis(200));
    net.run_until(Duration::from_secs(20));

    let mut acked = std::collections::BTreeSet::new();
    let mut nacked = std::collections::BTreeSet::new();
    for e in net.events(CLIENT) {
        match e {
            Event::Ack { stream_seq, .. } => assert!(acked.insert(*stream_seq)),
            Event::Nack {
                stream_seq,
                reason: NackReason::Lost,
                channel,
                ..
            } => {
                assert_eq!(*channel, Some(ChannelId::new(1)));
                assert!(nacked.insert(*stream_seq));
            }
            _ => {}
        }
    }
    assert!(!nacked.is_empty());
    assert!(acked.is_disjoint(&nacked));
    assert_eq!(acked.len() + nacked.len(), 400, "every ADU acked or nacked");
    let received = net
        .events(SERVER)
        .iter()
        .filter(|e| matches!(e, Event::Received { .. }))
        .count();
    assert_eq!(received, acked.len());
}

/// Calls that can miss say why, with a typed error: an ADU that already left, a
/// channel or objective the session does not have, a datagram that is not a hello.
/// Withdrawing a queued ADU reports it as `NackReason::Removed`.
#[test]
fn failed_calls_return_typed_errors() {
    let mut net = Net::new(
        &[20],
        CcConfig::Cbr {
            kbps: 400.0,
            burst_ms: 50.0,
        },
        Box::new(|_, _| false),
    );
    net.client()
        .open_stream(1, StreamConfig::default())
        .unwrap();
    let now = net.now();
    let h = net
        .client()
        .send_adu(now, 1, Bytes::from_static(b"x"), Fields::new())
        .unwrap();
    net.client().set_adu_field(h, "prio", 3i64.into()).unwrap();
    net.client().remove_adu(h).unwrap();
    assert_eq!(
        net.client().remove_adu(h),
        Err(SessionError::AduNotQueued(h))
    );
    assert_eq!(
        net.client().set_adu_field(h, "prio", 1i64.into()),
        Err(SessionError::AduNotQueued(h))
    );
    net.flush();
    assert!(net.events(CLIENT).iter().any(|e| matches!(
        e,
        Event::Nack {
            adu,
            reason: NackReason::Removed,
            ..
        } if *adu == h.id
    )));
    assert_eq!(
        net.client().remove_channel(now, ChannelId::new(9)),
        Err(SessionError::UnknownChannel(ChannelId::new(9)))
    );
    let mut ping = Vec::new();
    horde_proto::wire::encode(&horde_proto::wire::Packet::Close { conn: 7 }, &mut ping);
    let err = Session::accept(
        SessionConfig::default(),
        now,
        0,
        net.addr(CLIENT, 0),
        Bytes::from(ping),
        Vec::new(),
        Arc::new(|_| ChannelConfig::default()),
    )
    .unwrap_err();
    assert_eq!(err, SessionError::NotAHello("close"));
    let err = Session::accept(
        SessionConfig::default(),
        now,
        0,
        net.addr(CLIENT, 0),
        Bytes::from_static(&[0x30, 1, 2]),
        Vec::new(),
        Arc::new(|_| ChannelConfig::default()),
    )
    .unwrap_err();
    assert!(matches!(err, SessionError::Malformed(_)), "{err}");
}

#[test]
fn malformed_datagrams_are_counted_and_harmless() {
    let mut net = Net::new(&[10], CcConfig::default(), Box::new(|_, _| false));
    net.client()
        .open_stream(1, StreamConfig::default())
        .unwrap();
    net.run_until(Duration::from_millis(100));
    let garbage: Vec<Bytes> = vec![
        Bytes::new(),
        Bytes::from_static(&[0x13]),
        Bytes::from_static(&[0xff; 64]),
        Bytes::from_static(&[0x13, 0, 0, 0, 0, 0, 0, 0, 42, 0, 0]), // truncated data, right conn
    ];
    // Straight into the sessions: the endpoint would drop most of these unseen.
    let (now, server_addr, client_addr) = (net.now(), net.addr(SERVER, 0), net.addr(CLIENT, 0));
    for g in garbage {
        net.client().handle_datagram(now, 0, server_addr, g.clone());
        net.server().handle_datagram(now, 0, client_addr, g);
    }
    assert_eq!(net.client().stats().malformed, 4);
    assert_eq!(net.server().stats().malformed, 4);
    send_n(&mut net, 1, 20, 5, Duration::from_millis(100));
    net.run_until(Duration::from_secs(3));
    let received = net
        .events(SERVER)
        .iter()
        .filter(|e| matches!(e, Event::Received { .. }))
        .count();
    assert_eq!(received, 20);
}

#[test]
fn dead_channel_stops_getting_slots_and_recovers() {
    let mut net = Net::new(
        &[20, 20],
        CcConfig::Cbr {
            kbps: 200.0,
            burst_ms: 50.0,
        },
        Box::new(|_, _| false),
    );
    net.client()
        .open_stream(1, StreamConfig::default())
        .unwrap();
    net.run_until(Duration::from_millis(100));
    send_n(&mut net, 1, 100, 10, Duration::from_millis(100));
    // Kill channel 0 both ways by giving it an enormous delay.
    net.set_delay(0, Duration::from_secs(3600));
    let kill_at = net.now();
    send_n(&mut net, 1, 400, 10, kill_at);
    let down = net.events(CLIENT).iter().any(|e| {
        *e == Event::ChannelDown {
            channel: ChannelId::new(0),
        }
    });
    assert!(down, "channel 0 declared dead");
    let client = net.client();
    let ch0 = client.channels().get(ChannelId::new(0)).expect("channel 0");
    assert!(!ch0.is_alive());
    // Traffic moved to channel 1: in the last second nothing was sent on channel 0
    // except probes.
    let before = net.client().channel_stats()[0].1;
    let now = net.now();
    send_n(&mut net, 1, 100, 10, now);
    let after = net.client().channel_stats()[0].1;
    assert_eq!(
        after.packets_sent - before.packets_sent,
        after.probes_sent - before.probes_sent
    );
    // Bring it back: probes get through and it is used again.
    net.set_delay(0, Duration::from_millis(20));
    // Packets already in flight with the huge delay stay lost; new ones flow.
    let now = net.now();
    send_n(&mut net, 1, 300, 10, now);
    let up = net.events(CLIENT).iter().any(|e| {
        *e == Event::ChannelUp {
            channel: ChannelId::new(0),
        }
    });
    assert!(up, "channel 0 came back");
    let last = net.client().channel_stats()[0].1;
    assert!(last.packets_sent - last.probes_sent > after.packets_sent - after.probes_sent + 20);
}

#[test]
fn small_stream_is_not_starved_by_a_backlogged_one() {
    // One 400 kbit/s channel with 25 ms one-way delay; a bulk stream keeps it busy while
    // a 4 kbit/s telemetry stream sends a 20-byte ADU every 40 ms.
    let mut net = Net::new(
        &[25],
        CcConfig::Cbr {
            kbps: 400.0,
            burst_ms: 20.0,
        },
        Box::new(|_, _| false),
    );
    net.client()
        .open_stream(
            1,
            StreamConfig {
                max_queue_bytes: 20_000,
                ..StreamConfig::default()
            },
        )
        .unwrap();
    net.client()
        .open_stream(
            2,
            StreamConfig {
                max_kbps: Some(8.0),
                ..StreamConfig::default()
            },
        )
        .unwrap();
    net.run_until(Duration::from_millis(200));
    for k in 0..250u64 {
        let t = Duration::from_millis(200 + 40 * k);
        net.run_until(t);
        while net.client().queued(1) < 30 {
            net.client()
                .send_adu(t, 1, Bytes::from(vec![0u8; 500]), Fields::new())
                .unwrap();
        }
        net.client()
            .send_adu(t, 2, Bytes::from(vec![1u8; 20]), Fields::new())
            .unwrap();
    }
    net.run_until(Duration::from_secs(12));
    let mut small = Vec::new();
    let mut bulk = Vec::new();
    for e in net.events(CLIENT) {
        if let Event::Ack {
            stream, latency, ..
        } = e
        {
            let ms = latency.as_secs_f64() * 1e3;
            if *stream == 2 {
                small.push(ms)
            } else {
                bulk.push(ms)
            }
        }
    }
    small.sort_by(f64::total_cmp);
    bulk.sort_by(f64::total_cmp);
    let p95 = small[small.len() * 95 / 100];
    let bulk_median = bulk[bulk.len() / 2];
    // The small stream waits at most a slot or two behind the bulk backlog, which itself
    // queues for hundreds of ms.
    assert!(small.len() >= 245, "{}", small.len());
    assert!(
        bulk_median > 200.0,
        "bulk is backlogged: median {bulk_median}"
    );
    assert!(p95 < 80.0, "telemetry p95 {p95} ms");
}

/// Remove channel 0 after it has carried a few hundred packets and add it back; `lose_hello`
/// drops the new channel's first hello. Returns the client events since the re-add and the
/// new channel's id.
fn remove_and_readd(lose_hello: bool) -> (Vec<Event>, u8) {
    let mut net = Net::new(
        &[20, 20],
        CcConfig::Cbr {
            kbps: 400.0,
            burst_ms: 50.0,
        },
        Box::new(|_, _| false),
    );
    net.client()
        .open_stream(1, StreamConfig::default())
        .unwrap();
    net.run_until(Duration::from_millis(100));
    send_n(&mut net, 1, 400, 5, Duration::from_millis(100));
    let now = net.now();
    net.run_until(now + Duration::from_millis(200));
    let old = net.client().channel_stats()[0].1.packets_sent;
    assert!(old > 150, "channel 0 carried {old} packets");
    let now = net.now();
    net.client().remove_channel(now, ChannelId::new(0)).unwrap();
    send_n(&mut net, 1, 40, 5, now);
    let now = net.now();
    if lose_hello {
        net.set_delay(0, Duration::from_secs(3600));
    }
    let remote = net.addr(SERVER, 0);
    let id = net
        .client()
        .add_channel(
            now,
            ChannelSpec {
                local: 0,
                remote,
                config: ChannelConfig {
                    mtu: 600,
                    congestion: CcConfig::Cbr {
                        kbps: 400.0,
                        burst_ms: 50.0,
                    },
                    ..ChannelConfig::default()
                },
            },
        )
        .unwrap();
    net.flush();
    net.set_delay(0, Duration::from_millis(20));
    let mark = net.events(CLIENT).len();
    send_n(&mut net, 1, 200, 5, now);
    let now = net.now();
    net.run_until(now + Duration::from_millis(500));
    (net.events(CLIENT)[mark..].to_vec(), u8::from(id))
}

#[test]
fn a_channel_removed_and_added_again_starts_afresh_at_the_peer() {
    let (events, id) = remove_and_readd(false);
    assert_eq!(id, 0, "the lowest free id is reused");
    // Fewer packets than the old channel 0 carried: had the peer kept the old channel's
    // receive state, every one would have looked like a duplicate and gone unacked.
    let acked = events
        .iter()
        .filter(|e| matches!(e, Event::Ack { channel, .. } if *channel == ChannelId::new(id)))
        .count();
    let nacked: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, Event::Nack { .. }))
        .collect();
    assert!(
        acked >= 60,
        "only {acked} ADUs acked on the re-added channel"
    );
    assert!(nacked.is_empty(), "lossless paths, yet {nacked:?}");
}

#[test]
fn a_lost_hello_of_an_added_channel_is_repeated() {
    let (events, id) = remove_and_readd(true);
    let acked: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Ack {
                channel,
                stream_seq,
                ..
            } if *channel == ChannelId::new(id) => Some(*stream_seq),
            _ => None,
        })
        .collect();
    assert!(
        acked.len() >= 40,
        "only {} ADUs acked on the re-added channel",
        acked.len()
    );
    // What went out before the repeated hello reached the peer was dropped there as
    // duplicates of the old channel's packets; everything sent after it gets through.
    let first = acked.iter().min().copied().unwrap();
    let late_nacks = events
        .iter()
        .filter(|e| {
            matches!(e, Event::Nack { channel: Some(c), stream_seq, .. }
                if *c == ChannelId::new(id) && *stream_seq > first)
        })
        .count();
    assert_eq!(late_nacks, 0);
}

/// The session announces channel membership itself: removing a live channel reports
/// `ChannelDown` before the nacks of what it had in flight, adding one reports
/// `ChannelUp`, and on the accepting side a removed channel that the peer's traffic
/// brings back reports `ChannelUp` as well.
#[test]
fn the_session_announces_channels_going_and_coming() {
    let cc = CcConfig::Cbr {
        kbps: 400.0,
        burst_ms: 50.0,
    };
    let mut net = Net::new(&[20, 20], cc.clone(), Box::new(|_, _| false));
    net.client()
        .open_stream(1, StreamConfig::default())
        .unwrap();
    net.run_until(Duration::from_millis(100));
    send_n(&mut net, 1, 40, 5, Duration::from_millis(100));
    // Stop mid-stream so that channel 0 has ADUs in flight when it goes.
    let now = net.now();
    let before = net.events(CLIENT).len();
    net.client().remove_channel(now, ChannelId::new(0)).unwrap();
    assert_eq!(
        net.client().remove_channel(now, ChannelId::new(0)),
        Err(SessionError::UnknownChannel(ChannelId::new(0))),
        "already gone"
    );
    net.flush();
    let after: Vec<Event> = net.events(CLIENT)[before..].to_vec();
    let down = after
        .iter()
        .position(|e| {
            *e == Event::ChannelDown {
                channel: ChannelId::new(0),
            }
        })
        .expect("ChannelDown for channel 0");
    let first_nack = after.iter().position(|e| {
        matches!(
            e,
            Event::Nack {
                channel: Some(c),
                ..
            } if *c == ChannelId::new(0)
        )
    });
    assert!(first_nack.is_none_or(|n| n > down), "{after:?}");

    let remote = net.addr(SERVER, 0);
    let mark = net.events(CLIENT).len();
    let spec = ChannelSpec {
        local: 0,
        remote,
        config: ChannelConfig {
            congestion: cc,
            ..ChannelConfig::default()
        },
    };
    let id = net.client().add_channel(now, spec).unwrap();
    net.flush();
    assert_eq!(
        net.events(CLIENT)[mark..]
            .iter()
            .filter(|e| **e == Event::ChannelUp { channel: id })
            .count(),
        1
    );

    // The accepting side removes channel 1; the client keeps sending on it.
    let now = net.now();
    let mark = net.events(SERVER).len();
    net.server().remove_channel(now, ChannelId::new(1)).unwrap();
    send_n(&mut net, 1, 40, 5, now);
    let now = net.now();
    net.run_until(now + Duration::from_millis(300));
    let server: Vec<&Event> = net.events(SERVER)[mark..].iter().collect();
    let down = server
        .iter()
        .position(|e| {
            **e == Event::ChannelDown {
                channel: ChannelId::new(1),
            }
        })
        .expect("server: ChannelDown");
    let up = server
        .iter()
        .position(|e| {
            **e == Event::ChannelUp {
                channel: ChannelId::new(1),
            }
        })
        .expect("server: ChannelUp once the client's traffic returns");
    assert!(down < up);
}

/// Back-pressure end to end in the session: a stream stops being writable at the
/// high-water mark, `Writable` fires once as its queue drains to the low-water mark, and
/// a refill that stays under the high mark raises no further event.
#[test]
fn writable_fires_once_per_drain_from_high_to_low_water() {
    let mut net = Net::new(
        &[25],
        CcConfig::Cbr {
            kbps: 400.0,
            burst_ms: 20.0,
        },
        Box::new(|_, _| false),
    );
    // Marks fixed by their floor: low 4000 bytes, high 8000.
    let config = StreamConfig {
        water_floor_bytes: 4000,
        high_water_ms: 0.0,
        low_water_ms: 0.0,
        ..StreamConfig::default()
    };
    assert_eq!(config.water_marks(50_000.0), (4000, 8000));
    net.client().open_stream(1, config).unwrap();
    let writable_events = |net: &Net| {
        net.events(CLIENT)
            .iter()
            .filter(|e| matches!(e, Event::Writable { stream: 1 }))
            .count()
    };
    let fill = |net: &mut Net, upto: usize| {
        let t = net.now();
        while net.client().queued_bytes(1) + 500 <= upto {
            net.client()
                .send_adu(t, 1, Bytes::from(vec![0u8; 500]), Fields::new())
                .unwrap();
        }
    };
    // Queued before the handshake completes: 15 ADUs (7500 bytes) leave it writable,
    // the 16th reaches the high mark.
    fill(&mut net, 7500);
    assert!(net.client().writable(1).unwrap());
    fill(&mut net, 8000);
    assert!(!net.client().writable(1).unwrap());
    assert_eq!(
        net.client().writable(9),
        Err(SessionError::UnknownStream(9))
    );

    // Drain in 1 ms steps: blocked while above the low mark, one event on reaching it.
    let mut t = Duration::ZERO;
    while writable_events(&net) == 0 {
        assert!(t < Duration::from_secs(2), "never became writable");
        assert!(!net.client().writable(1).unwrap());
        assert!(
            net.client().queued_bytes(1) > 4000 - 500,
            "blocked too long"
        );
        t += Duration::from_millis(1);
        net.run_until(t);
    }
    assert!(net.client().queued_bytes(1) <= 4000);
    assert!(net.client().writable(1).unwrap());

    // Refill to just under the high mark and drain completely: no new event.
    fill(&mut net, 7500);
    assert!(net.client().writable(1).unwrap());
    net.run_until(t + Duration::from_secs(1));
    assert_eq!(net.client().queued_bytes(1), 0);
    assert_eq!(writable_events(&net), 1);

    // Over the high mark again: one more event when it drains.
    let t = net.now();
    fill(&mut net, 8000);
    assert!(!net.client().writable(1).unwrap());
    net.run_until(t + Duration::from_secs(1));
    assert_eq!(writable_events(&net), 2);
}

/// Send `n` ADUs of `len` bytes on `stream`, `per_ms` of them every millisecond.
fn send_small(net: &mut Net, stream: u32, n: u64, len: usize, per_ms: u64, start: Duration) {
    for i in 0..n {
        let t = start + Duration::from_millis(i / per_ms);
        net.run_until(t);
        net.client()
            .send_adu(t, stream, Bytes::from(vec![i as u8; len]), Fields::new())
            .unwrap();
    }
}

/// A pair over two CBR channels sending `n` 40-byte ADUs (speech-frame sized) on an
/// ordered stream, with packing on or off and every 5th data datagram of channel 0 lost.
fn small_adus(pack_adus: bool, n: u64) -> Net {
    let config = SessionConfig {
        pack_adus,
        cycle_ms: 20.0,
        ..SessionConfig::default()
    };
    let cc = CcConfig::Cbr {
        kbps: 200.0,
        burst_ms: 40.0,
    };
    let mut net = Net::with_config(&[30, 40], cc, Box::new(|c, k| c == 0 && k % 5 == 2), config);
    let ordered = StreamConfig {
        ordered: true,
        ..StreamConfig::default()
    };
    net.client().open_stream(1, ordered).unwrap();
    net.run_until(Duration::from_millis(200));
    send_small(&mut net, 1, n, 40, 1, Duration::from_millis(200));
    net.run_until(Duration::from_secs(5));
    net
}

#[test]
fn small_adus_are_packed_into_fewer_packets_and_each_is_acked_nacked_and_delivered_in_order() {
    let n = 400;
    let packed = small_adus(true, n);
    let single = small_adus(false, n);
    println!(
        "{n} ADUs of 40 bytes: {} data datagrams packed, {} one per slot",
        packed.data_datagrams.get(),
        single.data_datagrams.get()
    );
    assert_eq!(
        single.data_datagrams.get(),
        single.adus_in_datagrams.get(),
        "one ADU a packet"
    );
    assert_eq!(single.adus_in_datagrams.get(), n);
    assert_eq!(packed.adus_in_datagrams.get(), n, "every ADU sent once");
    assert!(
        packed.data_datagrams.get() * 3 < single.data_datagrams.get(),
        "packed {} datagrams, unpacked {}",
        packed.data_datagrams.get(),
        single.data_datagrams.get()
    );
    for net in [&packed, &single] {
        let mut acked = std::collections::BTreeSet::new();
        let mut nacked = std::collections::BTreeSet::new();
        for e in net.events(CLIENT) {
            match e {
                Event::Ack { stream_seq, .. } => assert!(acked.insert(*stream_seq)),
                Event::Nack {
                    stream_seq,
                    reason: NackReason::Lost,
                    ..
                } => assert!(nacked.insert(*stream_seq)),
                _ => {}
            }
        }
        assert!(!nacked.is_empty(), "the dropped datagrams' ADUs are nacked");
        assert!(acked.is_disjoint(&nacked));
        assert_eq!(
            acked.len() + nacked.len(),
            n as usize,
            "every ADU settled once"
        );
        let received: Vec<u64> = net
            .events(SERVER)
            .iter()
            .filter_map(|e| match e {
                Event::Received { stream_seq, .. } => Some(*stream_seq),
                _ => None,
            })
            .collect();
        assert_eq!(
            received
                .iter()
                .copied()
                .collect::<std::collections::BTreeSet<_>>(),
            acked,
            "exactly the acked ADUs arrived"
        );
        assert!(
            received.windows(2).all(|w| w[0] < w[1]),
            "an ordered stream is delivered in order"
        );
    }
}

#[test]
fn a_hello_of_wire_version_1_is_refused_by_name() {
    let mut net = Net::new(&[10], CcConfig::default(), Box::new(|_, _| false));
    let mut hello = Vec::new();
    let t = net
        .client()
        .poll_transmit(Duration::ZERO, &mut hello)
        .unwrap();
    assert!(t.adus.is_empty());
    assert_eq!(hello[0] >> 4, horde_proto::wire::VERSION);
    // The same hello as a version-1 peer would send it.
    hello[0] = (1 << 4) | (hello[0] & 0x0f);
    let refused = Session::accept(
        SessionConfig::default(),
        Duration::ZERO,
        0,
        net.addr(CLIENT, 0),
        Bytes::from(hello),
        Vec::new(),
        Arc::new(|_| ChannelConfig::default()),
    )
    .unwrap_err();
    assert_eq!(
        refused,
        SessionError::UnsupportedVersion { peer: 1, ours: 3 }
    );
    assert_eq!(
        refused.to_string(),
        "peer speaks wire version 1; this end speaks version 3 only"
    );
}
