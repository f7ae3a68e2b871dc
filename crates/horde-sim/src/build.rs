//! Turning a validated [`Scenario`] into the engine's [`Topology`]: host names become
//! indices, channel and stream settings become protocol configurations, scheduler names
//! become schedulers, and objective files are compiled.

use std::sync::Arc;
use std::time::Duration;

use horde_hose::CompiledObjective;
use horde_policy::registry::{scheduler, UnknownScheduler};
use horde_policy::Objective;
use horde_proto::{CcConfig, ChannelConfig, SessionConfig, StreamConfig};
use thiserror::Error;

use crate::engine::{ChannelSetup, StreamSetup, Topology};
use crate::scenario::{Congestion, Scenario, StreamRate};

#[derive(Debug, Error)]
pub enum BuildError {
    #[error(transparent)]
    UnknownScheduler(#[from] UnknownScheduler),
    #[error(transparent)]
    Objective(#[from] horde_hose::FileError),
    /// A stream asks for its objectives' latency bound and they imply none, or one out
    /// of range.
    #[error("stream {stream}: {message}")]
    LatencyBound { stream: u32, message: String },
}

/// The latency bound `objectives` imply for stream `id`, checked like an explicit one.
fn derived_bound<'a>(
    id: u32,
    objectives: impl IntoIterator<Item = &'a CompiledObjective>,
) -> Result<f64, BuildError> {
    let err = |message: String| BuildError::LatencyBound {
        stream: id,
        message,
    };
    match horde_hose::latency_bound_ms(objectives, id) {
        Some(ms) if horde_proto::LATENCY_BOUND_MS.contains(&ms) => Ok(ms),
        Some(ms) => Err(err(format!(
            "the objectives bound its latency to {ms} ms, but latency_bound_ms must be 1 to 60000 ms"
        ))),
        None => Err(err(
            "latency_bound_from_objectives is set, but no objective bounds its latency \
             (a goal `expected(x::latency) <= N` on all its ADUs, or `s::latency_ave <= N`; \
             docs/hose.md, \"Latency bounds\")"
                .to_string(),
        )),
    }
}

/// Resolve a scenario into a runnable topology.
pub fn topology(s: &Scenario) -> Result<Topology, BuildError> {
    let host = |name: &str| {
        s.hosts
            .iter()
            .position(|h| h.name == name)
            .expect("validated host name")
    };
    let channels = s
        .channels
        .iter()
        .map(|c| ChannelSetup {
            name: c.name.clone(),
            a: host(&c.between[0]),
            b: host(&c.between[1]),
            config: ChannelConfig {
                mtu: c.mtu,
                congestion: match c.congestion {
                    Congestion::Cbr { kbps, .. } => CcConfig::Cbr {
                        kbps,
                        // Bank at most one cycle plus a slot, so a cycle sees the slots that
                        // came due since the last one and no more.
                        burst_ms: s.scheduler.cycle_ms + f64::from(c.mtu) * 8.0 / kbps,
                    },
                    ref other => other.clone(),
                },
                cost_per_kb: c.cost_per_kb,
                loss_correlation: c.loss_correlation,
                loss_prior: c.loss_prior,
                ..ChannelConfig::default()
            },
            up: c.up.clone(),
            down: c.down.clone(),
        })
        .collect();
    let compiled = s
        .streams
        .iter()
        .map(|st| {
            st.objectives
                .iter()
                .map(|p| horde_hose::load_compiled(p))
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut streams = Vec::new();
    for (st, own) in s.streams.iter().zip(&compiled) {
        let latency_bound_ms = match st.latency_bound_ms {
            // An explicit bound wins over the objectives'.
            Some(ms) => Some(ms),
            None if st.latency_bound_from_objectives => {
                // Objectives belong to the session: any stream's may bound this one.
                Some(derived_bound(st.id, compiled.iter().flatten())?)
            }
            None => None,
        };
        let objectives = own
            .iter()
            .map(|o| Arc::new(o.clone()) as Arc<dyn Objective>)
            .collect();
        streams.push(StreamSetup {
            id: st.id,
            from: host(&st.from),
            to: host(&st.to),
            config: StreamConfig {
                max_kbps: match st.rate {
                    StreamRate::MaxKbps(k) => Some(k),
                    StreamRate::Elastic => None,
                },
                ordered: st.ordered,
                latency_bound_ms,
                latency_copies: st.latency_copies,
                quickest: st.quickest,
                ..StreamConfig::default()
            },
            workload: st.workload.clone(),
            objectives,
        });
    }
    Ok(Topology {
        hosts: s.hosts.iter().map(|h| h.name.clone()).collect(),
        channels,
        streams,
        session: SessionConfig {
            cycle_ms: s.scheduler.cycle_ms,
            lookahead_ms: s.scheduler.lookahead_ms,
            pack_adus: s.scheduler.pack_adus,
            phantom_wait_ms: s.scheduler.phantom_wait_ms,
            ..SessionConfig::default()
        },
        scheduler: scheduler(&s.scheduler.kind, s.scheduler.k)?,
        seed: s.seed,
        duration: Duration::from_secs_f64(s.duration_s),
        base_dir: s.base_dir.clone(),
    })
}
