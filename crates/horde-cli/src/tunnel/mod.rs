//! `horde tunnel client|server CONFIG`: whole IP traffic between a vehicle and a server
//! through TUN devices, each packet an ADU on one unordered Horde stream per direction,
//! over every channel, encrypted, packed several to a datagram when small
//! (docs/tunnel.md).

mod client;
pub mod config;
mod counters;
mod device;
mod forward;
mod rekey;
mod server;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use horde_net::tunnel::max_mss;
use horde_net::{Host, HostStats};
use serde::Serialize;
use tokio::time::Instant;

use counters::{Counters, Snapshot};

/// The tunnel stream's id, the same both ways.
const STREAM: u32 = 1;
/// How often the run checks for Ctrl-C and its end.
const POLL: Duration = Duration::from_millis(50);

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
}

pub fn run(command: Command) -> Result<ExitCode> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let (args, which) = match &command {
        Command::Client(a) => (a, "client"),
        Command::Server(a) => (a, "server"),
    };
    // Check the file first, so that its errors are not hidden behind the root check.
    match &command {
        Command::Client(a) => drop(config::load::<config::ClientConfig>(&a.config)?),
        Command::Server(a) => drop(config::load::<config::ServerConfig>(&a.config)?),
    }
    anyhow::ensure!(
        root,
        "horde tunnel {which} needs root (CAP_NET_ADMIN) to create its TUN device; run it with sudo"
    );
    let report = match &command {
        Command::Client(a) => client::run(a)?,
        Command::Server(a) => server::run(a)?,
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(ExitCode::SUCCESS)
}

/// Tell the user the tunnel is up and what its MTU is.
fn announce(role: &str, name: &str, mtu: u32, host: &Host, json: bool) {
    let addrs: Vec<String> = host.local_addrs().iter().map(|a| a.to_string()).collect();
    let line = format!(
        "tunnel {role}: device {name} up, mtu {mtu} (TCP MSS clamped to {} over IPv4, {} over IPv6), channels on {}",
        max_mss(mtu, false),
        max_mss(mtu, true),
        addrs.join(", ")
    );
    // Progress goes to stderr when stdout is kept for the JSON report.
    if json {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

/// Start the status writer if `--status` asked for one; the registry is where the run
/// reports its connections.
fn status_writer(
    args: &RunArgs,
    role: &'static str,
    host: &Host,
) -> (crate::status::Registry, Option<tokio::task::JoinHandle<()>>) {
    let registry = crate::status::Registry::default();
    let task = args.status.clone().map(|path| {
        crate::status::spawn_writer(path, role, host.public_key().to_string(), registry.clone())
    });
    (registry, task)
}

/// When a run ends.
struct Until {
    deadline: Option<Instant>,
    sigint: crate::sigint::Guard,
}

impl Until {
    fn new(args: &RunArgs) -> Result<Self> {
        let duration = args.duration.map(crate::emu::seconds).transpose()?;
        Ok(Self {
            deadline: duration.map(|d| Instant::now() + d),
            sigint: crate::sigint::Guard::install()?,
        })
    }

    /// Wait for Ctrl-C, the deadline, or `done()`; returns why it stopped.
    async fn wait(&self, done: impl Fn() -> bool) -> &'static str {
        loop {
            if self.sigint.interrupted() {
                return "interrupted";
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                return "duration reached";
            }
            if done() {
                return "session closed";
            }
            tokio::time::sleep(POLL).await;
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
    /// Authenticated datagrams for no live session or service.
    unroutable: u64,
    reconnects: u64,
    sessions_replaced: u64,
    /// Server: each client and whether it had a session at the end.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    clients: Vec<(String, bool)>,
}

impl Report {
    fn new(
        role: &'static str,
        end: &'static str,
        counters: &Counters,
        host: &HostStats,
        mtu: u32,
    ) -> Self {
        Self {
            role,
            end,
            mtu,
            counters: counters.snapshot(),
            datagrams_in: host.datagrams_in,
            datagrams_out: host.datagrams_out,
            dropped_by_secure_layer: host.dropped.total(),
            dropped_by_reason: crate::drops::to_json(&host.dropped),
            unroutable: host.unroutable,
            reconnects: host.reconnects,
            sessions_replaced: host.sessions_replaced,
            clients: Vec::new(),
        }
    }

    fn render(&self) -> String {
        let c = &self.counters;
        let mut s = format!(
            "ended: {}\ninto the tunnel: {} packets, {} bytes; out of it: {} packets, {} bytes; MSS clamped on {} SYNs\n",
            self.end, c.tun_in, c.tun_in_bytes, c.tun_out, c.tun_out_bytes, c.mss_clamped
        );
        s += &format!(
            "dropped: from the TUN device {} malformed, {} without a route, {} link-scoped, {} too big; from the peer {} malformed, {} with a foreign source, {} on another stream; {} TUN write errors\n",
            c.tun_malformed, c.tun_no_route, c.tun_link_scoped, c.tun_too_big, c.peer_malformed, c.peer_spoofed, c.peer_foreign_stream, c.tun_write_errors
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
