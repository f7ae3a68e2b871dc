//! TCP flows in the simulator: real TCP (smoltcp, with its own Cubic or Reno) between
//! two simulated hosts, in virtual time, over a [`Carrier`]; flow workloads that the
//! real-time client runs unchanged; and completion-time metrics. See `docs/flows.md`.

mod app;
pub mod carrier;
pub mod host;
mod metrics;
mod plot;
pub mod protocol;
mod retrans;
mod scenario;
mod sim;
pub mod sizes;
pub mod sweep;
pub mod tunnel;
pub mod tunnel_scenario;
mod workload;

pub use carrier::{AssignedRates, Carrier, CarrierStats, DirectLink, Side};
pub use metrics::{ClassSummary, FlowRecord, FlowReport, Stats};
pub use scenario::FlowScenario;
pub use sim::{simulate, Congestion, FlowSim, FlowSimError, TcpSettings};
pub use workload::{plan, Exchange, FlowSpec, PlannedFlow};

/// Run a scenario in the simulator over its direct link.
pub fn run_scenario(s: &FlowScenario) -> Result<FlowReport, RunError> {
    let (up, down) = s.links()?;
    let plan = s.plan().map_err(RunError::Plan)?;
    Ok(simulate(
        &s.name,
        DirectLink::new(up, down),
        s.tcp,
        &s.flows,
        plan,
        s.seed,
        s.end(),
    )?)
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("link: {0}")]
    Link(#[from] horde_links::LinkError),
    #[error("{0}")]
    Plan(String),
    #[error(transparent)]
    Sim(#[from] FlowSimError),
}
