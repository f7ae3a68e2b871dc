//! A periodic scheduling cycle issues the slots of its whole period, each with its time,
//! and the session paces them out: on `scenarios/cellular3.toml` the bulk stream's
//! goodput does not depend on the cycle period, nor does the loss rise at short periods;
//! and on the thesis's E1 (AIMD channels, 100 ms cycles) the periodic cycle keeps ADUs
//! waiting no longer than the event-driven one.

use std::path::PathBuf;

use horde_sim::build::topology;
use horde_sim::engine::Simulation;
use horde_sim::metrics::{Report, StreamReport};
use horde_sim::scenario::Scenario;

/// Long enough for the traces' slow phases and outages to average out.
const SECS: f64 = 30.0;

/// Run scenario `file` with scheduler `kind` and cycles of `cycle_ms` for `secs`.
fn run(file: &str, kind: &str, cycle_ms: f64, secs: f64) -> Report {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(file);
    let mut s = Scenario::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    s.scheduler.kind = kind.to_string();
    s.scheduler.cycle_ms = cycle_ms;
    s.duration_s = secs;
    Simulation::new(topology(&s).expect("the scenario builds"))
        .expect("the simulation starts")
        .run(|_| {})
}

/// The bulk stream of cellular3 with cycles of `cycle_ms`.
fn cellular3(cycle_ms: f64) -> StreamReport {
    let report = run("cellular3.toml", "rrr", cycle_ms, SECS);
    let [stream] = report.streams.as_slice() else {
        panic!("one stream expected");
    };
    stream.clone()
}

#[test]
fn goodput_does_not_depend_on_the_cycle_period() {
    let event_driven = cellular3(0.0);
    let base = event_driven.goodput_kbps / 1e3;
    assert!(base > 10.0, "event-driven: {base:.2} Mbit/s");
    for cycle_ms in [1.0, 10.0, 100.0] {
        let periodic = cellular3(cycle_ms);
        let goodput = periodic.goodput_kbps / 1e3;
        let off = (goodput - base).abs() / base;
        assert!(
            off <= 0.03,
            "cycle_ms {cycle_ms}: {goodput:.2} Mbit/s against {base:.2} event-driven \
             ({:.1}% off)",
            off * 100.0
        );
        // Slots due later in the period go out only when the controller allows: a short
        // period must not send past the window and overflow the links' buffers.
        let (loss, base_loss) = (
            periodic.loss_rate.expect("it sends"),
            event_driven.loss_rate.expect("it sends"),
        );
        assert!(
            loss <= base_loss + 0.005,
            "cycle_ms {cycle_ms}: loss {:.2}% against {:.2}% event-driven",
            loss * 100.0,
            base_loss * 100.0
        );
        assert_eq!(
            periodic.dropped, 0,
            "cycle_ms {cycle_ms}: ADUs dropped unsent"
        );
    }
}

#[test]
fn a_periodic_cycle_queues_no_longer_than_an_event_driven_one_on_e1() {
    // The thesis's E1 runs 100 ms cycles over AIMD channels; its bulk streams' latency
    // counts the time an ADU waits in Horde, so ADUs held for a period's later slots, or
    // a bulk source topped up past what a period can take, show here.
    let mean = |cycle_ms: f64| -> f64 {
        let report = run("thesis/e1.toml", "rrr", cycle_ms, 300.0);
        let means: Vec<f64> = report
            .streams
            .iter()
            .map(|s| s.latency_ms.mean.expect("the stream delivers"))
            .collect();
        means.iter().sum::<f64>() / means.len() as f64
    };
    let (event_driven, periodic) = (mean(0.0), mean(100.0));
    assert!(
        periodic <= event_driven * 1.02,
        "mean latency {periodic:.0} ms with 100 ms cycles against {event_driven:.0} ms \
         event-driven"
    );
}
