//! `horde trace gen` and `horde trace stats`: make cellular-like Mahimahi traces and
//! measure any trace.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use horde_config::input::Kind;
use horde_links::cellular::{self, CellularParams};
use horde_links::{Trace, TraceStats};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Generate a cellular-like Mahimahi trace.
    ///
    /// One ms timestamp per 1500-byte delivery opportunity, from rate states with dwell
    /// times, fading within them, and outages of 100 ms to 1 s, scaled to the mean. The
    /// same arguments always give the same trace. See docs/traces.md.
    Gen(GenArgs),
    /// Measure traces: mean rate, variation at 100 ms, gaps.
    ///
    /// Prints each trace's mean rate, coefficient of variation at 100 ms bins, share of
    /// time in gaps of at least 100 ms and longest gap. Exits 1 if any file cannot be read
    /// or parsed (the others are still measured).
    Stats {
        /// Mahimahi trace files; `-` reads standard input.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print a JSON array with one object per file instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Args)]
pub struct GenArgs {
    /// Long-run capacity in Mbit/s (default 6, or the --params file's).
    #[arg(long, value_parser = positive_number, allow_hyphen_values = true)]
    mean_mbps: Option<f64>,
    /// Length of the trace (its repeat period) in seconds; whole milliseconds.
    #[arg(long, default_value = "60", value_parser = positive_number, allow_hyphen_values = true)]
    duration_s: f64,
    /// Seed of every random draw.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// TOML file with the process's parameters (`mean_mbps`, `states`, `fading_sigma`,
    /// `fading_coherence_ms`, `outage_interval_s`, `outage_min_ms`, `outage_max_ms`);
    /// anything missing keeps its default.
    #[arg(long)]
    params: Option<PathBuf>,
    /// Write the trace to this file instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// A finite number above zero.
fn positive_number(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        Ok(_) => Err(format!("must be a positive number, got {s}")),
        Err(_) => Err(format!("expected a number, found {s:?}")),
    }
}

pub fn run(cmd: Command) -> Result<ExitCode> {
    match cmd {
        Command::Gen(args) => generate(args),
        Command::Stats { files, json } => stats(&files, json),
    }
}

fn generate(args: GenArgs) -> Result<ExitCode> {
    let mut params = match &args.params {
        Some(path) => horde_config::load::<CellularParams>(path)?,
        None => CellularParams::default(),
    };
    if let Some(mean) = args.mean_mbps {
        params.mean_mbps = mean;
    }
    let duration_ms = (args.duration_s * 1000.0).round();
    anyhow::ensure!(
        (1.0..=cellular::MAX_DURATION_MS as f64).contains(&duration_ms),
        "--duration-s must be between 0.001 and {} seconds, got {}",
        cellular::MAX_DURATION_MS / 1000,
        horde_config::shown(args.duration_s)
    );
    let trace = cellular::generate(&params, duration_ms as u64, args.seed)?;
    match &args.out {
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            let mut out = std::io::BufWriter::new(file);
            trace
                .write_mahimahi(&mut out)
                .and_then(|()| out.flush())
                .with_context(|| format!("writing {}", path.display()))?;
        }
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            match trace.write_mahimahi(&mut out).and_then(|()| out.flush()) {
                // A reader that stops early (`| head`) is not an error.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                written => written.context("writing the trace to standard output")?,
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn stats(files: &[PathBuf], json: bool) -> Result<ExitCode> {
    let mut measured = Vec::new();
    let mut failed = false;
    for path in files {
        let parsed = if path.as_os_str() == "-" {
            read_stdin().and_then(|bytes| Trace::parse_bytes("<stdin>", &bytes))
        } else {
            Trace::from_path(path)
        };
        match parsed {
            Ok(trace) => measured.push((path.display().to_string(), TraceStats::of(&trace))),
            Err(e) => {
                eprintln!("error: {e}");
                failed = true;
            }
        }
    }
    if json {
        let rows: Vec<_> = measured
            .iter()
            .map(|(file, s)| {
                let mut row = serde_json::to_value(s).expect("stats serialize");
                row["file"] = file.clone().into();
                row
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
    } else if !measured.is_empty() {
        print_table(&measured);
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn read_stdin() -> Result<Vec<u8>, horde_links::TraceError> {
    horde_config::input::read_from(std::io::stdin().lock(), Kind::LINK_TRACE).map_err(|source| {
        horde_links::TraceError::Io {
            file: "<stdin>".to_owned(),
            source,
        }
    })
}

fn print_table(measured: &[(String, TraceStats)]) {
    let width = measured
        .iter()
        .map(|(f, _)| f.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    println!(
        "{:<width$}  {:>10}  {:>8}  {:>9}  {:>12}  {:>11}",
        "file", "duration s", "Mbit/s", "CV 100ms", "in gaps≥100ms", "longest gap"
    );
    for (file, s) in measured {
        let cv = s.cv_100ms.map_or("-".to_owned(), |cv| format!("{cv:.2}"));
        println!(
            "{:<width$}  {:>10.1}  {:>8.2}  {:>9}  {:>12.1}%  {:>8} ms",
            file,
            s.duration_s,
            s.mean_mbps,
            cv,
            s.gap_fraction * 100.0,
            s.longest_gap_ms
        );
    }
}
