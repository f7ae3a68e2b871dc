//! Bandwidth allocations hold over time even when objectives and look-ahead let the
//! scheduler defer some streams onto phantom slots (thesis §4.2, §6.3): four equal
//! elastic streams on the Fig. 7-5 channels, a latency objective on two of them, and
//! every stream still gets its quarter of the slots.

use horde_sim::build::topology;
use horde_sim::engine::Simulation;
use horde_sim::scenario::Scenario;

/// Every placed ADU of stream 0 costs utility: a scheduler left alone would never send it.
const AVOID_STREAM_0: &str = "objective {\n  context { adu:foo { stream_id == 0 } }\n  goal { true }\n  utility { foo { -100 } }\n}\n";

fn shares(scheduler: &str, with_objective: bool) -> Vec<f64> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut s = Scenario::load(format!("{root}/scenarios/fig7-5.toml")).unwrap();
    s.duration_s = 300.0;
    s.scheduler.kind = scheduler.into();
    s.scheduler.lookahead_ms = 300.0;
    let mut topo = topology(&s).unwrap();
    if with_objective {
        let avoid = horde_hose::compile_named("avoid-stream-0", AVOID_STREAM_0).unwrap();
        let x1 = horde_hose::load(format!("{root}/objectives/x1.hose").as_ref()).unwrap();
        for st in topo.streams.iter_mut() {
            match st.id {
                0 => st.objectives.push(avoid.clone()),
                3 => st.objectives.push(x1.clone()),
                _ => {}
            }
        }
    }
    let report = Simulation::new(topo).unwrap().run(|_| {});
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    let sent: Vec<f64> = json["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| st["sent"].as_f64().unwrap())
        .collect();
    let total: f64 = sent.iter().sum();
    sent.iter().map(|x| x / total).collect()
}

#[test]
fn every_stream_keeps_its_share_under_objectives_and_look_ahead() {
    for scheduler in ["random-walk", "directed"] {
        let s = shares(scheduler, true);
        for (i, share) in s.iter().enumerate() {
            assert!(
                (share - 0.25).abs() < 0.02,
                "{scheduler}: stream {i} got {share:.3} of the ADUs: {s:?}"
            );
        }
    }
}

#[test]
fn without_objectives_shares_are_equal_too() {
    let s = shares("rrr", false);
    for share in &s {
        assert!((share - 0.25).abs() < 0.02, "{s:?}");
    }
}
