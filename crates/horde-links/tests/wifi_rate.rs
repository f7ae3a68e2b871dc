//! The `wifi` rate model: each packet takes its frame's airtime, retries included, and
//! the queue discipline is charged that airtime, so under CHAP a flow whose frames need
//! retries loses its priority to a clean one; bad values are refused with their name.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use horde_links::{FlowKey, Link, LinkSpec, QdiscKind, RateSpec, WifiPhy, WifiRate, WifiStation};

fn clean() -> FlowKey {
    FlowKey::udp([10, 0, 0, 1], 4000, [10, 0, 0, 2], 5000)
}

fn lossy() -> FlowKey {
    FlowKey::udp([10, 0, 0, 1], 4001, [10, 0, 0, 3], 5001)
}

/// A dot11g link whose frames to port 5001 are lost with probability `fer`.
fn link(qdisc: Option<QdiscKind>, fer: f64) -> Box<dyn Link> {
    LinkSpec {
        rate: Some(RateSpec::Wifi(WifiRate {
            phy: WifiPhy::Dot11g,
            mbps: None,
            distance_m: None,
            fer: None,
            stations: vec![WifiStation {
                addr: None,
                port: Some(5001),
                distance_m: None,
                fer: Some(fer),
            }],
        })),
        buffer_bytes: Some(60_000),
        qdisc,
        ..LinkSpec::default()
    }
    .build(3, Path::new("."))
    .unwrap()
}

/// Both flows offer 1200-byte packets every 200 µs, 2 s long, the lossy flow's 100 µs
/// after the clean flow's: more than the channel carries. Returns each flow's mean delay (ms) over its delivered packets and its
/// delivered count.
fn run(qdisc: Option<QdiscKind>, fer: f64) -> HashMap<u16, (f64, usize)> {
    let mut l = link(qdisc, fer);
    let mut sent = HashMap::new();
    let (mut out, mut lost) = (Vec::new(), Vec::new());
    for i in 0..10_000u64 {
        for (k, flow) in [clean(), lossy()].into_iter().enumerate() {
            let now = Duration::from_micros(i * 200 + 100 * k as u64);
            let id = 2 * i + k as u64;
            sent.insert(id, (now, flow.dst_port));
            l.enqueue_flow(now, id, 1200, &flow);
            l.deliver_and_report_losses(now, &mut out, &mut lost);
        }
    }
    while let Some(t) = l.next_delivery() {
        l.deliver_and_report_losses(t, &mut out, &mut lost);
    }
    let mut delays: HashMap<u16, (f64, usize)> = HashMap::new();
    for d in &out {
        let (at, port) = sent[&d.id];
        let e = delays.entry(port).or_default();
        e.0 += (d.at - at).as_secs_f64() * 1e3;
        e.1 += 1;
    }
    for v in delays.values_mut() {
        v.0 /= v.1 as f64;
    }
    delays
}

#[test]
fn under_chap_a_flow_needing_retries_loses_its_priority() {
    // The channel is oversubscribed, so who is served first decides who gets through.
    let chap = run(Some(QdiscKind::Chap), 0.4);
    let fifo = run(None, 0.4);
    let even = run(Some(QdiscKind::Chap), 0.0);
    eprintln!("chap: {chap:?}\nfifo: {fifo:?}\nchap, both clean: {even:?}");
    let (clean_n, lossy_n) = (chap[&5000].1, chap[&5001].1);
    // CHAP charges the lossy flow its retries and backoffs and serves the clean flow
    // first; the lossy flow's backlog is what it drops when full.
    assert!(
        clean_n > 3 * lossy_n,
        "CHAP: clean {clean_n} delivered against lossy {lossy_n}"
    );
    // FIFO serves arrivals in order: the two flows get through alike (the lossy one
    // loses the few frames that fail all 7 attempts, 4% at FER 0.4).
    let (f_clean, f_lossy) = (fifo[&5000].1, fifo[&5001].1);
    assert!(
        f_lossy * 10 > f_clean * 8,
        "FIFO: clean {f_clean} against lossy {f_lossy}"
    );
    // With both channels clean, CHAP shares alike.
    let (a, b) = (even[&5000].1, even[&5001].1);
    assert!(
        a.abs_diff(b) * 10 < a + b,
        "equal flows get equal service: {a} and {b}"
    );
}

