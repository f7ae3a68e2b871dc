//! End to end over real sockets through the user-space link emulator.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{link, setup};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, ChannelId, Event, NackReason, StreamConfig};

/// Every ADU sent over lossy emulated links is either acked or reported by a nack,
/// exactly once, and everything acked was delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_adu_is_acked_or_nacked() {
    let links = [
        ("a", link(2000.0, 20.0, 0.05), link(2000.0, 20.0, 0.0)),
        ("b", link(1000.0, 40.0, 0.10), link(1000.0, 40.0, 0.0)),
        ("c", link(500.0, 80.0, 0.02), link(500.0, 80.0, 0.0)),
    ];
    let s = setup(&links, ChannelConfig::default()).await;
    let (handle, mut events) = s.conn.split();
    handle
        .open_stream(1, StreamConfig::default())
        .await
        .unwrap();
    const N: u64 = 600;
    let mut acked = BTreeSet::new();
    let mut nacked = BTreeSet::new();
    let mut sent = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while (acked.len() + nacked.len()) < N as usize && Instant::now() < deadline {
        // Keep 40 ADUs outstanding.
        while sent < N && sent - (acked.len() + nacked.len()) as u64 <= 40 {
            handle
                .send_adu_nowait(1, Bytes::from(vec![7u8; 1000]), Fields::new())
                .unwrap();
            sent += 1;
        }
        match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
            Ok(Some(Event::Ack { stream_seq, .. })) => {
                assert!(acked.insert(stream_seq), "acked twice")
            }
            Ok(Some(Event::Nack {
                stream_seq, reason, ..
            })) => {
                assert_eq!(reason, NackReason::Lost);
                assert!(nacked.insert(stream_seq), "nacked twice");
            }
            Ok(Some(_)) => {}
            _ => break,
        }
    }
    assert!(acked.is_disjoint(&nacked));
    assert_eq!(
        acked.len() + nacked.len(),
        N as usize,
        "acked {} nacked {}",
        acked.len(),
        nacked.len()
    );
    assert!(!nacked.is_empty(), "lossy links lose something");
    let mut received = BTreeSet::new();
    let mut rx = s.accepted;
    while let Some(e) = rx.try_event() {
        if let Event::Received { stream_seq, .. } = e {
            received.insert(stream_seq);
        }
    }
    assert!(acked.is_subset(&received), "everything acked was delivered");
    s.emu.unwrap().shutdown();
}

/// A link killed mid-run never stalls the stream for more than two RTTs of the
/// remaining links, and carries traffic again once it comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_failure_does_not_stall_and_recovery_is_used() {
    let links = [
        ("a", link(2000.0, 15.0, 0.0), link(2000.0, 15.0, 0.0)),
        ("b", link(2000.0, 25.0, 0.0), link(2000.0, 25.0, 0.0)),
        ("c", link(2000.0, 35.0, 0.0), link(2000.0, 35.0, 0.0)),
    ];
    let s = setup(&links, ChannelConfig::default()).await;
    let emu = s.emu.unwrap();
    let (handle, mut events) = s.conn.split();
    let (_, mut rx) = s.accepted.split();
    handle
        .open_stream(1, StreamConfig::default())
        .await
        .unwrap();

    // 200 ADUs/s for 6 s; channel a dies at 2 s and returns at 4 s.
    let start = Instant::now();
    let mut arrivals: Vec<Duration> = Vec::new();
    let mut acks_on_a_after_recovery = 0;
    let mut killed = false;
    let mut revived = false;
    let mut n = 0u32;
    while start.elapsed() < Duration::from_secs(6) {
        let t = start.elapsed();
        if !killed && t >= Duration::from_secs(2) {
            emu.set_down("a", true).unwrap();
            killed = true;
        }
        if !revived && t >= Duration::from_secs(4) {
            emu.set_down("a", false).unwrap();
            revived = true;
        }
        while Duration::from_millis(5) * n <= t {
            handle
                .send_adu_nowait(1, Bytes::from(vec![1u8; 500]), Fields::new())
                .unwrap();
            n += 1;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        while let Ok(e) = rx.try_recv() {
            if let Event::Received { .. } = e {
                arrivals.push(start.elapsed());
            }
        }
        while let Ok(e) = events.try_recv() {
            let on_a = matches!(e, Event::Ack { channel, .. } if channel == ChannelId::new(0));
            if on_a && revived {
                acks_on_a_after_recovery += 1;
            }
        }
    }
    // Longest gap between deliveries while the link was down (2 s .. 4 s).
    let window: Vec<Duration> = arrivals
        .iter()
        .copied()
        .filter(|t| *t >= Duration::from_millis(1900) && *t <= Duration::from_millis(4000))
        .collect();
    let max_gap = window.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    // Remaining links: RTTs of 50 ms and 70 ms; two of the larger is 140 ms.
    assert!(
        max_gap <= Duration::from_millis(140),
        "stalled for {max_gap:?}"
    );
    assert!(
        acks_on_a_after_recovery > 20,
        "revived link carries traffic: {acks_on_a_after_recovery} acks"
    );
    emu.shutdown();
}

