//! A periodic scheduling cycle issues the slots of its whole period, each with its time,
//! and the session paces them out: on `scenarios/cellular3.toml` the bulk stream's
//! goodput does not depend on the cycle period.

use std::path::PathBuf;

use horde_sim::build::topology;
use horde_sim::engine::Simulation;
use horde_sim::scenario::Scenario;

/// Long enough for the traces' slow phases and outages to average out.
const SECS: f64 = 30.0;

/// The bulk stream's goodput in Mbit/s over `SECS` with cycles of `cycle_ms`.
fn goodput(kind: &str, cycle_ms: f64) -> f64 {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/cellular3.toml");
    let mut s = Scenario::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    s.scheduler.kind = kind.to_string();
    s.scheduler.cycle_ms = cycle_ms;
    s.duration_s = SECS;
    let report = Simulation::new(topology(&s).expect("the scenario builds"))
        .expect("the simulation starts")
        .run(|_| {});
    let [stream] = report.streams.as_slice() else {
        panic!("one stream expected");
    };
    stream.goodput_kbps / 1e3
}

#[test]
fn goodput_does_not_depend_on_the_cycle_period() {
    let event_driven = goodput("rrr", 0.0);
    assert!(
        event_driven > 10.0,
        "event-driven: {event_driven:.2} Mbit/s"
    );
    for cycle_ms in [10.0, 100.0] {
        let periodic = goodput("rrr", cycle_ms);
        let off = (periodic - event_driven).abs() / event_driven;
        assert!(
            off <= 0.03,
            "cycle_ms {cycle_ms}: {periodic:.2} Mbit/s against {event_driven:.2} event-driven \
             ({:.1}% off)",
            off * 100.0
        );
    }
}
