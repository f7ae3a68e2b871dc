//! Hostile input: a connected pair of sessions is fed arbitrary byte strings and mutated
//! real datagrams (bit flips, truncations, trailing bytes, wrong connection ids and
//! versions, absurd ack ranges, huge sequence numbers) between ordinary traffic.
//!
//! Checked after every attack: nothing panics or spins, `malformed` counts exactly the
//! datagrams that do not decode and `foreign` exactly those for another connection, and
//! the sender's next ADUs are still delivered.
//!
//! Without the secure layer nothing authenticates a datagram, so a forged data packet or
//! ping carrying the right connection id and a sequence number the real sender will use
//! next makes the receiver treat that real packet as a duplicate. Each such forgery can
//! cost at most one real datagram, and the delivery check allows exactly that many. A
//! forged `Close` legitimately ends a session, so the sender is never fed one.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;
use horde_proto::harness::{Harness, NodeId, PathConfig};
use horde_proto::wire::{self, Ack, Packet, FLAG_ORDERED, MAX_ACK_RANGES};
use horde_proto::{
    ChannelConfig, ChannelId, ChannelSpec, ConnectOptions, EndpointConfig, Event, ServerConfig,
    Session, SessionHandle, StreamConfig,
};
use proptest::prelude::*;

const CONN: u64 = 0x5eed_0000_0000_0042;
const CHANNELS: u16 = 2;
const ONE_WAY: Duration = Duration::from_millis(10);
const UNORDERED: u32 = 1;
const ORDERED: u32 = 2;
/// Steps of one `run_until` beyond which the sessions are considered to spin.
const MAX_STEPS: usize = 100_000;

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// A client and a server session joined by a lossless network with a fixed delay.
struct Pair {
    h: Harness,
    client_node: NodeId,
    server_node: NodeId,
    conn: SessionHandle,
    /// Datagrams seen on the wire, as seeds for mutation.
    captured: Rc<RefCell<Vec<Bytes>>>,
}

impl Pair {
    fn new() -> Self {
        let mut h = Harness::new(0);
        h.set_step_limit(MAX_STEPS);
        h.set_default_path(PathConfig::delay(ONE_WAY));
        let client_node = h.add_node(EndpointConfig::default(), CHANNELS);
        let server_node = h.add_node(EndpointConfig::default(), CHANNELS);
        h.listen(
            server_node,
            7,
            ServerConfig {
                aliases: Some(vec![Harness::addr(server_node, 0)]),
                ..ServerConfig::uniform(ChannelConfig::default())
            },
        );
        let captured = Rc::new(RefCell::new(Vec::new()));
        let seen = captured.clone();
        h.set_drop_filter(move |s| {
            let mut seen = seen.borrow_mut();
            if seen.len() < 64 {
                seen.push(Bytes::copy_from_slice(s.bytes));
            }
            false
        });
        let channels = (0..CHANNELS)
            .map(|i| ChannelSpec {
                local: i,
                remote: Harness::addr(server_node, i),
                config: ChannelConfig::default(),
            })
            .collect();
        let conn = h
            .connect(
                client_node,
                ConnectOptions {
                    service: 7,
                    channels,
                    conn_id: Some(CONN),
                    ..ConnectOptions::default()
                },
            )
            .expect("connect");
        Pair {
            h,
            client_node,
            server_node,
            conn,
            captured,
        }
    }

    fn now(&self) -> Duration {
        self.h.now()
    }

    fn client(&mut self) -> &mut Session {
        self.h.session_mut(self.client_node, self.conn)
    }

    fn server(&mut self) -> &mut Session {
        let h = *self
            .h
            .handles(self.server_node)
            .first()
            .expect("server accepted");
        self.h.session_mut(self.server_node, h)
    }

    /// Payloads the server delivered.
    fn delivered(&self) -> Vec<Bytes> {
        let Some(&h) = self.h.handles(self.server_node).first() else {
            return Vec::new();
        };
        self.h
            .events(self.server_node, h)
            .iter()
            .filter_map(|e| match e {
                Event::Received { payload, .. } => Some(payload.clone()),
                _ => None,
            })
            .collect()
    }

    fn run_until(&mut self, end: Duration) {
        self.h.run_until(end);
    }

    fn send_adu(&mut self, stream: u32, payload: Vec<u8>) {
        let now = self.now();
        self.client()
            .send_adu(now, stream, Bytes::from(payload), Fields::new())
            .expect("ADU accepted");
    }

