//! `horde-lab`: experiments run with Horde, kept out of the `horde` binary. The live
//! runners start the `horde` binary for `horde shell` and `horde tunnel`; see
//! [`horde_binary`] for how they find it.

mod atp;
mod chap;
mod pluribus;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "horde-lab", version, about = "Experiments run with Horde")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The PluriBus comparison: `pluribus sim FILE` runs a tunnel scenario's sweep.
    Pluribus {
        #[command(subcommand)]
        command: pluribus::Command,
    },
    /// The ATP experiments: `atp table1` reproduces the ATP paper's Table 1.
    Atp {
        #[command(subcommand)]
        command: atp::Command,
    },
    /// The CHAP experiments: `chap multi-app` reproduces the dissertation's Table 6.10.
    Chap {
        #[command(subcommand)]
        command: chap::Command,
    },
}

/// The variable that names the `horde` binary the live runners start.
pub const HORDE_BIN: &str = "HORDE_BIN";

/// The `horde` binary: `$HORDE_BIN` if set, else `horde` next to this executable (where
/// cargo puts both, e.g. `target/release/`).
pub fn horde_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(HORDE_BIN) {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().context("find the horde-lab binary")?;
    let path = exe.with_file_name("horde");
    if !path.is_file() {
        bail!(
            "no horde binary at {}: build it (cargo build --release -p horde-cli) or set {HORDE_BIN}",
            path.display()
        );
    }
    Ok(path)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Pluribus { command } => pluribus::run(command),
        Command::Atp { command } => atp::run(command),
        Command::Chap { command } => chap::run(command),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
