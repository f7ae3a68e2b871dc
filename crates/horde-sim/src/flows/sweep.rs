//! The PluriBus comparison: one tunnel scenario run at every load factor (and bad-state
//! loss rate) of its sweep, once per tunnel mode and once directly over each baseline
//! link, on the same flow plan; mean completion time with its 95% interval, the loss
//! the end hosts saw, and what the tunnel sent on top of their packets.

use serde::Serialize;

use super::carrier::{Carrier, DirectLink};
use super::metrics::Stats;
use super::sim::{FlowSim, FlowSimError};
use super::tunnel::{RecoveryCounts, TunnelCarrier, TunnelError};
use super::tunnel_scenario::{Mode, TunnelScenario};
use crate::workload::stream_seed;

/// One cell of the table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRow {
    /// Multiple of the scenario's load.
    pub load: f64,
    /// Bad-state loss of every Gilbert-Elliott link, when the sweep sets it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_in_bad: Option<f64>,
    /// The tunnel mode's name, or `direct:LINK` for single-path TCP over one link.
    pub mode: String,
    pub flows: usize,
    pub completed: usize,
    /// Completion times of the completed flows, ms.
    pub fct_ms: Option<Stats>,
    /// Fraction of the hosts' IP packets that never reached the other host.
    pub end_host_loss: f64,
    /// Fraction of datagrams the links lost or dropped (what the tunnel had to mask).
    pub link_loss: f64,
    /// Tunnel bytes sent per IP byte, less one (headers, acks, probes, redundancy);
    /// absent for direct runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<f64>,
    /// What the streams' loss recovery did (absent without recovery, and for direct runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoveryCounts>,
    /// TCP retransmissions per flow.
    pub retransmits_per_flow: f64,
}

