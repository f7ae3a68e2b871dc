//! UDP probes through a CDMA sector in virtual time: the thesis's Class 1 experiments
//! (CBR sweeps, on-off sources; 003 §6), one source per user, every packet acknowledged
//! over an uncongested uplink. The result is the per-second series the thesis logged.

use std::fmt::Write as _;
use std::str::FromStr;
use std::time::Duration;

use super::params::CdmaParams;
use super::sector::CdmaSector;
use crate::{Delivery, Verdict};

/// A UDP source.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Source {
    /// Constant bit rate (kbit/s).
    Cbr {
        /// Rate in kbit/s.
        kbps: f64,
    },
    /// `kbps` for `on_s` seconds, then silence for `off_s`, repeated.
    OnOff {
        /// Rate while on, kbit/s.
        kbps: f64,
        /// On period, s.
        on_s: f64,
        /// Off period, s.
        off_s: f64,
    },
}

impl Source {
    fn kbps(&self) -> f64 {
        match *self {
            Source::Cbr { kbps } | Source::OnOff { kbps, .. } => kbps,
        }
    }

    /// Whether the source sends at `t` seconds.
    pub fn is_on(&self, t: f64) -> bool {
        match *self {
            Source::Cbr { .. } => true,
            Source::OnOff { on_s, off_s, .. } => t.rem_euclid(on_s + off_s) < on_s,
        }
    }
}

/// `cbr:KBPS` or `onoff:KBPS:ON_S:OFF_S`.
impl FromStr for Source {
    type Err = String;

    fn from_str(s: &str) -> Result<Source, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let num = |i: usize, what: &str| -> Result<f64, String> {
            let v: f64 = parts[i]
                .parse()
                .map_err(|_| format!("`{s}`: {what} `{}` is not a number", parts[i]))?;
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(format!("`{s}`: {what} must be positive"))
            }
        };
        match (parts[0], parts.len()) {
            ("cbr", 2) => Ok(Source::Cbr {
                kbps: num(1, "rate")?,
            }),
            ("onoff", 4) => Ok(Source::OnOff {
                kbps: num(1, "rate")?,
                on_s: num(2, "on time")?,
                off_s: num(3, "off time")?,
            }),
            _ => Err(format!("`{s}`: expected cbr:KBPS or onoff:KBPS:ON_S:OFF_S")),
        }
    }
}

/// The same `cbr:KBPS` / `onoff:KBPS:ON_S:OFF_S` form the source was given in.
impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Source::Cbr { kbps } => write!(f, "cbr:{kbps}"),
            Source::OnOff { kbps, on_s, off_s } => write!(f, "onoff:{kbps}:{on_s}:{off_s}"),
        }
    }
}

/// The set-up of a probe run.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// The scheduler.
    pub params: CdmaParams,
    /// Per-user base-station buffer.
    pub buffer_bytes: u64,
    /// Base delay of the downlink (after the air interface), ms.
    pub down_delay_ms: f64,
    /// Delay of the acknowledgement path, ms.
    pub up_delay_ms: f64,
    /// UDP payload per packet.
    pub packet_bytes: u32,
    /// Length of the run.
    pub seconds: u64,
    /// RNG seed.
    pub seed: u64,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            params: CdmaParams::default(),
            buffer_bytes: 30_000,
            down_delay_ms: 250.0,
            up_delay_ms: 250.0,
            packet_bytes: 1000,
            seconds: 1200,
            seed: 1,
        }
    }
}

/// One second of one probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeSecond {
    /// Whole seconds since the start.
    pub second: u64,
    /// Sending rate of the source (kbit/s).
    pub send_kbps: f64,
    /// Time-averaged assigned channel rate (kbit/s).
    pub assigned_kbps: f64,
    /// Receiving rate at the mobile (kbit/s), by arrival time.
    pub recv_kbps: f64,
    /// Mean round trip of the packets sent in this second that arrived (ms; NaN if none).
    pub rtt_ms: f64,
    /// Fraction of the packets sent in this second that were lost (0 if none sent).
    pub loss: f64,
    /// Pilot Ec/Io (dB).
    pub ecio_db: f64,
    /// Active calls in the sector.
    pub calls: u32,
    /// Bytes in the base-station buffer at the end of the second.
    pub backlog_bytes: u64,
}

/// What one user's probe saw.
#[derive(Debug, Clone, Default)]
pub struct ProbeRun {
    /// One row per second.
    pub seconds: Vec<ProbeSecond>,
    /// Packets sent, delivered, dropped at the full buffer.
    pub sent: u64,
    /// Packets that arrived.
    pub delivered: u64,
    /// Round trip of every packet that arrived, in send order (ms).
    pub rtts_ms: Vec<f64>,
    /// Long-term cuts and burst caps the limiter imposed.
    pub denials: u32,
    /// Burst caps.
    pub caps: u32,
}

