//! A link shell: run a command in a network namespace whose interfaces reach the host
//! only through emulated links (one `horde-links` model per direction), in the spirit
//! of Mahimahi's mm-link. `horde shell --link SPEC [--link SPEC ...] -- COMMAND` is its
//! command line; [`run`] is the shell.
//!
//! Design (docs/shell.md): link `i` is two TUN devices, `link{i}` inside the namespace
//! and `hs{k}h{i}` on the host, joined by one point-to-point channel of the `horde-emu`
//! engine. What the command sends leaves `link{i}`, crosses the `up` model and is
//! written into the host-side device, where the host kernel receives it; the host's
//! replies leave the host-side device, cross `down` and are written into `link{i}`.

mod link_arg;
mod link_text;
mod netns;
mod packet_log;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use horde_emu::{
    link_seed, sys, Emulator, EmulatorHandle, PacketLogging, PacketPort, PortChannel, Stats,
    TimerOptions,
};
use horde_links::LinkError;

pub use link_arg::{LinkArg, LinkArgError};
pub use link_text::{link_text, link_texts};
pub use netns::MAX_LINKS;
use netns::{LinkDevices, Namespace};
use packet_log::PacketLogs;

/// How often the shell checks on the command and writes packet logs.
const POLL: Duration = Duration::from_millis(20);
/// After forwarding a termination signal, how long the command gets before SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

/// How to set up the shell's links.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// One `--link` value per link (see [`LinkArg`]).
    pub links: Vec<String>,
    /// Configure MPTCP in the namespace: one subflow endpoint per extra link.
    pub mptcp: bool,
    /// Write one CSV per link and direction (arrival, departure, size, dropped) here.
    pub log: Option<PathBuf>,
    /// Write one pcap (raw IP) per link and direction of the delivered packets here.
    pub pcap: Option<PathBuf>,
    /// Seed of the links' random processes.
    pub seed: u64,
    /// Initial congestion window of TCP over the links (route `initcwnd`).
    pub initcwnd: Option<u32>,
    /// Minimum retransmission timeout of TCP over the links, in ms (route `rto_min`).
    pub rto_min: Option<u32>,
}

/// How the command ended, with the links' counters. The namespace is deleted (with
/// whatever the command left running in it) when this is dropped.
pub struct Ended {
    pub status: ExitStatus,
    pub stats: Stats,
    _namespace: Namespace,
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
pub fn parse_link_arg(
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

/// Run `command` in a new namespace behind the links of `options` until it ends (a
/// SIGINT, SIGTERM or SIGHUP to this process is passed on to it). Needs root.
pub fn run(options: &Options, command: &[OsString]) -> Result<Ended> {
    let links = parse_links(&options.links)?;
    let models = build_channels(&links, options.seed)?;
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
    if let Some(n) = options.initcwnd {
        route_options.extend(["initcwnd".to_string(), n.to_string()]);
    }
    if let Some(ms) = options.rto_min {
        route_options.extend(["rto_min".to_string(), format!("{ms}ms")]);
    }
    if !route_options.is_empty() {
        ns.set_tcp_route_options(&devices, &route_options)
            .context("set TCP route options")?;
    }
    if options.mptcp {
        ns.configure_mptcp(&devices)
            .context("configure MPTCP endpoints")?;
    }
    let env = environment(&ns, &devices);
    let logging = match (options.log.is_some(), options.pcap.is_some()) {
        (_, true) => PacketLogging::RecordsWithPayload,
        (true, false) => PacketLogging::Records,
        _ => PacketLogging::Off,
    };
    let mut logs = PacketLogs::wanted(options.log.as_deref(), options.pcap.as_deref())
        .then(|| PacketLogs::create(options.log.as_deref(), options.pcap.as_deref(), links.len()))
        .transpose()?;
    let emu = start_emulator(devices, links, models, logging)?;

    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .args(command)
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
    Ok(Ended {
        status,
        stats,
        _namespace: ns,
    })
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