#[test]
fn a_frame_failing_every_attempt_is_lost_and_fifo_is_served_by_airtime_too() {
    let mut l = link(None, 1.0);
    let (mut out, mut lost) = (Vec::new(), Vec::new());
    l.enqueue_flow(Duration::ZERO, 1, 1200, &lossy());
    l.enqueue_flow(Duration::ZERO, 2, 1200, &clean());
    while let Some(t) = l.next_delivery() {
        l.deliver_and_report_losses(t, &mut out, &mut lost);
    }
    assert_eq!(lost, vec![1]);
    assert_eq!(l.stats().lost, 1);
    // The clean frame waited for all 7 attempts of the lost one and their backoffs.
    let phy = horde_links::wifi::Phy::dot11g(54.0);
    let seven = phy.attempt_time(1200) * 7;
    assert_eq!(out.len(), 1);
    assert!(
        out[0].at > seven + phy.attempt_time(1200)
            && out[0].at <= phy.max_airtime(1200) + phy.attempt_time(1200),
        "delivered at {:?}",
        out[0].at
    );
}

#[test]
fn wifi_parses_from_toml_and_bad_values_are_named() {
    let spec: LinkSpec = toml::from_str(
        r#"
rate = { model = "wifi", phy = "dot11b", mbps = 5.5, distance_m = 10, stations = [{ addr = "10.0.0.3", port = 5001, fer = 0.2 }] }
qdisc = "chap"
"#,
    )
    .unwrap();
    let Some(RateSpec::Wifi(w)) = &spec.rate else {
        panic!("{:?}", spec.rate)
    };
    assert_eq!(
        (w.phy, w.mbps, w.distance_m),
        (WifiPhy::Dot11b, Some(5.5), Some(10.0))
    );
    assert_eq!(w.stations[0].port, Some(5001));
    assert!(spec.validate().is_ok());
    let back: LinkSpec = toml::from_str(&toml::to_string(&spec).unwrap()).unwrap();
    assert_eq!(back, spec);

    let bad = |text: &str| -> String {
        match toml::from_str::<LinkSpec>(text) {
            Ok(spec) => spec.validate().unwrap_err().to_string(),
            Err(e) => e.to_string(),
        }
    };
    for (text, want) in [
        (
            r#"rate = { model = "wifi", phy = "dot11g", mbps = 11 }"#,
            "rate.mbps must be a dot11g rate: 6, 9, 12, 18, 24, 36, 48, 54, got 11",
        ),
        (
            r#"rate = { model = "wifi", phy = "dot11g", fer = -0.1 }"#,
            "rate.fer must be a probability in [0, 1], got -0.1",
        ),
        (
            r#"rate = { model = "wifi", phy = "dot11g", distance_m = -3 }"#,
            "rate.distance_m must be a finite distance >= 0 m, got -3",
        ),
        (
            r#"rate = { model = "wifi", phy = "dot11g", distance_m = 3, fer = 0.1 }"#,
            "rate.distance_m must be absent when rate.fer is given",
        ),
        (
            r#"rate = { model = "wifi", phy = "dot11g", stations = [{ fer = 0.1 }] }"#,
            "rate.stations must be an addr or a port to match in every station, got neither in station 1",
        ),
        (
            r#"rate = { model = "wifi", phy = "dot11g", stations = [{ port = 1 }, { port = 2, distance_m = nan }] }"#,
            "rate.stations.distance_m must be a finite distance >= 0 m, got NaN (station 2)",
        ),
        (r#"rate = { model = "wifi", phy = "dot11n" }"#, "unknown variant `dot11n`"),
        (r#"rate = { model = "wifi", phy = "dot11g", range = 3 }"#, "unknown field `range`"),
    ] {
        let got = bad(text);
        assert!(got.contains(want), "{text}: {got}");
    }
}
