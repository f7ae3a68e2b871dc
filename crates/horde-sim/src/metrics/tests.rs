use std::time::Duration;

use serde_json::Value as Json;

use super::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
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
    assert_eq!(s.latency_samples_ms, vec![105.0, 220.0, 310.0]);
    assert_eq!(s.latency_ms.mean, Some(635.0 / 3.0));
    assert_eq!(s.latency_ms.median, Some(220.0));
    assert_eq!(s.latency_ms.p25, Some(105.0));
    assert_eq!(s.latency_ms.p75, Some(310.0));
    assert_eq!(s.latency_ms.p95, Some(310.0));
    assert_eq!(s.rtt_ms.median, Some(210.0));
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
fn nearest_rank_percentiles() {
    let v: Vec<f64> = (1..=10).map(f64::from).collect();
    assert_eq!(percentile(&v, 25), Some(3.0));
    assert_eq!(percentile(&v, 50), Some(5.0));
    assert_eq!(percentile(&v, 75), Some(8.0));
    assert_eq!(percentile(&v, 95), Some(10.0));
    assert_eq!(percentile(&v, 100), Some(10.0));
    assert_eq!(percentile(&[4.0], 1), Some(4.0));
    assert_eq!(percentile(&[], 50), None);
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
    let mut lose = |m: &mut Metrics, stream: u32, ch: ChannelId, seq: u64| {
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
    assert_eq!(s.latency_ms.median, Some(1200.0));
    assert_eq!(s.rtt_ms.median, Some(390.0));
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
    m.adu_sent(1, ChannelId(3), 0, ms(0)); // unknown channel
    m.adu_nacked(1, ms(2)); // nothing in flight
    m.control_sent(ChannelId(9), 1);
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
        ChannelId(1),
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
    assert!(
        s.get("latency_samples_ms").is_none(),
        "samples stay out of JSON"
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
            r.cdf_svg().unwrap(),
        )
    };
    let one = render(&small_run());
    assert_eq!(one, render(&small_run()));
    // The same events for independent ADUs, reported in another order.
    let mut m = Metrics::new();
    let a = m.add_channel("a");
    let b = m.add_channel("b");
    for id in (0..4).rev() {
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
    let a = ChannelId(0);
    m.adu_inserted(0, 10, 100, ms(0));
    m.adu_sent(10, a, 5, ms(0));
    m.adu_acked(10, ms(220)); // ties with ADU 1's 220 ms
    let r = m.report(Duration::from_secs(2));
    for csv in [r.streams_csv(), r.channels_csv()] {
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
    assert_eq!(
        r.latency_cdf_csv(),
        "stream,latency_ms,cdf\n0,105,0.25\n0,220,0.75\n0,310,1\n"
    );
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