    /// A connected pair that has exchanged some ordered and unordered data.
    fn warmed_up() -> Self {
        let mut p = Pair::new();
        p.run_until(ms(100));
        assert!(p.client().is_connected());
        p.client()
            .open_stream(UNORDERED, StreamConfig::default())
            .unwrap();
        p.client()
            .open_stream(
                ORDERED,
                StreamConfig {
                    ordered: true,
                    ..StreamConfig::default()
                },
            )
            .unwrap();
        for i in 0..4u8 {
            p.send_adu(UNORDERED, vec![i; 100 + usize::from(i)]);
            p.send_adu(ORDERED, vec![0x80 | i; 50]);
            let t = p.now() + ms(5);
            p.run_until(t);
        }
        let t = p.now() + ms(500);
        p.run_until(t);
        assert_eq!(p.delivered().len(), 8, "warm-up traffic delivered");
        p
    }
}

/// One hostile datagram. Seeds index the datagrams captured on the wire.
#[derive(Debug, Clone)]
enum Attack {
    Garbage(Vec<u8>),
    /// Garbage behind a valid version-1 header byte and our connection id.
    GarbageBody(u8, Vec<u8>),
    Flip(usize, Vec<usize>),
    Truncate(usize, usize),
    Extend(usize, Vec<u8>),
    WrongConn(usize, u64),
    WrongVersion(usize, u8),
    AbsurdAck(Ack),
    /// An ack header announcing more ranges than allowed.
    TooManyRanges(u8),
    HugeSeq {
        ping: bool,
        channel: u8,
        seq: u64,
        stream: u32,
        stream_seq: u64,
        flags: u8,
    },
}

fn edge_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        Just(u64::MAX),
        (u64::MAX - 100_000)..=u64::MAX,
        0u64..64,
    ]
}

fn attack() -> impl Strategy<Value = Attack> {
    let seed = any::<usize>();
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200).prop_map(Attack::Garbage),
        (0u8..16, prop::collection::vec(any::<u8>(), 0..120))
            .prop_map(|(t, b)| Attack::GarbageBody(t, b)),
        (seed, prop::collection::vec(any::<usize>(), 1..4))
            .prop_map(|(s, bits)| Attack::Flip(s, bits)),
        (seed, any::<usize>()).prop_map(|(s, k)| Attack::Truncate(s, k)),
        (seed, prop::collection::vec(any::<u8>(), 1..16)).prop_map(|(s, b)| Attack::Extend(s, b)),
        (seed, any::<u64>()).prop_map(|(s, c)| Attack::WrongConn(s, c)),
        (seed, 0u8..16).prop_map(|(s, v)| Attack::WrongVersion(s, v)),
        (
            0u8..3,
            edge_u64(),
            edge_u64(),
            any::<u32>(),
            prop::collection::vec((edge_u64(), edge_u64()), 0..=MAX_ACK_RANGES)
        )
            .prop_map(|(channel, largest, first_range, ack_delay_us, ranges)| {
                Attack::AbsurdAck(Ack {
                    conn: CONN,
                    channel: ChannelId::new(channel),
                    largest,
                    ack_delay_us,
                    echo_ts: 0,
                    first_range,
                    ranges,
                })
            }),
        (MAX_ACK_RANGES as u8 + 1..=u8::MAX).prop_map(Attack::TooManyRanges),
        (
            any::<bool>(),
            0u8..3,
            edge_u64(),
            prop_oneof![Just(UNORDERED), Just(ORDERED), any::<u32>()],
            edge_u64(),
            prop_oneof![Just(0), Just(FLAG_ORDERED), any::<u8>()]
        )
            .prop_map(|(ping, channel, seq, stream, stream_seq, flags)| {
                Attack::HugeSeq {
                    ping,
                    channel,
                    seq,
                    stream,
                    stream_seq,
                    flags,
                }
            }),
    ]
}

fn encode(p: &Packet) -> Vec<u8> {
    let mut b = Vec::new();
    wire::encode(p, &mut b);
    b
}

