//! `horde-lab pluribus vehicle` (internal): the vehicle's side of one live run, started by
//! `horde-lab pluribus live` inside `horde shell`. It runs the scenario's flow plan with
//! kernel TCP, through the tunnel (a `horde tunnel client` child), over MPTCP on every
//! link, or over one link, and writes the flows' results and the tunnel's counters.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde::{Deserialize, Serialize};

use super::tunnel_files::{fill_client, SERVER_TUN_ADDR, TUN_NAME};
use horde_flows::{kernel_cc, run_client, ClientResult, ConnectOptions};

/// How long the tunnel may take to come up and carry a first connection.
const TUNNEL_READY: Duration = Duration::from_secs(20);

#[derive(clap::Args)]
pub struct VehicleArgs {
    /// The `horde` binary, for `horde tunnel client`.
    #[arg(long)]
    horde: PathBuf,
    /// The tunnel scenario.
    #[arg(long)]
    scenario: PathBuf,
    #[arg(long)]
    load: f64,
    #[arg(long)]
    seed: u64,
    #[arg(long)]
    duration: f64,
    #[arg(long)]
    drain: f64,
    /// The flow servers' TCP port (MPTCP: `--mptcp-port`).
    #[arg(long)]
    port: u16,
    #[arg(long)]
    mptcp_port: u16,
    /// Through the tunnel: the client's file without remotes.
    #[arg(long, conflicts_with_all = ["mptcp", "link"])]
    tunnel: Option<PathBuf>,
    /// MPTCP over every link.
    #[arg(long, conflicts_with = "link")]
    mptcp: bool,
    /// Single-path TCP over this link.
    #[arg(long)]
    link: Option<usize>,
    /// Write the results (JSON) here.
    #[arg(long)]
    results: PathBuf,
}

/// What the vehicle hands back.
#[derive(Debug, Serialize, Deserialize)]
pub struct VehicleRun {
    pub elapsed_s: f64,
    pub flows: Vec<ClientResult>,
    /// The tunnel client's `--json` report, for runs through the tunnel.
    pub tunnel: Option<serde_json::Value>,
}

/// `HORDE_SHELL_LINK{i}` and the host side of that link (the /30's first address).
fn link_addrs(i: usize) -> Result<(Ipv4Addr, Ipv4Addr)> {
    let name = format!("HORDE_SHELL_LINK{i}");
    let inner: Ipv4Addr = std::env::var(&name)
        .with_context(|| format!("{name} is not set: run inside horde shell"))?
        .parse()
        .with_context(|| format!("{name} is not an IPv4 address"))?;
    let host = Ipv4Addr::from(u32::from(inner) - 1);
    Ok((inner, host))
}

fn links() -> Result<usize> {
    std::env::var("HORDE_SHELL_LINKS")
        .context("HORDE_SHELL_LINKS is not set: run inside horde shell")?
        .parse()
        .context("HORDE_SHELL_LINKS is not a number")
}

/// The tunnel client, stopped with SIGINT (so it prints its report) when dropped early.
struct TunnelClient {
    child: Child,
    report: PathBuf,
}

impl TunnelClient {
    fn start(horde: &Path, template: &Path, dir: &Path) -> Result<Self> {
        let hosts = (0..links()?)
            .map(|i| link_addrs(i).map(|a| a.1))
            .collect::<Result<Vec<_>>>()?;
        let file = dir.join("client.toml");
        fill_client(template, &hosts, &file)?;
        let report = dir.join("client.json");
        let child = Command::new(horde)
            .args(["tunnel", "client"])
            .arg(&file)
            .arg("--json")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&report)?)
            .stderr(std::fs::File::create(dir.join("client.err"))?)
            .spawn()
            .context("start horde tunnel client")?;
        Ok(Self { child, report })
    }

    /// Wait for the device, then for a first connection to the flow server through the
    /// tunnel (it proves the session is up; the server ignores a connection that sends
    /// nothing).
    fn wait_ready(&mut self, server: SocketAddr) -> Result<()> {
        let deadline = Instant::now() + TUNNEL_READY;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                bail!("horde tunnel client exited with {status} before the run");
            }
            if Path::new(&format!("/sys/class/net/{TUN_NAME}")).exists()
                && TcpStream::connect_timeout(&server, Duration::from_secs(2)).is_ok()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!(
            "the tunnel did not carry a connection to {server} within {} s",
            TUNNEL_READY.as_secs()
        )
    }

    /// Stop it and read its report.
    fn stop(mut self) -> Result<serde_json::Value> {
        let _ = horde_emu::sys::interrupt(&self.child);
        let status = self.child.wait()?;
        ensure!(status.success(), "horde tunnel client exited with {status}");
        let text = std::fs::read_to_string(&self.report)?;
        serde_json::from_str(text.trim()).context("read the tunnel client's report")
    }
}

impl Drop for TunnelClient {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = horde_emu::sys::interrupt(&self.child);
            let _ = self.child.wait();
        }
    }
}

pub fn run(args: VehicleArgs) -> Result<ExitCode> {
    let mut s = horde_sim::flows::tunnel_scenario::TunnelScenario::load(&args.scenario)?;
    s.seed = args.seed;
    s.duration_s = args.duration;
    s.drain_s = args.drain;
    let plan = s.plan(args.load).map_err(anyhow::Error::msg)?;
    let cc = kernel_cc(s.tcp.congestion)?;
    let dir = args
        .results
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut options = ConnectOptions::tcp(cc);
    let mut tunnel = None;
    let server = if let Some(template) = &args.tunnel {
        let server = SocketAddr::from((SERVER_TUN_ADDR, args.port));
        let mut client = TunnelClient::start(&args.horde, template, &dir)?;
        client.wait_ready(server)?;
        tunnel = Some(client);
        server
    } else if args.mptcp {
        options.mptcp = true;
        SocketAddr::from((link_addrs(0)?.1, args.mptcp_port))
    } else {
        let i = args.link.context("give --tunnel, --mptcp or --link")?;
        let (inner, host) = link_addrs(i)?;
        options.bind = Some(IpAddr::V4(inner));
        SocketAddr::from((host, args.port))
    };
    let wall = Instant::now();
    let flows = run_client(&plan, server, s.end(), &options);
    let elapsed_s = wall.elapsed().as_secs_f64();
    let tunnel = tunnel.map(TunnelClient::stop).transpose()?;
    let run = VehicleRun {
        elapsed_s,
        flows,
        tunnel,
    };
    std::fs::write(&args.results, serde_json::to_string(&run)?)
        .with_context(|| format!("write {}", args.results.display()))?;
    Ok(ExitCode::SUCCESS)
}
