use std::time::Duration;

use serde_json::Value as Json;

use super::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Histogram percentiles are within 0.1 % of the exact value.
fn close(got: Option<f64>, want: f64) -> bool {
    got.is_some_and(|g| (g - want).abs() <= want.abs() * 1e-3 + 1e-9)
}

/// `cdf` matches `want` point for point, values within 0.1 %.
fn assert_cdf(cdf: &[(f64, f64)], want: &[(f64, f64)]) {
    assert_eq!(cdf.len(), want.len(), "{cdf:?}");
    for (&(x, p), &(wx, wp)) in cdf.iter().zip(want) {
        assert!(close(Some(x), wx) && (p - wp).abs() < 1e-12, "{cdf:?}");
    }
}

/// Two channels, stream 0 with four ADUs of 100 B: two acked on `a`, one acked on `b`,
/// one lost on `b`; stream 7 registered but silent.
fn small_run() -> Metrics {
    let mut m = Metrics::new();
    let a = m.add_channel("a");
    let b = m.add_channel("b");
    m.add_stream(7);
    for id in 0..4 {
        m.adu_inserted(0, id, 100, ms(10 * id));
    }
    m.adu_sent(0, a, 0, ms(5));
    m.adu_sent(1, b, 0, ms(20));
    m.adu_sent(2, a, 1, ms(30));
    m.adu_sent(3, b, 1, ms(40));
    m.adu_acked(0, ms(105)); // latency 105, rtt 100
    m.adu_acked(1, ms(230)); // latency 220, rtt 210
    m.adu_acked(2, ms(330)); // latency 310, rtt 300
    m.adu_nacked(3, ms(900));
    m.adu_delivered(0, ms(60));
    m.adu_delivered(1, ms(130));
    m.adu_delivered(1, ms(131)); // duplicate: ignored
    m.adu_delivered(2, ms(180));
    m.control_sent(a, 40);
    m
}

#[test]
fn counts_latencies_and_shares_from_a_hand_built_run() {
    let r = small_run().report(Duration::from_secs(2));
    assert_eq!(r.unmatched_events, 0);
    assert_eq!(r.streams.len(), 2);
    let s = &r.streams[0];
    assert_eq!(
        (
            s.inserted,
            s.sent,
            s.transmissions,
            s.acked,
            s.lost,
            s.pending,
            s.delivered
        ),
        (4, 4, 4, 3, 1, 0, 3)
    );
    assert_eq!(s.loss_rate, Some(0.25));
    assert_cdf(
        &s.latency_cdf,
        &[(105.0, 1.0 / 3.0), (220.0, 2.0 / 3.0), (310.0, 1.0)],
    );
    assert!(close(s.latency_ms.mean, 635.0 / 3.0));
    assert!(close(s.latency_ms.median, 220.0));
    assert!(close(s.latency_ms.p25, 105.0));
    assert_eq!(
        s.latency_ms.p75,
        Some(310.0),
        "the top bucket is the exact max"
    );
    assert_eq!(s.latency_ms.p95, Some(310.0));
    assert_eq!(s.latency_ms.min, Some(105.0));
    assert!(close(s.rtt_ms.median, 210.0));
    // 300 acked bytes in 2 s.
    assert!((s.goodput_kbps - 1.2).abs() < 1e-12);
    assert_eq!(s.channels["a"], 2);
    assert_eq!(s.channels["b"], 2);
    assert_eq!(s.channel_share["a"], 0.5);

    let silent = &r.streams[1];
    assert_eq!((silent.id, silent.sent), (7, 0));
    assert_eq!(silent.loss_rate, None);
    assert_eq!(silent.latency_ms.median, None);
    assert_eq!(silent.channels["a"], 0);

    let (a, b) = (&r.channels[0], &r.channels[1]);
    assert_eq!(
        (a.name.as_str(), a.sent, a.lost, a.bytes_sent),
        ("a", 2, 0, 200)
    );
    assert_eq!((b.name.as_str(), b.sent, b.lost), ("b", 2, 1));
    assert_eq!(b.loss_rate, Some(0.5));
    assert_eq!((a.control_sent, a.control_bytes), (1, 40));
}