fn build(a: &Attack, seeds: &[Bytes]) -> Bytes {
    let seed = |i: usize| seeds[i % seeds.len()].to_vec();
    let v = match a {
        Attack::Garbage(b) => b.clone(),
        Attack::GarbageBody(t, b) => {
            let mut v = vec![(wire::VERSION << 4) | t];
            v.extend_from_slice(&CONN.to_be_bytes());
            v.extend_from_slice(b);
            v
        }
        Attack::Flip(i, bits) => {
            let mut v = seed(*i);
            for b in bits {
                let b = b % (v.len() * 8);
                v[b / 8] ^= 1 << (b % 8);
            }
            v
        }
        Attack::Truncate(i, k) => {
            let mut v = seed(*i);
            v.truncate(k % v.len());
            v
        }
        Attack::Extend(i, extra) => {
            let mut v = seed(*i);
            v.extend_from_slice(extra);
            v
        }
        Attack::WrongConn(i, conn) => {
            let mut v = seed(*i);
            let conn = if *conn == CONN { !CONN } else { *conn };
            v[1..9].copy_from_slice(&conn.to_be_bytes());
            v
        }
        Attack::WrongVersion(i, version) => {
            let mut v = seed(*i);
            let version = if *version == wire::VERSION {
                0
            } else {
                *version
            };
            v[0] = (version << 4) | (v[0] & 0x0f);
            v
        }
        Attack::AbsurdAck(ack) => encode(&Packet::Ack(ack.clone())),
        Attack::TooManyRanges(n) => {
            let mut v = encode(&Packet::Ack(Ack {
                conn: CONN,
                channel: ChannelId::new(0),
                largest: 10,
                ack_delay_us: 0,
                echo_ts: 0,
                first_range: 0,
                ranges: Vec::new(),
            }));
            *v.last_mut().unwrap() = *n;
            v.resize(v.len() + usize::from(*n) * 16, 0);
            v
        }
        Attack::HugeSeq {
            ping,
            channel,
            seq,
            stream,
            stream_seq,
            flags,
        } => encode(&if *ping {
            Packet::Ping {
                conn: CONN,
                channel: ChannelId::new(*channel),
                seq: *seq,
                send_ts: 0,
            }
        } else {
            Packet::Data {
                conn: CONN,
                channel: ChannelId::new(*channel),
                flags: *flags,
                seq: *seq,
                send_ts: 0,
                stream: *stream,
                stream_seq: *stream_seq,
                payload: Bytes::from_static(b"forged"),
            }
        }),
    };
    Bytes::from(v)
}

/// How much the hostile datagrams fed to one side must move its counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Expect {
    malformed: u64,
    foreign: u64,
}

