//! The emulator's forwarding ceiling: how many packets per second one channel relays when
//! its links add nothing (ideal links), so that only the receive thread, the release
//! thread and the socket calls cost. A sender on loopback offers packets as fast as it
//! can for a few seconds; a sink counts what comes out. Printed per packet size: packets
//! offered and forwarded per second, and the forwarded share.
//!
//! The ports are UDP relay sockets; `horde shell`'s TUN ports run the same two threads,
//! with a TUN read/write in place of a socket call.
//!
//! `cargo bench -p horde-emu --bench forwarding [-- SECONDS]`

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use horde_emu::{ChannelSetup, Emulator, IdealLink, TimerOptions};

fn run(size: usize, secs: f64) {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let channel = ChannelSetup {
        name: "ideal".into(),
        listen: "127.0.0.1:0".parse().unwrap(),
        forward_to: sink.local_addr().unwrap(),
        up: Box::new(IdealLink::new()),
        down: Box::new(IdealLink::new()),
        schedule: Vec::new(),
    };
    let emu = Emulator::start_with(vec![channel], TimerOptions::default()).unwrap();
    let entry = emu.client_addr("ideal").unwrap();

    let received = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let counter = {
        let (received, done) = (received.clone(), done.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !done.load(Ordering::Relaxed) {
                if sink.recv(&mut buf).is_ok() {
                    received.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    let payload = vec![0u8; size];
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..64 {
            if sender.send_to(&payload, entry).is_ok() {
                sent += 1;
            }
        }
    }
    let offered_for = start.elapsed().as_secs_f64();
    // Let the emulator drain what it accepted.
    std::thread::sleep(Duration::from_millis(300));
    done.store(true, Ordering::Relaxed);
    counter.join().unwrap();
    emu.shutdown();
    let got = received.load(Ordering::Relaxed);
    println!(
        "forwarding: {size:>5} B packets: offered {:>9.0} pkt/s, forwarded {:>9.0} pkt/s ({:.1}%, {:.1} Mbit/s)",
        sent as f64 / offered_for,
        got as f64 / offered_for,
        100.0 * got as f64 / sent.max(1) as f64,
        got as f64 * size as f64 * 8.0 / offered_for / 1e6
    );
}

fn main() {
    let secs = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<f64>().ok())
        .unwrap_or(3.0);
    for size in [64, 512, 1200] {
        run(size, secs);
    }
}
