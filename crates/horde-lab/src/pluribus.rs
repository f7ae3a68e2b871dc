//! `horde-lab pluribus sim FILE`: the PluriBus comparison in the simulator. Every load factor
//! (and bad-state loss rate) of a tunnel scenario's sweep, for each tunnel mode and each
//! direct single-path baseline, with smoltcp TCP in virtual time; a table on stdout, and
//! JSON and CSV with `--out`. `horde-lab pluribus live FILE` runs the same sweep in real
//! time with kernel TCP, plus Linux MPTCP (see `live`).

mod live;
mod live_report;
mod server_ns;
mod tunnel_files;
mod vehicle;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args as ClapArgs, Subcommand};
use horde_sim::flows::sweep::run_sweep;
use horde_sim::flows::tunnel_scenario::TunnelScenario;
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Subcommand)]
pub enum Command {
    /// Run a tunnel scenario's sweep in the simulator (smoltcp TCP in virtual time).
    Sim(SimArgs),
    /// Run a tunnel scenario's sweep in real time (root): kernel TCP through `horde
    /// tunnel` per mode, Linux MPTCP and single-path TCP, over `horde shell` links.
    Live(live::LiveArgs),
    /// One live run's vehicle side, inside `horde shell` (started by `pluribus live`).
    #[command(hide = true)]
    Vehicle(vehicle::VehicleArgs),
}

#[derive(ClapArgs)]
pub struct SimArgs {
    /// Tunnel scenario (TOML; docs/pluribus.md), e.g. scenarios/pluribus/a.toml.
    file: PathBuf,
    /// Override the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Override the sweep's load factors, e.g. `--loads 1,8`.
    #[arg(long, value_delimiter = ',')]
    loads: Option<Vec<f64>>,
    /// Run only these modes (names from the scenario; `direct:LINK` for a baseline).
    #[arg(long, value_delimiter = ',')]
    modes: Option<Vec<String>>,
    /// Override the scenario's arrival period, in seconds.
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Print the report as JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
    /// Write sweep.json, sweep.csv and table.txt here.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

pub fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Sim(a) => sim(a),
        Command::Live(a) => live::run(a),
        Command::Vehicle(a) => vehicle::run(a),
    }
}

fn sim(args: SimArgs) -> Result<ExitCode> {
    let mut s = TunnelScenario::load(&args.file)?;
    if let Some(seed) = args.seed {
        s.seed = seed;
    }
    if let Some(loads) = args.loads {
        anyhow::ensure!(
            loads.iter().all(|l| l.is_finite() && *l > 0.0),
            "--loads must be positive numbers"
        );
        s.loads = loads;
    }
    if let Some(d) = args.duration {
        anyhow::ensure!(d.is_finite() && d > 0.0, "--duration must be positive");
        s.duration_s = d;
    }
    for &f in &s.loads {
        s.plan(f)
            .map_err(|m| anyhow::anyhow!("at load {f}x: {m}"))?;
    }
    let bar = ProgressBar::new(1);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} runs ({eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(s.name.clone());
    let wall = Instant::now();
    let report = run_sweep(&s, args.modes.as_deref(), |i, total, row| {
        bar.set_length(total as u64);
        bar.set_position(i as u64 + 1);
        bar.set_message(format!("{} {}x {}", s.name, row.load, row.mode));
    })?;
    bar.finish_and_clear();
    eprintln!(
        "{} runs in {:.1} s of wall time",
        report.rows.len(),
        wall.elapsed().as_secs_f64()
    );
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.table());
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        for (name, text) in [
            ("sweep.json", report.to_json()),
            ("sweep.csv", report.to_csv()),
            ("table.txt", report.table()),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
