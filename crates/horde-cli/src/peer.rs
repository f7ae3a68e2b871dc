//! `horde send` and `horde recv`: the two ends as separate processes (or hosts), with
//! streams, channels and keys from TOML files.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use horde_crypto::{Keypair, PublicKey};
use horde_net::{Host, HostConfig, InterfaceConfig, Reconnect};
use horde_proto::{CloseReason, Event};
use horde_proto::{InFlightPolicy, SessionConfig, StreamConfig};
use horde_sim::workload::WorkloadSpec;
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::app::{self, StreamPlan};
use crate::live::Live;
use crate::report::{render_recv, render_send, RecvReport, SendReport};
use crate::stamp;

mod channels;
mod checks;
pub(crate) use channels::{datagram_overhead, ChannelEntry};
pub(crate) use checks::device;
pub(crate) use horde_config::checks::{congestion, session};

#[derive(clap::Args)]
pub struct SendArgs {
    /// Sender configuration (TOML); see docs/cli.md.
    config: PathBuf,
    /// Override the run length in seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Print one JSON object (intervals and summary) at the end instead of tables.
    #[arg(long)]
    json: bool,
    /// Rewrite FILE every second with the peer and its channels, for `horde status FILE`.
    #[arg(long, value_name = "FILE")]
    status: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct RecvArgs {
    /// Receiver configuration (TOML); see docs/cli.md.
    config: PathBuf,
    /// Stop after this many seconds (default: run until the sender closes or Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
    /// Once a sender is connected, stop after this many seconds without data from it;
    /// 0 disables (default: `idle_timeout_s` from the file, 10).
    #[arg(long)]
    idle_timeout: Option<f64>,
    /// Print one JSON object (intervals and summary) at the end instead of tables.
    #[arg(long)]
    json: bool,
    /// Serve senders until `--duration` or Ctrl-C, however many come and go (by
    /// default the receiver also ends when its last sender closes).
    #[arg(long)]
    server: bool,
    /// Rewrite FILE every second with each sender and its channels, for `horde status
    /// FILE`.
    #[arg(long, value_name = "FILE")]
    status: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendConfig {
    /// Key file written by `horde keygen --out`.
    key_file: PathBuf,
    /// The receiver's public key.
    peer_key: String,
    #[serde(default = "default_service")]
    service: u32,
    #[serde(default)]
    seed: u64,
    #[serde(default = "default_duration")]
    duration_s: f64,
    #[serde(default)]
    session: SessionConfig,
    /// Scheduler name (see `horde sim --help`); default rrr.
    #[serde(default)]
    scheduler: Option<String>,
    /// Open a new session by itself, with backoff, when the receiver restarts, times
    /// out or becomes unreachable.
    #[serde(default = "default_reconnect")]
    reconnect: bool,
    channels: Vec<SendChannel>,
    streams: Vec<SendStream>,
}

/// A channel of `horde send`: 1200-byte ADUs unless its `mtu` says otherwise.
type SendChannel = ChannelEntry<1200>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendStream {
    id: u32,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    max_kbps: Option<f64>,
    #[serde(default)]
    ordered: bool,
    /// ADUs in flight when a session dies: `nack` (default) or `resend` on the next.
    #[serde(default)]
    on_reconnect: InFlightPolicy,
    workload: WorkloadSpec,
    #[serde(default)]
    objectives: Vec<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecvConfig {
    key_file: PathBuf,
    /// Public keys of senders allowed to connect.
    allowed_keys: Vec<String>,
    #[serde(default = "default_service")]
    service: u32,
    /// Seconds without data from a connected sender after which the receiver reports
    /// and exits; 0 disables.
    #[serde(default = "default_idle_timeout")]
    idle_timeout_s: f64,
    /// How long the in-order delay measure waits for a missing ADU before giving it up.
    #[serde(default = "default_in_order_hold")]
    in_order_hold_ms: f64,
    interfaces: Vec<RecvInterface>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecvInterface {
    bind: SocketAddr,
    #[serde(default)]
    device: Option<String>,
}

fn default_service() -> u32 {
    1
}
fn default_duration() -> f64 {
    30.0
}
fn default_reconnect() -> bool {
    true
}
fn default_idle_timeout() -> f64 {
    10.0
}
fn default_in_order_hold() -> f64 {
    100.0
}
/// Interval of the periodic report rows.
const REPORT_EVERY: Duration = Duration::from_secs(1);
/// How often the receiver looks for Ctrl-C.
const SIGINT_POLL: Duration = Duration::from_millis(50);

pub(crate) fn read_key(path: &Path, base: &Path) -> Result<Keypair> {
    let path = base.join(path);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading key file {}", path.display()))?;
    text.parse::<Keypair>()
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

pub(crate) fn public_key(text: &str, what: &str) -> Result<PublicKey> {
    text.trim()
        .parse::<PublicKey>()
        .map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

pub(crate) fn base_dir(config: &Path) -> PathBuf {
    config.parent().map(Path::to_path_buf).unwrap_or_default()
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

pub fn send(args: SendArgs) -> Result<ExitCode> {
    let cfg = checks::load_send(&args.config)?;
    let base = base_dir(&args.config);
    let keypair = read_key(&cfg.key_file, &base)?;
    let our_key = *keypair.public();
    let peer = public_key(&cfg.peer_key, "peer_key")?;
    let duration = crate::emu::seconds(args.duration.unwrap_or(cfg.duration_s))?;
    let plans = cfg
        .streams
        .iter()
        .map(|s| {
            Ok(StreamPlan {
                id: s.id,
                name: s.name.clone().unwrap_or_else(|| format!("stream {}", s.id)),
                config: StreamConfig {
                    max_kbps: s.max_kbps,
                    ordered: s.ordered,
                    on_reconnect: s.on_reconnect,
                    ..StreamConfig::default()
                },
                workload: s.workload.clone(),
                objectives: s
                    .objectives
                    .iter()
                    .map(|p| crate::hose::load(&base.join(p)))
                    .collect::<Result<_>>()?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let scheduler = crate::hose::scheduler(cfg.scheduler.as_deref().unwrap_or("rrr"))?;
    let max_adu = cfg.channels.iter().map(|c| c.mtu).min().unwrap_or(1200);
    let channel_names: Vec<String> = cfg
        .channels
        .iter()
        .enumerate()
        .map(|(i, c)| c.name.clone().unwrap_or_else(|| format!("ch{i}")))
        .collect();
    let sigint = crate::sigint::Guard::install()?;
    runtime()?.block_on(async move {
        let mut host_cfg = HostConfig::new(keypair, SendChannel::interfaces(&cfg.channels));
        host_cfg.session = cfg.session.clone();
        host_cfg.scheduler = Some(scheduler);
        let host = bind(host_cfg).await?;
        let target = SendChannel::connect_config(
            &cfg.channels,
            peer,
            cfg.service,
            Duration::from_secs(10),
        );
        let conn = if cfg.reconnect {
            host.connect_persistent(target, Reconnect::default()).await
        } else {
            host.connect(target).await
        }
        .map_err(|e| crate::hint::handshake(e, &our_key, &cfg.peer_key))?;
        let status = args.status.clone().map(|path| {
            let registry = crate::status::Registry::default();
            registry.track(peer.to_string(), conn.handle().clone());
            crate::status::spawn_writer(path, "send", our_key.to_string(), registry)
        });
        let live = Arc::new(Mutex::new(Live::default()));
        let locals = host.local_addrs().to_vec();
        let channels_json: Vec<serde_json::Value> = cfg
            .channels
            .iter()
            .zip(&channel_names)
            .zip(&locals)
            .enumerate()
            .map(|(i, ((c, name), local))| {
                if !args.json {
                    println!("channel {name}: {local} -> {}", c.remote);
                }
                serde_json::json!({ "id": i, "name": name, "local": local.to_string(), "remote": c.remote.to_string() })
            })
            .collect();
        let report = Arc::new(Mutex::new(SendReport::new(
            app::names(&plans),
            channel_names.clone(),
        )));
        let (l2, r2, json) = (live.clone(), report.clone(), args.json);
        app::run_sender(
            conn,
            &plans,
            duration,
            cfg.seed,
            max_adu,
            live.clone(),
            move |t| {
                let l = l2.lock().expect("live lock");
                let mut r = r2.lock().expect("report lock");
                let since = r.intervals.last().map_or(0.0, |i| i.end_s);
                if t.as_secs_f64() - since < 0.01 {
                    return; // nothing left of this interval
                }
                let row = r.interval(&l, t);
                if !json {
                    print!("{}", render_send(row));
                }
            },
        )
        .await?;
        if let Some(task) = status {
            task.abort();
        }
        // The connection is closed; the host waits for any other Close to be acked.
        let stats = host.stats().await?;
        host.shutdown().await;
        let l = live.lock().expect("live lock");
        let r = report.lock().expect("report lock");
        let ran = r.intervals.last().map_or(duration, |i| Duration::from_secs_f64(i.end_s));
        let summary = r.summary(&l, ran);
        // Every ADU is acked, lost, dropped from the queue or abandoned at close.
        let unaccounted: u64 = summary
            .streams
            .iter()
            .map(|s| s.sent.saturating_sub(s.acked + s.lost + s.dropped + s.abandoned))
            .sum();
        if args.json {
            let out = serde_json::json!({
                "role": "send",
                "channels": channels_json,
                "intervals": r.intervals,
                "summary": summary,
                "unaccounted": unaccounted,
                "reconnects": stats.reconnects,
                "interrupted": sigint.interrupted(),
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            print!("summary\n{}", render_send(&summary));
            println!(
                "reconnects: {}; ADUs unaccounted for: {unaccounted}",
                stats.reconnects
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}

pub fn recv(args: RecvArgs) -> Result<ExitCode> {
    let cfg = checks::load_recv(&args.config)?;
    let base = base_dir(&args.config);
    let keypair = read_key(&cfg.key_file, &base)?;
    let our_key = keypair.public().to_string();
    let allowed = cfg
        .allowed_keys
        .iter()
        .enumerate()
        .map(|(i, k)| public_key(k, &format!("allowed_keys[{i}]")))
        .collect::<Result<Vec<_>>>()?;
    let until = args.duration.map(crate::emu::seconds).transpose()?;
    let idle_s = args.idle_timeout.unwrap_or(cfg.idle_timeout_s);
    anyhow::ensure!(
        idle_s.is_finite() && idle_s >= 0.0,
        "idle timeout must be 0 (off) or a positive number of seconds, got {idle_s}"
    );
    let idle = (idle_s > 0.0).then(|| Duration::from_secs_f64(idle_s));
    let hold = Duration::from_secs_f64(cfg.in_order_hold_ms.max(0.0) / 1e3);
    let json = args.json;
    let sigint = crate::sigint::Guard::install()?;
    runtime()?.block_on(async move {
        let mut host_cfg = HostConfig::new(
            keypair,
            cfg.interfaces
                .iter()
                .map(|i| InterfaceConfig {
                    bind: i.bind,
                    device: i.device.clone(),
                })
                .collect(),
        );
        host_cfg.allowed_peers = allowed;
        let host = bind(host_cfg).await?;
        if !json {
            println!(
                "listening on {:?} for service {}",
                host.local_addrs(),
                cfg.service
            );
        }
        let listener = host.listen(cfg.service);
        let limits = Limits {
            deadline: until.map(|d| Instant::now() + d),
            idle,
            sigint: &sigint,
            server: args.server,
        };
        let mut serve = Serve::new(hold, json);
        let status = args
            .status
            .clone()
            .map(|path| crate::status::spawn_writer(path, "recv", our_key, serve.registry.clone()));
        let end = serve.run(listener, &limits).await;
        if let Some(task) = status {
            task.abort();
        }
        let stats = host.stats().await?;
        host.shutdown().await;
        if serve.senders.is_empty() {
            if json {
                println!(
                    "{}",
                    serde_json::json!({
                        "role": "recv",
                        "end": "no sender",
                        "dropped_by_reason": crate::drops::to_json(&stats.dropped),
                    })
                );
            } else {
                println!("no sender connected");
                print!("{}", crate::drops::render(&stats.dropped));
            }
            return Ok(ExitCode::SUCCESS);
        }
        let report = &mut serve.all;
        // The partial interval since the last row, unless it is too short to rate.
        let now = stamp::unix_micros();
        let since = report.intervals.last().map_or(0.0, |i| i.end_s);
        if report.secs(now) - since >= 0.01 {
            let last = report.interval(now);
            if !json {
                print!("{}", render_recv(last));
            }
        }
        let summary = report.summary();
        let senders: Vec<serde_json::Value> =
            serve.senders.iter_mut().map(SenderRx::summarize).collect();
        if json {
            let out = serde_json::json!({
                "role": "recv",
                "end": end.as_str(),
                "intervals": report.intervals,
                "summary": summary,
                "senders": senders,
                "sessions_replaced": stats.sessions_replaced,
                "dropped_by_secure_layer": stats.dropped.total(),
                "dropped_by_reason": crate::drops::to_json(&stats.dropped),
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            println!("ended: {}", end.as_str());
            print!("summary\n{}", render_recv(&summary));
            for s in &summary.streams {
                println!(
                    "stream {}: received {} ADUs, {:.0} kbit/s",
                    s.id, s.received, s.goodput_kbps
                );
            }
            for s in &senders {
                println!(
                    "sender {} (key {}): {}",
                    s["id"],
                    s["peer"].as_str().unwrap_or("?"),
                    s["end"].as_str().unwrap_or("?")
                );
                for st in s["summary"]["streams"].as_array().into_iter().flatten() {
                    println!(
                        "  stream {}: received {} ADUs, {:.0} kbit/s",
                        st["id"],
                        st["received"],
                        st["goodput_kbps"].as_f64().unwrap_or(0.0)
                    );
                }
            }
            print!("{}", crate::drops::render(&stats.dropped));
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// When the receiver stops waiting.
struct Limits<'a> {
    deadline: Option<Instant>,
    idle: Option<Duration>,
    sigint: &'a crate::sigint::Guard,
    /// Keep serving when the last sender closes.
    server: bool,
}

/// Why the receiver stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Closed,
    Idle,
    Duration,
    Interrupted,
}

impl End {
    fn as_str(self) -> &'static str {
        match self {
            End::Closed => "sender closed",
            End::Idle => "idle timeout",
            End::Duration => "duration reached",
            End::Interrupted => "interrupted",
        }
    }
}

/// One accepted connection, as `recv` reports it.
struct SenderRx {
    id: usize,
    peer: String,
    report: RecvReport,
    /// Why its session ended, once it has.
    end: Option<CloseReason>,
    /// The summary of a connection that is over. Its report (histograms of some 15 kB
    /// each) is dropped then, so that a server's memory does not grow with every
    /// connection it has served.
    finished: Option<serde_json::Value>,
}

impl SenderRx {
    /// The connection is over: keep its summary only.
    fn finish(&mut self) {
        let summary = self.summarize();
        self.finished = Some(summary);
        self.report = RecvReport::new(Duration::ZERO, 0);
    }

    fn summarize(&mut self) -> serde_json::Value {
        if let Some(done) = &self.finished {
            return done.clone();
        }
        let summary = self.report.summary();
        serde_json::json!({
            "id": self.id,
            "peer": self.peer,
            "end": self.end.map_or("open", CloseReason::as_str),
            "first_arrival_unix_us": self.report.first_arrival_us(),
            "summary": summary,
        })
    }
}

/// What a connection's forwarding task tells the server loop: an event, or that the
/// connection is over (`None`).
type FromSender = (usize, Option<Event>);

/// The receiver in server mode: every accepted connection is read at once by a task of
/// its own (so that it never holds its sender back needlessly), and its events are
/// counted per sender and in total.
struct Serve {
    hold: Duration,
    json: bool,
    all: RecvReport,
    senders: Vec<SenderRx>,
    open: usize,
    last_end: Option<CloseReason>,
    /// The accepted connections, for `--status`.
    registry: crate::status::Registry,
}

impl Serve {
    fn new(hold: Duration, json: bool) -> Self {
        Self {
            hold,
            json,
            all: RecvReport::new(hold, stamp::unix_micros()),
            senders: Vec::new(),
            open: 0,
            last_end: None,
            registry: crate::status::Registry::default(),
        }
    }

    fn accepted(
        &mut self,
        mut conn: horde_net::Connection,
        tx: &mpsc::UnboundedSender<FromSender>,
    ) {
        let id = self.senders.len();
        let peer = conn.peer().map_or_else(|| "?".into(), ToString::to_string);
        self.registry.track(peer.clone(), conn.handle().clone());
        if !self.json {
            println!("sender {id} connected (key {peer})");
        }
        self.senders.push(SenderRx {
            id,
            peer,
            report: RecvReport::new(self.hold, stamp::unix_micros()),
            end: None,
            finished: None,
        });
        self.open += 1;
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(e) = conn.next_event().await {
                let last = matches!(e, Event::Closed { .. });
                let _ = tx.send((id, Some(e)));
                if last {
                    break;
                }
            }
            let _ = tx.send((id, None));
        });
    }

    /// Serve until every sender has closed (unless `--server`), the idle timeout,
    /// `--duration` or Ctrl-C. The idle timeout counts once a sender is connected.
    async fn run(&mut self, mut listener: horde_net::Listener, limits: &Limits<'_>) -> End {
        let (tx, mut rx) = mpsc::unbounded_channel::<FromSender>();
        let mut next_row = Instant::now() + REPORT_EVERY;
        let mut idle_at: Option<Instant> = None;
        let mut listening = true;
        loop {
            let mut wake = Instant::now() + SIGINT_POLL;
            if !self.senders.is_empty() {
                wake = wake.min(next_row);
            }
            for t in [limits.deadline, idle_at].into_iter().flatten() {
                wake = wake.min(t);
            }
            tokio::select! {
                c = listener.accept(), if listening => match c {
                    Some(c) => {
                        self.accepted(c, &tx);
                        if self.senders.len() == 1 {
                            // Rows start with the first sender.
                            self.all = RecvReport::new(self.hold, stamp::unix_micros());
                            next_row = Instant::now() + REPORT_EVERY;
                        }
                        idle_at = limits.idle.map(|d| Instant::now() + d);
                    }
                    None => listening = false,
                },
                m = rx.recv() => match m {
                    Some((id, Some(Event::Received { stream, channel, payload, .. }))) => {
                        let now = stamp::unix_micros();
                        self.all.on_received(stream, u8::from(channel), &payload, now);
                        self.senders[id].report.on_received(stream, u8::from(channel), &payload, now);
                        idle_at = limits.idle.map(|d| Instant::now() + d);
                    }
                    Some((id, Some(Event::Closed { reason }))) => {
                        self.senders[id].end = Some(reason);
                        self.last_end = Some(reason);
                        if !self.json {
                            println!("sender {id}: {}", reason.as_str());
                        }
                    }
                    Some((id, None)) => {
                        self.senders[id].finish();
                        self.open -= 1;
                        let closed = matches!(
                            self.last_end,
                            Some(CloseReason::PeerClosed | CloseReason::LocalClose)
                        );
                        if self.open == 0 && closed && !limits.server {
                            return End::Closed;
                        }
                    }
                    Some(_) | None => {}
                },
                _ = tokio::time::sleep_until(wake) => {}
            }
            let now = Instant::now();
            if limits.sigint.interrupted() {
                return End::Interrupted;
            }
            if limits.deadline.is_some_and(|d| now >= d) {
                return End::Duration;
            }
            if !limits.server && idle_at.is_some_and(|t| now >= t) {
                return End::Idle;
            }
            if !self.senders.is_empty() && now >= next_row {
                next_row += REPORT_EVERY;
                let row = self.all.interval(stamp::unix_micros());
                if !self.json {
                    print!("{}", render_recv(row));
                }
            }
        }
    }
}

/// Bind the host's sockets; a failure names the addresses (the OS error alone does not).
async fn bind(cfg: HostConfig) -> Result<Host> {
    let addresses: Vec<String> = cfg
        .interfaces
        .iter()
        .map(|i| match &i.device {
            Some(d) => format!("{} on {d}", i.bind),
            None => i.bind.to_string(),
        })
        .collect();
    Host::bind(cfg)
        .await
        .with_context(|| format!("cannot bind {}", addresses.join(", ")))
}

#[cfg(test)]
mod sender_rx_tests {
    use super::*;

    fn adu(sent_us: u64, seq: u64) -> Vec<u8> {
        let mut p = sent_us.to_be_bytes().to_vec();
        p.extend_from_slice(&seq.to_be_bytes());
        p.resize(500, 0);
        p
    }

    #[test]
    fn a_finished_connection_keeps_its_summary_and_drops_its_report() {
        let mut s = SenderRx {
            id: 3,
            peer: "k".into(),
            report: RecvReport::new(Duration::from_millis(100), 1_000_000),
            end: Some(CloseReason::PeerClosed),
            finished: None,
        };
        for i in 0..50u64 {
            let at = 1_000_000 + i * 10_000;
            s.report.on_received(1, 0, &adu(at - 2_000, i), at);
        }
        s.finish();
        assert!(s.report.first_arrival_us().is_none(), "report not dropped");
        let v = s.summarize();
        assert_eq!(v["id"], 3);
        assert_eq!(v["end"], "peer closed");
        assert_eq!(v["first_arrival_unix_us"], 1_000_000);
        assert_eq!(v["summary"]["streams"][0]["received"], 50, "{v}");
    }
}
