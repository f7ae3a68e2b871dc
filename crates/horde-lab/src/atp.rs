//! `horde-lab atp table1`: the ATP paper's Table 1 (Atkin & Birman, "Evaluation of an
//! Adaptive Transport Protocol", §4.4) with Horde's message layer in virtual time, beside
//! the paper's figures. See `docs/atp-experiments.md`.

mod adaptive;
mod host;
mod rate;
mod table1;
mod traces;

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use clap::{Args as ClapArgs, Subcommand};

#[derive(Subcommand)]
pub enum Command {
    /// Table 1: a four-level adaptive application with bandwidth notifications only and
    /// with callbacks plus priorities, at poll delays of 1 s and 3 s, on the synthetic
    /// 0-200 KB/s trace and on a cellular-like trace.
    Table1(Table1Args),
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
    }
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
