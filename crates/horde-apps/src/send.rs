//! The `send` application: one connection to a receiver over the file's channels, its
//! streams fed by synthetic workloads for a while, then drained and closed.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use horde_crypto::{Keypair, PublicKey};
use horde_net::{Connection, Host, HostConfig, NetError, Reconnect, SchedulerFactory};
use horde_proto::StreamConfig;

use crate::config::{base_dir, public_key, read_key, seconds, SendChannel, SendConfig};
use crate::live::Live;
use crate::report::{SendInterval, SendReport};
use crate::sender::{self, StreamPlan};

/// How long a connection attempt waits for the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A checked send file with its keys read, its objectives compiled and its scheduler
/// chosen: ready to bind and connect.
pub struct Sender {
    cfg: SendConfig,
    keypair: Keypair,
    peer: PublicKey,
    duration: Duration,
    plans: Vec<StreamPlan>,
    scheduler: SchedulerFactory,
    max_adu: u32,
    channel_names: Vec<String>,
}

/// A channel as the sender set it up.
pub struct ChannelSetup {
    pub name: String,
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

/// What a send run reports: its interval rows, the summary over the run, and how many
/// ADUs are neither acked, lost, dropped from the queue nor abandoned at close.
pub struct SendOutcome {
    pub intervals: Vec<SendInterval>,
    pub summary: SendInterval,
    pub unaccounted: u64,
}

impl Sender {
    /// `cfg` was read from `path` (its relative paths start there); `duration`, in
    /// seconds, overrides the file's.
    pub fn new(cfg: SendConfig, path: &Path, duration: Option<f64>) -> Result<Self> {
        let base = base_dir(path);
        let keypair = read_key(&cfg.key_file, &base)?;
        let peer = public_key(&cfg.peer_key, "peer_key")?;
        let duration = seconds(duration.unwrap_or(cfg.duration_s))?;
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
        let channel_names = cfg
            .channels
            .iter()
            .enumerate()
            .map(|(i, c)| c.name.clone().unwrap_or_else(|| format!("ch{i}")))
            .collect();
        Ok(Self {
            cfg,
            keypair,
            peer,
            duration,
            plans,
            scheduler,
            max_adu,
            channel_names,
        })
    }

    pub fn our_key(&self) -> PublicKey {
        *self.keypair.public()
    }

    pub fn peer(&self) -> PublicKey {
        self.peer
    }

    /// The receiver's key as the file wrote it.
    pub fn peer_key_text(&self) -> &str {
        &self.cfg.peer_key
    }

    /// Bind a socket per channel.
    pub async fn bind(&self) -> Result<Host> {
        let mut host_cfg = HostConfig::new(
            self.keypair.clone(),
            SendChannel::interfaces(&self.cfg.channels),
        );
        host_cfg.session = self.cfg.session.clone();
        host_cfg.scheduler = Some(self.scheduler.clone());
        bind(host_cfg).await
    }

    /// Connect to the receiver; with `reconnect`, the connection outlives its sessions.
    pub async fn connect(&self, host: &Host) -> Result<Connection, NetError> {
        let target = SendChannel::connect_config(
            &self.cfg.channels,
            self.peer,
            self.cfg.service,
            HANDSHAKE_TIMEOUT,
        );
        if self.cfg.reconnect {
            host.connect_persistent(target, Reconnect::default()).await
        } else {
            host.connect(target).await
        }
    }

    /// The channels as bound, given the host's local addresses.
    pub fn channels(&self, locals: &[SocketAddr]) -> Vec<ChannelSetup> {
        self.cfg
            .channels
            .iter()
            .zip(&self.channel_names)
            .zip(locals)
            .map(|((c, name), local)| ChannelSetup {
                name: name.clone(),
                local: *local,
                remote: c.remote,
            })
            .collect()
    }

    /// Run the streams for the run length or until Ctrl-C, drain and close; `row` gets
    /// each interval's rows, about once a second.
    pub async fn run(
        &self,
        conn: Connection,
        mut row: impl FnMut(&SendInterval),
    ) -> Result<SendOutcome> {
        let live = Arc::new(Mutex::new(Live::default()));
        let report = Arc::new(Mutex::new(SendReport::new(
            sender::names(&self.plans),
            self.channel_names.clone(),
        )));
        let (l2, r2) = (live.clone(), report.clone());
        sender::run_sender(
            conn,
            &self.plans,
            self.duration,
            self.cfg.seed,
            self.max_adu,
            live.clone(),
            move |t| {
                let l = l2.lock().expect("live lock");
                let mut r = r2.lock().expect("report lock");
                let since = r.intervals.last().map_or(0.0, |i| i.end_s);
                if t.as_secs_f64() - since < 0.01 {
                    return; // nothing left of this interval
                }
                row(r.interval(&l, t));
            },
        )
        .await?;
        let l = live.lock().expect("live lock");
        let r = report.lock().expect("report lock");
        let ran = r
            .intervals
            .last()
            .map_or(self.duration, |i| Duration::from_secs_f64(i.end_s));
        let summary = r.summary(&l, ran);
        // Every ADU is acked, lost, dropped from the queue or abandoned at close.
        let unaccounted = summary
            .streams
            .iter()
            .map(|s| {
                s.sent
                    .saturating_sub(s.acked + s.lost + s.dropped + s.abandoned)
            })
            .sum();
        Ok(SendOutcome {
            intervals: r.intervals.clone(),
            summary,
            unaccounted,
        })
    }
}

/// Bind the host's sockets; a failure names the addresses (the OS error alone does not).
pub async fn bind(cfg: HostConfig) -> Result<Host> {
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
