//! `horde-lab atp table1` and `table2`: the ATP paper's Tables 1 and 2 (Atkin & Birman,
//! "Evaluation of an Adaptive Transport Protocol", §4.4 and §5.4) with Horde's message
//! layer in virtual time, Table 2 also with its endpoint over real sockets, beside NAI-TCP
//! on kernel TCP (MPTCP over several links). See `docs/atp-experiments.md`.

mod adaptive;
mod host;
mod nai_tcp;
mod rate;
mod replay;
mod sockets;
mod table1;
mod table2;
mod traces;
mod workloads;

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args as ClapArgs, Subcommand};

#[derive(Subcommand)]
pub enum Command {
    /// Table 1: a four-level adaptive application with bandwidth notifications only and
    /// with callbacks plus priorities, at poll delays of 1 s and 3 s, on the synthetic
    /// 0-200 KB/s trace and on a cellular-like trace.
    Table1(Table1Args),
    /// Table 2: six workloads over the synthetic trace, delivery by priority before the
    /// timers, for Horde's messages (virtual time, and over real sockets through an
    /// emulated link in real time) and NAI-TCP on kernel TCP through a `horde shell` link
    /// (real time; needs root).
    Table2(Table2Args),
    /// NAI-TCP's sender, run inside `horde shell` by `table2`.
    #[command(hide = true)]
    NaiTcpSend(NaiTcpSendArgs),
}

#[derive(ClapArgs)]
pub struct Table2Args {
    /// Compress the trace and the workloads' span by this factor (1, 2, 5 or 10): the
    /// same rates, intervals and timers over 300/N seconds. NAI-TCP runs in real time, so
    /// the full table takes about 6 × 300/N s.
    #[arg(long, default_value_t = 1)]
    speedup: u64,
    /// Comma-separated workloads (uniform, prioritised, reversed, filesystem, overload,
    /// random); all by default.
    #[arg(long, value_delimiter = ',')]
    workloads: Vec<String>,
    /// Seed of the random workload and the links.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// NAI-MTCP(k) for each of these k (one connection per priority level, k for the
    /// most important).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    mtcp: Vec<usize>,
    /// Leave NAI-TCP and NAI-MTCP out (no root needed; Horde's rows only).
    #[arg(long)]
    no_tcp: bool,
    /// Leave NAI-MTCP out.
    #[arg(long)]
    no_mtcp: bool,
    /// Leave out Horde over real sockets (its message endpoint over emulated links in
    /// real time).
    #[arg(long)]
    no_sockets: bool,
    /// Beyond ATP: run over every channel of this scenario at once (e.g.
    /// scenarios/cellular3.toml) instead of the synthetic trace; the TCP rows use MPTCP
    /// with one subflow per link, and Horde runs over real sockets only.
    #[arg(long)]
    scenario: Option<std::path::PathBuf>,
    /// Multiply every message's size by this (the workloads are sized for the synthetic
    /// trace's 0-200 KB/s; links ten times faster need ten times the load to contend).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    scale: u64,
    /// Print the rows as JSON instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs)]
pub struct NaiTcpSendArgs {
    #[arg(long)]
    workload: String,
    #[arg(long)]
    speedup: u64,
    #[arg(long)]
    seed: u64,
    /// The receiver's port on `HORDE_SHELL_HOST`.
    #[arg(long)]
    port: u16,
    /// 0 for NAI-TCP, k for NAI-MTCP(k).
    #[arg(long)]
    high: usize,
    /// When to give up, ms from the start.
    #[arg(long)]
    stop_ms: u64,
    /// Where to write the outcome (JSON).
    #[arg(long)]
    out: std::path::PathBuf,
    /// Every message's size times this.
    #[arg(long, default_value_t = 1)]
    scale: u64,
    /// Open MPTCP connections.
    #[arg(long)]
    mptcp: bool,
}

#[derive(ClapArgs)]
pub struct Table1Args {
    /// Seed of the cellular-like trace.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also run each scheme with a feature turned off: notifications for the modal
    /// scheme, priorities or timers for callbacks plus priorities.
    #[arg(long)]
    ablations: bool,
    /// Print the rows and every run's per-second record as JSON instead of the table.
    #[arg(long)]
    json: bool,
}

pub fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Table1(a) => run_table1(a),
        Command::Table2(a) => run_table2(a),
        Command::NaiTcpSend(a) => {
            let workload = parse_workload(&a.workload)?;
            let arrivals = table2::arrivals(workload, table2::span(a.speedup), a.seed, a.scale);
            let layout = match a.high {
                0 => nai_tcp::Layout::Single,
                high => nai_tcp::Layout::PerPriority { high },
            };
            nai_tcp::send_command(
                a.port,
                &arrivals,
                |c| workload.priority(c),
                layout,
                std::time::Duration::from_millis(a.stop_ms),
                a.mptcp,
                &a.out,
            )?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn parse_workload(name: &str) -> Result<workloads::Workload> {
    workloads::Workload::parse(name).ok_or_else(|| {
        let names: Vec<&str> = workloads::ALL.iter().map(|w| w.name()).collect();
        anyhow::anyhow!(
            "unknown workload {name:?}; expected one of {}",
            names.join(", ")
        )
    })
}

fn run_table2(a: Table2Args) -> Result<ExitCode> {
    let started = Instant::now();
    let workloads = if a.workloads.is_empty() {
        workloads::ALL.to_vec()
    } else {
        a.workloads
            .iter()
            .map(|w| parse_workload(w))
            .collect::<Result<Vec<_>>>()?
    };
    if a.mtcp.contains(&0) {
        bail!("--mtcp takes numbers of high-priority connections, at least 1");
    }
    let links = match &a.scenario {
        Some(path) => {
            let scenario = horde_sim::scenario::Scenario::load(path).context("the scenario")?;
            table2::Links::Scenario(Box::new(scenario))
        }
        None => table2::Links::Synthetic,
    };
    if a.no_sockets && a.scenario.is_some() {
        bail!("--scenario runs Horde over sockets only; --no-sockets would leave no Horde row");
    }
    let options = table2::Options {
        links,
        scale: a.scale,
        speedup: a.speedup,
        workloads,
        seed: a.seed,
        sockets: !a.no_sockets,
        nai_tcp: !a.no_tcp,
        mtcp: if a.no_tcp || a.no_mtcp {
            Vec::new()
        } else {
            a.mtcp.clone()
        },
    };
    let files = traces::TraceFiles::write(a.seed)?;
    let rows = table2::run(&options, &files)?;
    if a.json {
        let out = serde_json::json!({ "speedup": a.speedup, "seed": a.seed, "rows": rows });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", table2::render(&rows, &options));
        println!("wall time {:.0} s", started.elapsed().as_secs_f64());
    }
    Ok(ExitCode::SUCCESS)
}

fn run_table1(a: Table1Args) -> Result<ExitCode> {
    let started = Instant::now();
    let files = traces::TraceFiles::write(a.seed)?;
    let configs = table1::configs(a.ablations);
    let mut rows = Vec::new();
    let mut runs = Vec::new();
    for config in configs {
        let (row, stats) = table1::run(config, &files)?;
        rows.push(row);
        runs.push(serde_json::json!({ "config": config, "stats": stats }));
    }
    if a.json {
        let out = serde_json::json!({ "seed": a.seed, "rows": rows, "runs": runs });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", table1::render(&rows));
        println!(
            "{} runs of {} s in virtual time; cellular trace seed {}; wall time {:.1} s",
            rows.len(),
            traces::TRACE_S,
            a.seed,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}
