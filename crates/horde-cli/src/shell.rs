//! `horde shell --link SPEC [--link SPEC ...] -- COMMAND`: run a command in a network
//! namespace whose interfaces reach the host only through emulated links (the
//! `horde-shell` crate; docs/shell.md). This file parses the arguments and prints the
//! counters and the exit code.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitCode, ExitStatus};

use anyhow::Result;

#[derive(clap::Args)]
pub struct Args {
    /// One emulated link, e.g. `rate=10mbit,delay=20ms` or
    /// `delay=30ms,buffer=150kb,up=trace:traces/cell-a.up`; repeat for more links.
    /// Keys: rate, delay, jitter, buffer, loss, down_at, rate_at, up=..., down=... (docs/shell.md).
    #[arg(long = "link", required = true, value_name = "SPEC")]
    links: Vec<String>,
    /// Configure MPTCP in the namespace: one subflow endpoint per extra link.
    #[arg(long)]
    mptcp: bool,
    /// Write one CSV per link and direction (arrival, departure, size, dropped) here.
    #[arg(long, value_name = "DIR")]
    log: Option<PathBuf>,
    /// Write one pcap (raw IP) per link and direction of the delivered packets here.
    #[arg(long, value_name = "DIR")]
    pcap: Option<PathBuf>,
    /// Seed of the links' random processes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Initial congestion window, in segments, of TCP over the links (route `initcwnd`,
    /// both ways); the kernel default (10) when absent.
    #[arg(long, value_name = "SEGMENTS", value_parser = clap::value_parser!(u32).range(1..=1000))]
    initcwnd: Option<u32>,
    /// Minimum retransmission timeout of TCP over the links, in ms (route `rto_min`,
    /// both ways); the kernel default (200 ms) when absent.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u32).range(1..=60_000))]
    rto_min: Option<u32>,
    /// Print the emulator's per-link counters to stderr when the command ends.
    #[arg(long)]
    stats: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let options = horde_shell::Options {
        links: args.links,
        mptcp: args.mptcp,
        log: args.log,
        pcap: args.pcap,
        seed: args.seed,
        initcwnd: args.initcwnd,
        rto_min: args.rto_min,
    };
    let ended = horde_shell::run(&options, &args.command)?;
    if args.stats {
        eprintln!("{}", ended.stats);
    }
    let status = ended.status;
    // The namespace goes with it.
    drop(ended);
    Ok(exit_code(status))
}

/// The command's exit code, or 128 + signal like a POSIX shell.
fn exit_code(status: ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(code as u8),
        (None, Some(sig)) => ExitCode::from(128u8.saturating_add(sig as u8)),
        _ => ExitCode::FAILURE,
    }
}
