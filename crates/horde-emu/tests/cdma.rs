//! The CDMA2000 demand-driven model shaping real UDP traffic through the emulator.

mod common;

use std::time::{Duration, Instant};

use common::*;
use horde_emu::{Emulator, TimerOptions};

#[test]
fn cdma_link_grants_from_backlog_drops_at_the_tail_and_keeps_order() {
    const SIZE: usize = 500;
    const COUNT: usize = 70; // 35 KB: more than the 30 KB buffer
    let server = udp();
    let emu = Emulator::start_with(
        vec![channel(
            "1xrtt",
            server.local_addr().unwrap(),
            link(
                r#"rate = { model = "cdma1x_rtt" }
buffer_bytes = 30000
delay = { model = "constant", ms = 50 }"#,
                1,
            ),
            ideal(),
        )],
        TimerOptions::default(),
    )
    .unwrap();
    let client = udp();
    let entry = emu.client_addr("1xrtt").unwrap();
    let start = Instant::now();
    for i in 0..COUNT {
        let mut p = [0u8; SIZE];
        p[0] = i as u8;
        client.send_to(&p, entry).unwrap();
    }
    let got = drain(&server, Duration::from_millis(1500));
    let span = start.elapsed().as_secs_f64() - 1.5;
    let ids: Vec<u8> = got.iter().map(|p| p[0]).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in order: {ids:?}");
    // The first 60 packets (30 KB) fit; the rest meet a full buffer.
    assert!((60..=62).contains(&got.len()), "{} arrived", got.len());
    // A 30 KB backlog gets the 153.6 kbit/s supplemental channel within a decision:
    // about 1.6 s through the air, where the fundamental 9.6 kbit/s would need 25 s.
    assert!((1.2..4.0).contains(&span), "took {span:.2} s");
    let stats = emu.shutdown();
    let up = &stats.channel("1xrtt").unwrap().up;
    assert_eq!(up.delivered as usize, got.len());
    assert_eq!(up.dropped_queue as usize, COUNT - got.len());
    assert_eq!(up.dropped_loss, 0);
}
