//! Deterministic fault-injection simulation, in the manner of FoundationDB's simulator
//! and TigerBeetle's VOPR: each seed draws a run (links, streams, faults), runs two
//! hosts (`horde_host::Host`, with real handshakes and AEAD) through it in virtual time, and checks invariants about every ADU,
//! memory bounds, convergence and allocations. The same seed gives the same run byte for
//! byte (the report's digest covers every datagram and event), so a failing seed is
//! replayed by one command; see `docs/vopr.md`.

pub mod allocation;
pub mod ledger;
pub mod link_death;
pub mod net;
pub mod plan;
pub mod report;
pub mod violation;
pub mod world;

use std::panic::{catch_unwind, AssertUnwindSafe};
use thiserror::Error;

pub use plan::{DrawLimits, Fault, FaultKind, RunPlan};
pub use report::{replay_command, SeedReport, WindowFigures};
pub use violation::Violation;

/// A run that could not be set up (not an invariant violation).
#[derive(Debug, Error)]
pub enum SimFailure {
    #[error("setup: {0}")]
    Setup(String),
}

/// How to run seeds.
#[derive(Debug, Clone, Default)]
pub struct VoprOptions {
    pub limits: DrawLimits,
    /// Keep only these faults of the drawn plan (shrinking).
    pub keep_faults: Option<Vec<usize>>,
    /// Called on every host the run builds (each start and restart), before it is used:
    /// how a test plants a bug in the host (`Host::plant`, behind horde-host's
    /// `planted-bugs` feature) to show the simulator catches it.
    pub host_hook: Option<HostHook>,
}

/// See [`VoprOptions::host_hook`].
pub type HostHook = fn(&mut horde_host::Host);

/// Run one plan to its end and check it; panics inside are caught and reported.
pub fn run_plan(plan: RunPlan, keep: Option<&[usize]>) -> SeedReport {
    run_plan_with(plan, keep, None)
}

/// [`run_plan`], with every host the run builds passed to `hook` first.
pub fn run_plan_with(plan: RunPlan, keep: Option<&[usize]>, hook: Option<HostHook>) -> SeedReport {
    let seed = plan.seed;
    let faults = plan.faults.clone();
    let links = plan.links.len();
    let streams = plan.streams.len();
    let outcome = catch_unwind(AssertUnwindSafe(
        move || -> Result<SeedReport, SimFailure> {
            let mut w = world::World::new_with(plan, hook)?;
            let end = w.end();
            w.run_until(end);
            w.finish();
            let mut violations = std::mem::take(&mut w.violations);
            violations.append(&mut w.ledger.violations);
            Ok(SeedReport {
                seed,
                links,
                streams,
                faults: w.plan().faults.clone(),
                adus: w.ledger.tally,
                net: w.net.stats,
                lifecycle: w.lifecycle,
                digest: w.digest.hex(),
                simulated_s: w.now.as_secs_f64(),
                resumed_after_s: w.resumed_after.map(|d| d.as_secs_f64()),
                window: w.window,
                violations,
                replay: replay_command(seed, keep),
            })
        },
    ));
    let failed = |kind, detail: String| SeedReport {
        seed,
        links,
        streams,
        faults: faults.clone(),
        adus: Default::default(),
        net: Default::default(),
        lifecycle: Default::default(),
        digest: String::new(),
        simulated_s: 0.0,
        resumed_after_s: None,
        window: Default::default(),
        violations: vec![Violation::new(kind, detail)],
        replay: replay_command(seed, keep),
    };
    match outcome {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => failed("setup", e.to_string()),
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".into());
            failed("panic", msg)
        }
    }
}

/// Draw and run seed `seed`.
pub fn run_seed(seed: u64, opts: &VoprOptions) -> SeedReport {
    let mut plan = RunPlan::draw(seed, opts.limits);
    if let Some(keep) = &opts.keep_faults {
        plan.keep_faults(keep, opts.limits.quiet);
    }
    run_plan_with(plan, opts.keep_faults.as_deref(), opts.host_hook)
}

/// Remove faults from a failing seed's plan one at a time while it still fails with a
/// violation of the same kind; returns the smallest subset found and its report.
pub fn shrink(seed: u64, opts: &VoprOptions) -> (Vec<usize>, SeedReport) {
    let first = run_seed(seed, opts);
    let all = RunPlan::draw(seed, opts.limits).faults.len();
    let keep = opts
        .keep_faults
        .clone()
        .unwrap_or_else(|| (0..all).collect());
    shrink_faults(first, keep, |trial| {
        let o = VoprOptions {
            keep_faults: Some(trial.to_vec()),
            ..opts.clone()
        };
        run_seed(seed, &o)
    })
}

/// The shrinking loop, for any way of running a plan with some of its faults: `first`
/// is the report of the run with the faults at `keep`, and `run(trial)` runs with only
/// the faults at `trial`. A fault is dropped when the run without it still shows a
/// violation of the first one's kind.
pub fn shrink_faults(
    first: SeedReport,
    mut keep: Vec<usize>,
    mut run: impl FnMut(&[usize]) -> SeedReport,
) -> (Vec<usize>, SeedReport) {
    let Some(kind) = first.violations.first().map(|v| v.kind) else {
        return (keep, first);
    };
    let mut best = first;
    let mut i = 0;
    while i < keep.len() {
        let mut trial = keep.clone();
        trial.remove(i);
        let r = run(&trial);
        if r.violations.iter().any(|v| v.kind == kind) {
            keep = trial;
            best = r;
        } else {
            i += 1;
        }
    }
    (keep, best)
}
