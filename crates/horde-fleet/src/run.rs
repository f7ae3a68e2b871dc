//! A fleet run, phase by phase: the server starts empty; every vehicle connects; all
//! sit idle (memory and CPU of the server); all send at once (goodput and fairness);
//! the server is killed with SIGKILL and started again while the vehicles send
//! telemetry (how fast all are back, and whether each moves data again).

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use horde_proto::SessionConfig;

use crate::driver::{Fleet, Mode};
use crate::keys::{server_keypair, vehicle_keypair};
use crate::procstat::{cpu_s, loadavg, rss_kb};
use crate::report::{
    jain_index, ConnectFigures, FleetReport, IdleFigures, LoadFigures, RestartFigures,
};
use crate::server::{Server, ServerCommand, ServerTimers};
use crate::sockets::raise_fd_limit;
use crate::vehicle::{Vehicle, VehiclePlan, CHANNELS};

/// The most vehicles the loopback address plan has room for.
pub const MAX_VEHICLES: u32 = 60_000;
/// Vehicles without an acknowledged ADU (after connecting, or under load) described in
/// the report, at most.
const SILENT_SHOWN: usize = 5;
/// Settling time after a phase, before the next measures anything.
const SETTLE: Duration = Duration::from_secs(2);

/// What a fleet run does.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    pub vehicles: u32,
    pub server: ServerCommand,
    /// Draws the keys.
    pub seed: u64,
    /// Keepalive interval of the vehicles and the server, s; the idle timeout of both is
    /// three of them.
    pub keepalive_s: f64,
    /// How long the idle measurement lasts at least, s (rounded up to a whole number of
    /// keepalive intervals).
    pub idle_s: f64,
    /// How long all vehicles send at once, s.
    pub load_s: f64,
    pub adu_bytes: usize,
    /// Each vehicle's telemetry interval around the restart, s.
    pub telemetry_s: f64,
    /// How long connecting, and reconnecting after the restart, may take, s.
    pub limit_s: f64,
    /// All three channels of a vehicle send from one socket: N descriptors instead
    /// of 3N, where the open-file limit cannot be raised that far.
    pub one_socket: bool,
    /// Where the server's files go (a fresh directory is made inside).
    pub work_dir: PathBuf,
}

impl FleetConfig {
    fn check(&self) -> Result<()> {
        if self.vehicles == 0 || self.vehicles > MAX_VEHICLES {
            bail!(
                "--vehicles must be 1..={MAX_VEHICLES}, got {}",
                self.vehicles
            );
        }
        for (name, v) in [
            ("--keepalive", self.keepalive_s),
            ("--idle", self.idle_s),
            ("--load", self.load_s),
            ("--telemetry", self.telemetry_s),
            ("--limit", self.limit_s),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
                bail!("{name} must be a positive number of seconds up to a day, got {v}");
            }
        }
        if !(16..=60_000).contains(&self.adu_bytes) {
            bail!("--adu-bytes must be 16..=60000, got {}", self.adu_bytes);
        }
        Ok(())
    }
}

impl FleetConfig {
    /// A bound on the whole run, s: every phase at its longest, twice over.
    fn max_run_s(&self) -> f64 {
        let idle = self.keepalive_s + idle_window_s(self.idle_s, self.keepalive_s);
        let phases = 2.0 * self.limit_s + idle + self.load_s + 5.0 * self.telemetry_s;
        2.0 * (phases + 60.0)
    }
}

/// The median of `x`, which is left sorted; `None` if empty.
fn median(x: &mut [f64]) -> Option<f64> {
    x.sort_by(f64::total_cmp);
    x.get(x.len() / 2).copied()
}

/// The idle window: `idle_s` rounded up to a whole number of keepalive intervals.
fn idle_window_s(idle_s: f64, keepalive_s: f64) -> f64 {
    (idle_s / keepalive_s).ceil().max(1.0) * keepalive_s
}

fn secs(x: f64) -> Duration {
    Duration::from_secs_f64(x)
}

