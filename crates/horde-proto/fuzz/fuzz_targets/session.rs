//! Arbitrary datagrams, timer expiries and ADU sends into a connected client and the
//! server that accepted it, on the harness's two nodes joined by zero-delay paths so
//! their own traffic keeps flowing between the injected datagrams. Datagrams enter
//! through each node's endpoint, so its routing and accept path are fuzzed too.
//! Nothing may panic, spin on a due timer, or emit an unbounded burst of datagrams.
//!
//! The input is a sequence of operations. Each starts with an opcode byte and a time
//! step byte (the clock advances by step² × 16 µs, up to about one second):
//!
//! | `op & 3` | operation                                                               |
//! |----------|-------------------------------------------------------------------------|
//! | 0        | datagram of the next `len` bytes (`len` = next byte), as is             |
//! | 1        | the same behind a current-version header of type `op >> 4` and the session's conn id |
//! | 2        | timers only                                                             |
//! | 3        | send an ADU of `4 × next byte` bytes on stream 1 or 2                    |
//!
//! `op & 4` picks the node (server if set), `op & 8` the interface a datagram
//! arrives on.
//!
//! An input of a few kB holds hundreds of operations and simulates a minute or more
//! of the pair (a 1.7 kB one: 85 s, 1,022 harness steps), so run it without
//! AddressSanitizer (`cargo fuzz run -O -s none session`): horde-proto and
//! horde-policy forbid unsafe code, and ASan makes every step about three times
//! dearer (`docs/fuzzing.md`).

#![no_main]

use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;
use horde_proto::harness::{Harness, NodeId};
use horde_proto::wire;
use horde_proto::{
    ChannelConfig, ChannelSpec, ConnectOptions, SessionHandle, EndpointConfig, ServerConfig,
    StreamConfig,
};
use libfuzzer_sys::fuzz_target;

const CONN: u64 = 0x0123_4567_89ab_cdef;
/// Datagrams one operation may cause before it counts as a storm.
const MAX_BURST: u64 = 10_000;
/// Harness steps one operation may take before the sessions count as spinning.
const MAX_STEPS: usize = 10_000;

struct Pair {
    h: Harness,
    nodes: [NodeId; 2],
    sessions: [SessionHandle; 2],
}

fn open_streams(p: &mut Pair, side: usize) {
    let s = p.h.session_mut(p.nodes[side], p.sessions[side]);
    s.open_stream(1, StreamConfig::default()).unwrap();
    let ordered = StreamConfig {
        ordered: true,
        ..StreamConfig::default()
    };
    s.open_stream(2, ordered).unwrap();
}

/// A connected client and the server session that accepted it.
fn pair() -> Pair {
    let mut h = Harness::new(0);
    h.set_step_limit(MAX_STEPS);
    let client = h.add_node(EndpointConfig::default(), 2);
    let server = h.add_node(EndpointConfig::default(), 2);
    h.listen(server, 7, ServerConfig::uniform(ChannelConfig::default()));
    let channels = (0..2)
        .map(|i| ChannelSpec {
            local: i,
            remote: Harness::addr(server, i),
            config: ChannelConfig::default(),
        })
        .collect();
    let options = ConnectOptions {
        service: 7,
        channels,
        conn_id: Some(CONN),
        ..ConnectOptions::default()
    };
    let c = h.connect(client, options).unwrap();
    h.run_until(Duration::ZERO);
    assert!(h.session(client, c).is_connected());
    let s = h.accept(server).expect("the server accepted the hello");
    let mut p = Pair {
        h,
        nodes: [client, server],
        sessions: [c, s],
    };
    open_streams(&mut p, 0);
    open_streams(&mut p, 1);
    p
}

fuzz_target!(|data: &[u8]| {
    let mut p = pair();
    let mut now = Duration::ZERO;
    let mut input = data.iter().copied();
    while let (Some(op), Some(step)) = (input.next(), input.next()) {
        now += Duration::from_micros(u64::from(step) * u64::from(step) * 16);
        p.h.run_until(now);
        let sent = p.h.stats().sent;
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
                let src = Harness::addr(p.nodes[1 - side], local);
                p.h.inject(p.nodes[side], local, src, Bytes::from(d));
            }
            2 => {}
            _ => {
                let len = 4 * usize::from(input.next().unwrap_or(0));
                let stream = 1 + u32::from(op >> 7);
                let payload = Bytes::from(vec![op; len]);
                let s = p.h.session_mut(p.nodes[side], p.sessions[side]);
                let _ = s.send_adu(now, stream, payload, Fields::new());
            }
        }
        // Everything that follows at this instant (zero-delay paths): the harness's
        // step limit catches a spin.
        p.h.run_until(now);
        assert!(p.h.stats().sent - sent < MAX_BURST, "transmit storm");
    }
});
