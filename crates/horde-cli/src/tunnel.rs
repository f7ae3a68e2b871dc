//! `horde tunnel client|server CONFIG`: whole IP traffic between a vehicle and a server
//! through TUN devices, each packet an ADU on one unordered Horde stream per direction,
//! over every channel, encrypted, packed several to a datagram when small
//! (docs/tunnel.md).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use horde_crypto::PublicKey;
use horde_net::{ConnectionHandle, Host, HostStats, NetError};
use horde_tunnel::config::{self, ClientConfig, ServerConfig};
use horde_tunnel::{server, Observer, Outcome, Reload, Run, Snapshot, Until, Up};
use serde::Serialize;
use tokio::time::Instant;

#[derive(clap::Subcommand)]
pub enum Command {
    /// The vehicle's end: connects to the server over every channel.
    Client(RunArgs),
    /// The wired end: serves the clients listed in its file.
    Server(RunArgs),
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Configuration (TOML); see docs/tunnel.md and configs/tunnel-*.toml.
    config: PathBuf,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
    /// Print one JSON object (counters, drops by reason) at the end instead of text.
    #[arg(long)]
    json: bool,
    /// Rewrite FILE every second with the peers (the server's clients), their keys and
    /// channels, for `horde status FILE`.
    #[arg(long, value_name = "FILE")]
    status: Option<PathBuf>,
    /// Serve metrics at ADDR (e.g. 127.0.0.1:9477): OpenMetrics at /metrics, a live page
    /// at /; see docs/monitoring.md.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
}

/// A tunnel file, read and checked, for the end it is for.
pub(crate) enum Loaded {
    Client(ClientConfig),
    Server(ServerConfig),
}

pub fn run(command: Command) -> Result<ExitCode> {
    // Check the file first, so that its errors are not hidden behind the root check.
    let (args, loaded) = match command {
        Command::Client(a) => {
            let cfg = load(&a)?;
            (a, Loaded::Client(cfg))
        }
        Command::Server(a) => {
            let cfg = load(&a)?;
            (a, Loaded::Server(cfg))
        }
    };
    run_loaded(&args, loaded, None)
}

/// Called on a client's reload with the file as read again, before its channels are
/// handed to the running tunnel (`horde up` routes new devices there).
pub(crate) type OnReload = Box<dyn FnMut(&ClientConfig)>;

