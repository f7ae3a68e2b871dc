//! Table 2 of the ATP paper (§5.4): six workloads over the synthetic trace, delivery by
//! priority before the timers, for Horde's messages and for NAI-TCP on kernel TCP; and,
//! beyond the paper, the same over every link of a scenario at once, against MPTCP.
//!
//! Horde's first rows run in virtual time ([`super::host`]), its `sockets` row in real
//! time over real sockets ([`super::sockets`]); NAI-TCP runs in real time, its sender
//! inside a `horde shell` namespace whose uplinks are the same `horde-links` models
//! (same traces, send queues and delays), its receiver on the host.

use std::ffi::OsString;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use horde_links::{DelaySpec, LinkSpec};
use horde_sim::scenario::Scenario;
use serde::Serialize;

use super::host::{Host, HostConfig};
use super::nai_tcp::{self, ClassOutcome, Layout};
use super::replay::Replay;
use super::sockets;
use super::traces::{self, TraceFiles, TRACE_S};
use super::workloads::{Arrival, Workload};

/// Each way's propagation delay of the link the real-time rows cross.
const ONE_WAY: Duration = Duration::from_millis(10);
/// Its send queue: ATP's 50 packets of 1500 bytes.
const BUFFER_BYTES: u64 = 75_000;

/// The protocols of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// Horde's message layer: strict priorities, EDF, admission, early callbacks.
    Horde,
    /// The same with every message at one level (EDF only), to show what priorities give.
    HordeOneLevel,
    /// Neither priorities nor timers: one FIFO, to show what the scheduling gives.
    HordeFifo,
    /// Horde's message endpoint and sessions over real sockets in real time.
    HordeSockets,
    /// One kernel TCP connection, FIFO, half-timer discard, 1-byte acknowledgements.
    NaiTcp,
    /// The same on one connection per priority level, `k` for the most important.
    NaiMtcp(usize),
}

impl Protocol {
    fn name(self) -> String {
        match self {
            Protocol::Horde => "horde".into(),
            Protocol::HordeOneLevel => "horde, one level".into(),
            Protocol::HordeFifo => "horde, fifo".into(),
            Protocol::HordeSockets => "horde, sockets".into(),
            Protocol::NaiTcp => "nai-tcp".into(),
            Protocol::NaiMtcp(k) => format!("nai-mtcp({k})"),
        }
    }

    fn layout(self) -> Layout {
        match self {
            Protocol::NaiMtcp(k) => Layout::PerPriority { high: k },
            _ => Layout::Single,
        }
    }
}

/// One class's result.
#[derive(Debug, Clone, Serialize)]
pub struct ClassRow {
    /// The class's name.
    pub class: String,
    /// Messages in the workload.
    pub total: u64,
    /// Delivered by their timer.
    pub delivered: u64,
    /// `delivered / total`.
    pub fraction: f64,
}

/// One workload under one protocol.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub workload: Workload,
    pub protocol: Protocol,
    pub classes: Vec<ClassRow>,
    /// What it cost: the bytes the sender put on the links.
    pub cost: Cost,
}

/// The bytes a protocol put on the links for a workload, beside its deliveries.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Cost {
    /// Bytes the sender's side offered to the links: packets with their headers (UDP
    /// payloads through `horde-emu`, IP packets through `horde shell`), repeats, probes
    /// and copies included.
    pub wire_bytes: u64,
    /// The workload's message bytes, all of them, whether admitted or not.
    pub offered_bytes: u64,
    /// `wire_bytes / offered_bytes`.
    pub wire_per_offered: f64,
    /// Pieces the message endpoint sent a second time on its quick channel (Horde over
    /// sockets only).
    pub copied_pieces: Option<u64>,
}

impl Cost {
    fn new(wire_bytes: u64, arrivals: &[Arrival], copied_pieces: Option<u64>) -> Self {
        let offered_bytes: u64 = arrivals.iter().map(|a| a.size).sum();
        Self {
            wire_bytes,
            offered_bytes,
            wire_per_offered: wire_bytes as f64 / offered_bytes.max(1) as f64,
            copied_pieces,
        }
    }
}

