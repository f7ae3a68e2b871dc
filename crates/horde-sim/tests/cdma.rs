//! The CDMA2000 scenarios run in the simulator, and `verb` keeps the queue short where
//! AIMD fills the base-station buffer (docs/results.md, "verb against AIMD").

use horde_proto::CcConfig;
use horde_sim::build::topology;
use horde_sim::engine::Simulation;
use horde_sim::scenario::Scenario;

/// (goodput kbit/s, median RTT ms) of one stream over 600 s.
fn run(name: &str, cc: &str) -> (f64, f64) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut s = Scenario::load(format!("{root}/scenarios/cdma/{name}.toml")).unwrap();
    s.duration_s = 600.0;
    for c in &mut s.channels {
        c.congestion = CcConfig::with_defaults(cc).unwrap();
    }
    let report = Simulation::new(topology(&s).unwrap()).unwrap().run(|_| {});
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    let st = &json["streams"][0];
    let goodput = st["goodput_kbps"].as_f64().unwrap();
    let delay = st["rtt_ms"]["median"].as_f64().unwrap();
    (goodput, delay)
}

#[test]
fn verb_beats_aimd_on_the_stationary_cdma_channel() {
    let (g_aimd, d_aimd) = run("stationary", "aimd");
    let (g_verb, d_verb) = run("stationary", "verb");
    assert!(g_verb > 1.2 * g_aimd, "goodput verb {g_verb} aimd {g_aimd}");
    assert!(d_verb < 0.7 * d_aimd, "rtt verb {d_verb} aimd {d_aimd}");
    // The model's long-term limiter holds any sender near 64 kbit/s.
    assert!(g_verb < 70.0, "{g_verb}");
}
