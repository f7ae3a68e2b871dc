//! `horde-lab pluribus live FILE`: the PluriBus comparison in real time. The tunnel
//! scenario's links are emulated by `horde shell` (one `--link` per link, the same
//! models as the simulator's), the wired side lives in a namespace of its own, and for
//! every load (and bad-state loss) each arm runs the same flow plan with kernel TCP:
//! through `horde tunnel` once per recovery mode, over Linux MPTCP with one subflow per
//! link, and over each link alone.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use clap::Args as ClapArgs;
use horde_sim::flows::tunnel_scenario::{Mode, TunnelScenario};
use horde_sim::flows::{FlowRecord, Stats};

use super::live_report::{LinkTotals, LiveReport, LiveRow};
use super::server_ns::ServerNamespace;
use super::tunnel_files::{client_template, server_file, write_keys, Keys, TUN_NAME};
use super::vehicle::VehicleRun;
use horde_emu::sys::SigintGuard;
use horde_flows::{kernel_cc, ServerRetransmits};
use horde_shell::link_text;

/// The flow servers' ports in the server namespace (TCP, and MPTCP).
const FLOW_PORT: u16 = 5301;
const MPTCP_PORT: u16 = 5302;
/// How long a run may last beyond its arrivals and drain (tunnel start, teardown).
const RUN_SLACK: Duration = Duration::from_secs(60);
/// How long a stopped child gets before SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

