//! `horde bench fleet`: N simulated vehicles against a real `horde recv --server`
//! process (the load generator is `horde_fleet`; docs/fleet.md).

use std::process::ExitCode;

use anyhow::{Context, Result};
use horde_fleet::{FleetConfig, ServerCommand};

#[derive(clap::Args)]
pub struct FleetArgs {
    /// Vehicles, each with three channels of its own.
    #[arg(long, default_value_t = 1000)]
    vehicles: u32,
    /// Keepalive interval of the vehicles and the server, s (idle timeout: three times).
    #[arg(long, default_value_t = 10.0)]
    keepalive: f64,
    /// Length of the idle measurement, s, rounded up to a whole number of keepalive
    /// intervals; it starts after the fleet's first keepalive round.
    #[arg(long, default_value_t = 20.0)]
    idle: f64,
    /// How long all vehicles send at once, s.
    #[arg(long, default_value_t = 10.0)]
    load: f64,
    /// Each vehicle's telemetry interval around the server restart, s.
    #[arg(long, default_value_t = 1.0)]
    telemetry: f64,
    /// How long connecting, and reconnecting after the restart, may take, s.
    #[arg(long, default_value_t = 60.0)]
    limit: f64,
    /// Bytes per ADU.
    #[arg(long, default_value_t = 1000)]
    adu_bytes: usize,
    /// Draws the vehicles' and the server's keys.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// All three channels of a vehicle send from one socket (N open files instead of
    /// 3N, where the open-file limit is too low for 3N).
    #[arg(long)]
    one_socket: bool,
    /// Print the figures as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: FleetArgs) -> Result<ExitCode> {
    let program = std::env::current_exe().context("finding the horde binary")?;
    let cfg = FleetConfig {
        vehicles: args.vehicles,
        server: ServerCommand { program },
        seed: args.seed,
        keepalive_s: args.keepalive,
        idle_s: args.idle,
        load_s: args.load,
        adu_bytes: args.adu_bytes,
        telemetry_s: args.telemetry,
        limit_s: args.limit,
        one_socket: args.one_socket,
        work_dir: std::env::temp_dir(),
    };
    let report = horde_fleet::run(&cfg)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(ExitCode::SUCCESS)
}
