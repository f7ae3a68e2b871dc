//! The link-death measurement (issue target: within 2 s of a link dying, the surviving
//! links carry 90% or more of their capacity). A bulk stream fills every link; one link
//! dies at 10 s and stays dead; the surviving links' up-direction wire bytes are
//! measured against their bottleneck rate, per second and over 12–20 s.

use std::time::Duration;

use horde_links::{DelaySpec, LinkSpec, RateSpec};
use horde_proto::{CcConfig, StreamConfig};
use serde::Serialize;

use super::plan::{vopr_session, Fault, FaultKind, Feed, LinkPlan, RunPlan, StreamPlan};
use super::world::World;
use super::SimFailure;

/// The scenario: up-direction rates of the links, which one dies, the controller.
#[derive(Debug, Clone)]
pub struct LinkDeathSetup {
    pub kbps: Vec<f64>,
    pub dies: usize,
    pub congestion: CcConfig,
    pub delay_ms: f64,
    pub seed: u64,
}

impl Default for LinkDeathSetup {
    fn default() -> Self {
        Self {
            kbps: vec![2000.0, 1500.0, 1000.0],
            dies: 1,
            congestion: CcConfig::default(),
            delay_ms: 40.0,
            seed: 1,
        }
    }
}

pub const DEATH_AT: Duration = Duration::from_secs(10);
/// The measurement starts this long after the death.
pub const SETTLE: Duration = Duration::from_secs(2);
pub const MEASURE_UNTIL: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Serialize)]
pub struct LinkDeathFigure {
    /// Per link, share of its capacity carried over 5–10 s (before the death).
    pub before: Vec<f64>,
    /// The surviving links together, share of their capacity over 12–20 s.
    pub after: f64,
    /// The lowest one-second share of the surviving links over 12–20 s.
    pub worst_second: f64,
    /// Per second from 10 s: the surviving links' share of their capacity.
    pub per_second: Vec<f64>,
    /// Payload the receiving application got over 12–20 s, as a share of the surviving
    /// links' capacity (headers, acks and pings are the rest).
    pub goodput: f64,
}

fn plan(setup: &LinkDeathSetup) -> RunPlan {
    let spec = |kbps: f64| LinkSpec {
        rate: Some(RateSpec::Constant { kbps }),
        buffer_bytes: Some(((kbps * 1000.0 / 8.0 * 0.2) as u64).max(8_000)),
        loss: None,
        delay: Some(DelaySpec::Constant { ms: setup.delay_ms }),
        qdisc: None,
    };
    let links = setup
        .kbps
        .iter()
        .map(|&k| LinkPlan {
            up: spec(k),
            down: spec(k),
            up_kbps: k,
            congestion: setup.congestion.clone(),
        })
        .collect();
    let mut p = RunPlan {
        seed: setup.seed,
        links,
        streams: vec![StreamPlan {
            id: 1,
            feed: Feed::Bulk {
                size: 1100,
                depth: 64,
            },
            config: StreamConfig::default(),
        }],
        faults: vec![Fault {
            at: DEATH_AT,
            length: Duration::from_secs(60),
            kind: FaultKind::LinkDeath { link: setup.dies },
        }],
        session: vopr_session(setup.seed),
        recv_buffer: 1 << 20,
        quiet_from: Duration::ZERO,
        close_at: Duration::ZERO,
    };
    p.set_quiet(Duration::from_secs(5));
    p
}

/// Run the scenario to [`MEASURE_UNTIL`] and measure.
pub fn measure(setup: &LinkDeathSetup) -> Result<LinkDeathFigure, SimFailure> {
    let mut w = World::new(plan(setup))?;
    w.ledger.watch_from = Duration::ZERO;
    let mut samples: Vec<Vec<u64>> = Vec::new();
    for s in 0..=MEASURE_UNTIL.as_secs() {
        w.run_until(Duration::from_secs(s));
        samples.push(w.net.up_bytes.clone());
    }
    let bits = |from: u64, to: u64, link: usize| {
        (samples[to as usize][link] - samples[from as usize][link]) as f64 * 8.0
    };
    let cap = |link: usize, secs: f64| setup.kbps[link] * 1000.0 * secs;
    let before = (0..setup.kbps.len())
        .map(|l| bits(5, 10, l) / cap(l, 5.0))
        .collect();
    let survivors: Vec<usize> = (0..setup.kbps.len()).filter(|&l| l != setup.dies).collect();
    let share = |from: u64, to: u64| {
        let carried: f64 = survivors.iter().map(|&l| bits(from, to, l)).sum();
        let capacity: f64 = survivors.iter().map(|&l| cap(l, (to - from) as f64)).sum();
        carried / capacity
    };
    let start = (DEATH_AT + SETTLE).as_secs();
    let end = MEASURE_UNTIL.as_secs();
    let per_second: Vec<f64> = (DEATH_AT.as_secs()..end).map(|s| share(s, s + 1)).collect();
    let worst_second = (start..end)
        .map(|s| share(s, s + 1))
        .fold(f64::INFINITY, f64::min);
    let payload: u64 = w
        .ledger
        .deliveries_after
        .values()
        .flatten()
        .filter(|&&(t, _)| t >= Duration::from_secs(start) && t < Duration::from_secs(end))
        .map(|&(_, len)| u64::from(len))
        .sum();
    let capacity: f64 = survivors
        .iter()
        .map(|&l| cap(l, (end - start) as f64))
        .sum();
    Ok(LinkDeathFigure {
        goodput: payload as f64 * 8.0 / capacity,
        before,
        after: share(start, end),
        worst_second,
        per_second,
    })
}
