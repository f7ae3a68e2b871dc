//! `horde`: run Horde's demo, simulator, emulator, sender and receiver, check hose
//! objectives, and make and measure link traces.

mod allocator;
mod analyze;
mod bench;
mod demo;
mod demo_setup;
mod docgen;
mod drops;
mod emu;
mod fleet;
mod flow;
mod flows;
mod hint;
mod hose;
mod keygen;
mod live;
mod messages;
mod metrics;
mod peer;
mod pipe;
mod report;
mod screen;
mod shell;
mod sigint;
mod sim;
mod status;
mod table;
mod trace;
mod transfer;
mod tunnel;
mod up;
mod verdict;
mod vopr;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "horde",
    version,
    about = "Application-driven multipath transport over wireless WAN links"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Telemedicine streams over three emulated cellular links, with and without objectives.
    Demo(demo::Args),
    /// Run a scenario in the discrete-event simulator.
    Sim(sim::Args),
    /// Run the real-time link emulator.
    Emu(emu::Args),
    /// Send synthetic streams, prioritised messages with deadlines (`[[messages]]`), or a
    /// file or a pipe (`--file`), to a receiver over real UDP channels.
    Send(peer::SendArgs),
    /// Receive streams from senders over real UDP channels, or one file or pipe
    /// (`--out`).
    Recv(peer::RecvArgs),
    /// Show the peers, handshakes and channels of a running `horde send`/`recv` started
    /// with `--status FILE`, in the manner of `wg show`.
    Status(status::Args),
    /// Make a static key pair for `horde send` / `horde recv`.
    Keygen(keygen::Args),
    /// hose objective tools.
    Hose {
        #[command(subcommand)]
        command: hose::Command,
    },
    /// Whole-run benchmarks: controllers over a scenario's links, simulated and real time.
    Bench {
        #[command(subcommand)]
        command: bench::Command,
    },
    /// Cellular-like Mahimahi traces: generate them, measure any trace.
    Trace {
        #[command(subcommand)]
        command: trace::Command,
    },
    /// Whole IP traffic through TUN devices over every channel: `tunnel client|server CONFIG` (root).
    Tunnel {
        #[command(subcommand)]
        command: tunnel::Command,
    },
    /// A tunnel end with the host's network set up around it, like `wg-quick up`:
    /// per-link policy routing (client), forwarding and NAT (server); undone on exit (root).
    Up(up::UpArgs),
    /// Undo what a killed `horde up CONFIG` left behind (root).
    Down(up::DownArgs),
    /// Run a command in a network namespace whose interfaces are emulated links (root).
    Shell(shell::Args),
    /// Kernel TCP/MPTCP bulk transfer: `flow server`, `flow client --bytes N`.
    Flow {
        #[command(subcommand)]
        command: flow::Command,
    },
    /// Flow workloads and completion times: `flows sim FILE` (smoltcp), `flows emu FILE` (kernel TCP, root).
    Flows {
        #[command(subcommand)]
        command: flows::Command,
    },
    /// Print shell completions: `horde completions bash > /etc/bash_completion.d/horde`.
    Completions(docgen::CompletionsArgs),
    /// Print the man page (roff), or write one per subcommand with --out DIR.
    Man(docgen::ManArgs),
    /// Deterministic fault-injection simulation: run seeds, check invariants, replay one.
    Vopr(vopr::Args),
    /// Trace analysis (lagged NMI, wavelets, distributions, pcap RTTs) and CDMA2000 probes.
    Analyze {
        #[command(subcommand)]
        command: analyze::Command,
    },
}

fn main() -> ExitCode {
    allocator::keep_large_blocks_mapped();
    let cli = Cli::parse();
    // `send` and `recv` say by default when a session ends, reconnects or gives up.
    let default_filter = match cli.command {
        Command::Send(_) | Command::Recv(_) => "warn,horde_host=info",
        // The simulated hosts' own warnings (an initiation a fault corrupted) are the
        // faults working; the run's report says what matters.
        Command::Vopr(_) => "warn,horde_host=error",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default_filter.into()),
        )
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal, not in a log file or a pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if matches!(
        cli.command,
        Command::Demo(_)
            | Command::Sim(_)
            | Command::Hose { .. }
            | Command::Trace { .. }
            | Command::Analyze { .. }
            | Command::Vopr(_)
            | Command::Completions(_)
            | Command::Man(_)
            | Command::Keygen(_)
            | Command::Status(_)
    ) {
        pipe::end_quietly_when_stdout_closes();
    }
    let result = match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::Sim(a) => sim::run(a),
        Command::Emu(a) => emu::run(a),
        Command::Send(a) => peer::send(a),
        Command::Recv(a) => peer::recv(a),
        Command::Keygen(a) => keygen::run(a),
        Command::Status(a) => status::run(a),
        Command::Hose { command } => hose::run(command),
        Command::Trace { command } => trace::run(command),
        Command::Bench { command } => bench::run(command),
        Command::Shell(a) => shell::run(a),
        Command::Tunnel { command } => tunnel::run(command),
        Command::Up(a) => up::up(a),
        Command::Down(a) => up::down(a),
        Command::Flow { command } => flow::run(command),
        Command::Flows { command } => flows::run(command),
        Command::Completions(a) => docgen::completions(a),
        Command::Man(a) => docgen::man(a),
        Command::Analyze { command } => analyze::run(command),
        Command::Vopr(a) => vopr::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", message(&e));
            ExitCode::from(1)
        }
    }
}

/// The error and its causes, `: `-separated as `{:#}` prints them, but without a cause
/// whose text its parent's message already ends with (many errors quote their source).
fn message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}