impl ProbeRun {
    /// Mean delivered rate over the run (kbit/s).
    pub fn goodput_kbps(&self) -> f64 {
        let n = self.seconds.len().max(1) as f64;
        self.seconds.iter().map(|s| s.recv_kbps).sum::<f64>() / n
    }

    /// The series as CSV with a header line.
    pub fn to_csv(&self) -> String {
        let mut s = String::from(
            "second,send_kbps,assigned_kbps,recv_kbps,rtt_ms,loss,ecio_db,calls,backlog_bytes\n",
        );
        for r in &self.seconds {
            let rtt = if r.rtt_ms.is_nan() {
                String::new()
            } else {
                format!("{:.1}", r.rtt_ms)
            };
            let _ = writeln!(
                s,
                "{},{:.3},{:.3},{:.3},{},{:.4},{:.2},{},{}",
                r.second,
                r.send_kbps,
                r.assigned_kbps,
                r.recv_kbps,
                rtt,
                r.loss,
                r.ecio_db,
                r.calls,
                r.backlog_bytes
            );
        }
        s
    }
}

/// Drive one source per user through one sector for `cfg.seconds`.
pub fn run(cfg: &ProbeConfig, sources: &[Source]) -> Vec<ProbeRun> {
    let n = sources.len();
    let delay = Duration::from_secs_f64(cfg.down_delay_ms.max(0.0) / 1e3);
    let up = cfg.up_delay_ms.max(0.0);
    let mut sector = CdmaSector::new(
        cfg.params.clone(),
        n,
        cfg.buffer_bytes,
        delay,
        cfg.seed,
        true,
    );
    let end = Duration::from_secs(cfg.seconds);
    let bits = f64::from(cfg.packet_bytes) * 8.0;
    let gap: Vec<Duration> = sources
        .iter()
        .map(|s| Duration::from_secs_f64(bits / (s.kbps() * 1e3)))
        .collect();
    let mut next_send: Vec<Duration> = vec![Duration::ZERO; n];
    let secs = cfg.seconds as usize;
    let mut sent_per_s = vec![vec![0u64; secs]; n];
    let mut arrived_per_s = vec![vec![0u64; secs]; n];
    let mut rtt_sum = vec![vec![0.0f64; secs]; n];
    let mut recv_bytes = vec![vec![0u64; secs]; n];
    let mut send_time: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut runs: Vec<ProbeRun> = vec![ProbeRun::default(); n];
    let mut out: Vec<Delivery> = Vec::new();
    loop {
        let mut tn = next_send.iter().copied().min().unwrap_or(end).min(end);
        for u in 0..n {
            if let Some(d) = sector.next_delivery(u) {
                tn = tn.min(d);
            }
        }
        if tn >= end {
            break;
        }
        for u in 0..n {
            out.clear();
            sector.deliver(u, tn, &mut out);
            for d in &out {
                let sent = send_time[u][d.id as usize];
                let rtt = (d.at.as_secs_f64() - sent) * 1e3 + up;
                let s = sent as usize;
                arrived_per_s[u][s] += 1;
                rtt_sum[u][s] += rtt;
                runs[u].rtts_ms.push(rtt);
                let r = (d.at.as_secs_f64() as usize).min(secs - 1);
                recv_bytes[u][r] += u64::from(cfg.packet_bytes);
            }
        }
        for u in 0..n {
            while next_send[u] <= tn {
                let ts = next_send[u];
                next_send[u] += gap[u];
                if !sources[u].is_on(ts.as_secs_f64()) {
                    continue;
                }
                let id = send_time[u].len() as u64;
                send_time[u].push(ts.as_secs_f64());
                sent_per_s[u][ts.as_secs() as usize] += 1;
                // Drop-tail refusals show up as packets that never arrive.
                let _: Verdict = sector.enqueue(u, ts, id, cfg.packet_bytes);
            }
        }
    }
    sector.advance(end);
    for (u, run) in runs.iter_mut().enumerate() {
        let log = sector.series(u);
        run.sent = send_time[u].len() as u64;
        run.delivered = run.rtts_ms.len() as u64;
        (run.denials, run.caps) = sector.limiter_events(u);
        for (i, l) in log.iter().enumerate().take(secs) {
            let sent = sent_per_s[u][i];
            let arrived = arrived_per_s[u][i];
            run.seconds.push(ProbeSecond {
                second: i as u64,
                send_kbps: sent as f64 * bits / 1e3,
                assigned_kbps: l.assigned_kbps,
                recv_kbps: recv_bytes[u][i] as f64 * 8.0 / 1e3,
                rtt_ms: if arrived > 0 {
                    rtt_sum[u][i] / arrived as f64
                } else {
                    f64::NAN
                },
                loss: if sent > 0 {
                    1.0 - arrived.min(sent) as f64 / sent as f64
                } else {
                    0.0
                },
                ecio_db: l.ecio_db,
                calls: l.calls,
                backlog_bytes: l.backlog_bytes,
            });
        }
    }
    runs
}