#[derive(ClapArgs)]
pub struct LiveArgs {
    /// Tunnel scenario (TOML; docs/pluribus.md), e.g. scenarios/pluribus/a.toml.
    file: PathBuf,
    /// Override the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Override the sweep's load factors, e.g. `--loads 1,8`.
    #[arg(long, value_delimiter = ',')]
    loads: Option<Vec<f64>>,
    /// Override the sweep's bad-state loss rates, e.g. `--loss-in-bad 0.1,0.5`.
    #[arg(long, value_delimiter = ',')]
    loss_in_bad: Option<Vec<f64>>,
    /// Run only these arms: the scenario's mode names, `mptcp`, `direct:LINK`, or
    /// `direct` for every single-path baseline.
    #[arg(long, value_delimiter = ',')]
    modes: Option<Vec<String>>,
    /// Override the scenario's arrival period, in seconds.
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Override how long flows may finish after the arrivals, in seconds.
    #[arg(long, value_name = "S")]
    drain: Option<f64>,
    /// Print the report as JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
    /// Write live.json, live.csv, table.md and each run's files (runs/) here.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// What one cell runs over.
#[derive(Debug, Clone)]
enum Arm {
    Tunnel(Mode),
    Mptcp,
    /// Single-path TCP over link `index`.
    Direct {
        index: usize,
        name: String,
    },
}

impl Arm {
    fn name(&self) -> String {
        match self {
            Arm::Tunnel(m) => m.name.clone(),
            Arm::Mptcp => "mptcp".into(),
            Arm::Direct { name, .. } => format!("direct:{name}"),
        }
    }
}

/// The tunnel modes, MPTCP, then the scenario's single-path baselines; `only` picks.
fn arms(s: &TunnelScenario, only: Option<&[String]>) -> Result<Vec<Arm>> {
    let direct = s
        .direct
        .iter()
        .map(|name| {
            let index = s
                .links
                .iter()
                .position(|l| &l.name == name)
                .with_context(|| format!("sweep.direct names no link \"{name}\""))?;
            Ok(Arm::Direct {
                index,
                name: name.clone(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let all: Vec<Arm> = s
        .modes
        .iter()
        .cloned()
        .map(Arm::Tunnel)
        .chain([Arm::Mptcp])
        .chain(direct)
        .collect();
    let Some(only) = only else { return Ok(all) };
    let mut out = Vec::new();
    for n in only {
        let picked: Vec<&Arm> = all
            .iter()
            .filter(|a| &a.name() == n || (n == "direct" && matches!(a, Arm::Direct { .. })))
            .collect();
        if picked.is_empty() {
            let known: Vec<String> = all.iter().map(Arm::name).collect();
            bail!("no arm named \"{n}\" (known: {}, direct)", known.join(", "));
        }
        out.extend(picked.into_iter().cloned());
    }
    Ok(out)
}

/// A child process that is stopped (SIGINT, then SIGKILL after a grace period) if it
/// is still running when dropped.
struct Stopped(Child);

impl Stopped {
    fn stop(&mut self) -> Result<ExitStatus> {
        if let Some(status) = self.0.try_wait()? {
            return Ok(status);
        }
        let _ = horde_emu::sys::interrupt(&self.0);
        let deadline = Instant::now() + GRACE;
        while Instant::now() < deadline {
            if let Some(status) = self.0.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        Ok(self.0.wait()?)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The end of a file, for error messages.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

fn counter(report: &serde_json::Value, name: &str) -> u64 {
    report["counters"][name].as_u64().unwrap_or(0)
}

/// Everything the runs share.
struct Live<'a> {
    s: &'a TunnelScenario,
    /// The scenario file, absolute (the vehicle reads it again).
    file: PathBuf,
    /// The `horde` binary (tunnel and shell) and this one (the vehicle).
    horde: PathBuf,
    lab: PathBuf,
    ns: &'a ServerNamespace,
    keys: &'a Keys,
    work: &'a Path,
    server_counters: ServerRetransmits,
    sigint: &'a SigintGuard,
}

impl Live<'_> {
    fn start_tunnel_server(&self, file: &Path, dir: &Path) -> Result<Stopped> {
        let child = self
            .ns
            .command(&self.horde)
            .args(["tunnel", "server"])
            .arg(file)
            .arg("--json")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.join("server.json"))?)
            .stderr(std::fs::File::create(dir.join("server.err"))?)
            .spawn()
            .context("start horde tunnel server")?;
        let mut server = Stopped(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.ns.has_device(TUN_NAME) {
            if let Some(status) = server.0.try_wait()? {
                bail!(
                    "horde tunnel server exited with {status}: {}",
                    tail(&dir.join("server.err"))
                );
            }
            ensure!(
                Instant::now() < deadline,
                "horde tunnel server did not bring up {TUN_NAME} within 10 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(server)
    }

    fn run(&self, load: f64, loss: Option<f64>, arm: &Arm) -> Result<LiveRow> {
        let s = self.s;
        let tag = format!(
            "{load}x{}-{}",
            loss.map_or(String::new(), |p| format!("-p{p}")),
            arm.name().replace(':', "-")
        );
        let dir = self.work.join(tag);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("links"))
            .with_context(|| format!("create {}", dir.display()))?;
        self.server_counters
            .lock()
            .expect("no panics hold it")
            .clear();
        let links = s.links_at(loss);
        let mut vehicle: Vec<OsString> = Vec::new();
        let mut tunnel_server = None;
        match arm {
            Arm::Tunnel(mode) => {
                let file = server_file(s, mode, &links, &dir, self.keys)?;
                let template = client_template(s, mode, &links, &dir, self.keys)?;
                tunnel_server = Some(self.start_tunnel_server(&file, &dir)?);
                vehicle.extend(["--tunnel".into(), template.into_os_string()]);
            }
            Arm::Mptcp => vehicle.push("--mptcp".into()),
            Arm::Direct { index, .. } => {
                vehicle.extend(["--link".into(), index.to_string().into()])
            }
        }
        let results = dir.join("vehicle.json");
        let mut shell = self.ns.command(&self.horde);
        shell
            .arg("shell")
            .args(["--seed", &s.seed.to_string()])
            .arg("--log")
            .arg(dir.join("links"));
        if matches!(arm, Arm::Mptcp) {
            shell.arg("--mptcp");
        }
        for l in &links {
            shell
                .arg("--link")
                .arg(link_text(&l.up, &l.down, &s.base_dir)?);
        }
        shell
            .arg("--")
            .arg(&self.lab)
            .args(["pluribus", "vehicle", "--horde"])
            .arg(&self.horde)
            .arg("--scenario")
            .arg(&self.file)
            .args(["--load", &load.to_string()])
            .args(["--seed", &s.seed.to_string()])
            .args(["--duration", &s.duration_s.to_string()])
            .args(["--drain", &s.drain_s.to_string()])
            .args(["--port", &FLOW_PORT.to_string()])
            .args(["--mptcp-port", &MPTCP_PORT.to_string()])
            .args(vehicle)
            .arg("--results")
            .arg(&results)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.join("shell.out"))?)
            .stderr(std::fs::File::create(dir.join("shell.err"))?);
        let mut shell = Stopped(shell.spawn().context("start horde shell")?);
        let deadline = Instant::now() + s.end() + RUN_SLACK;
        let status = loop {
            if let Some(status) = shell.0.try_wait()? {
                break status;
            }
            if self.sigint.interrupted() {
                shell.stop()?;
                bail!("interrupted");
            }
            if Instant::now() > deadline {
                shell.stop()?;
                bail!(
                    "the run did not end within {} s; its files are in {}",
                    (s.end() + RUN_SLACK).as_secs(),
                    dir.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let server_report = match tunnel_server.as_mut() {
            Some(server) => {
                let st = server.stop()?;
                ensure!(
                    st.success(),
                    "horde tunnel server exited with {st}: {}",
                    tail(&dir.join("server.err"))
                );
                let text = std::fs::read_to_string(dir.join("server.json"))?;
                Some(
                    serde_json::from_str::<serde_json::Value>(text.trim())
                        .context("read the tunnel server's report")?,
                )
            }
            None => None,
        };
        ensure!(
            status.success(),
            "horde shell exited with {status}: {}{}",
            tail(&dir.join("shell.err")),
            tail(&dir.join("client.err"))
        );
        let text = std::fs::read_to_string(&results)
            .with_context(|| format!("read {}", results.display()))?;
        let run: VehicleRun = serde_json::from_str(&text).context("read the vehicle's results")?;
        self.row(load, loss, arm, &dir, &run, server_report.as_ref())
    }

    fn row(
        &self,
        load: f64,
        loss: Option<f64>,
        arm: &Arm,
        dir: &Path,
        run: &VehicleRun,
        server_report: Option<&serde_json::Value>,
    ) -> Result<LiveRow> {
        let s = self.s;
        // The server records a connection once it has seen it close; give stragglers
        // a moment.
        let connected = run.flows.iter().filter(|f| f.error.is_none()).count();
        let deadline = Instant::now() + Duration::from_secs(3);
        while self
            .server_counters
            .lock()
            .expect("no panics hold it")
            .len()
            < connected
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let server = self
            .server_counters
            .lock()
            .expect("no panics hold it")
            .clone();
        let plan = s.plan(load).map_err(anyhow::Error::msg)?;
        let specs = s.scaled_flows(load);
        let (mut rtx, mut segs) = (0u64, 0u64);
        let records: Vec<FlowRecord> = plan
            .iter()
            .map(|f| {
                let r = run.flows.iter().find(|r| r.id == f.id);
                let sv = server.get(&f.id).copied().unwrap_or_default();
                let client_rtx = r.map_or(0, |r| r.retransmits);
                rtx += client_rtx + sv.retransmits;
                segs += r.map_or(0, |r| r.data_segs_out) + sv.data_segs_out;
                let completions: Vec<Duration> = r
                    .map(|r| {
                        r.completions_us
                            .iter()
                            .map(|&us| Duration::from_micros(us))
                            .collect()
                    })
                    .unwrap_or_default();
                FlowRecord::new(f, &specs, &completions, client_rtx + sv.retransmits)
            })
            .collect();
        let fct: Vec<f64> = records.iter().filter_map(|r| r.completion_ms).collect();
        let links = LinkTotals::read(&dir.join("links"))
            .with_context(|| format!("read the link logs in {}", dir.display()))?;
        let mut row = LiveRow {
            load,
            loss_in_bad: loss,
            mode: arm.name(),
            flows: records.len(),
            completed: fct.len(),
            fct_ms: Stats::of(&fct),
            end_host_loss: links.loss(),
            link_loss: links.loss(),
            tcp_retransmit_rate: rtx as f64 / segs.max(1) as f64,
            retransmits_per_flow: rtx as f64 / records.len().max(1) as f64,
            overhead: None,
            links,
            ip_bytes_offered: None,
            reconnects: None,
            error: None,
        };
        if let (Some(client), Some(server)) = (&run.tunnel, server_report) {
            let packets_in = counter(client, "tun_in") + counter(server, "tun_in");
            let packets_out = counter(client, "tun_out") + counter(server, "tun_out");
            let bytes_in = counter(client, "tun_in_bytes") + counter(server, "tun_in_bytes");
            row.end_host_loss = 1.0 - (packets_out as f64 / packets_in.max(1) as f64).min(1.0);
            row.overhead = Some(links.bytes as f64 / bytes_in.max(1) as f64 - 1.0);
            row.ip_bytes_offered = Some(bytes_in);
            row.reconnects = client["reconnects"].as_u64();
        }
        Ok(row)
    }
}

/// The row of a run that failed: every flow of its plan counts as not completed.
fn failed_row(
    s: &TunnelScenario,
    load: f64,
    loss: Option<f64>,
    arm: &Arm,
    error: String,
) -> Result<LiveRow> {
    Ok(LiveRow {
        load,
        loss_in_bad: loss,
        mode: arm.name(),
        flows: s.plan(load).map_err(anyhow::Error::msg)?.len(),
        completed: 0,
        fct_ms: None,
        end_host_loss: 0.0,
        link_loss: 0.0,
        tcp_retransmit_rate: 0.0,
        retransmits_per_flow: 0.0,
        overhead: None,
        links: LinkTotals::default(),
        ip_bytes_offered: None,
        reconnects: None,
        error: Some(error),
    })
}

/// Where the runs' files go: `OUT/runs`, kept, or a temporary folder removed at the end.
struct WorkDir {
    path: PathBuf,
    remove: bool,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

pub fn run(args: LiveArgs) -> Result<ExitCode> {
    let mut s = TunnelScenario::load(&args.file)?;
    if let Some(seed) = args.seed {
        s.seed = seed;
    }
    if let Some(loads) = args.loads {
        ensure!(
            loads.iter().all(|l| l.is_finite() && *l > 0.0),
            "--loads must be positive numbers"
        );
        s.loads = loads;
    }
    if let Some(l) = args.loss_in_bad {
        ensure!(
            l.iter().all(|p| (0.0..=1.0).contains(p)),
            "--loss-in-bad must be probabilities in [0, 1]"
        );
        s.loss_in_bad = Some(l);
    }
    if let Some(d) = args.duration {
        ensure!(d.is_finite() && d > 0.0, "--duration must be positive");
        s.duration_s = d;
    }
    if let Some(d) = args.drain {
        ensure!(d.is_finite() && d >= 0.0, "--drain must not be negative");
        s.drain_s = d;
    }
    for &f in &s.loads {
        s.plan(f)
            .map_err(|m| anyhow::anyhow!("at load {f}x: {m}"))?;
    }
    for l in &s.links {
        link_text(&l.up, &l.down, &s.base_dir)
            .with_context(|| format!("link {} cannot be emulated by horde shell", l.name))?;
    }
    let arms = arms(&s, args.modes.as_deref())?;
    let cc = kernel_cc(s.tcp.congestion)?;
    ensure!(
        horde_emu::sys::is_root(),
        "horde-lab pluribus live needs root (network namespaces, TUN devices); run it with sudo"
    );
    let file = args.file.canonicalize().unwrap_or(args.file.clone());
    let work = match &args.out {
        Some(out) => WorkDir {
            path: out.join("runs"),
            remove: false,
        },
        None => WorkDir {
            path: std::env::temp_dir().join(format!("horde-pluribus-live-{}", std::process::id())),
            remove: true,
        },
    };
    std::fs::create_dir_all(&work.path)
        .with_context(|| format!("create {}", work.path.display()))?;
    let work_path = work.path.canonicalize()?;
    let sigint = SigintGuard::install().map_err(|e| anyhow::anyhow!("sigaction: {e}"))?;
    let ns = ServerNamespace::create()?;
    let server_counters = ServerRetransmits::default();
    let mptcp = arms.iter().any(|a| matches!(a, Arm::Mptcp));
    ns.serve_flows(
        FLOW_PORT,
        mptcp.then_some(MPTCP_PORT),
        cc,
        server_counters.clone(),
    )?;
    let keys = write_keys(&work_path)?;
    let live = Live {
        s: &s,
        file,
        horde: crate::horde_binary()?,
        lab: std::env::current_exe().context("find the horde-lab binary")?,
        ns: &ns,
        keys: &keys,
        work: &work_path,
        server_counters,
        sigint: &sigint,
    };
    let losses: Vec<Option<f64>> = match &s.loss_in_bad {
        Some(l) => l.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    let total = s.loads.len() * losses.len() * arms.len();
    let mut rows = Vec::with_capacity(total);
    let wall = Instant::now();
    for &load in &s.loads {
        for &loss in &losses {
            for arm in &arms {
                let at = format!(
                    "load {load}x{}, {}",
                    loss.map_or(String::new(), |p| format!(", bad-state loss {p}")),
                    arm.name()
                );
                eprintln!(
                    "pluribus live [{}/{total}] {at}: running ({} s of arrivals)",
                    rows.len() + 1,
                    s.duration_s
                );
                // A run that fails (the tunnel never came up, a child died) becomes a
                // row that says so; the sweep goes on. Ctrl-C stops everything.
                let row = match live.run(load, loss, arm) {
                    Ok(row) => row,
                    Err(e) if sigint.interrupted() => return Err(e.context(at)),
                    Err(e) => {
                        eprintln!("pluribus live: {at}: run failed: {e:#}");
                        failed_row(&s, load, loss, arm, format!("{e:#}"))?
                    }
                };
                eprintln!(
                    "pluribus live [{}/{total}] {at}: {}/{} flows, mean FCT {}",
                    rows.len() + 1,
                    row.completed,
                    row.flows,
                    row.fct_ms
                        .as_ref()
                        .map_or("-".into(), |f| format!("{:.0} ms", f.mean))
                );
                rows.push(row);
            }
        }
    }
    eprintln!(
        "{} runs in {:.0} s of wall time",
        rows.len(),
        wall.elapsed().as_secs_f64()
    );
    let report = LiveReport {
        scenario: s.name.clone(),
        seed: s.seed,
        duration_s: s.duration_s,
        tcp: "kernel",
        congestion: cc.to_string(),
        rows,
    };
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.table());
    }
    if let Some(dir) = &args.out {
        for (name, text) in [
            ("live.json", report.to_json()),
            ("live.csv", report.to_csv()),
            ("table.md", report.table()),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
