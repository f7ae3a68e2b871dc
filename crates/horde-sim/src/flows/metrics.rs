//! Flow metrics: one record per flow, and per workload entry the completion-time
//! statistics (mean, median, p95, 95% confidence interval of the mean), goodput and
//! retransmissions. The simulator and the real-time client both produce a
//! [`FlowReport`], so their outputs compare field by field.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::carrier::AssignedRates;
use super::workload::{FlowSpec, PlannedFlow};

/// What happened to one flow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowRecord {
    pub id: u32,
    /// The `[[flow]]` entry's label.
    pub class: String,
    pub kind: &'static str,
    pub start_s: f64,
    /// Start to the last answer byte; `None` if the flow did not finish.
    pub completion_ms: Option<f64>,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Application bytes both ways over the completion time, in Mbit/s.
    pub goodput_mbps: Option<f64>,
    /// Retransmitted data segments, both directions.
    pub retransmits: u64,
    pub exchanges: usize,
    /// Per finished exchange: from when it was due to its last answer byte, in ms.
    pub exchange_ms: Vec<f64>,
}

impl FlowRecord {
    /// A record for `flow`, given when each exchange finished (a prefix of them).
    pub fn new(
        flow: &PlannedFlow,
        specs: &[FlowSpec],
        completions: &[Duration],
        retransmits: u64,
    ) -> Self {
        let spec = &specs[flow.class];
        let done = completions.len() == flow.exchanges.len();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let completion = done.then(|| {
            completions
                .last()
                .map_or(Duration::ZERO, |&t| t - flow.start)
        });
        let bytes = flow.bytes_up() + flow.bytes_down();
        FlowRecord {
            id: flow.id,
            class: spec.label(flow.class),
            kind: spec.kind(),
            start_s: flow.start.as_secs_f64(),
            completion_ms: completion.map(ms),
            bytes_up: flow.bytes_up(),
            bytes_down: flow.bytes_down(),
            goodput_mbps: completion
                .filter(|c| !c.is_zero())
                .map(|c| bytes as f64 * 8.0 / c.as_secs_f64() / 1e6),
            retransmits,
            exchanges: flow.exchanges.len(),
            exchange_ms: completions
                .iter()
                .enumerate()
                .map(|(k, &t)| ms(t.saturating_sub(flow.start + flow.interval * k as u32)))
                .collect(),
        }
    }
}

/// Mean, median, p95 and the 95% confidence interval of the mean of some samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    pub p95: f64,
    pub ci95_low: f64,
    pub ci95_high: f64,
}

impl Stats {
    /// `None` for no samples. Quantiles are nearest-rank; the interval is Student's t
    /// on the sample standard deviation (zero width for one sample).
    pub fn of(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let mean = s.iter().sum::<f64>() / n as f64;
        let rank = |p: f64| s[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        let half = if n > 1 {
            let var = s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            t975(n - 1) * (var / n as f64).sqrt()
        } else {
            0.0
        };
        Some(Stats {
            n,
            mean,
            median: rank(0.5),
            p95: rank(0.95),
            ci95_low: mean - half,
            ci95_high: mean + half,
        })
    }
}

/// The 97.5% quantile of Student's t with `df` degrees of freedom: a table to 30, then
/// the normal quantile with two Cornish-Fisher corrections (error < 0.001).
pub fn t975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df - 1],
        _ => {
            let z: f64 = 1.959_964;
            let df = df as f64;
            z + (z.powi(3) + z) / (4.0 * df)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * df * df)
        }
    }
}

/// Per `[[flow]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassSummary {
    pub class: String,
    pub kind: &'static str,
    pub flows: usize,
    pub completed: usize,
    /// Flow completion time of the finished flows, in ms.
    pub completion_ms: Option<Stats>,
    /// Exchange latency (due to answered), in ms: for one-exchange flows the same as
    /// the completion time; for interactive flows the per-message figure that matters.
    pub exchange_ms: Option<Stats>,
    /// Mean of the finished flows' goodput, Mbit/s.
    pub mean_goodput_mbps: Option<f64>,
    pub retransmits: u64,
    pub retransmits_per_flow: f64,
}

/// A whole run: its settings, a summary per entry, and every flow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowReport {
    pub scenario: String,
    /// `smoltcp` (simulator) or `kernel` (real time).
    pub stack: String,
    pub congestion: String,
    pub seed: u64,
    /// Time from the first flow's start to the end of the run, in seconds.
    pub run_s: f64,
    /// Mean rates assigned to scheduled links (the CDMA model) during the run; left
    /// out of the JSON for fixed-rate links.
    #[serde(rename = "link", skip_serializing_if = "AssignedRates::is_empty")]
    pub link_assigned_kbps: AssignedRates,
    pub classes: Vec<ClassSummary>,
    pub flows: Vec<FlowRecord>,
}