/// How to run the table.
#[derive(Debug, Clone)]
pub struct Options {
    /// The trace and the workloads last `TRACE_S / speedup` seconds.
    pub speedup: u64,
    /// Which workloads.
    pub workloads: Vec<Workload>,
    /// Seed of "random" and of the links.
    pub seed: u64,
    /// What the rows run over.
    pub links: Links,
    /// Every message is this many times its workload's size.
    pub scale: u64,
    /// Run Horde over real sockets and emulated links in real time.
    pub sockets: bool,
    /// Run NAI-TCP (needs root for the namespace).
    pub nai_tcp: bool,
    /// Run NAI-MTCP(k) for each of these k (needs root).
    pub mtcp: Vec<usize>,
}

/// The workloads' span at `speedup`.
pub fn span(speedup: u64) -> Duration {
    Duration::from_secs(TRACE_S / speedup)
}

fn rows_of(workload: Workload, protocol: Protocol, counts: &[(u64, u64)], cost: Cost) -> Row {
    let names = workload.class_names();
    Row {
        workload,
        protocol,
        cost,
        classes: counts
            .iter()
            .enumerate()
            .map(|(i, &(total, delivered))| ClassRow {
                class: names.get(i).copied().unwrap_or("?").to_string(),
                total,
                delivered,
                fraction: if total == 0 {
                    0.0
                } else {
                    delivered as f64 / total as f64
                },
            })
            .collect(),
    }
}

/// The links a table runs over.
#[derive(Debug, Clone)]
pub enum Links {
    /// The paper's: one link over the synthetic trace, 10 ms each way, a 50-packet queue.
    Synthetic,
    /// Beyond ATP: every channel of a scenario at once; the TCP rows run on MPTCP with
    /// one subflow per link, and the virtual-time rows (one link only) are left out.
    Scenario(Box<Scenario>),
}

/// What the real-time rows cross: the emulated links for Horde, the `horde shell` link
/// texts for the TCP rows, and whether those use MPTCP.
struct RealLinks {
    emu: Vec<sockets::EmuLink>,
    base_dir: PathBuf,
    shell: Vec<String>,
    mptcp: bool,
}

impl RealLinks {
    fn synthetic(trace: &Path) -> RealLinks {
        let delay = || {
            Some(DelaySpec::Constant {
                ms: ONE_WAY.as_secs_f64() * 1e3,
            })
        };
        RealLinks {
            emu: vec![sockets::EmuLink {
                up: LinkSpec {
                    delay: delay(),
                    ..traces::uplink(trace.to_path_buf(), BUFFER_BYTES)
                },
                down: LinkSpec {
                    delay: delay(),
                    ..LinkSpec::default()
                },
            }],
            base_dir: PathBuf::from("."),
            shell: vec![format!(
                "delay={}ms,buffer={}kb,up=trace:{}",
                ONE_WAY.as_millis(),
                BUFFER_BYTES / 1000,
                trace.display()
            )],
            mptcp: false,
        }
    }

    fn scenario(s: &Scenario) -> Result<RealLinks> {
        let channels = s.channels.iter().map(|c| (c.name.as_str(), &c.up, &c.down));
        let shell = horde_shell::link_texts(channels, &s.base_dir)?;
        Ok(RealLinks {
            emu: s
                .channels
                .iter()
                .map(|c| sockets::EmuLink {
                    up: c.up.clone(),
                    down: c.down.clone(),
                })
                .collect(),
            base_dir: s.base_dir.clone(),
            shell,
            mptcp: s.channels.len() > 1,
        })
    }
}

/// `workload`'s messages over `span`, each `scale` times its size.
pub fn arrivals(workload: Workload, span: Duration, seed: u64, scale: u64) -> Vec<Arrival> {
    let mut arrivals = workload.arrivals(span, seed);
    for a in &mut arrivals {
        a.size *= scale;
    }
    arrivals
}

