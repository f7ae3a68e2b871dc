//! `horde flows sim FILE` and `horde flows emu FILE`: one flow scenario, run in the
//! simulator over smoltcp TCP, or in real time over kernel TCP through `horde shell`
//! links built from the same models; both print and write the same report.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use clap::{Args as ClapArgs, Subcommand};
use horde_sim::flows::{run_scenario, FlowRecord, FlowReport, FlowScenario, PlannedFlow};
use serde::{Deserialize, Serialize};

use horde_flows::{kernel_cc, ClientResult, ConnectOptions, ServerRetransmits};

#[derive(Subcommand)]
pub enum Command {
    /// Run a flow scenario in the simulator (smoltcp TCP in virtual time).
    Sim(RunArgs),
    /// Run a flow scenario in real time: kernel TCP over `horde shell` links with the
    /// scenario's models (root).
    Emu(RunArgs),
}

#[derive(ClapArgs)]
pub struct RunArgs {
    /// Flow scenario (TOML; docs/flows.md).
    file: PathBuf,
    /// Override the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Print the report as JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
    /// Write report.json, flows.csv, summary.csv and fct_cdf.svg here.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// emu only: kernel TCP's initial window in segments (passed to `horde shell`), e.g.
    /// 2 to start like smoltcp; the kernel default (10) when absent.
    #[arg(long, value_name = "SEGMENTS")]
    initcwnd: Option<u32>,
    /// emu only: kernel TCP's minimum retransmission timeout in ms (passed to `horde
    /// shell`), e.g. 1000 to time out like smoltcp; the kernel default (200) when absent.
    #[arg(long, value_name = "MS")]
    rto_min: Option<u32>,
}

pub fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Sim(a) => sim(a),
        Command::Emu(a) => emu(a),
    }
}

fn load(file: &Path, seed: Option<u64>) -> Result<FlowScenario> {
    let mut s = FlowScenario::load(file)?;
    if let Some(seed) = seed {
        s.seed = seed;
    }
    Ok(s)
}

