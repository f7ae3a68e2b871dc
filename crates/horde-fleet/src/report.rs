//! What a fleet run measured, as a table and as JSON.

use std::fmt::Write;

use serde::Serialize;

/// The figures of one fleet run.
#[derive(Debug, Clone, Serialize)]
pub struct FleetReport {
    pub vehicles: u32,
    pub channels_per_vehicle: usize,
    pub sockets_per_vehicle: usize,
    /// Keepalive interval of both ends, s.
    pub keepalive_s: f64,
    /// `/proc/loadavg` at the start and at the end (1, 5, 15 min).
    pub loadavg_start: String,
    pub loadavg_end: String,
    pub connect: ConnectFigures,
    pub idle: IdleFigures,
    pub load: LoadFigures,
    pub restart: RestartFigures,
    /// Datagrams the vehicles sent and received in the whole run, and sends refused.
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    pub send_errors: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConnectFigures {
    pub connected: u32,
    /// From the first initiation until the last vehicle was connected, s.
    pub all_connected_s: Option<f64>,
    pub handshakes_per_s: f64,
    /// Vehicles whose first ADU was acknowledged, and when the last one was, s.
    pub moved_data: u32,
    pub all_moved_data_s: Option<f64>,
    /// Vehicles whose connection failed for good, with the first reason.
    pub failed: u32,
    pub first_failure: Option<String>,
    /// The state of the first few vehicles whose first ADU was never acknowledged.
    pub silent: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct IdleFigures {
    pub server_rss_empty_kb: u64,
    pub server_rss_connected_kb: u64,
    /// (connected − empty) / vehicles, bytes.
    pub server_bytes_per_vehicle: f64,
    pub window_s: f64,
    /// Server CPU (user + system) over the window, % of one core.
    pub server_cpu_pct: f64,
    /// The generator's own CPU over the window, % of one core.
    pub generator_cpu_pct: f64,
    /// Datagrams to and from the server over the window, per second.
    pub datagrams_per_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadFigures {
    pub window_s: f64,
    pub adu_bytes: usize,
    pub total_goodput_mbps: f64,
    pub min_kbps: f64,
    pub median_kbps: f64,
    pub max_kbps: f64,
    /// Jain's fairness index of the vehicles' goodputs (1: all equal).
    pub jain: f64,
    /// Vehicles that got no ADU acknowledged in the window.
    pub starved: u32,
    /// The state of the first few starved vehicles at the end of the window.
    pub starved_shown: Vec<String>,
    pub server_cpu_pct: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RestartFigures {
    /// From the SIGKILL until the new server listened, s.
    pub server_down_s: f64,
    pub reconnected: u32,
    /// Vehicles that did not reconnect within the limit.
    pub not_reconnected: u32,
    /// From the SIGKILL until the first and the last vehicle reconnected, s.
    pub first_reconnect_s: Option<f64>,
    pub all_reconnected_s: Option<f64>,
    /// Reconnections per second between the first and the last.
    pub handshakes_per_s: f64,
    /// From the SIGKILL until a vehicle's session ended (it noticed), median and max, s.
    pub noticed_median_s: Option<f64>,
    pub noticed_max_s: Option<f64>,
    /// From a vehicle's session ending until it was reconnected, median and max, s.
    pub handshake_median_s: Option<f64>,
    pub handshake_max_s: Option<f64>,
    /// Most reconnections within one second after the kill.
    pub peak_reconnects_per_s: u32,
    /// Reconnected vehicles with an ADU acknowledged by the new server.
    pub moved_data_after: u32,
    pub server_rss_after_kb: u64,
}

/// Jain's fairness index, (Σx)² / (n Σx²): 1 when every share is equal, 1/n when one
/// takes everything. An empty or all-zero list counts as fair (1).
pub fn jain_index(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    if x.is_empty() || squares == 0.0 {
        return 1.0;
    }
    sum * sum / (x.len() as f64 * squares)
}

fn opt(x: Option<f64>) -> String {
    x.map_or_else(|| "never".into(), |v| format!("{v:.2} s"))
}

impl FleetReport {
    /// The table `horde bench fleet` prints.
    pub fn table(&self) -> String {
        let mut t = String::new();
        let c = &self.connect;
        let i = &self.idle;
        let l = &self.load;
        let r = &self.restart;
        let _ = writeln!(
            t,
            "fleet: {} vehicles x {} channels ({} sockets each), keepalive {} s (load avg {} -> {})",
            self.vehicles,
            self.channels_per_vehicle,
            self.sockets_per_vehicle,
            self.keepalive_s,
            self.loadavg_start,
            self.loadavg_end
        );
        let rows: Vec<(&str, String)> = vec![
            ("connected", format!("{} / {}", c.connected, self.vehicles)),
            ("all connected after", opt(c.all_connected_s)),
            ("connect handshakes/s", format!("{:.0}", c.handshakes_per_s)),
            (
                "first ADU acknowledged",
                format!("{} / {}", c.moved_data, self.vehicles),
            ),
            ("all first ADUs after", opt(c.all_moved_data_s)),
            ("failed connections", format!("{}", c.failed)),
            ("server RSS, empty", format!("{} kB", i.server_rss_empty_kb)),
            (
                "server RSS, all connected",
                format!("{} kB", i.server_rss_connected_kb),
            ),
            (
                "server memory per vehicle",
                format!("{:.0} B", i.server_bytes_per_vehicle),
            ),
            (
                "server CPU, idle",
                format!(
                    "{:.2} % of a core over {:.0} s",
                    i.server_cpu_pct, i.window_s
                ),
            ),
            (
                "generator CPU, idle",
                format!("{:.2} % of a core", i.generator_cpu_pct),
            ),
            ("idle datagrams/s", format!("{:.0}", i.datagrams_per_s)),
            (
                "goodput, all sending",
                format!(
                    "{:.1} Mbit/s over {:.0} s",
                    l.total_goodput_mbps, l.window_s
                ),
            ),
            (
                "per vehicle min/median/max",
                format!(
                    "{:.1} / {:.1} / {:.1} kbit/s",
                    l.min_kbps, l.median_kbps, l.max_kbps
                ),
            ),
            ("Jain fairness", format!("{:.3}", l.jain)),
            ("starved under load", format!("{}", l.starved)),
            (
                "server CPU, all sending",
                format!("{:.1} % of a core", l.server_cpu_pct),
            ),
            ("restart: server down", format!("{:.2} s", r.server_down_s)),
            (
                "reconnected",
                format!("{} / {}", r.reconnected, self.vehicles),
            ),
            ("first reconnected after", opt(r.first_reconnect_s)),
            ("all reconnected after", opt(r.all_reconnected_s)),
            (
                "reconnect handshakes/s",
                format!("{:.0}", r.handshakes_per_s),
            ),
            (
                "peak reconnections in 1 s",
                format!("{}", r.peak_reconnects_per_s),
            ),
            (
                "noticed median / max",
                format!("{} / {}", opt(r.noticed_median_s), opt(r.noticed_max_s)),
            ),
            (
                "reconnect after notice",
                format!("{} / {}", opt(r.handshake_median_s), opt(r.handshake_max_s)),
            ),
            (
                "moved data after restart",
                format!("{} / {}", r.moved_data_after, self.vehicles),
            ),
            (
                "server RSS after restart",
                format!("{} kB", r.server_rss_after_kb),
            ),
        ];
        let mut rows = rows;
        for d in &c.silent {
            rows.push(("no ADU acknowledged", d.clone()));
        }
        for d in &l.starved_shown {
            rows.push(("starved under load", d.clone()));
        }
        let w = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in rows {
            let _ = writeln!(t, "  {k:<w$}  {v}");
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_when_equal_and_one_over_n_when_one_takes_all() {
        assert!((jain_index(&[3.0, 3.0, 3.0, 3.0]) - 1.0).abs() < 1e-12);
        assert!((jain_index(&[8.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert!((jain_index(&[1.0, 2.0]) - 0.9).abs() < 1e-12);
        assert_eq!(jain_index(&[]), 1.0);
    }
}
