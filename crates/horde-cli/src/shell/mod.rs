//! `horde shell --link SPEC [--link SPEC ...] -- COMMAND`: run a command in a network
//! namespace whose interfaces reach the host only through emulated links (one
//! `horde-links` model per direction), in the spirit of Mahimahi's mm-link.
//!
//! Design (docs/shell.md): link `i` is two TUN devices, `link{i}` inside the namespace
//! and `hs{k}h{i}` on the host, joined by one point-to-point channel of the `horde-emu`
//! engine. What the command sends leaves `link{i}`, crosses the `up` model and is
//! written into the host-side device, where the host kernel receives it; the host's
//! replies leave the host-side device, cross `down` and are written into `link{i}`.

mod link_arg;
mod netns;
mod packet_log;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use horde_emu::{
    link_seed, sys, Emulator, EmulatorHandle, PacketLogging, PacketPort, PortChannel, TimerOptions,
};
use horde_links::LinkError;

use link_arg::LinkArg;
use netns::{LinkDevices, Namespace, MAX_LINKS};
use packet_log::PacketLogs;

/// How often the shell checks on the command and writes packet logs.
const POLL: Duration = Duration::from_millis(20);
/// After forwarding a termination signal, how long the command gets before SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

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

/// The built `up` and `down` models of one link.
type LinkModels = (Box<dyn horde_links::Link>, Box<dyn horde_links::Link>);

/// Parse every `--link`, numbering errors from 1.
fn parse_links(specs: &[String]) -> Result<Vec<LinkArg>> {
    if specs.len() > MAX_LINKS {
        bail!("at most {MAX_LINKS} links, got {}", specs.len());
    }
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| LinkArg::parse(s).map_err(|e| anyhow::anyhow!("--link {}: {e}", i + 1)))
        .collect()
}

/// The `up` and `down` models of one `--link` value (for checking what others write).
#[cfg(test)]
pub(crate) fn parse_link_arg(
    text: &str,
) -> Result<(horde_links::LinkSpec, horde_links::LinkSpec), String> {
    LinkArg::parse(text)
        .map(|l| (l.up, l.down))
        .map_err(|e| e.to_string())
}

/// Build the link models (reading traces) for each `--link`.
fn build_channels(links: &[LinkArg], seed: u64) -> Result<Vec<LinkModels>> {
    let cwd = std::env::current_dir()?;
    let build = |i: usize, dir: &str, spec: &horde_links::LinkSpec, down: bool| {
        spec.build(link_seed(seed, i, down), &cwd)
            .map_err(|e| match e {
                // file:line: message first, so editors can jump to it.
                LinkError::Trace(t) => anyhow::anyhow!("{t} (--link {} {dir})", i + 1),
                other => anyhow::anyhow!("--link {}: {dir}: {other}", i + 1),
            })
    };
    links
        .iter()
        .enumerate()
        .map(|(i, l)| {
            Ok((
                build(i, "up", &l.up, false)?,
                build(i, "down", &l.down, true)?,
            ))
        })
        .collect()
}

pub fn run(args: Args) -> Result<ExitCode> {
    let links = parse_links(&args.links)?;
    let models = build_channels(&links, args.seed)?;
    if !sys::is_root() {
        bail!(
            "horde shell needs root (it creates a network namespace and TUN devices); \
             run it with sudo"
        );
    }
    sys::catch_stop_signals();
    let ns = Namespace::create()?;
    ns.prepare()?;
    let devices = (0..links.len())
        .map(|i| ns.add_link(i))
        .collect::<Result<Vec<_>>>()?;
    ns.default_route(&devices)?;
    let mut route_options = Vec::new();
    if let Some(n) = args.initcwnd {
        route_options.extend(["initcwnd".to_string(), n.to_string()]);
    }
    if let Some(ms) = args.rto_min {
        route_options.extend(["rto_min".to_string(), format!("{ms}ms")]);
    }
    if !route_options.is_empty() {
        ns.set_tcp_route_options(&devices, &route_options)
            .context("set TCP route options")?;
    }
    if args.mptcp {
        ns.configure_mptcp(&devices)
            .context("configure MPTCP endpoints")?;
    }
    let env = environment(&ns, &devices);
    let logging = match (args.log.is_some(), args.pcap.is_some()) {
        (_, true) => PacketLogging::RecordsWithPayload,
        (true, false) => PacketLogging::Records,
        _ => PacketLogging::Off,
    };
    let mut logs = PacketLogs::wanted(args.log.as_deref(), args.pcap.as_deref())
        .then(|| PacketLogs::create(args.log.as_deref(), args.pcap.as_deref(), links.len()))
        .transpose()?;
    let emu = start_emulator(devices, links, models, logging)?;

    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .args(&args.command)
        .envs(env)
        .spawn()
        .context("start the command")?;
    let status = supervise(&mut child, &emu, logs.as_mut())?;
    if let Some(logs) = logs.as_mut() {
        logs.write(emu.take_packet_records())?;
    }
    let stats = emu.shutdown();
    if let Some(logs) = logs.as_mut() {
        logs.flush()?;
    }
    if args.stats {
        eprintln!("{stats}");
    }
    drop(ns);
    Ok(exit_code(status))
}

/// `HORDE_SHELL_HOST`, `HORDE_SHELL_LINKS` and `HORDE_SHELL_LINK0..N-1`.
fn environment(ns: &Namespace, devices: &[LinkDevices]) -> Vec<(String, String)> {
    let mut env = vec![
        ("HORDE_SHELL_HOST".into(), devices[0].outer_addr.to_string()),
        ("HORDE_SHELL_LINKS".into(), devices.len().to_string()),
        ("HORDE_SHELL_NETNS".into(), ns.name.clone()),
    ];
    for (i, d) in devices.iter().enumerate() {
        env.push((format!("HORDE_SHELL_LINK{i}"), d.inner_addr.to_string()));
    }
    env
}

fn start_emulator(
    devices: Vec<LinkDevices>,
    links: Vec<LinkArg>,
    models: Vec<LinkModels>,
    logging: PacketLogging,
) -> Result<EmulatorHandle> {
    let channels = devices
        .into_iter()
        .zip(links)
        .zip(models)
        .map(|((d, l), (up, down))| PortChannel {
            name: d.inner_name,
            client_facing: Box::new(d.inner) as Box<dyn PacketPort>,
            server_facing: Box::new(d.outer),
            up,
            down,
            schedule: l.schedule,
        })
        .collect();
    Ok(Emulator::start_ports(
        channels,
        TimerOptions::default(),
        logging,
    )?)
}

/// Wait for the command, writing packet logs as records come in. A stop signal is
/// passed on to the command (SIGKILL after a grace period).
fn supervise(
    child: &mut Child,
    emu: &EmulatorHandle,
    mut logs: Option<&mut PacketLogs>,
) -> Result<ExitStatus> {
    let mut forwarded: Option<Instant> = None;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if let Some(logs) = logs.as_deref_mut() {
            logs.write(emu.take_packet_records())?;
        }
        match (forwarded, sys::stop_signal()) {
            (None, Some(sig)) => {
                let _ = sys::kill(child.id() as libc::pid_t, sig);
                forwarded = Some(Instant::now());
            }
            (Some(at), _) if at.elapsed() > GRACE => {
                let _ = child.kill();
            }
            _ => {}
        }
        if !emu.is_running() {
            let _ = child.kill();
            child.wait()?;
            bail!("the link emulator stopped; the command was killed");
        }
        std::thread::sleep(POLL);
    }
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
