//! Writing a [`Report`] as JSON and CSV files.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use super::report::Report;
use super::stats::Summary;

/// One CSV field: quoted only when it holds a comma, quote or line break (RFC 4180).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `f64` as its shortest round-trip text, `None` as an empty field.
fn num(v: Option<f64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn summary_header(prefix: &str) -> String {
    [
        "count", "mean", "min", "p25", "median", "p75", "p95", "p99", "max",
    ]
    .iter()
    .map(|s| format!("{prefix}_{s}"))
    .collect::<Vec<_>>()
    .join(",")
}

fn summary_row(s: &Summary) -> String {
    let cols = [s.mean, s.min, s.p25, s.median, s.p75, s.p95, s.p99, s.max];
    let mut row = s.count.to_string();
    for c in cols {
        row.push(',');
        row.push_str(&num(c));
    }
    row
}

impl Report {
    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        // Serialising plain structs, maps with string keys and numbers cannot fail.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// `report.json` in `dir` (created if missing).
    pub fn write_json(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("report.json"), self.to_json())
    }

    /// `streams.csv`: one row per stream; latency and RTT summaries in ms; then, per
    /// channel in report order, `adus_<name>` and `share_<name>`.
    pub fn streams_csv(&self) -> String {
        let mut out = String::from(
            "id,inserted,dropped,sent,transmissions,acked,lost,pending,delivered,loss_rate,\
             lost_correlated,correlated_loss_fraction,goodput_kbps,",
        );
        out.push_str(&summary_header("latency_ms"));
        out.push(',');
        out.push_str(&summary_header("rtt_ms"));
        for c in &self.channels {
            let _ = write!(
                out,
                ",{},{}",
                field(&format!("adus_{}", c.name)),
                field(&format!("share_{}", c.name))
            );
        }
        out.push('\n');
        for s in &self.streams {
            let _ = write!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                s.id,
                s.inserted,
                s.dropped,
                s.sent,
                s.transmissions,
                s.acked,
                s.lost,
                s.pending,
                s.delivered,
                num(s.loss_rate),
                s.lost_correlated,
                num(s.correlated_loss_fraction),
                s.goodput_kbps,
                summary_row(&s.latency_ms),
                summary_row(&s.rtt_ms),
            );
            for c in &self.channels {
                let n = s.channels.get(&c.name).copied().unwrap_or(0);
                let share = s.channel_share.get(&c.name).copied().unwrap_or(0.0);
                let _ = write!(out, ",{n},{share}");
            }
            out.push('\n');
        }
        out
    }

    /// `channels.csv`: one row per channel; `link_*` columns empty without link counters.
    pub fn channels_csv(&self) -> String {
        let mut out = String::from(
            "name,sent,lost,loss_rate,bytes_sent,control_sent,control_bytes,\
             link_offered,link_queue_drops,link_lost,link_delivered,link_bytes_delivered\n",
        );
        for c in &self.channels {
            let link = match c.link {
                Some(l) => format!(
                    "{},{},{},{},{}",
                    l.offered, l.queue_drops, l.lost, l.delivered, l.bytes_delivered
                ),
                None => ",,,,".to_string(),
            };
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{}",
                field(&c.name),
                c.sent,
                c.lost,
                num(c.loss_rate),
                c.bytes_sent,
                c.control_sent,
                c.control_bytes,
                link
            );
        }
        out
    }

    /// `latency_cdf.csv`: `stream,latency_ms,cdf`, the empirical CDF of each stream's ADU
    /// latency. One row per distinct latency value; `cdf` is the fraction of the
    /// stream's acked ADUs with latency at or below it.
    pub fn latency_cdf_csv(&self) -> String {
        let mut out = String::from("stream,latency_ms,cdf\n");
        for s in &self.streams {
            let v = &s.latency_samples_ms;
            let n = v.len() as f64;
            for (i, x) in v.iter().enumerate() {
                // Ties: keep only the last of a run of equal values (the step's top).
                if v.get(i + 1) == Some(x) {
                    continue;
                }
                let _ = writeln!(out, "{},{},{}", s.id, x, (i + 1) as f64 / n);
            }
        }
        out
    }

    /// `streams.csv`, `channels.csv` and `latency_cdf.csv` in `dir` (created if missing).
    pub fn write_csv(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("streams.csv"), self.streams_csv())?;
        std::fs::write(dir.join("channels.csv"), self.channels_csv())?;
        std::fs::write(dir.join("latency_cdf.csv"), self.latency_cdf_csv())
    }
}
