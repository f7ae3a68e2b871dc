//! `horde emu`: run the real-time link emulator from a TOML file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use horde_emu::EmulatorConfig;

#[derive(clap::Args)]
pub struct Args {
    /// Emulator configuration (TOML): channels with listen/forward_to addresses and links.
    config: PathBuf,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
    /// Seconds between statistics tables.
    #[arg(long, default_value_t = 5.0)]
    report_every: f64,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let config = EmulatorConfig::from_file(&args.config)?;
    let duration = args.duration.map(seconds).transpose()?;
    let every = seconds(args.report_every)?;
    horde_emu::run_until(&config, duration, every)?;
    Ok(ExitCode::SUCCESS)
}

/// A run length given in seconds: positive and at most a year.
pub use horde_apps::seconds;