#[test]
fn summary_of_sorted_samples() {
    let s = Summary::from_sorted(&[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(
        (s.count, s.mean, s.median, s.min, s.max),
        (4, Some(2.5), Some(2.0), Some(1.0), Some(4.0))
    );
}

#[test]
fn correlated_losses_are_same_stream_same_channel_within_eight() {
    let mut m = Metrics::new();
    let a = m.add_channel("a");
    let b = m.add_channel("b");
    let mut id = 0;
    let mut lose = |m: &mut Metrics, stream: u32, ch: MetricsChannel, seq: u64| {
        m.adu_inserted(stream, id, 768, Duration::ZERO);
        m.adu_sent(id, ch, seq, Duration::ZERO);
        m.adu_nacked(id, ms(1));
        id += 1;
    };
    lose(&mut m, 0, a, 10); // pairs with seq 18: gap 8, correlated
    lose(&mut m, 0, a, 18);
    lose(&mut m, 0, a, 30); // nearest same-stream loss is 12 away
    lose(&mut m, 0, a, 40); // neighbour at 41 is another stream's
    lose(&mut m, 1, a, 41);
    lose(&mut m, 0, b, 11); // other channel: not with a's 10
                            // Ten delivered ADUs of stream 0 so the fraction has a larger denominator.
    for seq in 100..110 {
        m.adu_inserted(0, id, 768, Duration::ZERO);
        m.adu_sent(id, b, seq, Duration::ZERO);
        m.adu_acked(id, ms(500));
        id += 1;
    }
    let r = m.report(Duration::from_secs(1));
    let s0 = &r.streams[0];
    assert_eq!((s0.sent, s0.lost, s0.lost_correlated), (15, 5, 2));
    assert_eq!(s0.correlated_loss_fraction, Some(2.0 / 15.0));
    assert_eq!(r.streams[1].lost_correlated, 0);
}

#[test]
fn an_adu_lost_twice_on_one_channel_is_not_correlated_with_itself() {
    let mut m = Metrics::new();
    let a = m.add_channel("a");
    m.adu_inserted(0, 1, 100, Duration::ZERO);
    m.adu_sent(1, a, 1, Duration::ZERO);
    m.adu_nacked(1, ms(1));
    m.adu_sent(1, a, 2, ms(2));
    m.adu_nacked(1, ms(3));
    let s = &m.report(Duration::from_secs(1)).streams[0];
    assert_eq!(
        (s.sent, s.transmissions, s.lost, s.lost_correlated),
        (1, 2, 1, 0)
    );
}

#[test]
fn retransmission_after_nack_counts_once_and_rtt_is_the_acked_copy() {
    let mut m = Metrics::new();
    let a = m.add_channel("a");
    let b = m.add_channel("b");
    m.adu_inserted(3, 9, 500, ms(0));
    m.adu_sent(9, a, 4, ms(10));
    m.adu_nacked(9, ms(800));
    m.adu_sent(9, b, 2, ms(810));
    m.adu_acked(9, ms(1200));
    let r = m.report(Duration::from_secs(2));
    let s = &r.streams[0];
    assert_eq!((s.sent, s.transmissions, s.acked, s.lost), (1, 2, 1, 0));
    assert!(close(s.latency_ms.median, 1200.0));
    assert!(close(s.rtt_ms.median, 390.0));
    assert_eq!((r.channels[0].lost, r.channels[1].lost), (1, 0));
    assert_eq!(s.channels["a"] + s.channels["b"], 2);
}

#[test]
fn a_late_ack_overrules_a_loss_timeout_and_unresolved_adus_are_pending() {
    let mut m = Metrics::new();
    let a = m.add_channel("a");
    m.adu_inserted(0, 1, 100, ms(0));
    m.adu_sent(1, a, 0, ms(0));
    m.adu_nacked(1, ms(1000));
    m.adu_acked(1, ms(1500));
    m.adu_inserted(0, 2, 100, ms(0));
    m.adu_sent(2, a, 1, ms(0));
    m.adu_inserted(0, 3, 100, ms(0));
    m.adu_dropped(3, ms(1));
    let r = m.report(Duration::from_secs(2));
    let s = &r.streams[0];
    assert_eq!(
        (s.inserted, s.dropped, s.sent, s.acked, s.lost, s.pending),
        (3, 1, 2, 1, 0, 1)
    );
    assert_eq!(s.latency_ms.max, Some(1500.0));
    assert_eq!(r.channels[0].lost, 0);
}

#[test]
fn events_the_collector_cannot_match_are_counted() {
    let mut m = Metrics::new();
    let a = m.add_channel("a");
    m.adu_acked(5, ms(1)); // never inserted
    m.adu_inserted(0, 1, 10, ms(0));
    m.adu_inserted(0, 1, 10, ms(0)); // duplicate id
    m.adu_sent(1, MetricsChannel(3), 0, ms(0)); // unknown channel
    m.adu_nacked(1, ms(2)); // nothing in flight
    m.control_sent(MetricsChannel(9), 1);
    m.adu_sent(1, a, 0, ms(0));
    m.adu_acked(1, ms(3));
    m.adu_acked(1, ms(4)); // nothing left to resolve
    assert_eq!(m.add_channel("a"), a);
    assert_eq!(m.report(Duration::from_secs(1)).unmatched_events, 6);
}

#[test]
fn json_has_the_agreed_shape() {
    let mut m = small_run();
    m.link_stats(
        MetricsChannel(1),
        horde_links::LinkStats {
            offered: 2,
            queue_drops: 0,
            lost: 1,
            delivered: 1,
            bytes_delivered: 100,
        },
    );
    let json: Json = serde_json::from_str(&m.report(Duration::from_secs(2)).to_json()).unwrap();
    let s = &json["streams"][0];
    for key in [
        "id",
        "sent",
        "delivered",
        "lost",
        "loss_rate",
        "correlated_loss_fraction",
        "goodput_kbps",
    ] {
        assert!(s.get(key).is_some(), "stream.{key}");
    }
    for key in ["mean", "median", "p95", "p25", "p75"] {
        assert!(s["latency_ms"][key].is_number(), "latency_ms.{key}");
    }
    assert_eq!(s["channels"]["a"], 2);
    assert_eq!(s["channel_share"]["b"], 0.5);
    assert!(s.get("latency_cdf").is_none(), "the CDF stays out of JSON");
    for key in ["mean", "median", "p95", "p99"] {
        assert!(s["one_way_delay_ms"][key].is_number(), "one_way.{key}");
        assert!(s["in_order_delay_ms"][key].is_number(), "in_order.{key}");
    }
    assert_eq!(s["delivered_bytes"], 300);
    assert_eq!(json["goodput_interval_s"], 1.0);
    assert_eq!(
        s["delivered_goodput_series_kbps"].as_array().unwrap().len(),
        2
    );
    assert!(json["streams"][1]["latency_ms"]["median"].is_null());
    let c = &json["channels"][1];
    assert_eq!(
        (c["name"].as_str(), c["sent"].as_u64(), c["lost"].as_u64()),
        (Some("b"), Some(2), Some(1))
    );
    assert_eq!(c["link"]["lost"], 1);
    assert!(json["channels"][0].get("link").is_none());
}

#[test]
fn output_is_byte_for_byte_deterministic_and_independent_of_event_interleaving() {
    let render = |m: &Metrics| {
        let r = m.report(Duration::from_secs(2));
        (
            r.to_json(),
            r.streams_csv(),
            r.channels_csv(),
            r.latency_cdf_csv(),
            r.goodput_csv(),
            r.cdf_svg().unwrap(),
        )
    };
    let one = render(&small_run());
    assert_eq!(one, render(&small_run()));
    // The same events for independent ADUs, reported in another order (insertions stay
    // in stream order: that is the order in-order delivery follows).
    let mut m = Metrics::new();
    let a = m.add_channel("a");
    let b = m.add_channel("b");
    for id in 0..4 {
        m.adu_inserted(0, id, 100, ms(10 * id));
    }
    m.add_stream(7);
    m.adu_sent(3, b, 1, ms(40));
    m.adu_sent(2, a, 1, ms(30));
    m.adu_nacked(3, ms(900));
    m.adu_sent(1, b, 0, ms(20));
    m.adu_sent(0, a, 0, ms(5));
    m.control_sent(a, 40);
    m.adu_acked(2, ms(330));
    m.adu_acked(1, ms(230));
    m.adu_acked(0, ms(105));
    for (id, at) in [(2, 180), (1, 130), (0, 60)] {
        m.adu_delivered(id, ms(at));
    }
    assert_eq!(one, render(&m));
}

#[test]
fn csv_files_are_rectangular_and_the_cdf_steps_over_ties() {
    let mut m = small_run();
    let a = MetricsChannel(0);
    m.adu_inserted(0, 10, 100, ms(0));
    m.adu_sent(10, a, 5, ms(0));
    m.adu_acked(10, ms(220)); // ties with ADU 1's 220 ms
    let r = m.report(Duration::from_secs(2));
    for csv in [r.streams_csv(), r.channels_csv(), r.goodput_csv()] {
        let widths: Vec<usize> = csv.lines().map(|l| l.split(',').count()).collect();
        assert!(
            widths.len() > 1 && widths.iter().all(|&w| w == widths[0]),
            "{csv}"
        );
    }
    assert!(r.streams_csv().starts_with("id,inserted,"));
    assert!(r
        .streams_csv()
        .lines()
        .next()
        .unwrap()
        .ends_with("adus_b,share_b"));
    // One row per histogram bucket: the two 220 ms ADUs share one.
    let rows: Vec<(f64, f64)> = r
        .latency_cdf_csv()
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f[0], "0");
            (f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect();
    assert_cdf(&rows, &[(105.0, 0.25), (220.0, 0.75), (310.0, 1.0)]);
    assert!(r.latency_cdf_csv().starts_with("stream,latency_ms,cdf\n"));
    assert!(r.channels_csv().contains("\na,3,0,0,300,1,40,,,,,\n"));
}

#[test]
fn files_are_written_where_asked() {
    let dir = std::env::temp_dir().join(format!("horde-sim-metrics-{}", std::process::id()));
    let mut r = small_run().report(Duration::from_secs(2));
    r.scenario = Some("unit".into());
    r.write_csv(&dir).unwrap();
    r.write_json(&dir).unwrap();
    r.write_cdf_plot(&dir).unwrap();
    for f in [
        "streams.csv",
        "channels.csv",
        "latency_cdf.csv",
        "goodput.csv",
        "report.json",
    ] {
        assert!(std::fs::metadata(dir.join(f)).unwrap().len() > 0, "{f}");
    }
    let svg = std::fs::read_to_string(dir.join("latency_cdf.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    assert!(
        svg.contains("stream 0") && !svg.contains("stream 7"),
        "only streams with samples get a line"
    );
    assert!(svg.contains("ADU latency CDF: unit"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn one_way_and_in_order_delays_from_a_hand_built_run() {
    let r = small_run().report(Duration::from_secs(2));
    let s = &r.streams[0];
    // Delivered at 60, 130, 180 ms; inserted at 0, 10, 20 ms; nothing waits.
    assert_eq!(s.one_way_delay_ms.count, 3);
    assert!(close(s.one_way_delay_ms.mean, (60.0 + 120.0 + 160.0) / 3.0));
    assert!(close(s.one_way_delay_ms.median, 120.0));
    assert_eq!(s.one_way_delay_ms.max, Some(160.0));
    assert_eq!(s.in_order_delay_ms, s.one_way_delay_ms);
}

/// Stream 0: ADU 0 arrives late, ADU 2 is lost (declared at 900 ms), ADUs 1 and 3
/// arrive early and wait.
fn hole_run() -> Metrics {
    let mut m = Metrics::new();
    let a = m.add_channel("a");
    for id in 0..4 {
        m.adu_inserted(0, id, 1000, ms(10 * id));
        m.adu_sent(id, a, id, ms(10 * id));
    }
    m.adu_delivered(1, ms(60)); // one-way 50
    m.adu_delivered(3, ms(80)); // one-way 50
    m.adu_delivered(0, ms(400)); // one-way 400: releases 1, which waited
    m.adu_nacked(2, ms(900)); // releases 3, waiting behind the lost ADU 2
    for id in [0, 1, 3] {
        m.adu_acked(id, ms(950));
    }
    m
}

#[test]
fn in_order_delay_includes_head_of_line_waiting_and_lost_holes_release() {
    let r = hole_run().report(Duration::from_secs(2));
    let s = &r.streams[0];
    assert_eq!((s.delivered, s.lost), (3, 1));
    // One-way: 400, 50, 50.
    assert!(close(s.one_way_delay_ms.median, 50.0));
    assert_eq!(s.one_way_delay_ms.max, Some(400.0));
    // In order: ADU 0 at 400 (400), ADU 1 at 400 (390), ADU 3 at 900 (870).
    assert_eq!(s.in_order_delay_ms.count, 3);
    assert_eq!(s.in_order_delay_ms.min, Some(390.0));
    assert_eq!(s.in_order_delay_ms.max, Some(870.0));
    assert!(close(
        s.in_order_delay_ms.mean,
        (400.0 + 390.0 + 870.0) / 3.0
    ));
    assert!(s.in_order_delay_ms.mean >= s.one_way_delay_ms.mean);
}

#[test]
fn adus_behind_an_unresolved_hole_have_no_in_order_delay_yet() {
    let mut m = Metrics::new();
    let a = m.add_channel("a");
    for id in 0..3 {
        m.adu_inserted(0, id, 100, ms(0));
    }
    m.adu_sent(0, a, 0, ms(0)); // never resolved
    m.adu_delivered(1, ms(50));
    m.adu_dropped(2, ms(60)); // resolved, but behind ADU 0
    let s = &m.report(Duration::from_secs(1)).streams[0];
    assert_eq!(s.one_way_delay_ms.count, 1);
    assert_eq!(s.in_order_delay_ms.count, 0);
    assert_eq!(s.in_order_delay_ms.median, None);
    // Three live ADUs, one of them settled (dropped), two resolved ones waiting.
    assert_eq!(m.held_records(), 3 + 1 + 2);
}

#[test]
fn goodput_series_sums_to_the_run_total() {
    let mut m = Metrics::new();
    m.set_goodput_interval(Duration::from_millis(400));
    let a = m.add_channel("a");
    // 1000-byte ADUs delivered at 100, 300, 500, 900 and 1000 ms of a 1 s run.
    for (id, at) in [(0, 100), (1, 300), (2, 500), (3, 900), (4, 1000)] {
        m.adu_inserted(0, id, 1000, ms(0));
        m.adu_sent(id, a, id, ms(0));
        m.adu_delivered(id, ms(at));
    }
    let r = m.report(Duration::from_secs(1));
    assert_eq!(r.goodput_interval_s, 0.4);
    let s = &r.streams[0];
    assert_eq!(s.delivered_bytes, 5000);
    assert_eq!(s.delivered_goodput_kbps, 40.0);
    // Intervals [0, .4), [.4, .8), [.8, 1]: the last is 0.2 s and holds the delivery at
    // the very end.
    assert_eq!(s.delivered_bytes_series, vec![2000, 1000, 2000]);
    let kbps = &s.delivered_goodput_series_kbps;
    assert!((kbps[0] - 40.0).abs() < 1e-9 && (kbps[2] - 80.0).abs() < 1e-9);
    let bits: f64 = kbps.iter().zip([0.4, 0.4, 0.2]).map(|(k, t)| k * t).sum();
    assert!((bits - s.delivered_goodput_kbps * 1.0).abs() < 1e-9);
    let csv = r.goodput_csv();
    assert!(csv.contains("\n0,0.8,1,2000,80\n"), "{csv}");
    // Nothing sent, nothing delivered: acked goodput stays the thesis's measure.
    assert_eq!(s.goodput_kbps, 0.0);
}

/// `n` ADUs alternating between streams 0 and 1, one every 10 ms, each sent, then
/// delivered 100 ms and acked 200 ms later; but of every 50, the first and third (both
/// stream 0, two slots apart: a correlated loss) are lost, declared at 300 ms, and the
/// second's first transmission is lost and retransmitted.
fn long_run(m: &mut Metrics, n: u64) {
    let a = m.add_channel("a");
    let mut seq = 0;
    for id in 0..n {
        let t = ms(10 * id);
        m.adu_inserted((id % 2) as u32, id, 500, t);
        m.adu_sent(id, a, seq, t);
        seq += 1;
        if id % 50 == 0 || id % 50 == 2 {
            m.adu_nacked(id, t + ms(300));
        } else if id % 50 == 1 {
            m.adu_nacked(id, t + ms(300));
            m.adu_sent(id, a, seq, t + ms(300));
            seq += 1;
            m.adu_delivered(id, t + ms(400));
            m.adu_acked(id, t + ms(500));
        } else {
            m.adu_delivered(id, t + ms(100));
            m.adu_acked(id, t + ms(200));
        }
    }
}

#[test]
fn letting_go_of_settled_adus_changes_no_number() {
    let mut keep_all = Metrics::new();
    keep_all.set_retention(Duration::from_secs(1_000_000));
    let mut short = Metrics::new();
    short.set_retention(Duration::from_secs(1));
    long_run(&mut keep_all, 20_000);
    long_run(&mut short, 20_000);
    let end = Duration::from_secs(201);
    let (a, b) = (keep_all.report(end), short.report(end));
    assert_eq!(a.to_json(), b.to_json());
    assert_eq!(
        (a.streams[0].lost, a.streams[0].lost_correlated),
        (800, 800)
    );
    assert_eq!((a.streams[1].lost, a.streams[1].acked), (0, 10_000));
    assert!(a.streams[1].transmissions > 10_000, "retransmissions");
    assert!(a.streams[0].in_order_delay_ms.count > 9_000);
    assert!(keep_all.held_records() > 20_000);
    assert!(short.held_records() < 1_000, "{}", short.held_records());
}

#[test]
fn memory_held_does_not_grow_with_the_run_length() {
    // 60 s and 600 s of the same traffic.
    let held = |n| {
        let mut m = Metrics::new();
        long_run(&mut m, n);
        (m.held_records(), m.summary_heap_bytes())
    };
    let (records_60, heap_60) = held(6_000);
    let (records_600, heap_600) = held(60_000);
    // 30 s of retention at 100 ADUs/s, whatever the run's length.
    assert!(records_60 > 1_000, "{records_60}");
    assert!(
        records_600 <= records_60 + records_60 / 10,
        "{records_60} -> {records_600}"
    );
    // Histograms do not grow; the three 1 s series (goodput, offered and sent bytes)
    // grow to 600 entries per stream (a vector's capacity is at most twice that).
    assert!(
        heap_600 <= heap_60 + 3 * 2 * (2 * 600 * 8),
        "{heap_60} -> {heap_600}"
    );
}
