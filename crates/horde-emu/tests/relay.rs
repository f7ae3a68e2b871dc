//! End-to-end relaying over real UDP sockets on loopback.

mod common;

use std::time::{Duration, Instant};

use common::*;
use horde_emu::{Emulator, ScheduleStep, TimerOptions};

#[test]
fn relays_both_ways_and_follows_the_client_address() {
    let server = udp();
    let emu = Emulator::start_with(
        vec![channel("a", server.local_addr().unwrap(), ideal(), ideal())],
        TimerOptions::default(),
    )
    .unwrap();
    let entry = emu.client_addr("a").unwrap();
    assert_ne!(entry.port(), 0);

    let first = udp();
    first.send_to(b"hello", entry).unwrap();
    let (payload, from) = recv(&server).expect("up relayed");
    assert_eq!(payload, b"hello");
    assert_eq!(Some(from), emu.server_side_addr("a"));
    server.send_to(b"reply", from).unwrap();
    let (payload, from_emu) = recv(&first).expect("down relayed");
    assert_eq!(payload, b"reply");
    assert_eq!(from_emu, entry);

    // The client moves to a new address (as after a NAT rebinding).
    let moved = udp();
    moved.send_to(b"again", entry).unwrap();
    assert_eq!(recv(&server).expect("up relayed").0, b"again");
    server.send_to(b"to-new", from).unwrap();
    assert_eq!(recv(&moved).expect("reply follows the client").0, b"to-new");
    assert!(drain(&first, Duration::from_millis(50)).is_empty());

    let stats = emu.shutdown();
    let a = stats.channel("a").unwrap();
    assert_eq!((a.up.offered, a.up.delivered), (2, 2));
    assert_eq!((a.down.offered, a.down.delivered), (2, 2));
    assert_eq!(a.up.release_error.count(), 2);
}