fn publish(report: &FlowReport, args: &RunArgs) -> Result<ExitCode> {
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.table());
    }
    if let Some(dir) = &args.out {
        report
            .write_dir(dir)
            .with_context(|| format!("write {}", dir.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn sim(args: RunArgs) -> Result<ExitCode> {
    ensure!(
        args.initcwnd.is_none() && args.rto_min.is_none(),
        "--initcwnd and --rto-min apply to `flows emu` only"
    );
    let s = load(&args.file, args.seed)?;
    let wall = Instant::now();
    let report = run_scenario(&s)?;
    eprintln!(
        "simulated {:.1} s in {:.2} s of wall time",
        report.run_s,
        wall.elapsed().as_secs_f64()
    );
    publish(&report, &args)
}

/// What `horde flow client --workload` hands back to `horde flows emu`.
#[derive(Debug, Serialize, Deserialize)]
pub struct ClientRun {
    pub elapsed_s: f64,
    pub flows: Vec<ClientResult>,
}

/// Records from the client's results and the server's retransmission counts.
pub(crate) fn records(
    s: &FlowScenario,
    plan: &[PlannedFlow],
    results: &[ClientResult],
    server: &std::collections::BTreeMap<u32, horde_flows::TcpCounters>,
) -> Vec<FlowRecord> {
    plan.iter()
        .map(|f| {
            let r = results.iter().find(|r| r.id == f.id);
            let completions: Vec<Duration> = r
                .map(|r| {
                    r.completions_us
                        .iter()
                        .map(|&us| Duration::from_micros(us))
                        .collect()
                })
                .unwrap_or_default();
            let rtx =
                r.map_or(0, |r| r.retransmits) + server.get(&f.id).map_or(0, |c| c.retransmits);
            FlowRecord::new(f, &s.flows, &completions, rtx)
        })
        .collect()
}

/// `horde flow client --workload FILE`: run the plan against a server.
pub fn client(
    file: &Path,
    seed: Option<u64>,
    server: SocketAddr,
    results: Option<&Path>,
) -> Result<ExitCode> {
    let s = load(file, seed)?;
    let cc = kernel_cc(s.tcp.congestion)?;
    let plan = s.plan().map_err(anyhow::Error::msg)?;
    let wall = Instant::now();
    let flows = horde_flows::run_client(&plan, server, s.end(), &ConnectOptions::tcp(cc));
    let run = ClientRun {
        elapsed_s: wall.elapsed().as_secs_f64(),
        flows,
    };
    match results {
        Some(path) => std::fs::write(path, serde_json::to_string(&run)?)
            .with_context(|| format!("write {}", path.display()))?,
        None => {
            // Standalone: the server's retransmissions are not known here.
            let recs = records(&s, &plan, &run.flows, &Default::default());
            let report =
                FlowReport::new(&s.name, "kernel", cc, s.seed, run.elapsed_s, &s.flows, recs);
            print!("{}", report.table());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `horde flow server --workload`: answer flow-protocol connections.
pub fn server(listen: SocketAddr, count: Option<u64>) -> Result<ExitCode> {
    let listener = TcpListener::bind(listen).with_context(|| format!("bind {listen}"))?;
    eprintln!(
        "flow workload server listening on {}",
        listener.local_addr()?
    );
    horde_flows::serve(listener, None, count, ServerRetransmits::default(), true)?;
    Ok(ExitCode::SUCCESS)
}

fn emu(args: RunArgs) -> Result<ExitCode> {
    let s = load(&args.file, args.seed)?;
    let cc = kernel_cc(s.tcp.congestion)?;
    ensure!(
        horde_emu::sys::is_root(),
        "horde flows emu needs root (horde shell creates a network namespace and TUN devices)"
    );
    let link = horde_shell::link_text(&s.up, &s.down, &s.base_dir)?;
    let plan = s.plan().map_err(anyhow::Error::msg)?;
    // The server runs here, on the host side of the emulated link; the client inside.
    let listener = TcpListener::bind("0.0.0.0:0").context("bind the flow server")?;
    let port = listener.local_addr()?.port();
    let retrans = ServerRetransmits::default();
    {
        let retrans = retrans.clone();
        let cc = cc.to_string();
        std::thread::spawn(move || horde_flows::serve(listener, Some(cc), None, retrans, false));
    }
    let results_path =
        std::env::temp_dir().join(format!("horde-flows-{}.json", std::process::id()));
    let exe = std::env::current_exe().context("find the horde binary")?;
    let file = args
        .file
        .canonicalize()
        .unwrap_or_else(|_| args.file.clone());
    let mut shell_args = vec!["--seed".to_string(), s.seed.to_string()];
    if let Some(n) = args.initcwnd {
        shell_args.extend(["--initcwnd".to_string(), n.to_string()]);
    }
    if let Some(ms) = args.rto_min {
        shell_args.extend(["--rto-min".to_string(), ms.to_string()]);
    }
    shell_args.extend(["--link".to_string(), link]);
    eprintln!("horde shell {}", shell_args.join(" "));
    let status = Process::new(&exe)
        .arg("shell")
        .args(&shell_args)
        .arg("--")
        .args([
            "sh",
            "-c",
            "exec \"$0\" flow client --workload \"$1\" --seed \"$2\" --connect \"$HORDE_SHELL_HOST:$3\" --results \"$4\"",
        ])
        .arg(&exe)
        .arg(&file)
        .arg(s.seed.to_string())
        .arg(port.to_string())
        .arg(&results_path)
        .status()
        .context("run horde shell")?;
    let text = std::fs::read_to_string(&results_path);
    let _ = std::fs::remove_file(&results_path);
    ensure!(status.success(), "horde shell exited with {status}");
    let run: ClientRun = serde_json::from_str(&text.context("read the client's results")?)?;
    // Server threads record a connection once they see its close; give stragglers a moment.
    let connected = run.flows.iter().filter(|f| f.error.is_none()).count();
    let deadline = Instant::now() + Duration::from_secs(3);
    while retrans.lock().expect("no panics hold it").len() < connected && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let server = retrans.lock().expect("no panics hold it").clone();
    let recs = records(&s, &plan, &run.flows, &server);
    let report = FlowReport::new(&s.name, "kernel", cc, s.seed, run.elapsed_s, &s.flows, recs);
    publish(&report, &args)
}