/// Runs every row of `options`.
pub fn run(options: &Options, files: &TraceFiles) -> Result<Vec<Row>> {
    let trace = traces::synthetic_faster(options.speedup)?;
    let path = files.add(&format!("synthetic-x{}", options.speedup), &trace)?;
    let real = match &options.links {
        Links::Synthetic => RealLinks::synthetic(&path),
        Links::Scenario(s) => RealLinks::scenario(s)?,
    };
    let span = span(options.speedup);
    let mut rows = Vec::new();
    for &workload in &options.workloads {
        let arrivals = arrivals(workload, span, options.seed, options.scale);
        let longest = arrivals.iter().map(|a| a.timer).max().unwrap_or_default();
        let virtual_rows = match options.links {
            Links::Synthetic => &[
                (Protocol::Horde, true, true),
                (Protocol::HordeOneLevel, false, true),
                (Protocol::HordeFifo, false, false),
            ][..],
            Links::Scenario(_) => &[],
        };
        for &(protocol, priorities, timers) in virtual_rows {
            let config = HostConfig::atp(1, span + longest + Duration::from_secs(1));
            let link = traces::uplink(path.clone(), config.buffer_bytes)
                .build(options.seed, files.dir())
                .context("the synthetic link")?;
            let mut app = Replay::new(workload, arrivals.clone(), priorities, timers);
            let stats = Host::new(config, link)?.run(&mut app)?;
            let counts: Vec<(u64, u64)> = stats
                .classes
                .iter()
                .map(|c| (c.submitted, c.delivered))
                .collect();
            let cost = Cost::new(stats.wire_bytes, &arrivals, None);
            rows.push(rows_of(workload, protocol, &counts, cost));
        }
        if options.sockets {
            let run = sockets::run(
                workload,
                &arrivals,
                &real.emu,
                &real.base_dir,
                options.seed,
                span + longest,
            )
            .context("Horde over sockets")?;
            let cost = Cost::new(run.wire_bytes, &arrivals, Some(run.copied_pieces));
            rows.push(rows_of(workload, Protocol::HordeSockets, &run.counts, cost));
        }
        let tcp = options
            .nai_tcp
            .then_some(Protocol::NaiTcp)
            .into_iter()
            .chain(options.mtcp.iter().map(|&k| Protocol::NaiMtcp(k)));
        for protocol in tcp {
            let (outcome, wire_bytes) = run_tcp(
                workload,
                &arrivals,
                protocol,
                options,
                &real,
                files.dir(),
                span + longest,
            )?;
            let counts: Vec<(u64, u64)> = outcome.iter().map(|c| (c.total, c.delivered)).collect();
            let cost = Cost::new(wire_bytes, &arrivals, None);
            rows.push(rows_of(workload, protocol, &counts, cost));
        }
    }
    Ok(rows)
}

