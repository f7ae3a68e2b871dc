//! The live comparison's rows and how they are printed: a Markdown table, JSON and CSV.
//! The columns follow the simulator's table (`horde-lab pluribus sim`) so the two can be
//! read side by side, plus what only kernel TCP can tell (its retransmission rate).

use std::path::Path;

use horde_sim::flows::sweep::{csv_leading, csv_opt, CSV_LEADING};
use horde_sim::flows::Stats;
use serde::Serialize;

/// Packets and bytes that entered the emulated links (both directions, every link),
/// from `horde shell --log`'s CSVs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LinkTotals {
    pub packets: u64,
    pub bytes: u64,
    /// Lost by the loss model or dropped at a full buffer.
    pub dropped: u64,
}

impl LinkTotals {
    /// Add up every `*.csv` in `dir` (`arrival_ms,departure_ms,size,dropped,reason`).
    pub fn read(dir: &Path) -> std::io::Result<Self> {
        let mut t = Self::default();
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "csv") {
                continue;
            }
            t.add(&std::fs::read_to_string(&path)?);
        }
        Ok(t)
    }

    fn add(&mut self, csv: &str) {
        for line in csv.lines() {
            let mut f = line.split(',');
            let (Some(_), Some(_), Some(size), Some(dropped)) =
                (f.next(), f.next(), f.next(), f.next())
            else {
                continue;
            };
            // The header and anything else that is not a packet row is skipped.
            let (Ok(size), Ok(dropped)) = (size.parse::<u64>(), dropped.parse::<u8>()) else {
                continue;
            };
            self.packets += 1;
            self.bytes += size;
            self.dropped += u64::from(dropped == 1);
        }
    }

    pub fn loss(&self) -> f64 {
        self.dropped as f64 / self.packets.max(1) as f64
    }
}

/// One cell: a load (and bad-state loss), one arm.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveRow {
    pub load: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_in_bad: Option<f64>,
    /// A tunnel mode's name, `mptcp`, or `direct:LINK`.
    pub mode: String,
    pub flows: usize,
    pub completed: usize,
    /// Completion times of the completed flows, ms.
    pub fct_ms: Option<Stats>,
    /// Tunnel: IP packets one host handed to the tunnel that never came out at the
    /// other (the tunnel's own counters). MPTCP and single path: the links' loss.
    pub end_host_loss: f64,
    /// Packets the links lost or dropped, of all that entered them.
    pub link_loss: f64,
    /// Kernel TCP, both ends: retransmitted segments per data segment sent.
    pub tcp_retransmit_rate: f64,
    pub retransmits_per_flow: f64,
    /// Tunnel: bytes on the links (IP packets of the tunnel's datagrams) per IP byte the
    /// hosts offered, less one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<f64>,
    pub links: LinkTotals,
    /// Tunnel: IP bytes the hosts offered (both ends' `tun_in_bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_bytes_offered: Option<u64>,
    /// Tunnel: sessions the client opened again during the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconnects: Option<u64>,
    /// Why the run failed, when it did (its flows then count as not completed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A whole live comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveReport {
    pub scenario: String,
    pub seed: u64,
    pub duration_s: f64,
    /// Always `"kernel"`: Linux TCP at both hosts.
    pub tcp: &'static str,
    pub congestion: String,
    pub rows: Vec<LiveRow>,
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

impl LiveRow {
    fn fct(&self) -> (String, String) {
        match &self.fct_ms {
            Some(s) => (
                format!("{:.0} [{:.0}, {:.0}]", s.mean, s.ci95_low, s.ci95_high),
                format!("{:.0}", s.median),
            ),
            None => ("-".into(), "-".into()),
        }
    }
}