/// A bulk sender that waits on back-pressure (`writable`) instead of a fixed window
/// keeps a constant 20 Mbit/s emulated link more than 90% busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_pressure_keeps_a_bulk_stream_on_the_link() {
    const KBPS: f64 = 20_000.0;
    let links = [("a", link(KBPS, 10.0, 0.0), link(KBPS, 10.0, 0.0))];
    let s = setup(&links, ChannelConfig::default()).await;
    let emu = s.emu.unwrap();
    let (handle, _) = s.conn.split();
    handle
        .open_stream(1, StreamConfig::default())
        .await
        .unwrap();
    let (_, mut rx) = s.accepted.split();
    let payload = Bytes::from(vec![3u8; 1200]);
    let probe = handle.clone();
    let sender = tokio::spawn(async move {
        let mut queued = 0u64;
        while handle.writable(1).await.is_ok() {
            for _ in 0..4 {
                handle
                    .send_adu_nowait(1, payload.clone(), Fields::new())
                    .unwrap();
                queued += 1;
            }
        }
        queued
    });
    let receiver = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    // Leave slow start out of the measurement.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (t0, before) = (Instant::now(), emu.stats());
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (t1, after) = (Instant::now(), emu.stats());
    let up = |st: &horde_emu::Stats| st.channel("a").unwrap().up.clone();
    let (b0, b1) = (up(&before), up(&after));
    let secs = (t1 - t0).as_secs_f64();
    let utilisation = (b1.delivered_bytes - b0.delivered_bytes) as f64 * 8.0 / (KBPS * 1e3 * secs);
    println!(
        "link utilisation {:.1}% over {secs:.2} s; {} tail drops",
        100.0 * utilisation,
        b1.dropped_queue
    );
    assert!(
        utilisation > 0.90,
        "bulk stream used {:.1}% of the link",
        100.0 * utilisation
    );
    // The stream was held back, not flooded: nothing was dropped from its queue.
    let stats = probe.stats().await.unwrap();
    assert_eq!(stats.adus_dropped, 0, "{stats:?}");
    sender.abort();
    receiver.abort();
    emu.shutdown();
}

/// Real-time version of the simulator's link-death check: a bulk stream over three
/// links of 2, 1.5 and 1 Mbit/s; the 1.5 Mbit/s link dies for good. From 2 s after the
/// death, the two surviving links carry at least 90% of their capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn surviving_links_carry_their_capacity_two_seconds_after_a_link_death() {
    // Buffers of about 60-120 ms, so the surviving links run dry within a fraction of a
    // second unless the scheduler moves the dead link's share onto them.
    let short = |kbps: f64, ms: f64| {
        let mut l = link(kbps, ms, 0.0);
        l.buffer_bytes = Some(15_000);
        l
    };
    let links = [
        ("a", short(2000.0, 20.0), short(2000.0, 20.0)),
        ("b", short(1500.0, 30.0), short(1500.0, 30.0)),
        ("c", short(1000.0, 40.0), short(1000.0, 40.0)),
    ];
    const SURVIVING_KBPS: f64 = 3000.0;
    let s = setup(&links, ChannelConfig::default()).await;
    let emu = s.emu.unwrap();
    let (handle, _) = s.conn.split();
    handle
        .open_stream(1, StreamConfig::default())
        .await
        .unwrap();
    let (_, mut rx) = s.accepted.split();
    let payload = Bytes::from(vec![7u8; 1200]);
    let sender = tokio::spawn(async move {
        while handle.writable(1).await.is_ok() {
            for _ in 0..4 {
                let _ = handle.send_adu_nowait(1, payload.clone(), Fields::new());
            }
        }
    });
    let receiver = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    // Leave slow start out; check that link b carries its share, then kill it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let b_bytes = || emu.stats().channel("b").unwrap().up.delivered_bytes;
    let (t0, b0) = (Instant::now(), b_bytes());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let b_kbps = (b_bytes() - b0) as f64 * 8.0 / 1e3 / t0.elapsed().as_secs_f64();
    println!("link b before its death: {b_kbps:.0} kbit/s");
    assert!(b_kbps > 750.0, "link b carried only {b_kbps:.0} kbit/s");
    emu.set_down("b", true).unwrap();
    let died = Instant::now();
    let surviving_bytes = |st: &horde_emu::Stats| {
        ["a", "c"]
            .iter()
            .map(|n| st.channel(n).unwrap().up.delivered_bytes)
            .sum::<u64>()
    };
    // Per-second shares of the surviving capacity, for the record; the target is judged
    // over seconds 2 to 6 after the death.
    let mut samples = vec![(Instant::now(), surviving_bytes(&emu.stats()))];
    for second in 1..=6u32 {
        tokio::time::sleep_until((died + Duration::from_secs(second.into())).into()).await;
        samples.push((Instant::now(), surviving_bytes(&emu.stats())));
    }
    let share = |from: usize, to: usize| {
        let (t0, b0) = samples[from];
        let (t1, b1) = samples[to];
        (b1 - b0) as f64 * 8.0 / (SURVIVING_KBPS * 1e3 * (t1 - t0).as_secs_f64())
    };
    let per_second: Vec<String> = (0..6)
        .map(|i| format!("{}-{} s {:.1}%", i, i + 1, 100.0 * share(i, i + 1)))
        .collect();
    println!(
        "surviving links' share after the death: {}",
        per_second.join(", ")
    );
    let after_two = share(2, 6);
    println!("seconds 2-6 after the death: {:.1}%", 100.0 * after_two);
    assert!(
        after_two >= 0.90,
        "surviving links carried {:.1}% of their capacity from 2 s after the death ({})",
        100.0 * after_two,
        per_second.join(", ")
    );
    sender.abort();
    receiver.abort();
    emu.shutdown();
}