/// NAI-TCP or NAI-MTCP over `links` in real time: the receiver here, the sender in a
/// `horde shell` namespace (this program's `atp nai-tcp-send`, which builds the same
/// `arrivals` from the workload, speed-up, seed and scale it is given). Its outcome per
/// class, and the bytes the sender offered to the links.
fn run_tcp(
    workload: Workload,
    arrivals: &[Arrival],
    protocol: Protocol,
    options: &Options,
    links: &RealLinks,
    dir: &Path,
    stop: Duration,
) -> Result<(Vec<ClassOutcome>, u64)> {
    let any: std::net::SocketAddr = "0.0.0.0:0".parse().expect("an address");
    let listener = if links.mptcp {
        // Subflows arrive on every link's host side; a plain listener would take the
        // connection as plain TCP on one link.
        let socket = horde_emu::sys::stream_socket(any, true)
            .context("create an MPTCP listener (is net.mptcp.enabled = 1 on this host?)")?;
        socket.bind(&any.into())?;
        socket.listen(64)?;
        TcpListener::from(socket)
    } else {
        TcpListener::bind(any).context("listen for the NAI-TCP sender")?
    };
    let port = listener.local_addr()?.port();
    let handle = nai_tcp::ReceiverHandle::default();
    let connections = protocol
        .layout()
        .connections(arrivals, |c| workload.priority(c));
    let receiver = {
        let handle = handle.clone();
        std::thread::spawn(move || nai_tcp::receive(listener, connections, &handle))
    };
    let high = match protocol.layout() {
        Layout::Single => 0,
        Layout::PerPriority { high } => high,
    };
    let out = dir.join(format!("tcp-{}-{high}.json", workload.name()));
    let exe = std::env::current_exe().context("find this program")?;
    let mut command: Vec<OsString> = vec![
        exe.into(),
        "atp".into(),
        "nai-tcp-send".into(),
        "--workload".into(),
        workload.name().into(),
        "--speedup".into(),
        options.speedup.to_string().into(),
        "--seed".into(),
        options.seed.to_string().into(),
        "--scale".into(),
        options.scale.to_string().into(),
        "--port".into(),
        port.to_string().into(),
        "--high".into(),
        high.to_string().into(),
        "--stop-ms".into(),
        stop.as_millis().to_string().into(),
        "--out".into(),
        out.clone().into(),
    ];
    if links.mptcp {
        command.push("--mptcp".into());
    }
    let shell = horde_shell::Options {
        links: links.shell.clone(),
        seed: options.seed,
        mptcp: links.mptcp,
        ..horde_shell::Options::default()
    };
    let ended = horde_shell::run(&shell, &command);
    // The sender is gone; its close may not have crossed the link before the link went
    // down, so end the receiver from here.
    handle.finish();
    let ended = ended.context("horde shell for the NAI-TCP sender")?;
    if !ended.status.success() {
        bail!("the NAI-TCP sender failed ({})", ended.status);
    }
    match receiver.join() {
        Ok(result) => {
            result.context("the NAI-TCP receiver")?;
        }
        Err(_) => bail!("the NAI-TCP receiver panicked"),
    }
    let bytes = std::fs::read(&out).with_context(|| format!("read {}", out.display()))?;
    let outcome = serde_json::from_slice(&bytes).context("the NAI-TCP sender's outcome")?;
    Ok((outcome, sockets::wire_bytes_up(&ended.stats)))
}

/// The rows as a text table.
pub fn render(rows: &[Row], options: &Options) -> String {
    let mut over = match &options.links {
        Links::Synthetic => "the synthetic trace".to_string(),
        Links::Scenario(s) => format!(
            "the {} links of {} at once (TCP rows on MPTCP)",
            s.channels.len(),
            s.name
        ),
    };
    if options.scale != 1 {
        over += &format!(", messages {}x their size", options.scale);
    }
    let mut out = format!(
        "Table 2 (ATP §5.4): fraction of each class's messages delivered by its timer, \
         over {over} for {} s\n\
         workload     protocol          wire/offered  classes\n",
        TRACE_S / options.speedup
    );
    for r in rows {
        let classes: Vec<String> = r
            .classes
            .iter()
            .map(|c| {
                format!(
                    "{} {:.3} ({}/{})",
                    c.class, c.fraction, c.delivered, c.total
                )
            })
            .collect();
        let copies = r
            .cost
            .copied_pieces
            .map_or(String::new(), |n| format!("  ({n} pieces copied)"));
        out.push_str(&format!(
            "{:<12} {:<17} {:<13.3} {}{copies}\n",
            r.workload.name(),
            r.protocol.name(),
            r.cost.wire_per_offered,
            classes.join("  ")
        ));
    }
    out.push_str(
        "wire/offered: the bytes the sender put on the links (headers, repeats, probes and \
         copies included) over the workload's message bytes\n",
    );
    out.push_str(
        "paper (Fig. 7; its bar heights are not in the text): ATP delivers the most \
         high-priority messages under contention (filesystem, overload, prioritised); \
         uniform and reversed differ little; NAI-TCP beats ATP by 2.5% on random's high \
         priority\n",
    );
    out
}
