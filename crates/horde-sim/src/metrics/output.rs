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

    /// `streams.csv`: one row per stream; latency, RTT, one-way and in-order delay
    /// summaries in ms; then, per channel in report order, `adus_<name>` and
    /// `share_<name>`.
    pub fn streams_csv(&self) -> String {
        let mut out = String::from(
            "id,inserted,dropped,sent,transmissions,acked,lost,pending,delivered,loss_rate,\
             lost_correlated,correlated_loss_fraction,goodput_kbps,delivered_bytes,\
             delivered_goodput_kbps,",
        );
        for (i, name) in [
            "latency_ms",
            "rtt_ms",
            "one_way_delay_ms",
            "in_order_delay_ms",
        ]
        .iter()
        .enumerate()
        {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&summary_header(name));
        }
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
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
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
                s.delivered_bytes,
                s.delivered_goodput_kbps,
                summary_row(&s.latency_ms),
                summary_row(&s.rtt_ms),
                summary_row(&s.one_way_delay_ms),
                summary_row(&s.in_order_delay_ms),
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

    /// `latency_cdf.csv`: `stream,latency_ms,cdf`, the CDF of each stream's ADU latency
    /// from its histogram: one row per non-empty bucket (values within 0.1 %), `cdf`
    /// the fraction of the stream's acked ADUs at or below it.
    pub fn latency_cdf_csv(&self) -> String {
        let mut out = String::from("stream,latency_ms,cdf\n");
        for s in &self.streams {
            for (x, p) in &s.latency_cdf {
                let _ = writeln!(out, "{},{},{}", s.id, x, p);
            }
        }
        out
    }

    /// `goodput.csv`: `stream,start_s,end_s,bytes,kbps`, each stream's delivered payload
    /// in each goodput interval.
    pub fn goodput_csv(&self) -> String {
        let mut out = String::from("stream,start_s,end_s,bytes,kbps\n");
        for s in &self.streams {
            let series = s
                .delivered_bytes_series
                .iter()
                .zip(&s.delivered_goodput_series_kbps);
            for (k, (bytes, kbps)) in series.enumerate() {
                let start = k as f64 * self.goodput_interval_s;
                let end = (start + self.goodput_interval_s).min(self.duration_s);
                let _ = writeln!(out, "{},{},{},{},{}", s.id, start, end, bytes, kbps);
            }
        }
        out
    }

    /// `streams.csv`, `channels.csv`, `latency_cdf.csv` and `goodput.csv` in `dir`
    /// (created if missing).
    pub fn write_csv(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("streams.csv"), self.streams_csv())?;
        std::fs::write(dir.join("channels.csv"), self.channels_csv())?;
        std::fs::write(dir.join("latency_cdf.csv"), self.latency_cdf_csv())?;
        std::fs::write(dir.join("goodput.csv"), self.goodput_csv())
    }
}
