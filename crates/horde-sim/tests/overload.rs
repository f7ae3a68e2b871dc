//! Fair shares under overload (`scenarios/overload.toml`): whatever the scheduler, the
//! objectives or the look-ahead, every stream is sent at least 95% of its min-max
//! allocation (or of what it offered, if less) in every 5 s window; and look-ahead with
//! no objective asking for it never slows a stream down.

use std::time::Duration;

use horde_sim::build::topology;
use horde_sim::engine::Simulation;
use horde_sim::fairness::{allocations, service, StreamService};
use horde_sim::metrics::Report;
use horde_sim::scenario::Scenario;

const AUDIO: u32 = 1;

fn overload(kind: &str, lookahead_ms: f64, objectives: bool) -> Scenario {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut s = Scenario::load(format!("{root}/scenarios/overload.toml")).unwrap();
    s.duration_s = 120.0;
    s.scheduler.kind = kind.into();
    s.scheduler.lookahead_ms = lookahead_ms;
    if !objectives {
        for st in &mut s.streams {
            st.objectives.clear();
        }
    }
    s
}

fn run(s: &Scenario) -> (Report, Vec<StreamService>) {
    let mut sim = Simulation::new(topology(s).unwrap()).unwrap();
    let report = sim.run(|_| {});
    let served = service(
        sim.metrics(),
        &allocations(s).unwrap(),
        Duration::from_secs(5),
        Duration::from_secs(1),
        s.duration(),
    );
    (report, served)
}

#[test]
fn the_scenario_is_overloaded() {
    let s = overload("directed", 200.0, true);
    let alloc = allocations(&s).unwrap();
    let kbps = |id| alloc[&id] * 8.0 / 1000.0;
    assert!((kbps(AUDIO) - 32.0).abs() < 1e-9, "audio gets all it asks");
    assert!((kbps(0) - kbps(2)).abs() < 1e-9);
    assert!(
        kbps(0) < 176.0 / 2.0 + 5.0,
        "video offers about twice its share"
    );
    let (report, _) = run(&s);
    let video = report.streams.iter().find(|r| r.id == 0).unwrap();
    assert!(video.dropped > 0, "video's queue overflows");
}

#[test]
fn every_stream_gets_its_allocation_in_every_window_under_overload() {
    for kind in ["directed", "random-walk", "rrr"] {
        let (report, served) = run(&overload(kind, 200.0, true));
        for s in &served {
            assert!(
                s.worst_ratio >= 0.95,
                "{kind}: stream {} was sent {:.3} of its due in the 5 s window at {:?} \
                 (allocation {:.1} kbit/s)",
                s.stream,
                s.worst_ratio,
                s.worst_start,
                s.allocation * 8.0 / 1000.0
            );
        }
        let audio = report.streams.iter().find(|r| r.id == AUDIO).unwrap();
        assert!(
            audio.sent * 100 >= audio.inserted * 99,
            "{kind}: audio sent {} of {} ADUs",
            audio.sent,
            audio.inserted
        );
    }
}

#[test]
fn look_ahead_without_objectives_does_not_slow_audio_down() {
    for kind in ["directed", "random-walk", "rrr"] {
        let latency = |lookahead| {
            let (report, _) = run(&overload(kind, lookahead, false));
            let audio = report.streams.iter().find(|r| r.id == AUDIO).unwrap();
            assert_eq!(audio.dropped, 0, "{kind}: audio dropped ADUs");
            audio.latency_ms.mean.unwrap()
        };
        let (without, with) = (latency(0.0), latency(200.0));
        assert!(
            with <= without * 1.05,
            "{kind}: audio's mean latency {with:.0} ms with 200 ms of look-ahead, \
             {without:.0} ms without"
        );
    }
}
