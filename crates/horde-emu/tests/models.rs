//! Real link models (from `LinkSpec`) shaping traffic through the emulator.

mod common;

use std::time::{Duration, Instant};

use common::*;
use horde_emu::{Emulator, TimerOptions};

#[test]
fn rate_limited_link_delivers_at_its_rate() {
    const SIZE: usize = 1000;
    const COUNT: usize = 60;
    let server = udp();
    let emu = Emulator::start_with(
        vec![channel(
            "rate",
            server.local_addr().unwrap(),
            link(r#"rate = { model = "constant", kbps = 4000 }"#, 1),
            ideal(),
        )],
        TimerOptions::default(),
    )
    .unwrap();
    let client = udp();
    let entry = emu.client_addr("rate").unwrap();
    for i in 0..COUNT {
        let mut p = [0u8; SIZE];
        p[0] = i as u8;
        client.send_to(&p, entry).unwrap();
    }
    let mut arrivals = Vec::new();
    while arrivals.len() < COUNT {
        let (p, _) = recv(&server).expect("all packets arrive");
        assert_eq!(p[0] as usize, arrivals.len(), "FIFO order");
        arrivals.push(Instant::now());
    }
    // 1000 bytes at 4 Mbit/s take 2 ms each.
    let span = (*arrivals.last().unwrap() - arrivals[0]).as_secs_f64();
    let rate = ((COUNT - 1) * SIZE * 8) as f64 / span;
    assert!((3.8e6..4.2e6).contains(&rate), "measured {rate:.0} bit/s");
    let stats = emu.shutdown();
    let up = &stats.channel("rate").unwrap().up;
    assert_eq!(up.delivered as usize, COUNT);
    assert_eq!(up.accounted(), up.offered);
    assert!(up.release_error.quantile(0.5) < Duration::from_millis(1));
}

#[test]
fn loss_model_drops_about_p() {
    const COUNT: u64 = 1000;
    let server = udp();
    let emu = Emulator::start_with(
        vec![channel(
            "lossy",
            server.local_addr().unwrap(),
            link(r#"loss = { model = "bernoulli", p = 0.2 }"#, 42),
            ideal(),
        )],
        TimerOptions::default(),
    )
    .unwrap();
    let client = udp();
    let entry = emu.client_addr("lossy").unwrap();
    // Read concurrently so the receiver's socket buffer never overflows.
    let reader = std::thread::spawn(move || drain(&server, Duration::from_millis(150)).len());
    for i in 0..COUNT {
        client.send_to(&i.to_le_bytes(), entry).unwrap();
        if i % 100 == 99 {
            // Stay well inside the receiver's socket buffer.
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let got = reader.join().unwrap() as u64;
    let stats = emu.shutdown();
    let up = &stats.channel("lossy").unwrap().up;
    assert!((740..=860).contains(&got), "received {got} of {COUNT}");
    assert_eq!(up.offered, COUNT);
    assert_eq!(up.delivered, got);
    assert_eq!(up.dropped_loss, COUNT - got, "{up:?}");
    assert_eq!(up.in_flight, 0);
    assert_eq!(up.accounted(), up.offered);
}
