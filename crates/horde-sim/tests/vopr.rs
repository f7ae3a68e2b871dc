//! The fault harness on a fixed set of seeds, its determinism, that it catches what it
//! claims to, and the link-death figure.

use std::time::Duration;

use horde_sim::faults::link_death::{measure, LinkDeathSetup};
use horde_sim::faults::{
    run_plan, run_seed, shrink, shrink_faults, Fault, FaultKind, RunPlan, VoprOptions,
};

/// CI's seeds: a few hundred short runs, each with its own links, streams and faults.
#[test]
fn a_fixed_set_of_seeds_holds_every_invariant() {
    let opts = VoprOptions::default();
    let mut failures = Vec::new();
    let mut kinds = std::collections::HashSet::new();
    let mut faults = 0;
    for seed in 0..300 {
        let r = run_seed(seed, &opts);
        faults += r.faults.len();
        for f in &r.faults {
            kinds.insert(std::mem::discriminant(&f.kind));
        }
        // The books close: every queued ADU has exactly one outcome.
        let t = r.adus;
        if r.passed() && t.queued != t.acked + t.lost + t.dropped + t.abandoned + t.crashed {
            failures.push(format!("seed {}: tally {t:?} does not add up", r.seed));
        }
        for v in &r.violations {
            failures.push(format!(
                "seed {}: {}: {} ({})",
                r.seed, v.kind, v.detail, r.replay
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(kinds.len(), 11, "every kind of fault was injected");
    assert!(faults > 1100, "{faults} faults");
}

#[test]
fn a_seed_replays_byte_for_byte() {
    let opts = VoprOptions::default();
    for seed in [3, 57, 129] {
        let a = run_seed(seed, &opts);
        let b = run_seed(seed, &opts);
        assert_eq!(a.digest, b.digest);
        assert_eq!(a.adus, b.adus);
        assert_eq!(a.net, b.net);
        assert_eq!(a.replay, format!("horde vopr --seed {seed}"));
    }
    assert_ne!(run_seed(3, &opts).digest, run_seed(4, &opts).digest);
}

/// Seed 5's run with a receiver that stops reading at 2 s and never reads again before
/// the close, plus the faults in `decoys` before it.
fn stop_reading_plan(decoys: &[FaultKind]) -> RunPlan {
    let mut plan = RunPlan::draw(5, Default::default());
    plan.faults = decoys
        .iter()
        .map(|kind| Fault {
            at: Duration::from_millis(1000),
            length: Duration::from_millis(800),
            kind: *kind,
        })
        .collect();
    plan.faults.push(Fault {
        at: Duration::from_secs(2),
        length: Duration::from_secs(60),
        kind: FaultKind::AppPause,
    });
    // The pause holds past the close: the quiet time starts before it ends.
    plan.quiet_from = Duration::from_secs(3);
    plan.close_at = Duration::from_secs(14);
    plan
}

/// A run whose receiver never reads again cannot honour its allocations (the sender
/// only probes the shut window), and the harness says so.
#[test]
fn a_receiver_that_stops_reading_for_good_is_reported() {
    let r = run_plan(stop_reading_plan(&[]), None);
    let kinds: Vec<&str> = r.violations.iter().map(|v| v.kind).collect();
    assert!(
        kinds.contains(&"allocation") || kinds.contains(&"stalled"),
        "{kinds:?}"
    );
    assert!(r.lifecycle.flow_blocked > 0);
}

/// Shrinking drops the faults that do not cause a failure and keeps the one that does.
/// With the four faults the run once stuck at 14.033 s: the client's session closed
/// while the server's window was shut, and its zero-window probe deadline stayed due.
#[test]
fn shrinking_keeps_only_the_fault_that_causes_the_failure() {
    let decoys = [
        FaultKind::Loss { link: 0, p: 0.02 },
        FaultKind::Reorder {
            link: 0,
            p: 0.05,
            extra_ms: 20,
        },
        FaultKind::Duplicate { link: 0, p: 0.05 },
    ];
    let run = |keep: &[usize]| {
        let mut plan = stop_reading_plan(&decoys);
        let mut i = 0;
        plan.faults.retain(|_| {
            i += 1;
            keep.contains(&(i - 1))
        });
        run_plan(plan, Some(keep))
    };
    let all: Vec<usize> = (0..=decoys.len()).collect();
    let first = run(&all);
    assert!(!first.passed(), "{:?}", first.violations);
    let kind = first.violations[0].kind;
    let (keep, shrunk) = shrink_faults(first, all, run);
    assert_eq!(
        keep,
        vec![decoys.len()],
        "only the reader's pause is needed"
    );
    assert!(shrunk.violations.iter().any(|v| v.kind == kind));
    assert!(matches!(shrunk.faults[..], [ref f] if f.kind == FaultKind::AppPause));
}

#[test]
fn surviving_links_carry_their_capacity_within_two_seconds_of_a_link_death() {
    let three = measure(&LinkDeathSetup::default()).expect("scenario runs");
    assert!(three.before.iter().all(|&x| x > 0.9), "{:?}", three.before);
    assert!(three.worst_second >= 0.9, "{three:?}");
    assert!(three.goodput >= 0.9, "{three:?}");
    let two = measure(&LinkDeathSetup {
        kbps: vec![2000.0, 2000.0],
        dies: 0,
        congestion: horde_proto::CcConfig::with_defaults("bbr").expect("bbr"),
        ..LinkDeathSetup::default()
    })
    .expect("scenario runs");
    assert!(two.worst_second >= 0.9, "{two:?}");
}

/// The seeds that once sent a stream 30-40% under its allocation (docs/vopr.md,
/// "Allocations after clock jumps and restarts"): their channels carried less than
/// their controllers estimated (in 11249 because a channel back from a burst of lost
/// acks took the late-acked burst for one round trip's delivery), a shortfall every
/// stream shared alike. The split was honoured and the sender never idled.
#[test]
fn seeds_once_under_their_allocation_hold_every_invariant() {
    for seed in [7496, 10916, 11249, 12235] {
        let r = run_seed(seed, &VoprOptions::default());
        assert!(r.violations.is_empty(), "seed {seed}: {:?}", r.violations);
    }
}

fn release_on_redial(h: &mut horde_host::Host) {
    h.plant(horde_host::PlantedBug::ReleaseOnRedial);
}

/// A host whose reconnection releases the ended session's ADUs instead of carrying them
/// over to the new session (a planted bug, horde-host's `planted-bugs` feature): the
/// ledger reports the ADUs it nacked on some seed of the first fifty, and the failing
/// plan shrinks to fewer faults that still show it.
#[test]
fn a_redial_that_releases_what_it_should_carry_is_caught_and_shrunk() {
    let opts = VoprOptions {
        host_hook: Some(release_on_redial),
        ..VoprOptions::default()
    };
    let released =
        |r: &horde_sim::faults::SeedReport| r.violations.iter().any(|v| v.kind == "released");
    let failing = (0..50)
        .map(|seed| run_seed(seed, &opts))
        .find(|r| released(r) && r.faults.len() > 1)
        .expect("the planted bug fails some seed");
    let (keep, shrunk) = shrink(failing.seed, &opts);
    assert!(keep.len() < failing.faults.len(), "{keep:?}");
    assert!(released(&shrunk), "{:?}", shrunk.violations);
    // The same seed on the host as it ships holds.
    let fixed = run_seed(failing.seed, &VoprOptions::default());
    assert!(fixed.passed(), "{:?}", fixed.violations);
}