impl LiveReport {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data serialises")
    }

    /// The single-path arm with the lowest mean completion time at `load`/`loss`,
    /// among those that completed every flow (any, if none did).
    pub fn best_single_path(&self, load: f64, loss: Option<f64>) -> Option<&LiveRow> {
        let mean = |r: &LiveRow| r.fct_ms.as_ref().map_or(f64::INFINITY, |s| s.mean);
        let direct: Vec<&LiveRow> = self
            .rows
            .iter()
            .filter(|r| r.load == load && r.loss_in_bad == loss && r.mode.starts_with("direct:"))
            .collect();
        let all_done = direct.iter().any(|r| r.completed == r.flows);
        direct
            .into_iter()
            .filter(|r| !all_done || r.completed == r.flows)
            .min_by(|a, b| mean(a).total_cmp(&mean(b)))
    }

    /// A Markdown table, one line per row; the best single path is marked.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{} (seed {}, {} s of arrivals, kernel TCP {} at both hosts)\n\n\
             | load | p_bad | mode | done/flows | mean FCT ms [95% CI] | median | host loss | link loss | TCP rtx | overhead |\n\
             | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
            self.scenario, self.seed, self.duration_s, self.congestion
        );
        for r in &self.rows {
            let best = self
                .best_single_path(r.load, r.loss_in_bad)
                .is_some_and(|b| b.mode == r.mode)
                && r.mode.starts_with("direct:");
            let (mean, median) = match &r.error {
                Some(e) => (format!("failed: {e}"), "-".into()),
                None => r.fct(),
            };
            out.push_str(&format!(
                "| {}x | {} | {}{} | {}/{} | {} | {} | {} | {} | {} | {} |\n",
                r.load,
                r.loss_in_bad.map_or("-".into(), |p| p.to_string()),
                r.mode,
                if best { " (best single path)" } else { "" },
                r.completed,
                r.flows,
                mean,
                median,
                pct(r.end_host_loss),
                pct(r.link_loss),
                pct(r.tcp_retransmit_rate),
                r.overhead
                    .map_or("-".into(), |o| format!("{:.0}%", 100.0 * o)),
            ));
        }
        out
    }

    pub fn to_csv(&self) -> String {
        let mut out = format!(
            "{CSV_LEADING},end_host_loss,link_loss,tcp_retransmit_rate,retransmits_per_flow,overhead\n"
        );
        for r in &self.rows {
            out.push_str(&format!(
                "{},{:.5},{:.5},{:.5},{:.3},{}\n",
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
                r.tcp_retransmit_rate,
                r.retransmits_per_flow,
                csv_opt(r.overhead),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_logs_add_up_packets_bytes_and_drops() {
        let mut t = LinkTotals::default();
        t.add(
            "arrival_ms,departure_ms,size,dropped,reason\n\
             1.000,21.500,1500,0,\n\
             2.000,,1400,1,loss\n\
             3.000,,60,1,queue\n\
             garbage\n",
        );
        assert_eq!(
            t,
            LinkTotals {
                packets: 3,
                bytes: 2960,
                dropped: 2
            }
        );
        assert!((t.loss() - 2.0 / 3.0).abs() < 1e-12);
    }

    fn row(mode: &str, done: usize, mean: f64) -> LiveRow {
        LiveRow {
            load: 1.0,
            loss_in_bad: None,
            mode: mode.into(),
            flows: 10,
            completed: done,
            fct_ms: Stats::of(&[mean, mean]),
            end_host_loss: 0.0,
            link_loss: 0.0,
            tcp_retransmit_rate: 0.0,
            retransmits_per_flow: 0.0,
            overhead: None,
            links: LinkTotals::default(),
            ip_bytes_offered: None,
            reconnects: None,
            error: None,
        }
    }

    #[test]
    fn the_best_single_path_completes_its_flows_first_then_is_fastest() {
        let report = LiveReport {
            scenario: "x".into(),
            seed: 1,
            duration_s: 10.0,
            tcp: "kernel",
            congestion: "cubic".into(),
            rows: vec![
                row("oec", 10, 50.0),
                row("direct:fast", 9, 100.0),
                row("direct:slow", 10, 300.0),
                row("direct:slower", 10, 400.0),
            ],
        };
        // The fast link lost a flow, so the slow one that finished all is the best.
        assert_eq!(
            report.best_single_path(1.0, None).unwrap().mode,
            "direct:slow"
        );
        let table = report.table();
        assert!(table.contains("| direct:slow (best single path) |"));
        assert!(!table.contains("fast (best"));
        assert_eq!(report.to_csv().lines().count(), 5);
    }
}