/// Run the whole load test.
pub fn run(cfg: &FleetConfig) -> Result<FleetReport> {
    cfg.check()?;
    let n = cfg.vehicles;
    let sockets = if cfg.one_socket { 1 } else { CHANNELS as u64 };
    raise_fd_limit(u64::from(n) * sockets + 256)?;
    let loadavg_start = loadavg();
    let dir = cfg.work_dir.join(format!(
        "horde-fleet-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let result = run_in(cfg, &dir, loadavg_start);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run_in(cfg: &FleetConfig, dir: &std::path::Path, loadavg_start: String) -> Result<FleetReport> {
    let n = cfg.vehicles;
    let server_key = server_keypair(cfg.seed);
    let keys: Vec<_> = (0..n).map(|i| vehicle_keypair(cfg.seed, i)).collect();
    let publics: Vec<_> = keys.iter().map(|k| *k.public()).collect();
    let keepalive_ms = cfg.keepalive_s * 1e3;
    let timers = ServerTimers {
        keepalive_ms,
        idle_timeout_ms: 3.0 * keepalive_ms,
    };
    let mut server = Server::prepare(
        cfg.server.clone(),
        dir,
        &server_key,
        &publics,
        &timers,
        cfg.max_run_s(),
    )?;
    server.start()?;
    std::thread::sleep(Duration::from_millis(500));
    let pid = server.pid().context("server not running")?;
    let rss_empty = rss_kb(pid)?;

    // Connect.
    let start = Instant::now();
    let mut fleet = Fleet::new(start, cfg.adu_bytes)?;
    let plan = VehiclePlan {
        server_key: *server_key.public(),
        server_addr: server.addr,
        session: SessionConfig {
            keepalive_ms,
            idle_timeout_ms: 3.0 * keepalive_ms,
            ..SessionConfig::default()
        },
        seed: cfg.seed,
        unix_micros_at_start: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64),
        one_socket: cfg.one_socket,
    };
    for (i, k) in keys.into_iter().enumerate() {
        let now = fleet.now();
        fleet.add(Vehicle::new(i as u32, k, &plan, now)?)?;
    }
    let t0 = fleet.now();
    let all_up = |f: &Fleet| {
        f.vehicles
            .iter()
            .all(|v| v.first_acked_at.is_some() || v.failed.is_some())
    };
    fleet.run_for(secs(cfg.limit_s), all_up)?;
    let connected = fleet
        .vehicles
        .iter()
        .filter(|v| v.connected_at.is_some())
        .count() as u32;
    let last_up = fleet.vehicles.iter().filter_map(|v| v.connected_at).max();
    let moving = fleet
        .vehicles
        .iter()
        .filter(|v| v.first_acked_at.is_some())
        .count() as u32;
    let last_moving = fleet.vehicles.iter().filter_map(|v| v.first_acked_at).max();
    let failed: Vec<_> = fleet
        .vehicles
        .iter()
        .filter_map(|v| v.failed.clone())
        .collect();
    let connect = ConnectFigures {
        connected,
        all_connected_s: (connected == n)
            .then(|| last_up.map(|t| t.saturating_sub(t0).as_secs_f64()))
            .flatten(),
        handshakes_per_s: last_up.map_or(0.0, |t| {
            f64::from(connected) / t.saturating_sub(t0).as_secs_f64().max(1e-3)
        }),
        moved_data: moving,
        all_moved_data_s: (moving == n)
            .then(|| last_moving.map(|t| t.saturating_sub(t0).as_secs_f64()))
            .flatten(),
        failed: failed.len() as u32,
        first_failure: failed.first().cloned(),
        silent: fleet
            .vehicles
            .iter()
            .enumerate()
            .filter(|(_, v)| v.first_acked_at.is_none())
            .take(SILENT_SHOWN)
            .map(|(i, v)| format!("vehicle {i}: {}", v.describe()))
            .collect(),
    };

    // Idle, in steady state: the fleet's first keepalive round (one keepalive interval
    // after the last vehicle's first ADU) is let pass, and the window spans a whole
    // number of keepalive intervals, so that each channel's keepalives fall in it
    // equally often whatever their phase.
    fleet.run_for(SETTLE, |_| false)?;
    let rss_connected = rss_kb(pid)?;
    let first_round_done = last_moving.unwrap_or(fleet.now()) + secs(cfg.keepalive_s) + SETTLE;
    fleet.run_for(first_round_done.saturating_sub(fleet.now()), |_| false)?;
    let me = std::process::id();
    let (s0, g0, tr0, w0) = (cpu_s(pid)?, cpu_s(me)?, fleet.traffic, Instant::now());
    fleet.run_for(secs(idle_window_s(cfg.idle_s, cfg.keepalive_s)), |_| false)?;
    let window = w0.elapsed().as_secs_f64();
    let (s1, g1, tr1) = (cpu_s(pid)?, cpu_s(me)?, fleet.traffic);
    let idle = IdleFigures {
        server_rss_empty_kb: rss_empty,
        server_rss_connected_kb: rss_connected,
        server_bytes_per_vehicle: (rss_connected as f64 - rss_empty as f64) * 1024.0 / f64::from(n),
        window_s: window,
        server_cpu_pct: (s1 - s0) / window * 100.0,
        generator_cpu_pct: (g1 - g0) / window * 100.0,
        datagrams_per_s: ((tr1.sent - tr0.sent) + (tr1.received - tr0.received)) as f64 / window,
    };

    // Everyone sends at once.
    fleet.start_bulk(Duration::from_secs(1));
    fleet.run_for(Duration::from_secs(1), |_| false)?;
    let acked0: Vec<u64> = fleet.vehicles.iter().map(|v| v.acked).collect();
    let (s0, w0) = (cpu_s(pid)?, Instant::now());
    fleet.run_for(secs(cfg.load_s), |_| false)?;
    let window = w0.elapsed().as_secs_f64();
    let s1 = cpu_s(pid)?;
    let kbps: Vec<f64> = fleet
        .vehicles
        .iter()
        .zip(&acked0)
        .map(|(v, &a0)| (v.acked - a0) as f64 * cfg.adu_bytes as f64 * 8.0 / 1e3 / window)
        .collect();
    let mut sorted = kbps.clone();
    sorted.sort_by(f64::total_cmp);
    let load = LoadFigures {
        window_s: window,
        adu_bytes: cfg.adu_bytes,
        total_goodput_mbps: kbps.iter().sum::<f64>() / 1e3,
        min_kbps: sorted.first().copied().unwrap_or(0.0),
        median_kbps: sorted.get(sorted.len() / 2).copied().unwrap_or(0.0),
        max_kbps: sorted.last().copied().unwrap_or(0.0),
        jain: jain_index(&kbps),
        starved: kbps.iter().filter(|&&k| k == 0.0).count() as u32,
        starved_shown: fleet
            .vehicles
            .iter()
            .enumerate()
            .filter(|&(i, _)| kbps[i] == 0.0)
            .take(SILENT_SHOWN)
            .map(|(i, v)| format!("vehicle {i}: {}", v.describe()))
            .collect(),
        server_cpu_pct: (s1 - s0) / window * 100.0,
    };

    // Kill the server and start it again while the vehicles send telemetry.
    fleet.mode = Mode::Telemetry(secs(cfg.telemetry_s));
    fleet.kick_all();
    fleet.run_for(SETTLE, |_| false)?;
    for v in &mut fleet.vehicles {
        v.reconnects_base = v.host.counters().reconnects;
        v.reconnected_at = None;
        v.lost_at = None;
        v.watch_loss = true;
    }
    let killed = fleet.now();
    server.kill();
    server.start()?;
    let server_down_s = (fleet.now() - killed).as_secs_f64();
    let pid = server.pid().context("server not running")?;
    let all_back = |f: &Fleet| f.vehicles.iter().all(|v| v.reconnected_at.is_some());
    fleet.run_for(secs(cfg.limit_s), all_back)?;
    // Each vehicle that came back gets a few telemetry intervals to be heard.
    let moved = |f: &Fleet| {
        f.vehicles
            .iter()
            .filter(|v| v.reconnected_at.is_some())
            .all(|v| v.acked > v.acked_at_reconnect)
    };
    fleet.run_for(secs(3.0 * cfg.telemetry_s + 2.0), moved)?;
    let back: Vec<Duration> = fleet
        .vehicles
        .iter()
        .filter_map(|v| v.reconnected_at)
        .collect();
    let first = back
        .iter()
        .min()
        .map(|t| t.saturating_sub(killed).as_secs_f64());
    let last = back
        .iter()
        .max()
        .map(|t| t.saturating_sub(killed).as_secs_f64());
    let reconnected = back.len() as u32;
    // How long each vehicle took to notice, and then to handshake again.
    let mut noticed: Vec<f64> = fleet
        .vehicles
        .iter()
        .filter_map(|v| v.lost_at.map(|t| t.saturating_sub(killed).as_secs_f64()))
        .collect();
    let mut handshake: Vec<f64> = fleet
        .vehicles
        .iter()
        // A vehicle can lose its new session again after reconnecting: only a loss
        // before the reconnection counts.
        .filter_map(|v| {
            let (back, lost) = (v.reconnected_at?, v.lost_at?);
            (back >= lost).then(|| (back - lost).as_secs_f64())
        })
        .collect();
    let mut per_second = std::collections::BTreeMap::<u64, u32>::new();
    for t in &back {
        *per_second
            .entry(t.saturating_sub(killed).as_secs())
            .or_default() += 1;
    }
    let restart = RestartFigures {
        server_down_s,
        reconnected,
        not_reconnected: n - reconnected,
        first_reconnect_s: first,
        all_reconnected_s: (reconnected == n).then_some(last).flatten(),
        handshakes_per_s: match (first, last) {
            (Some(a), Some(b)) => f64::from(reconnected) / (b - a).max(1e-3),
            _ => 0.0,
        },
        noticed_median_s: median(&mut noticed),
        noticed_max_s: noticed.last().copied(),
        handshake_median_s: median(&mut handshake),
        handshake_max_s: handshake.last().copied(),
        peak_reconnects_per_s: per_second.values().copied().max().unwrap_or(0),
        moved_data_after: fleet
            .vehicles
            .iter()
            .filter(|v| v.reconnected_at.is_some() && v.acked > v.acked_at_reconnect)
            .count() as u32,
        server_rss_after_kb: rss_kb(pid)?,
    };
    server.kill();
    Ok(FleetReport {
        vehicles: n,
        channels_per_vehicle: CHANNELS,
        sockets_per_vehicle: if cfg.one_socket { 1 } else { CHANNELS },
        keepalive_s: cfg.keepalive_s,
        loadavg_start,
        loadavg_end: loadavg(),
        connect,
        idle,
        load,
        restart,
        datagrams_sent: fleet.traffic.sent,
        datagrams_received: fleet.traffic.received,
        send_errors: fleet.traffic.send_errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idle_window_spans_whole_keepalive_intervals() {
        assert_eq!(idle_window_s(20.0, 10.0), 20.0);
        assert_eq!(idle_window_s(20.0, 25.0), 25.0);
        assert_eq!(idle_window_s(30.0, 25.0), 50.0);
        assert_eq!(idle_window_s(1.0, 10.0), 10.0);
    }
}