/// Run the tunnel end of a file already read and checked.
pub(crate) fn run_loaded(
    args: &RunArgs,
    loaded: Loaded,
    on_reload: Option<OnReload>,
) -> Result<ExitCode> {
    let which = match &loaded {
        Loaded::Client(_) => "client",
        Loaded::Server(_) => "server",
    };
    anyhow::ensure!(
        horde_emu::sys::is_root(),
        "horde tunnel {which} needs root (CAP_NET_ADMIN) to create its TUN device; run it with sudo"
    );
    let report = match loaded {
        Loaded::Client(cfg) => client(args, cfg, on_reload)?,
        Loaded::Server(cfg) => server(args, cfg)?,
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(ExitCode::SUCCESS)
}

impl RunArgs {
    /// The tunnel file.
    pub fn config(&self) -> &std::path::Path {
        &self.config
    }
}

/// Read, parse and check the file; warnings go to stderr.
fn load<T: serde::de::DeserializeOwned + horde_config::Validate>(args: &RunArgs) -> Result<T> {
    load_file(&args.config)
}

/// Read, parse and check a tunnel file; warnings go to stderr.
pub(crate) fn load_file<T: serde::de::DeserializeOwned + horde_config::Validate>(
    path: &std::path::Path,
) -> Result<T> {
    let checked = config::load::<T>(path)?;
    for w in &checked.warnings {
        eprintln!("warning: {w}");
    }
    Ok(checked.value)
}

fn client(args: &RunArgs, cfg: ClientConfig, mut on_reload: Option<OnReload>) -> Result<Report> {
    let base = crate::peer::base_dir(&args.config);
    let keypair = crate::peer::read_key(&cfg.key_file, &base)?;
    let our_key = *keypair.public();
    let peer = crate::peer::public_key(&cfg.peer_key, "peer_key")?;
    let scheduler = cfg
        .scheduler
        .as_deref()
        .map(horde_apps::hose::scheduler)
        .transpose()?;
    let path = args.config.clone();
    let until = until(args, move || {
        let cfg = load_file::<ClientConfig>(&path)?;
        if let Some(hook) = on_reload.as_mut() {
            hook(&cfg);
        }
        Ok(Reload::Channels(cfg.channels))
    })?;
    let observer = Front::new(args, "tunnel client", our_key, &cfg.peer_key)?;
    let run = Run {
        keypair,
        scheduler,
        until,
        observer,
    };
    let outcome = crate::peer::runtime()?.block_on(horde_tunnel::client::run(cfg, peer, run))?;
    Ok(Report::new("client", outcome))
}

fn server(args: &RunArgs, cfg: ServerConfig) -> Result<Report> {
    let base = crate::peer::base_dir(&args.config);
    let keypair = crate::peer::read_key(&cfg.key_file, &base)?;
    let our_key = *keypair.public();
    let clients = clients_of(&cfg)?;
    let scheduler = cfg
        .scheduler
        .as_deref()
        .map(horde_apps::hose::scheduler)
        .transpose()?;
    let path = args.config.clone();
    let until = until(args, move || {
        Ok(Reload::Clients(clients_of(&load_file::<ServerConfig>(
            &path,
        )?)?))
    })?;
    let observer = Front::new(args, "tunnel server", our_key, "")?;
    let run = Run {
        keypair,
        scheduler,
        until,
        observer,
    };
    let outcome = crate::peer::runtime()?.block_on(server::run(cfg, clients, run))?;
    Ok(Report::new("server", outcome))
}

/// The clients a server's file lists, with their keys decoded.
fn clients_of(cfg: &ServerConfig) -> Result<Vec<server::Client>> {
    cfg.clients
        .iter()
        .enumerate()
        .map(|(i, c)| {
            Ok(server::Client {
                name: c.name.clone().unwrap_or_else(|| format!("client {i}")),
                key: crate::peer::public_key(&c.key, &format!("clients[{i}].key"))?,
                prefixes: c.prefixes(),
            })
        })
        .collect()
}

/// The run ends on Ctrl-C or after `--duration`; SIGHUP re-reads the file with `reread`.
fn until(args: &RunArgs, mut reread: impl FnMut() -> Result<Reload> + 'static) -> Result<Until> {
    let duration = args.duration.map(crate::emu::seconds).transpose()?;
    let sigint = crate::sigint::install()?;
    horde_emu::sys::catch_reload_signal().map_err(|e| anyhow::anyhow!("sigaction: {e}"))?;
    Ok(Until {
        deadline: duration.map(|d| Instant::now() + d),
        interrupted: Box::new(move || sigint.interrupted()),
        reload: Box::new(move || {
            horde_emu::sys::take_reload_request().then(|| reread().map_err(|e| format!("{e:#}")))
        }),
    })
}

/// What the user sees of a run as it goes: the progress lines, the status file.
struct Front {
    json: bool,
    role: &'static str,
    status: Option<PathBuf>,
    registry: crate::status::Registry,
    /// The status writer and the metrics endpoint, while the run lasts.
    writer: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The metrics endpoint's socket, bound before the run and served once it starts.
    metrics: Mutex<Option<std::net::TcpListener>>,
    our_key: PublicKey,
    peer_key: String,
}

impl Front {
    fn new(
        args: &RunArgs,
        role: &'static str,
        our_key: PublicKey,
        peer_key: &str,
    ) -> Result<Arc<Self>> {
        Ok(Arc::new(Self {
            json: args.json,
            role,
            status: args.status.clone(),
            registry: crate::status::Registry::default(),
            writer: Mutex::new(Vec::new()),
            metrics: Mutex::new(args.metrics.map(crate::metrics::bind).transpose()?),
            our_key,
            peer_key: peer_key.to_string(),
        }))
    }
}

impl Observer for Front {
    fn up(&self, up: &Up) {
        // Progress goes to stderr when stdout is kept for the JSON report.
        if self.json {
            eprintln!("{up}");
        } else {
            println!("{up}");
        }
    }

    fn started(&self, host: &Host) {
        // The status writer and the metrics endpoint, if asked for.
        let mut tasks = self.writer.lock().expect("status writer lock");
        tasks.extend(self.status.clone().map(|path| {
            crate::status::spawn_writer(
                path,
                self.role,
                host.public_key().to_string(),
                self.registry.clone(),
            )
        }));
        if let Some(listener) = self.metrics.lock().expect("metrics lock").take() {
            let exporter = crate::metrics::Exporter {
                role: self.role,
                public_key: host.public_key().to_string(),
                registry: self.registry.clone(),
                streams: crate::metrics::StreamFeed::default(),
                host: Some(host.stats_handle()),
            };
            match crate::metrics::spawn(listener, exporter) {
                Ok(task) => tasks.push(task),
                Err(e) => eprintln!("warning: no metrics endpoint: {e:#}"),
            }
        }
    }

    fn track(&self, name: Option<&str>, key: &PublicKey, handle: &ConnectionHandle) {
        match name {
            // A tunnel client that reconnected is one peer.
            Some(name) => {
                self.registry
                    .track_named(name.to_string(), key.to_string(), handle.clone())
            }
            None => self.registry.track(key.to_string(), handle.clone()),
        }
    }

    fn notice(&self, line: &str) {
        eprintln!("{line}");
    }

    fn connect_failed(&self, e: NetError) -> anyhow::Error {
        crate::hint::handshake(e, &self.our_key, &self.peer_key)
    }

    fn ending(&self) {
        for task in self.writer.lock().expect("status writer lock").drain(..) {
            task.abort();
        }
    }
}

/// What a run reports at its end.
#[derive(Serialize)]
struct Report {
    role: &'static str,
    end: &'static str,
    mtu: u32,
    counters: Snapshot,
    datagrams_in: u64,
    datagrams_out: u64,
    /// Datagrams the secure layer refused (garbage, unknown index, replay...).
    dropped_by_secure_layer: u64,
    dropped_by_reason: serde_json::Value,
    /// Datagrams the kernel dropped at the data sockets before Horde read them: they could
    /// belong to no live session (or found a receive buffer full).
    kernel_dropped: u64,
    /// Authenticated datagrams for no live session or service.
    unroutable: u64,
    reconnects: u64,
    sessions_replaced: u64,
    /// Server: each client and whether it had a session at the end.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    clients: Vec<(String, bool)>,
}

impl Report {
    fn new(role: &'static str, outcome: Outcome) -> Self {
        let host: &HostStats = &outcome.host;
        Self {
            role,
            end: outcome.end,
            mtu: outcome.mtu,
            counters: outcome.counters,
            datagrams_in: host.datagrams_in,
            datagrams_out: host.datagrams_out,
            dropped_by_secure_layer: host.dropped.total(),
            dropped_by_reason: crate::drops::to_json(&host.dropped),
            kernel_dropped: host.kernel_dropped,
            unroutable: host.unroutable,
            reconnects: host.reconnects,
            sessions_replaced: host.sessions_replaced,
            clients: outcome.clients,
        }
    }

    fn render(&self) -> String {
        let c = &self.counters;
        let mut s = format!(
            "ended: {}\ninto the tunnel: {} packets, {} bytes; out of it: {} packets, {} bytes; MSS clamped on {} SYNs\n",
            self.end, c.tun_in, c.tun_in_bytes, c.tun_out, c.tun_out_bytes, c.mss_clamped
        );
        s += &format!(
            "dropped: from the TUN device {} malformed, {} without a route, {} link-scoped, {} too big; from the peer {} malformed, {} with a foreign source, {} on another stream; {} TUN write errors; {} by the ingress queue\n",
            c.tun_malformed, c.tun_no_route, c.tun_link_scoped, c.tun_too_big, c.peer_malformed, c.peer_spoofed, c.peer_foreign_stream, c.tun_write_errors, c.ingress_dropped
        );
        s += &format!(
            "datagrams in {}, out {}; unroutable {}; reconnects {}\n",
            self.datagrams_in, self.datagrams_out, self.unroutable, self.reconnects
        );
        for (name, up) in &self.clients {
            s += &format!(
                "client {name}: {}\n",
                if *up { "connected" } else { "not connected" }
            );
        }
        s
    }
}
