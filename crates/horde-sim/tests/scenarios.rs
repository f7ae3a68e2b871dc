//! The scenario files shipped in `scenarios/` load and say what their comments say.

use std::path::PathBuf;
use std::time::Duration;

use horde_links::{DelaySpec, LinkSpec, LossSpec, RateSpec};
use horde_sim::scenario::{Congestion, Scenario, StreamRate};
use horde_sim::workload::{stream_seed, WorkloadSpec};

fn shipped(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
}

fn kbps(l: &LinkSpec) -> f64 {
    match l.rate {
        Some(RateSpec::Constant { kbps }) => kbps,
        ref other => panic!("rate {other:?}"),
    }
}

/// Mean and sd of the round trip a 768-byte packet sees: serialization on the `up`
/// link plus its delay (the `down` link is ideal).
fn rtt(l: &LinkSpec, mtu: u32) -> (f64, f64) {
    let ser = f64::from(mtu) * 8.0 / kbps(l);
    match l.delay {
        Some(DelaySpec::Gaussian { mean_ms, sd_ms }) => (ser + mean_ms, sd_ms),
        ref other => panic!("delay {other:?}"),
    }
}

#[test]
fn fig7_5_is_the_thesis_channel_table() {
    let s = Scenario::load(shipped("fig7-5.toml")).unwrap();
    assert_eq!((s.name.as_str(), s.duration_s), ("fig7-5", 600.0));
    assert_eq!(
        (s.scheduler.kind.as_str(), s.scheduler.cycle_ms),
        ("rrr", 100.0)
    );
    // Fig. 7-5: rate, RTT mean, RTT sd, loss rate, largest burst.
    let table = [
        ("cdma1", 120.0, 600.0, 50.0, 0.005, 16),
        ("cdma2", 120.0, 300.0, 15.0, 0.2, 16),
        ("gprs1", 22.0, 900.0, 100.0, 0.03, 4),
        ("gprs2", 22.0, 900.0, 100.0, 0.03, 4),
        ("gprs3", 22.0, 1000.0, 100.0, 0.03, 4),
        ("gprs4", 22.0, 1000.0, 100.0, 0.03, 4),
    ];
    assert_eq!(s.channels.len(), table.len());
    let mut capacity = 0.0;
    let mut weighted_rtt = 0.0;
    for (c, (name, rate, mean, sd, loss, burst)) in s.channels.iter().zip(table) {
        assert_eq!(c.name, name);
        assert_eq!(c.mtu, 768);
        assert_eq!(
            c.congestion,
            Congestion::Cbr {
                kbps: rate,
                burst_ms: 150.0
            }
        );
        assert_eq!(kbps(&c.up), rate);
        let (m, d) = rtt(&c.up, c.mtu);
        assert!((m - mean).abs() < 0.01, "{name}: RTT mean {m}");
        assert_eq!(d, sd);
        assert_eq!(
            c.up.loss,
            Some(LossSpec::BurstMarkov {
                rate: loss,
                max_burst: burst
            })
        );
        assert_eq!(c.down, LinkSpec::default(), "{name}: down is ideal");
        capacity += rate;
        weighted_rtt += rate * mean;
    }
    assert_eq!(capacity, 328.0);
    // The thesis's RRR mean RTT is 580 ms (§7.3); the bandwidth-weighted mean is 584.
    assert!((weighted_rtt / capacity - 584.1).abs() < 0.1);
    assert_eq!(s.streams.len(), 4);
    for (i, st) in s.streams.iter().enumerate() {
        assert_eq!(st.id, i as u32);
        assert_eq!(st.rate, StreamRate::Elastic);
        assert_eq!(
            st.workload,
            WorkloadSpec::Bulk {
                adu_bytes: 768,
                batch: 1
            }
        );
        assert_eq!(s.max_adu(st), 768);
    }
}

#[test]
fn telemedicine_is_the_builtin_and_fits_its_channels() {
    let s = Scenario::load(shipped("telemedicine.toml")).unwrap();
    let builtin = Scenario::builtin();
    assert_eq!(
        Scenario {
            base_dir: builtin.base_dir.clone(),
            ..s.clone()
        },
        builtin
    );
    assert_eq!(s.channels.len(), 3);
    assert_eq!(s.hosts.len(), 2);
    let capacity: f64 = s.channels.iter().map(|c| kbps(&c.up)).sum();
    let mut offered = 0.0;
    let kinds: Vec<&str> = s.streams.iter().map(|st| st.workload.kind()).collect();
    assert_eq!(kinds, ["video", "audio", "ekg"]);
    for st in &s.streams {
        let load = st.workload.mean_kbps().unwrap();
        let StreamRate::MaxKbps(max) = st.rate else {
            panic!("stream {} is elastic", st.id)
        };
        assert!(load <= max, "stream {} offers {load} > max {max}", st.id);
        offered += load;
        // Ten seconds of ADUs all fit the stream's channels.
        let max_adu = s.max_adu(st);
        let mut w = st
            .workload
            .build(stream_seed(s.seed, st.id), max_adu)
            .unwrap();
        let mut out = Vec::new();
        while let Some(t) = w.next_at().filter(|&t| t < Duration::from_secs(10)) {
            w.emit(t, &mut out);
        }
        assert!(!out.is_empty());
        assert!(out.iter().all(|a| a.size <= max_adu));
    }
    assert!(offered < capacity * 0.75, "offered {offered} of {capacity}");
}

#[test]
fn thesis_scenarios_keep_their_100_ms_cycle() {
    let mut files = vec![shipped("fig7-5.toml")];
    for e in std::fs::read_dir(shipped("thesis")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            files.push(p);
        }
    }
    assert!(files.len() > 10);
    for f in files {
        let s = Scenario::load(&f).unwrap();
        assert_eq!(s.scheduler.cycle_ms, 100.0, "{}", f.display());
    }
}

#[test]
fn event_driven_cycles_are_the_default_and_runs_move_on() {
    // E1 (AIMD channels, random walk, an objective) without its `cycle_ms`: the session
    // asks to run whenever a channel may send, also when no ADU may take the slot yet;
    // the engine must not spin at one instant.
    let text = std::fs::read_to_string(shipped("thesis/e1.toml")).unwrap();
    let text = text.replace("cycle_ms = 100\n", "");
    let mut s = Scenario::from_str(&text, "e1-default-cycle.toml").unwrap();
    s.base_dir = shipped("thesis");
    for st in &mut s.streams {
        for o in &mut st.objectives {
            *o = shipped("thesis").join(&*o);
        }
    }
    s.duration_s = 20.0;
    assert_eq!(s.scheduler.cycle_ms, 0.0);
    let topo = horde_sim::build::topology(&s).unwrap();
    assert_eq!(topo.session.cycle_ms, 0.0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let report = horde_sim::engine::Simulation::new(topo)
            .unwrap()
            .run(|_| {});
        let _ = tx.send(report);
    });
    let r = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("20 simulated seconds finish");
    assert_eq!(r.unmatched_events, 0);
    for st in &r.streams {
        assert!(st.delivered > 50, "stream {}: {}", st.id, st.delivered);
    }
}
