//! What `horde demo` runs: the scenario file `scenarios/demo.toml` and its objectives,
//! built into the binary, so that the real-time demo and its simulator version are
//! one definition.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Result};
use horde_emu::{EmulatorConfig, TimerConfig};
use horde_policy::Objective;
use horde_proto::{ChannelConfig, StreamConfig};
use horde_sim::scenario::{ChannelSpec, Scenario, StreamRate};

use horde_apps::sender::StreamPlan;

const SCENARIO: &str = include_str!("../../../scenarios/demo.toml");

/// The objective files the scenario names, by the path it gives.
const OBJECTIVES: &[(&str, &str)] = &[
    (
        "demo/iframes.hose",
        include_str!("../../../scenarios/demo/iframes.hose"),
    ),
    (
        "demo/voice.hose",
        include_str!("../../../scenarios/demo/voice.hose"),
    ),
    (
        "demo/ekg.hose",
        include_str!("../../../scenarios/demo/ekg.hose"),
    ),
];

/// Stream names by id, for tables.
pub const STREAM_NAMES: &[(u32, &str)] = &[(1, "video"), (2, "audio"), (3, "ekg")];

/// What each objective asks for and how the summary judges it, for the screen: lines
/// that fit an 80-column terminal after a 11-character indent.
pub const OBJECTIVE_NOTES: &[(&str, &[&str])] = &[
    (
        "iframes",
        &[
            "video I-frames on the slots least likely to be lost;",
            "wins if I-frame loss is lower",
        ],
    ),
    (
        "voice",
        &[
            "audio on the fastest slots while its own loss stays low;",
            "wins if audio mean and p95 latency are lower",
        ],
    ),
    (
        "ekg",
        &[
            "EKG on the slots least likely to be lost that come soon;",
            "wins if EKG loss is lower",
        ],
    ),
    (
        "guard",
        &["no stream may lose more than 1.5x what it loses without objectives"],
    ),
];

/// The demo scenario; `seed` replaces the file's.
pub fn scenario(seed: u64) -> Result<Scenario> {
    let mut s = Scenario::from_str(SCENARIO, "scenarios/demo.toml")?;
    s.seed = seed;
    Ok(s)
}

/// The scenario with objectives attached (compiled from the built-in files) or not.
/// The objective paths are cleared: the simulator would read them from disk.
pub fn streams(s: &Scenario, with_objectives: bool) -> Result<Vec<StreamPlan>> {
    s.streams
        .iter()
        .map(|st| {
            let objectives = if with_objectives {
                st.objectives
                    .iter()
                    .map(|p| objective(p))
                    .collect::<Result<Vec<_>>>()?
            } else {
                Vec::new()
            };
            Ok(StreamPlan {
                id: st.id,
                name: name(st.id),
                config: StreamConfig {
                    max_kbps: match st.rate {
                        StreamRate::MaxKbps(k) => Some(k),
                        StreamRate::Elastic => None,
                    },
                    ordered: st.ordered,
                    latency_bound_ms: st.latency_bound_ms,
                    ..StreamConfig::default()
                },
                workload: st.workload.clone(),
                objectives,
            })
        })
        .collect()
}

fn objective(path: &Path) -> Result<Arc<dyn Objective>> {
    let key = path.to_string_lossy();
    let Some((file, src)) = OBJECTIVES.iter().find(|(p, _)| *p == key) else {
        bail!("the demo scenario names {key}, which is not built in");
    };
    Ok(horde_hose::compile_named(file, src)?)
}

/// A stream's display name.
pub fn name(id: u32) -> String {
    STREAM_NAMES
        .iter()
        .find(|(i, _)| *i == id)
        .map_or_else(|| format!("stream {id}"), |(_, n)| n.to_string())
}

/// Stream names by id.
pub fn names() -> BTreeMap<u32, String> {
    STREAM_NAMES
        .iter()
        .map(|(i, n)| (*i, n.to_string()))
        .collect()
}

/// The emulator configuration for the scenario's channels, each forwarding to
/// `receiver`.
pub fn emulator(s: &Scenario, receiver: SocketAddr) -> EmulatorConfig {
    let channels = s
        .channels
        .iter()
        .map(|c| horde_emu::ChannelConfig {
            name: c.name.clone(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            forward_to: receiver,
            up: c.up.clone(),
            down: Some(c.down.clone()),
            schedule: Vec::new(),
        })
        .collect();
    EmulatorConfig {
        seed: s.seed,
        timer: TimerConfig::default(),
        channels,
        base_dir: PathBuf::from("."),
    }
}

/// The sender's settings for one of the scenario's channels over real sockets: what
/// the simulator gives it (`horde_sim::build`), the loss prior included.
pub fn channel_config(c: &ChannelSpec) -> ChannelConfig {
    ChannelConfig {
        mtu: c.mtu,
        congestion: c.congestion.clone(),
        cost_per_kb: c.cost_per_kb,
        loss_correlation: c.loss_correlation,
        loss_prior: c.loss_prior,
        ..ChannelConfig::default()
    }
}

/// The scenario as a simulation, objectives attached or not.
pub fn topology(s: &Scenario, with_objectives: bool) -> Result<horde_sim::engine::Topology> {
    let mut bare = s.clone();
    for st in &mut bare.streams {
        st.objectives.clear();
    }
    let mut topo = horde_sim::build::topology(&bare)?;
    for (setup, plan) in topo.streams.iter_mut().zip(streams(s, with_objectives)?) {
        setup.objectives = plan.objectives;
    }
    Ok(topo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_time_channels_get_the_scenarios_settings() {
        let s = scenario(1).unwrap();
        let sim = horde_sim::build::topology(&{
            let mut bare = s.clone();
            for st in &mut bare.streams {
                st.objectives.clear();
            }
            bare
        })
        .unwrap();
        for (spec, setup) in s.channels.iter().zip(&sim.channels) {
            let real = channel_config(spec);
            assert!(real.loss_prior.is_some(), "{} has no loss prior", spec.name);
            assert_eq!(real, setup.config, "{}", spec.name);
        }
    }
}
