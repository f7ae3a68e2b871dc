//! `horde sim`: run a scenario in virtual time.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use horde_sim::engine::Simulation;
use horde_sim::metrics::Report;
use horde_sim::scenario::Scenario;
use indicatif::{ProgressBar, ProgressStyle};

#[derive(clap::Args)]
pub struct Args {
    /// Scenario file (TOML). Without one, the built-in telemedicine scenario runs.
    file: Option<PathBuf>,
    /// Override the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Override the simulated duration, in seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Override the scheduler (e.g. rrr).
    #[arg(long)]
    scheduler: Option<String>,
    /// Print one JSON object with the results on stdout.
    #[arg(long)]
    json: bool,
    /// Write report.json, CSV files and a latency CDF plot into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Length of each goodput-series interval, in seconds.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let mut scenario = match &args.file {
        Some(f) => Scenario::load(f)?,
        None => Scenario::builtin(),
    };
    if let Some(s) = args.seed {
        scenario.seed = s;
    }
    if let Some(d) = args.duration {
        anyhow::ensure!(
            d > 0.0 && d.is_finite(),
            "--duration must be a positive number of seconds, got {}",
            horde_config::shown(d)
        );
        anyhow::ensure!(
            d <= horde_config::MAX_SECONDS,
            "--duration must be at most {} seconds (a year), got {}",
            horde_config::MAX_SECONDS,
            horde_config::shown(d)
        );
        scenario.duration_s = d;
    }
    if let Some(k) = &args.scheduler {
        scenario.scheduler.kind = k.clone();
    }
    anyhow::ensure!(
        args.interval > 0.0 && args.interval.is_finite(),
        "--interval must be a positive number of seconds, got {}",
        args.interval
    );
    let report = simulate(&scenario, Duration::from_secs_f64(args.interval))?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        report
            .write_json(dir)
            .with_context(|| format!("writing into {}", dir.display()))?;
        report
            .write_csv(dir)
            .with_context(|| format!("writing into {}", dir.display()))?;
        report
            .write_cdf_plot(dir)
            .with_context(|| format!("writing into {}", dir.display()))?;
    }
    if args.json {
        println!("{}", report.to_json());
    } else {
        print_summary(&scenario, &report);
        if let Some(dir) = &args.out {
            println!("\nwrote report.json, streams.csv, channels.csv, latency_cdf.csv, goodput.csv, latency_cdf.svg to {}", dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Run a scenario with a progress bar on the terminal; the report's goodput series is
/// in steps of `interval`.
pub fn simulate(scenario: &Scenario, interval: Duration) -> Result<Report> {
    let topo = horde_sim::build::topology(scenario)?;
    let mut sim = Simulation::new(topo)?;
    sim.set_goodput_interval(interval);
    let total = sim.duration();
    let bar = ProgressBar::new(total.as_secs().max(1));
    bar.set_style(
        ProgressStyle::with_template("{spinner} simulating {msg} [{bar:30}] {pos}/{len} s ({eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(scenario.name.clone());
    let report = sim.run(|t: Duration| bar.set_position(t.as_secs()));
    bar.finish_and_clear();
    Ok(report)
}

fn print_summary(scenario: &Scenario, report: &Report) {
    let json: serde_json::Value =
        serde_json::from_str(&report.to_json()).expect("report is valid JSON");
    println!(
        "{}: {} s simulated, seed {}, scheduler {}",
        scenario.name, scenario.duration_s, scenario.seed, scenario.scheduler.kind
    );
    let mut rows = vec![vec![
        "stream".to_string(),
        "sent".into(),
        "delivered".into(),
        "lost".into(),
        "mean ms".into(),
        "median ms".into(),
        "p95 ms".into(),
        "1-way p50".into(),
        "1-way p95".into(),
        "in-order p95".into(),
        "goodput kbps".into(),
        "channels".into(),
    ]];
    for s in json["streams"].as_array().into_iter().flatten() {
        let lat = &s["latency_ms"];
        let one_way = &s["one_way_delay_ms"];
        let in_order = &s["in_order_delay_ms"];
        let f = |v: &serde_json::Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.0}"));
        let shares = s["channels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}:{v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        rows.push(vec![
            s["id"].to_string(),
            s["sent"].to_string(),
            s["delivered"].to_string(),
            s["lost"].to_string(),
            f(&lat["mean"]),
            f(&lat["median"]),
            f(&lat["p95"]),
            f(&one_way["median"]),
            f(&one_way["p95"]),
            f(&in_order["p95"]),
            f(&s["delivered_goodput_kbps"]),
            shares,
        ]);
    }
    print!("{}", crate::table::render(&rows));
    let mut rows = vec![vec!["channel".to_string(), "sent".into(), "lost".into()]];
    for c in json["channels"].as_array().into_iter().flatten() {
        rows.push(vec![
            c["name"].as_str().unwrap_or("?").to_string(),
            c["sent"].to_string(),
            c["lost"].to_string(),
        ]);
    }
    println!();
    print!("{}", crate::table::render(&rows));
}