impl FlowReport {
    /// Summarise `flows` for the entries in `specs`.
    pub fn new(
        scenario: &str,
        stack: &str,
        congestion: &str,
        seed: u64,
        run_s: f64,
        specs: &[FlowSpec],
        mut flows: Vec<FlowRecord>,
    ) -> Self {
        flows.sort_by_key(|f| f.id);
        let classes = specs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let label = spec.label(i);
                let mine: Vec<&FlowRecord> = flows.iter().filter(|f| f.class == label).collect();
                let fct: Vec<f64> = mine.iter().filter_map(|f| f.completion_ms).collect();
                let exchanges: Vec<f64> = mine
                    .iter()
                    .flat_map(|f| f.exchange_ms.iter().copied())
                    .collect();
                let goodputs: Vec<f64> = mine.iter().filter_map(|f| f.goodput_mbps).collect();
                let retransmits = mine.iter().map(|f| f.retransmits).sum();
                ClassSummary {
                    class: label,
                    kind: spec.kind(),
                    flows: mine.len(),
                    completed: fct.len(),
                    completion_ms: Stats::of(&fct),
                    exchange_ms: Stats::of(&exchanges),
                    mean_goodput_mbps: (!goodputs.is_empty())
                        .then(|| goodputs.iter().sum::<f64>() / goodputs.len() as f64),
                    retransmits,
                    retransmits_per_flow: if mine.is_empty() {
                        0.0
                    } else {
                        retransmits as f64 / mine.len() as f64
                    },
                }
            })
            .collect();
        FlowReport {
            scenario: scenario.to_string(),
            stack: stack.to_string(),
            congestion: congestion.to_string(),
            seed,
            run_s,
            link_assigned_kbps: AssignedRates::default(),
            classes,
            flows,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report is plain data")
    }

    /// One line per flow.
    pub fn flows_csv(&self) -> String {
        let mut out = String::from(
            "id,class,kind,start_s,completion_ms,bytes_up,bytes_down,goodput_mbps,retransmits,exchanges,exchanges_done\n",
        );
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
        for f in &self.flows {
            let _ = writeln!(
                out,
                "{},{},{},{:.6},{},{},{},{},{},{},{}",
                f.id,
                f.class,
                f.kind,
                f.start_s,
                opt(f.completion_ms),
                f.bytes_up,
                f.bytes_down,
                opt(f.goodput_mbps),
                f.retransmits,
                f.exchanges,
                f.exchange_ms.len()
            );
        }
        out
    }

    /// One line per entry.
    pub fn summary_csv(&self) -> String {
        let mut out = String::from(
            "class,kind,flows,completed,fct_mean_ms,fct_median_ms,fct_p95_ms,fct_ci95_low_ms,fct_ci95_high_ms,exchange_mean_ms,exchange_p95_ms,mean_goodput_mbps,retransmits_per_flow\n",
        );
        for c in &self.classes {
            let f = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
            let fct = c.completion_ms.as_ref();
            let ex = c.exchange_ms.as_ref();
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{:.3}",
                c.class,
                c.kind,
                c.flows,
                c.completed,
                f(fct.map(|s| s.mean)),
                f(fct.map(|s| s.median)),
                f(fct.map(|s| s.p95)),
                f(fct.map(|s| s.ci95_low)),
                f(fct.map(|s| s.ci95_high)),
                f(ex.map(|s| s.mean)),
                f(ex.map(|s| s.p95)),
                f(c.mean_goodput_mbps),
                c.retransmits_per_flow
            );
        }
        out
    }

    /// A text table for the terminal.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{} ({} TCP, {}), seed {}, {:.1} s\n{:<20} {:>6} {:>6} {:>10} {:>10} {:>10} {:>21} {:>9} {:>8}\n",
            self.scenario,
            self.stack,
            self.congestion,
            self.seed,
            self.run_s,
            "class",
            "flows",
            "done",
            "mean ms",
            "median ms",
            "p95 ms",
            "mean 95% CI ms",
            "Mbit/s",
            "rtx/flow"
        );
        for c in &self.classes {
            let (mean, median, p95, ci) = match &c.completion_ms {
                Some(s) => (
                    format!("{:.1}", s.mean),
                    format!("{:.1}", s.median),
                    format!("{:.1}", s.p95),
                    format!("{:.1}..{:.1}", s.ci95_low, s.ci95_high),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            let _ = writeln!(
                out,
                "{:<20} {:>6} {:>6} {:>10} {:>10} {:>10} {:>21} {:>9} {:>8.2}",
                c.class,
                c.flows,
                c.completed,
                mean,
                median,
                p95,
                ci,
                c.mean_goodput_mbps
                    .map_or("-".into(), |g| format!("{g:.2}")),
                c.retransmits_per_flow
            );
            if c.kind == "interactive" {
                if let Some(s) = &c.exchange_ms {
                    let _ = writeln!(
                        out,
                        "{:<20} per message: mean {:.1} ms, median {:.1} ms, p95 {:.1} ms ({} messages)",
                        "", s.mean, s.median, s.p95, s.n
                    );
                }
            }
        }
        for (dir, rate) in [
            ("up", self.link_assigned_kbps.up_kbps),
            ("down", self.link_assigned_kbps.down_kbps),
        ] {
            if let Some(kbps) = rate {
                let _ = writeln!(out, "link {dir}: mean assigned rate {kbps:.1} kbit/s");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::workload::Exchange;

    #[test]
    fn stats_of_a_known_sample() {
        let xs: Vec<f64> = (1..=20).map(f64::from).collect();
        let s = Stats::of(&xs).unwrap();
        assert_eq!((s.n, s.mean, s.median, s.p95), (20, 10.5, 10.0, 19.0));
        // sd of 1..=20 is sqrt(35); t(19) = 2.093.
        let half = 2.093 * (35.0f64 / 20.0).sqrt();
        assert!((s.ci95_high - 10.5 - half).abs() < 1e-9);
        assert!((10.5 - s.ci95_low - half).abs() < 1e-9);
        let one = Stats::of(&[4.0]).unwrap();
        assert_eq!((one.ci95_low, one.ci95_high, one.p95), (4.0, 4.0, 4.0));
        assert!(Stats::of(&[]).is_none());
    }

    #[test]
    fn t_quantiles_join_smoothly() {
        assert_eq!(t975(1), 12.706);
        assert!((t975(31) - 2.0395).abs() < 0.001, "{}", t975(31));
        assert!((t975(120) - 1.9799).abs() < 0.001, "{}", t975(120));
    }

    #[test]
    fn records_and_summaries_of_a_known_case() {
        let spec = FlowSpec::Interactive {
            name: Some("voip".into()),
            request_bytes: 200,
            response_bytes: 200,
            interval_ms: 20.0,
            count: 3,
            at_s: 1.0,
        };
        let flow = PlannedFlow {
            id: 4,
            class: 0,
            start: Duration::from_secs(1),
            interval: Duration::from_millis(20),
            exchanges: vec![Exchange { up: 200, down: 200 }; 3],
        };
        let at = |ms| Duration::from_secs(1) + Duration::from_millis(ms);
        let done = FlowRecord::new(
            &flow,
            std::slice::from_ref(&spec),
            &[at(50), at(60), at(100)],
            2,
        );
        assert_eq!(done.completion_ms, Some(100.0));
        assert_eq!(done.exchange_ms, vec![50.0, 40.0, 60.0]);
        let gp = done.goodput_mbps.unwrap();
        assert!((gp - 1200.0 * 8.0 / 0.1 / 1e6).abs() < 1e-9);
        let unfinished = FlowRecord::new(
            &PlannedFlow {
                id: 5,
                ..flow.clone()
            },
            std::slice::from_ref(&spec),
            &[at(70)],
            0,
        );
        assert_eq!(
            (unfinished.completion_ms, unfinished.goodput_mbps),
            (None, None)
        );
        let report = FlowReport::new(
            "t",
            "smoltcp",
            "cubic",
            1,
            2.0,
            &[spec],
            vec![unfinished, done],
        );
        let c = &report.classes[0];
        assert_eq!((c.flows, c.completed, c.retransmits), (2, 1, 2));
        assert_eq!(c.completion_ms.as_ref().unwrap().mean, 100.0);
        assert_eq!(c.exchange_ms.as_ref().unwrap().n, 4);
        assert_eq!(report.flows[0].id, 4, "sorted by id");
        assert_eq!(report.flows_csv().lines().count(), 3);
        assert!(report
            .summary_csv()
            .contains("voip,interactive,2,1,100.000"));
        assert!(report.table().contains("per message"));
    }
}
