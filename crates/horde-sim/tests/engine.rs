//! The simulator end to end on hand-built topologies.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use horde_links::{DelaySpec, LinkSpec, LossSpec, RateSpec};
use horde_policy::RandomizedRoundRobin;
use horde_proto::{CcConfig, ChannelConfig, SessionConfig, StreamConfig};
use horde_sim::engine::{ChannelSetup, Simulation, StreamSetup, Topology};
use horde_sim::workload::WorkloadSpec;

fn channel(name: &str, kbps: f64, delay_ms: f64, loss: f64) -> ChannelSetup {
    ChannelSetup {
        name: name.into(),
        a: 0,
        b: 1,
        config: ChannelConfig {
            mtu: 800,
            congestion: CcConfig::Cbr {
                kbps: kbps * 0.95,
                burst_ms: 100.0,
            },
            ..ChannelConfig::default()
        },
        up: LinkSpec {
            rate: Some(RateSpec::Constant { kbps }),
            buffer_bytes: Some(64_000),
            loss: (loss > 0.0).then_some(LossSpec::Bernoulli { p: loss }),
            delay: Some(DelaySpec::Constant { ms: delay_ms }),
            qdisc: None,
        },
        down: LinkSpec::default(),
    }
}

fn topology(seed: u64, loss: f64) -> Topology {
    Topology {
        hosts: vec!["a".into(), "b".into()],
        channels: vec![
            channel("fast", 400.0, 50.0, loss),
            channel("mid", 200.0, 150.0, loss),
            channel("slow", 100.0, 400.0, loss),
        ],
        streams: vec![StreamSetup {
            id: 1,
            from: 0,
            to: 1,
            config: StreamConfig::default(),
            workload: WorkloadSpec::Cbr {
                kbps: 300.0,
                adu_bytes: 700,
            },
            objectives: vec![],
        }],
        session: SessionConfig::default(),
        scheduler: Arc::new(|| Box::new(RandomizedRoundRobin::default())),
        seed,
        duration: Duration::from_secs(60),
        base_dir: PathBuf::from("."),
    }
}

#[test]
fn lossless_run_delivers_everything_over_all_channels() {
    let mut sim = Simulation::new(topology(1, 0.0)).unwrap();
    let mut ticks = 0;
    let report = sim.run(|_| ticks += 1);
    assert!(ticks >= 60, "progress reported every simulated second");
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    let s = &json["streams"][0];
    let sent = s["sent"].as_u64().unwrap();
    let delivered = s["delivered"].as_u64().unwrap();
    // 300 kbit/s of 700-byte ADUs for 60 s is about 3200 ADUs; the last second's may
    // still be in flight.
    assert!(sent > 3000, "sent {sent}");
    assert!(delivered + 60 >= sent, "delivered {delivered} of {sent}");
    assert_eq!(s["lost"].as_u64().unwrap(), 0, "{json}");
    for ch in ["fast", "mid", "slow"] {
        assert!(
            s["channels"][ch].as_u64().unwrap() > 100,
            "{ch} carried traffic: {s}"
        );
    }
    let mean = s["latency_ms"]["mean"].as_f64().unwrap();
    assert!(mean > 100.0 && mean < 1000.0, "mean latency {mean}");
}

#[test]
fn lossy_run_reports_losses_per_channel() {
    let mut sim = Simulation::new(topology(2, 0.05)).unwrap();
    let report = sim.run(|_| {});
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    let s = &json["streams"][0];
    let (sent, lost) = (s["sent"].as_f64().unwrap(), s["lost"].as_f64().unwrap());
    assert!((lost / sent - 0.05).abs() < 0.015, "loss {}", lost / sent);
    let channel_lost: u64 = json["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["lost"].as_u64().unwrap())
        .sum();
    assert!(channel_lost > 0);
}

#[test]
fn same_seed_gives_identical_json_and_another_seed_does_not() {
    let run = |seed| {
        Simulation::new(topology(seed, 0.03))
            .unwrap()
            .run(|_| {})
            .to_json()
    };
    let a = run(7);
    assert_eq!(a, run(7));
    assert_ne!(a, run(8));
}

/// Speech-frame-sized ADUs (40 bytes, 50 a second, 16 kbit/s) on a lossy channel set,
/// with packing on or off.
fn speech(pack_adus: bool) -> horde_sim::metrics::Report {
    let mut topo = topology(3, 0.02);
    topo.streams[0].workload = WorkloadSpec::Cbr {
        kbps: 16.0,
        adu_bytes: 40,
    };
    topo.session = SessionConfig {
        pack_adus,
        cycle_ms: 100.0,
        ..SessionConfig::default()
    };
    Simulation::new(topo).unwrap().run(|_| {})
}

#[test]
fn packing_sends_small_adus_in_fewer_packets_and_the_metrics_follow_every_adu() {
    let (packed, single) = (speech(true), speech(false));
    let data_packets = |r: &horde_sim::metrics::Report| -> u64 {
        r.channels
            .iter()
            .map(|c| c.link.expect("link counters").offered - c.control_sent)
            .sum()
    };
    for r in [&packed, &single] {
        assert_eq!(r.unmatched_events, 0, "every transmit's ADUs were known");
        let s = &r.streams[0];
        assert!(s.sent > 2800, "sent {}", s.sent);
        assert!(s.lost > 0, "2% link loss shows up per ADU");
        assert!(s.delivered + s.lost + 20 >= s.sent);
    }
    println!(
        "{} ADUs of 40 bytes: {} data packets packed, {} one per slot",
        packed.streams[0].sent,
        data_packets(&packed),
        data_packets(&single)
    );
    let adu_tx =
        |r: &horde_sim::metrics::Report| -> u64 { r.channels.iter().map(|c| c.sent).sum() };
    assert_eq!(data_packets(&single), adu_tx(&single), "one ADU per packet");
    assert!(
        data_packets(&packed) * 2 < data_packets(&single),
        "packed {} packets, one per slot {}",
        data_packets(&packed),
        data_packets(&single)
    );
}

#[test]
fn a_channel_from_a_host_to_itself_is_refused_by_name() {
    let mut topo = topology(1, 0.0);
    topo.channels[1].b = 0;
    let err = Simulation::new(topo).err().expect("a loop is refused");
    assert_eq!(err.to_string(), "channel mid: joins a host to itself");
}
