//! `horde send` and `horde recv`: the two ends as separate processes (or hosts), with
//! streams, channels and keys from TOML files.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use horde_crypto::{Keypair, PublicKey};
use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, InterfaceConfig};
use horde_proto::{CcConfig, ChannelConfig, SessionConfig, StreamConfig};
use horde_sim::workload::WorkloadSpec;
use serde::Deserialize;

use crate::app::{self, StreamPlan};
use crate::live::Live;

#[derive(clap::Args)]
pub struct SendArgs {
    /// Sender configuration (TOML); see docs/cli.md.
    config: PathBuf,
    /// Override the run length in seconds.
    #[arg(long)]
    duration: Option<f64>,
}

#[derive(clap::Args)]
pub struct RecvArgs {
    /// Receiver configuration (TOML); see docs/cli.md.
    config: PathBuf,
    /// Stop after this many seconds (default: run until the sender closes or Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
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
    channels: Vec<SendChannel>,
    streams: Vec<SendStream>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendChannel {
    bind: SocketAddr,
    #[serde(default)]
    device: Option<String>,
    remote: SocketAddr,
    #[serde(default = "default_mtu")]
    mtu: u32,
    #[serde(default)]
    congestion: CcConfig,
    #[serde(default)]
    cost_per_kb: f64,
}

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
fn default_mtu() -> u32 {
    1200
}

fn read_key(path: &Path, base: &Path) -> Result<Keypair> {
    let path = base.join(path);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading key file {}", path.display()))?;
    text.parse::<Keypair>()
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

fn public_key(text: &str, what: &str) -> Result<PublicKey> {
    text.trim()
        .parse::<PublicKey>()
        .map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

fn base_dir(config: &Path) -> PathBuf {
    config.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

pub fn send(args: SendArgs) -> Result<ExitCode> {
    let cfg: SendConfig = horde_config::load(&args.config)?;
    let base = base_dir(&args.config);
    let keypair = read_key(&cfg.key_file, &base)?;
    let peer = public_key(&cfg.peer_key, "peer_key")?;
    anyhow::ensure!(
        !cfg.channels.is_empty(),
        "{}: at least one [[channels]] entry is needed",
        args.config.display()
    );
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
    runtime()?.block_on(async move {
        let mut host_cfg = HostConfig::new(
            keypair,
            cfg.channels
                .iter()
                .map(|c| InterfaceConfig {
                    bind: c.bind,
                    device: c.device.clone(),
                })
                .collect(),
        );
        host_cfg.session = cfg.session.clone();
        host_cfg.scheduler = Some(scheduler);
        let host = Host::bind(host_cfg).await?;
        let conn = host
            .connect(ConnectConfig {
                peer,
                service: cfg.service,
                channels: cfg
                    .channels
                    .iter()
                    .enumerate()
                    .map(|(i, c)| ChannelTarget {
                        interface: i,
                        remote: c.remote,
                        config: ChannelConfig {
                            mtu: c.mtu,
                            congestion: c.congestion.clone(),
                            cost_per_kb: c.cost_per_kb,
                            ..ChannelConfig::default()
                        },
                    })
                    .collect(),
                handshake_timeout: Duration::from_secs(10),
            })
            .await?;
        let live = Arc::new(Mutex::new(Live::default()));
        let names = app::names(&plans);
        let channel_names: Vec<String> =
            cfg.channels.iter().map(|c| c.remote.to_string()).collect();
        let l2 = live.clone();
        app::run_sender(
            conn,
            &plans,
            duration,
            cfg.seed,
            max_adu,
            live.clone(),
            |t| {
                println!(
                    "--- {:.0} s\n{}",
                    t.as_secs_f64(),
                    l2.lock()
                        .expect("live lock")
                        .table(t, &names, &channel_names)
                );
            },
        )
        .await?;
        host.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}

pub fn recv(args: RecvArgs) -> Result<ExitCode> {
    let cfg: RecvConfig = horde_config::load(&args.config)?;
    let base = base_dir(&args.config);
    let keypair = read_key(&cfg.key_file, &base)?;
    let allowed = cfg
        .allowed_keys
        .iter()
        .enumerate()
        .map(|(i, k)| public_key(k, &format!("allowed_keys[{i}]")))
        .collect::<Result<Vec<_>>>()?;
    let until = args.duration.map(crate::emu::seconds).transpose()?;
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
        let host = Host::bind(host_cfg).await?;
        println!(
            "listening on {:?} for service {}",
            host.local_addrs(),
            cfg.service
        );
        let mut listener = host.listen(cfg.service);
        let deadline = until.map(|d| tokio::time::Instant::now() + d);
        let accept = async { listener.accept().await };
        let conn = match deadline {
            Some(d) => tokio::time::timeout_at(d, accept).await.ok().flatten(),
            None => accept.await,
        };
        let Some(conn) = conn else {
            println!("no sender connected");
            return Ok(ExitCode::SUCCESS);
        };
        let live = Arc::new(Mutex::new(Live::default()));
        let start = tokio::time::Instant::now();
        app::run_receiver(conn, live.clone(), deadline).await;
        let l = live.lock().expect("live lock").clone();
        let elapsed = start.elapsed().as_secs_f64().max(1e-3);
        for (id, s) in &l.streams {
            println!(
                "stream {id}: received {} ADUs, {:.0} kbit/s",
                s.received,
                s.bytes_received as f64 * 8.0 / elapsed / 1e3
            );
        }
        let stats = host.stats().await?;
        println!(
            "datagrams dropped by the secure layer: {}",
            stats.dropped.total()
        );
        host.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}