/// Feed `attacks` (each to the server if its flag is set, else to the client), then
/// check the counters and that the client's next ADUs still reach the server.
fn run_attack(attacks: &[(bool, Attack)]) -> Result<(), TestCaseError> {
    let mut p = Pair::warmed_up();
    let seeds = p.captured.borrow().clone();
    let before = [p.client().stats(), p.server().stats()];
    let mut expect = [Expect::default(); 2];
    // Datagrams for our connection the server accepted: without the secure layer each is
    // trusted, and each may cost one real ADU: a forged data packet (plain or packed) or
    // ping shadows the real packet with the same channel and number, and a replayed hello
    // restarts its channel at the peer (as a re-added channel must), dropping what was in
    // flight.
    let mut shadows = 0u64;
    let mut closed = false;
    for (to_server, a) in attacks {
        let d = build(a, &seeds);
        let decoded = wire::decode(&d);
        if !to_server && matches!(decoded, Ok(Packet::Close { conn: CONN })) {
            continue;
        }
        let e = &mut expect[usize::from(*to_server)];
        match &decoded {
            Err(_) => e.malformed += 1,
            Ok(pk) if pk.conn() != CONN => e.foreign += 1,
            // A packed data packet shadows a real one as a plain data packet does.
            Ok(
                Packet::Data { .. }
                | Packet::Packed { .. }
                | Packet::Ping { .. }
                | Packet::Hello { .. },
            ) if *to_server => shadows += 1,
            // A well-formed Close for the connection is the peer's own word (the secure
            // layer vouches for every datagram here): it ends the session.
            Ok(Packet::Close { .. }) => closed = true,
            Ok(_) => {}
        }
        let now = p.now();
        let local = d.len() as u16 % CHANNELS;
        // Forged with the peer's own source address: a session follows the source of
        // what it accepts, and the network routes by address, so a forgery from
        // elsewhere would move the real traffic off the network instead of testing it.
        if *to_server {
            let src = Harness::addr(p.client_node, local);
            p.server().handle_datagram(now, local, src, d);
        } else {
            let src = Harness::addr(p.server_node, local);
            p.client().handle_datagram(now, local, src, d);
        }
        let t = p.now() + ms(1);
        p.run_until(t);
    }
    let after = [p.client().stats(), p.server().stats()];
    for side in 0..2 {
        prop_assert_eq!(
            after[side].malformed - before[side].malformed,
            expect[side].malformed,
            "malformed on side {}",
            side
        );
        prop_assert_eq!(
            after[side].foreign - before[side].foreign,
            expect[side].foreign,
            "foreign on side {}",
            side
        );
    }

    if closed {
        prop_assert!(p.client().is_closed() || p.server().is_closed());
        return Ok(());
    }

    // Real traffic afterwards: every marker arrives except at most one per shadow.
    let markers = shadows + 3;
    let first = p.delivered().len();
    for i in 0..markers {
        let stream = if i % 2 == 0 { UNORDERED } else { ORDERED };
        let mut m = b"real-after-attack-".to_vec();
        m.extend_from_slice(&i.to_be_bytes());
        p.send_adu(stream, m);
        let t = p.now() + ms(20);
        p.run_until(t);
    }
    let t = p.now() + ms(3000);
    p.run_until(t);
    let got = p.delivered()[first..]
        .iter()
        .filter(|d| d.starts_with(b"real-after-attack-"))
        .count() as u64;
    prop_assert!(
        got + shadows >= markers,
        "{} of {} real ADUs delivered after the attack ({} forged data/pings/hellos)",
        got,
        markers,
        shadows
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn hostile_datagrams_are_counted_and_harmless(
        attacks in prop::collection::vec((any::<bool>(), attack()), 1..24)
    ) {
        run_attack(&attacks)?;
    }
}

/// A single forged far-future sequence number must not make every real packet that
/// follows on the channel look like an old duplicate.
#[test]
fn far_future_sequence_number_does_not_poison_a_channel() {
    for channel in 0..CHANNELS as u8 {
        for seq in [u64::MAX, u64::MAX - 1, 1 << 40] {
            for ping in [false, true] {
                let a = Attack::HugeSeq {
                    ping,
                    channel,
                    seq,
                    stream: UNORDERED,
                    stream_seq: 1_000,
                    flags: 0,
                };
                run_attack(&[(true, a)]).unwrap();
            }
        }
    }
}

/// An ordered stream that releases stream sequence number `u64::MAX` keeps delivering.
#[test]
fn ordered_stream_survives_the_largest_stream_sequence_number() {
    let a = Attack::HugeSeq {
        ping: false,
        channel: 0,
        seq: 1 << 20,
        stream: ORDERED,
        stream_seq: u64::MAX,
        flags: FLAG_ORDERED,
    };
    run_attack(&[(true, a)]).unwrap();
}

/// The hostile shapes the property test draws from, each once, against both sides.
#[test]
fn every_attack_shape_once() {
    let ack = Ack {
        conn: CONN,
        channel: ChannelId::new(0),
        largest: u64::MAX,
        ack_delay_us: u32::MAX,
        echo_ts: 0,
        first_range: u64::MAX,
        ranges: vec![(u64::MAX, u64::MAX); MAX_ACK_RANGES],
    };
    let shapes = vec![
        Attack::Garbage(vec![]),
        Attack::Garbage(vec![0xff; 64]),
        Attack::GarbageBody(3, vec![1, 2, 3]),
        Attack::GarbageBody(0xf, vec![]),
        Attack::Flip(2, vec![0, 9, 100]),
        Attack::Truncate(2, 20),
        Attack::Extend(1, vec![0; 3]),
        Attack::WrongConn(2, 99),
        Attack::WrongVersion(2, 2),
        Attack::AbsurdAck(ack.clone()),
        Attack::AbsurdAck(Ack {
            largest: 3,
            first_range: 0,
            ranges: vec![(0, u64::MAX), (u64::MAX, 0)],
            ..ack
        }),
        Attack::TooManyRanges(33),
    ];
    for to_server in [false, true] {
        let attacks: Vec<_> = shapes.iter().map(|a| (to_server, a.clone())).collect();
        run_attack(&attacks).unwrap();
    }
}
