//! Objectives steer real traffic: over emulated links of different latency, an objective
//! favouring one stream's latency lowers that stream's measured latency against the same
//! run without it.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{link, setup_with};
use horde_policy::{Directed, Fields, Scheduler};
use horde_proto::{ChannelConfig, Event, StreamConfig};

const LOW_LATENCY: &str = r#"objective {
  context { adu:a { stream_id == 1 } }
  goal { expected(a::latency) <= 300 }
  utility { a { 300 - expected(a::latency) } }
}"#;

/// Mean insertion-to-ack latency (ms) of streams 1 and 2, each sending 100 ADUs/s.
async fn run(with_objective: bool) -> (f64, f64) {
    let links = [
        ("fast", link(4000.0, 10.0, 0.0), link(4000.0, 10.0, 0.0)),
        ("mid", link(4000.0, 50.0, 0.0), link(4000.0, 50.0, 0.0)),
        ("slow", link(4000.0, 100.0, 0.0), link(4000.0, 100.0, 0.0)),
    ];
    let directed: horde_net::SchedulerFactory =
        Arc::new(|| Box::new(Directed::default()) as Box<dyn Scheduler>);
    let s = setup_with(&links, ChannelConfig::default(), |c| {
        c.scheduler = Some(directed)
    })
    .await;
    let (handle, mut events) = s.conn.split();
    for id in [1, 2] {
        handle
            .open_stream(id, StreamConfig::default())
            .await
            .unwrap();
    }
    if with_objective {
        handle
            .inject_objective(Arc::new(horde_hose::compile(LOW_LATENCY).unwrap()))
            .await
            .unwrap();
    }
    let start = Instant::now();
    let mut n = 0u32;
    let mut lat: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    while start.elapsed() < Duration::from_secs(4) {
        while Duration::from_millis(10) * n <= start.elapsed() {
            for id in [1, 2] {
                handle
                    .send_adu_nowait(id, Bytes::from(vec![0u8; 800]), Fields::new())
                    .unwrap();
            }
            n += 1;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        while let Ok(e) = events.try_recv() {
            if let Event::Ack {
                stream, latency, ..
            } = e
            {
                lat[stream as usize - 1].push(latency.as_secs_f64() * 1e3);
            }
        }
    }
    s.emu.unwrap().shutdown();
    let mean = |v: &Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
    assert!(
        lat[0].len() > 200 && lat[1].len() > 200,
        "traffic flowed: {} {}",
        lat[0].len(),
        lat[1].len()
    );
    (mean(&lat[0]), mean(&lat[1]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latency_objective_lowers_that_streams_latency() {
    let (favoured, other) = run(true).await;
    let (baseline, baseline_other) = run(false).await;
    println!("with objective: favoured {favoured:.0} ms, other {other:.0} ms; without: {baseline:.0} ms, {baseline_other:.0} ms");
    // Without objectives both streams see about the same mix of links.
    assert!(
        (baseline - baseline_other).abs() < 0.3 * baseline,
        "baseline {baseline:.0} vs {baseline_other:.0}"
    );
    // With it, stream 1 gets the fast link's slots: its latency drops clearly.
    assert!(
        favoured < 0.7 * baseline,
        "favoured {favoured:.0} ms vs baseline {baseline:.0} ms"
    );
    assert!(
        favoured < other,
        "favoured {favoured:.0} ms vs unfavoured {other:.0} ms"
    );
}