/// A whole sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepReport {
    pub scenario: String,
    pub seed: u64,
    pub duration_s: f64,
    pub rows: Vec<SweepRow>,
}

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("{0}")]
    Plan(String),
    #[error(transparent)]
    Tunnel(#[from] TunnelError),
    #[error("link: {0}")]
    Link(#[from] horde_links::LinkError),
    #[error(transparent)]
    Sim(#[from] FlowSimError),
    #[error("no mode named \"{0}\" in the scenario")]
    UnknownMode(String),
}

/// What one cell runs over.
#[derive(Debug, Clone)]
pub enum Arm {
    Tunnel(Mode),
    /// Single-path TCP over the named link.
    Direct(String),
}

impl Arm {
    pub fn name(&self) -> String {
        match self {
            Arm::Tunnel(m) => m.name.clone(),
            Arm::Direct(l) => format!("direct:{l}"),
        }
    }
}

/// The arms a sweep runs: the direct baselines, then the modes; `only` keeps those
/// whose names it lists (`direct:LINK` for a baseline).
pub fn arms(s: &TunnelScenario, only: Option<&[String]>) -> Result<Vec<Arm>, SweepError> {
    let all: Vec<Arm> = s
        .direct
        .iter()
        .map(|l| Arm::Direct(l.clone()))
        .chain(s.modes.iter().cloned().map(Arm::Tunnel))
        .collect();
    let Some(only) = only else { return Ok(all) };
    only.iter()
        .map(|n| {
            all.iter()
                .find(|a| &a.name() == n)
                .cloned()
                .ok_or_else(|| SweepError::UnknownMode(n.clone()))
        })
        .collect()
}

/// Run one cell.
pub fn run_cell(
    s: &TunnelScenario,
    load: f64,
    loss_in_bad: Option<f64>,
    arm: &Arm,
) -> Result<SweepRow, SweepError> {
    let plan = s.plan(load).map_err(SweepError::Plan)?;
    let specs = s.scaled_flows(load);
    let links = s.links_at(loss_in_bad);
    let row = |records: &[super::FlowRecord]| {
        let fct: Vec<f64> = records.iter().filter_map(|r| r.completion_ms).collect();
        let retransmits: u64 = records.iter().map(|r| r.retransmits).sum();
        SweepRow {
            load,
            loss_in_bad,
            mode: arm.name(),
            flows: records.len(),
            completed: fct.len(),
            fct_ms: Stats::of(&fct),
            end_host_loss: 0.0,
            link_loss: 0.0,
            overhead: None,
            recovery: None,
            retransmits_per_flow: retransmits as f64 / records.len().max(1) as f64,
        }
    };
    match arm {
        Arm::Tunnel(mode) => {
            let carrier = TunnelCarrier::new(s.setup(mode, links))?;
            let mut sim = FlowSim::new(carrier, s.tcp, specs, plan, s.seed);
            let (records, _) = sim.run_in_place(s.end())?;
            let t = sim.carrier().tunnel_stats();
            let links = sim.carrier().stats();
            let mut r = row(&records);
            let (pin, pout) = (
                t.up.packets_in + t.down.packets_in,
                t.up.packets_out + t.down.packets_out,
            );
            r.end_host_loss = 1.0 - (pout as f64 / pin.max(1) as f64).min(1.0);
            r.link_loss = loss_fraction(&links);
            let (wire, ip) = (
                t.up.wire_bytes + t.down.wire_bytes,
                t.up.bytes_in + t.down.bytes_in,
            );
            r.overhead = Some(wire as f64 / ip.max(1) as f64 - 1.0);
            r.recovery = t.recovery;
            Ok(r)
        }
        Arm::Direct(name) => {
            let (i, l) = links
                .iter()
                .enumerate()
                .find(|(_, l)| &l.name == name)
                .ok_or_else(|| SweepError::UnknownMode(format!("direct:{name}")))?;
            let seed = |dir: u32| stream_seed(s.seed ^ 0xd1 << 40, 2 * i as u32 + dir);
            let carrier = DirectLink::new(
                l.up.build(seed(0), &s.base_dir)?,
                l.down.build(seed(1), &s.base_dir)?,
            );
            let mut sim = FlowSim::new(carrier, s.tcp, specs, plan, s.seed);
            let (records, _) = sim.run_in_place(s.end())?;
            let mut r = row(&records);
            r.link_loss = loss_fraction(&sim.carrier_stats());
            r.end_host_loss = r.link_loss;
            Ok(r)
        }
    }
}

fn loss_fraction(c: &super::CarrierStats) -> f64 {
    let offered = c.up.offered + c.down.offered;
    let lost = c.up.lost + c.down.lost + c.up.queue_drops + c.down.queue_drops;
    lost as f64 / offered.max(1) as f64
}

/// Run every cell: loads, then loss rates, then arms. `progress` hears each finished
/// row with its index and the total.
pub fn run_sweep(
    s: &TunnelScenario,
    only: Option<&[String]>,
    mut progress: impl FnMut(usize, usize, &SweepRow),
) -> Result<SweepReport, SweepError> {
    let arms = arms(s, only)?;
    let losses: Vec<Option<f64>> = match &s.loss_in_bad {
        Some(l) => l.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    let total = s.loads.len() * losses.len() * arms.len();
    let mut rows = Vec::with_capacity(total);
    for &load in &s.loads {
        for &loss in &losses {
            for arm in &arms {
                let r = run_cell(s, load, loss, arm)?;
                progress(rows.len(), total, &r);
                rows.push(r);
            }
        }
    }
    Ok(SweepReport {
        scenario: s.name.clone(),
        seed: s.seed,
        duration_s: s.duration_s,
        rows,
    })
}

/// The CSV columns every PluriBus table starts with, simulated or live, so that their
/// files line up; [`csv_leading`] writes a row's cells.
pub const CSV_LEADING: &str =
    "load,loss_in_bad,mode,flows,completed,fct_mean_ms,fct_ci95_low_ms,fct_ci95_high_ms,fct_median_ms";

/// A row's cells under [`CSV_LEADING`], without a trailing comma.
pub fn csv_leading(
    load: f64,
    loss_in_bad: Option<f64>,
    mode: &str,
    flows: usize,
    completed: usize,
    fct_ms: Option<&Stats>,
) -> String {
    format!(
        "{load},{},{mode},{flows},{completed},{},{},{},{}",
        csv_opt(loss_in_bad),
        csv_opt(fct_ms.map(|s| s.mean)),
        csv_opt(fct_ms.map(|s| s.ci95_low)),
        csv_opt(fct_ms.map(|s| s.ci95_high)),
        csv_opt(fct_ms.map(|s| s.median)),
    )
}

/// An optional CSV cell: empty when absent.
pub fn csv_opt(x: Option<f64>) -> String {
    x.map_or(String::new(), |v| format!("{v:.4}"))
}

impl SweepReport {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data serialises")
    }

    pub fn to_csv(&self) -> String {
        let mut out = format!(
            "{CSV_LEADING},end_host_loss,link_loss,overhead,coded_fraction,coding_overhead,\
             recovered,retransmitted,retransmits_per_flow\n"
        );
        let opt = csv_opt;
        for r in &self.rows {
            out.push_str(&format!(
                "{},{:.5},{:.5},{},{},{},{},{},{:.3}\n",
                csv_leading(
                    r.load,
                    r.loss_in_bad,
                    &r.mode,
                    r.flows,
                    r.completed,
                    r.fct_ms.as_ref()
                ),
                r.end_host_loss,
                r.link_loss,
                opt(r.overhead),
                opt(r.recovery.map(|c| c.coded_fraction())),
                opt(r.recovery.map(|c| c.coding_overhead())),
                r.recovery
                    .map_or(String::new(), |c| c.recovered.to_string()),
                r.recovery
                    .map_or(String::new(), |c| c.retransmitted.to_string()),
                r.retransmits_per_flow,
            ));
        }
        out
    }

    /// A text table, one line per row.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{} (seed {}, {} s of arrivals)\n{:>5} {:>6} {:<16} {:>11} {:>22} {:>8} {:>9} {:>9} {:>9} {:>6} {:>6}\n",
            self.scenario,
            self.seed,
            self.duration_s,
            "load",
            "p_bad",
            "mode",
            "done/flows",
            "mean FCT ms [95% CI]",
            "median",
            "host loss",
            "link loss",
            "overhead",
            "coded",
            "rtx/fl",
        );
        for r in &self.rows {
            let (mean, median) = match &r.fct_ms {
                Some(s) => (
                    format!("{:.0} [{:.0}, {:.0}]", s.mean, s.ci95_low, s.ci95_high),
                    format!("{:.0}", s.median),
                ),
                None => ("-".into(), "-".into()),
            };
            out.push_str(&format!(
                "{:>4}x {:>6} {:<16} {:>11} {:>22} {:>8} {:>8.2}% {:>8.2}% {:>9} {:>6} {:>6.2}\n",
                r.load,
                r.loss_in_bad.map_or("-".into(), |p| format!("{p}")),
                r.mode,
                format!("{}/{}", r.completed, r.flows),
                mean,
                median,
                100.0 * r.end_host_loss,
                100.0 * r.link_loss,
                r.overhead
                    .map_or("-".into(), |o| format!("{:.0}%", 100.0 * o)),
                r.recovery.map_or("-".into(), |c| format!(
                    "{:.0}%",
                    100.0 * c.coded_fraction()
                )),
                r.retransmits_per_flow,
            ));
        }
        out
    }

    /// The row of `mode` at `load` (and `loss_in_bad`).
    pub fn row(&self, load: f64, loss_in_bad: Option<f64>, mode: &str) -> Option<&SweepRow> {
        self.rows
            .iter()
            .find(|r| r.load == load && r.loss_in_bad == loss_in_bad && r.mode == mode)
    }
}