#[test]
fn constant_delay_is_applied_within_a_millisecond() {
    let delay = Duration::from_millis(20);
    let server = udp();
    let emu = Emulator::start_with(
        vec![channel(
            "d",
            server.local_addr().unwrap(),
            link(r#"delay = { model = "constant", ms = 20 }"#, 1),
            ideal(),
        )],
        TimerOptions::default(),
    )
    .unwrap();
    let client = udp();
    let entry = emu.client_addr("d").unwrap();
    let mut observed = Vec::new();
    for i in 0..20u8 {
        let sent = Instant::now();
        client.send_to(&[i], entry).unwrap();
        let (p, _) = recv(&server).expect("relayed");
        observed.push(sent.elapsed());
        assert_eq!(p, [i]);
    }
    observed.sort();
    assert!(observed[0] >= delay, "early delivery: {:?}", observed[0]);
    let median = observed[observed.len() / 2];
    assert!(
        median < delay + Duration::from_millis(1),
        "median {median:?}"
    );
    let stats = emu.shutdown();
    let err = &stats.channel("d").unwrap().up.release_error;
    assert_eq!(err.count(), 20);
    assert!(err.quantile(0.5) < Duration::from_millis(1), "{err:?}");
}

#[test]
fn scheduled_down_period_drops_both_ways_then_recovers() {
    let server = udp();
    let mut ch = channel("s", server.local_addr().unwrap(), ideal(), ideal());
    ch.schedule = vec![
        ScheduleStep {
            at: Duration::from_millis(150),
            down: true,
        },
        ScheduleStep {
            at: Duration::from_millis(300),
            down: false,
        },
    ];
    let emu = Emulator::start_with(vec![ch], TimerOptions::default()).unwrap();
    let entry = emu.client_addr("s").unwrap();
    let client = udp();
    client.send_to(b"hi", entry).unwrap();
    let (_, back) = recv(&server).unwrap();
    server.set_nonblocking(true).unwrap();
    client.set_nonblocking(true).unwrap();

    // Every 5 ms both ends send a packet tagged with the emulator time of sending.
    let mut up_got = Vec::new();
    let mut down_got = Vec::new();
    let mut buf = [0u8; 64];
    while emu.elapsed() < Duration::from_millis(450) {
        let t = emu.elapsed().as_millis() as u64;
        client.send_to(&t.to_le_bytes(), entry).unwrap();
        server.send_to(&t.to_le_bytes(), back).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        while let Ok(n) = server.recv(&mut buf) {
            up_got.push(u64::from_le_bytes(buf[..n].try_into().unwrap()));
        }
        while let Ok(n) = client.recv(&mut buf) {
            down_got.push(u64::from_le_bytes(buf[..n].try_into().unwrap()));
        }
    }
    let stats = emu.shutdown();
    // A stamp is taken just before its send, and the emulator reads the packet
    // later still: on a loaded machine one stamped near either edge of the
    // down period can reach the emulator on the other side of it. Only the
    // middle of the period is certain.
    for (dir, got) in [("up", &up_got), ("down", &down_got)] {
        assert!(
            got.iter().all(|&t| !(170..260).contains(&t)),
            "{dir}: sent while down yet delivered: {got:?}"
        );
        assert!(
            got.iter().any(|&t| t < 140),
            "{dir}: nothing before: {got:?}"
        );
        assert!(got.iter().any(|&t| t > 310), "{dir}: no recovery: {got:?}");
    }
    let s = stats.channel("s").unwrap();
    assert!(s.up.dropped_down >= 10, "{s:?}");
    assert_eq!(s.up.accounted(), s.up.offered);
    assert_eq!(s.down.accounted(), s.down.offered);
    assert!(s.down.dropped_down >= 10, "{s:?}");
    assert!(!s.link_down);
}

#[test]
fn set_down_at_runtime() {
    let server = udp();
    let emu = Emulator::start_with(
        vec![channel("r", server.local_addr().unwrap(), ideal(), ideal())],
        TimerOptions::default(),
    )
    .unwrap();
    let entry = emu.client_addr("r").unwrap();
    let client = udp();
    emu.set_down("r", true).unwrap();
    assert!(emu.stats().channel("r").unwrap().link_down);
    client.send_to(b"lost", entry).unwrap();
    assert!(drain(&server, Duration::from_millis(50)).is_empty());
    emu.set_down("r", false).unwrap();
    client.send_to(b"kept", entry).unwrap();
    assert_eq!(recv(&server).unwrap().0, b"kept");
    assert!(emu.set_down("nope", true).is_err());
    assert_eq!(emu.client_addr("nope"), None);
    let s = emu.shutdown();
    assert_eq!(s.channel("r").unwrap().up.dropped_down, 1);
}

#[test]
fn shutdown_joins_threads_and_releases_sockets() {
    let server = udp();
    let emu = Emulator::start_with(
        vec![channel(
            "x",
            server.local_addr().unwrap(),
            link(r#"delay = { model = "constant", ms = 5000 }"#, 1),
            ideal(),
        )],
        TimerOptions::default(),
    )
    .unwrap();
    assert!(emu.is_running());
    let entry = emu.client_addr("x").unwrap();
    udp().send_to(b"pending", entry).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let started = Instant::now();
    let stats = emu.shutdown();
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(stats.channel("x").unwrap().up.in_flight, 1);
    // The threads held the sockets; once joined, the port is free again.
    std::net::UdpSocket::bind(entry).expect("client-facing port released");

    // Dropping the handle stops it too.
    let emu = Emulator::start_with(
        vec![channel("y", server.local_addr().unwrap(), ideal(), ideal())],
        TimerOptions::default(),
    )
    .unwrap();
    let entry = emu.client_addr("y").unwrap();
    drop(emu);
    std::net::UdpSocket::bind(entry).expect("released on drop");
}

#[test]
fn duplicate_channel_names_are_rejected() {
    let server = udp();
    let addr = server.local_addr().unwrap();
    let err = Emulator::start_with(
        vec![
            channel("same", addr, ideal(), ideal()),
            channel("same", addr, ideal(), ideal()),
        ],
        TimerOptions::default(),
    )
    .err()
    .expect("rejected");
    assert!(err.to_string().contains("same"), "{err}");
}
