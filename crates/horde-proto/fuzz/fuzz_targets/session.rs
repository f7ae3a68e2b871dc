//! Arbitrary datagrams, timer expiries and ADU sends into a connected client session and
//! the server session that accepted it, joined by a zero-delay in-memory link so their
//! own traffic keeps flowing between the injected datagrams. Nothing may panic, spin on
//! a due timer, or emit an unbounded burst of datagrams.
//!
//! The input is a sequence of operations. Each starts with an opcode byte and a time
//! step byte (the clock advances by step² × 16 µs, up to about one second):
//!
//! | `op & 3` | operation                                                               |
//! |----------|-------------------------------------------------------------------------|
//! | 0        | datagram of the next `len` bytes (`len` = next byte), as is             |
//! | 1        | the same behind a version-1 header of type `op >> 4` and the session's conn id |
//! | 2        | timers only                                                             |
//! | 3        | send an ADU of `4 × next byte` bytes on stream 1 or 2                    |
//!
//! `op & 4` picks the session (server if set), `op & 8` the interface a datagram
//! arrives on.

#![no_main]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;
use horde_proto::wire::{self, Packet};
use horde_proto::{ChannelConfig, ChannelSpec, Session, SessionConfig, StreamConfig};
use libfuzzer_sys::fuzz_target;

const CONN: u64 = 0x0123_4567_89ab_cdef;
/// Datagrams one drain may produce before it counts as a storm.
const MAX_BURST: usize = 10_000;
/// Times a due timer may be handled without the deadline moving.
const MAX_SPINS: usize = 64;

fn client_addr(i: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 4000 + i))
}

fn server_addr(i: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 1, 1], 5000 + i))
}

fn open_streams(s: &mut Session) {
    s.open_stream(1, StreamConfig::default()).unwrap();
    let ordered = StreamConfig {
        ordered: true,
        ..StreamConfig::default()
    };
    s.open_stream(2, ordered).unwrap();
}

/// A client that sent its hellos and got a hello-ack, and the server that accepted it.
fn pair() -> [Session; 2] {
    let channels = (0..2)
        .map(|i| ChannelSpec {
            local: i,
            remote: server_addr(i),
            config: ChannelConfig::default(),
        })
        .collect();
    let mut client = Session::connect(
        SessionConfig::default(),
        CONN,
        7,
        channels,
        vec![client_addr(0), client_addr(1)],
        Duration::ZERO,
    )
    .unwrap();
    let mut buf = Vec::new();
    let t = client.poll_transmit(Duration::ZERO, &mut buf).unwrap();
    let hello = Bytes::copy_from_slice(&buf);
    while client.poll_transmit(Duration::ZERO, &mut buf).is_some() {}
    let mut ack = Vec::new();
    wire::encode(
        &Packet::HelloAck {
            conn: CONN,
            channel: t.channel,
            aliases: vec![server_addr(0)],
        },
        &mut ack,
    );
    client.handle_datagram(Duration::ZERO, t.local, t.dst, Bytes::from(ack));
    assert!(client.is_connected());
    let mut server = Session::accept(
        SessionConfig::default(),
        Duration::ZERO,
        t.local,
        client_addr(t.local),
        hello,
        vec![server_addr(0), server_addr(1)],
        Arc::new(|_| ChannelConfig::default()),
    )
    .unwrap();
    open_streams(&mut client);
    open_streams(&mut server);
    [client, server]
}

/// Fire due timers and pass datagrams between the two sessions until both are quiet.
fn settle(s: &mut [Session; 2], now: Duration, buf: &mut Vec<u8>) {
    for _ in 0..MAX_SPINS {
        for x in s.iter_mut() {
            if x.poll_timeout(now).is_some_and(|t| t <= now) {
                x.handle_timeout(now);
            }
        }
        let mut moved = false;
        for from in 0..2 {
            let mut burst = Vec::new();
            while let Some(t) = s[from].poll_transmit(now, buf) {
                assert!(burst.len() < MAX_BURST, "transmit storm");
                burst.push((t.local, Bytes::copy_from_slice(buf)));
            }
            let to = 1 - from;
            let src = if from == 0 { client_addr } else { server_addr };
            for (local, d) in burst {
                moved = true;
                s[to].handle_datagram(now, local, src(local), d);
            }
            while s[from].poll_event().is_some() {}
        }
        let due = s
            .iter()
            .any(|x| x.poll_timeout(now).is_some_and(|t| t <= now));
        if !moved && !due {
            return;
        }
    }
    panic!("sessions spin at {now:?}");
}

fuzz_target!(|data: &[u8]| {
    let mut s = pair();
    let mut now = Duration::ZERO;
    let mut buf = Vec::new();
    let mut input = data.iter().copied();
    while let (Some(op), Some(step)) = (input.next(), input.next()) {
        now += Duration::from_micros(u64::from(step) * u64::from(step) * 16);
        let side = usize::from(op & 4 != 0);
        let local = u16::from(op & 8 != 0);
        match op & 3 {
            kind @ (0 | 1) => {
                let len = usize::from(input.next().unwrap_or(0));
                let mut d = Vec::with_capacity(9 + len);
                if kind == 1 {
                    d.push((wire::VERSION << 4) | (op >> 4));
                    d.extend_from_slice(&CONN.to_be_bytes());
                }
                d.extend(input.by_ref().take(len));
                let src = if side == 0 { server_addr } else { client_addr };
                s[side].handle_datagram(now, local, src(local), Bytes::from(d));
            }
            2 => {}
            _ => {
                let len = 4 * usize::from(input.next().unwrap_or(0));
                let stream = 1 + u32::from(op >> 7);
                let payload = Bytes::from(vec![op; len]);
                let _ = s[side].send_adu(now, stream, payload, Fields::new());
            }
        }
        settle(&mut s, now, &mut buf);
    }
});
