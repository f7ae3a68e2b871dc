//! `horde bench links`: elastic bulk over a scenario's links under each congestion
//! controller, in the simulator and in real time through the emulator, reported as goodput
//! against the links' capacity, per-packet one-way delay, and declared against actual loss;
//! with a throughput-delay plot in the Pantheon style. With `--kernel`, Horde, kernel TCP
//! and MPTCP over the same `horde shell` links instead (`kernel`).

mod horde_peer;
mod kernel;
mod shell_log;
mod shell_run;
mod tcp_sink;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use horde_crypto::Keypair;
use horde_emu::{Emulator, EmulatorConfig};
use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, InterfaceConfig};
use horde_policy::Fields;
use horde_proto::{CcConfig, ChannelConfig, Event, StreamConfig};
use horde_sim::scenario::Scenario;
use serde::Serialize;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Elastic bulk over a scenario's links, once per congestion controller.
    ///
    /// Runs the scenario's channels with one elastic bulk stream in the simulator and, with
    /// --realtime, through the real-time emulator with sender and receiver on real
    /// encrypted sockets. Prints goodput as a fraction of the links' capacity, per-packet
    /// one-way delay (p50, p95) and declared against actual loss for each controller.
    Links(LinksArgs),
    /// N simulated vehicles (three channels each, one process) against a real `horde recv
    /// --server`: server memory and CPU per idle vehicle, fairness under load, and
    /// reconnection after the server is killed and restarted. See docs/fleet.md.
    Fleet(crate::fleet::FleetArgs),
}

#[derive(clap::Args)]
pub struct LinksArgs {
    /// Scenario whose channels (links, mtu) are used; its streams are replaced by one
    /// elastic bulk stream [default: scenarios/cellular3.toml, built in with its traces]
    scenario: Option<PathBuf>,
    /// Controllers to compare, comma-separated [default: aimd,cubic,bbr,copa,ontime; with
    /// --kernel: the default controller].
    #[arg(long, value_delimiter = ',')]
    cc: Option<Vec<String>>,
    /// Seconds per run.
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// Also run each controller in real time through the emulator (takes the duration
    /// again per controller).
    #[arg(long)]
    realtime: bool,
    /// Instead of the simulator and the emulator: Horde (`horde send`/`horde recv`
    /// processes), kernel TCP (one flow per link) and MPTCP (one subflow per link), each
    /// TCP under cubic and bbr, one after another over `horde shell` links built from the
    /// scenario's channels. Root.
    #[arg(long, conflicts_with = "realtime")]
    kernel: bool,
    /// Write results.json, results.csv and tput_delay.svg here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// One controller's run in one mode.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// `sim`, `realtime`; with --kernel the contender: `horde`, `tcp`, `mptcp`.
    pub mode: &'static str,
    pub cc: String,
    pub duration_s: f64,
    /// Summed capacity of the data direction of every link, Mbit/s.
    pub capacity_mbps: f64,
    /// ADU payload delivered to the receiving application, Mbit/s.
    pub goodput_mbps: f64,
    pub utilization: f64,
    /// Per-packet one-way delay through the links (queueing, serialization,
    /// propagation), ms.
    pub delay_p50_ms: f64,
    pub delay_p95_ms: f64,
    /// Packets the sender declared lost (net of late acks; Horde's own runs only) and
    /// packets the links dropped, as fractions of data packets sent.
    pub declared_loss: Option<f64>,
    pub actual_loss: f64,
    /// Losses declared and then acknowledged after all (counted in real time only).
    pub late_acks: Option<u64>,
    /// IP throughput of each link's data direction, Mbit/s (--kernel, from the packet log).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_mbps: Option<Vec<f64>>,
}

/// The controllers compared when `--cc` is not given.
const DEFAULT_CCS: [&str; 5] = ["aimd", "cubic", "bbr", "copa", "ontime"];

pub fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Links(args) => links(args),
        Command::Fleet(args) => crate::fleet::run(args),
    }
}

fn links(args: LinksArgs) -> Result<ExitCode> {
    let duration = crate::emu::seconds(args.duration)?;
    let names = match (&args.cc, args.kernel) {
        (Some(names), _) => names.clone(),
        (None, true) => vec![CcConfig::default().kind().to_string()],
        (None, false) => DEFAULT_CCS.iter().map(|s| s.to_string()).collect(),
    };
    let ccs = names
        .iter()
        .map(|k| parse_cc(k).map(|c| (k.clone(), c)))
        .collect::<Result<Vec<_>>>()?;
    // The built-in scenario's traces stay on disk until the runs are over.
    let (base, _traces) = match &args.scenario {
        Some(path) => (Scenario::load(path)?, None),
        None => {
            let (s, dir) = builtin_scenario()?;
            (s, Some(dir))
        }
    };
    let rows = if args.kernel {
        kernel::run(&base, &names, duration)?
    } else {
        let mut rows = Vec::new();
        for (name, cc) in &ccs {
            eprintln!("simulating {name} for {} s", duration.as_secs_f64());
            rows.push(simulate(&base, name, cc, duration)?);
            if args.realtime {
                eprintln!(
                    "running {name} in real time for {} s",
                    duration.as_secs_f64()
                );
                rows.push(realtime(&base, name, cc, duration)?);
            }
        }
        rows
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_table(&rows);
    }
    if let Some(dir) = &args.out {
        write_outputs(dir, &rows)?;
        if !args.json {
            println!(
                "\nwrote results.json, results.csv, tput_delay.svg to {}",
                dir.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The default scenario, with the traces it names, compiled in so that `horde bench
/// links` runs from any directory.
const BUILTIN_NAME: &str = "scenarios/cellular3.toml";
const BUILTIN: &str = include_str!("../../../scenarios/cellular3.toml");
const BUILTIN_TRACES: [(&str, &str); 3] = [
    ("cell-a.up", include_str!("../../../traces/cell-a.up")),
    ("cell-b.up", include_str!("../../../traces/cell-b.up")),
    ("cell-c.up", include_str!("../../../traces/cell-c.up")),
];

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The built-in scenario. The links read their traces from files relative to the
/// scenario's directory, so the traces are written to a temporary directory laid out as
/// in the repository (`scenarios/` beside `traces/`), which lives as long as the
/// returned guard.
fn builtin_scenario() -> Result<(Scenario, TempDir)> {
    let dir =
        TempDir(std::env::temp_dir().join(format!("horde-bench-links-{}", std::process::id())));
    let traces = dir.0.join("traces");
    let scenarios = dir.0.join("scenarios");
    for d in [&traces, &scenarios] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    for (name, text) in BUILTIN_TRACES {
        let path = traces.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let mut s = Scenario::from_str(BUILTIN, BUILTIN_NAME)?;
    s.base_dir = scenarios;
    Ok((s, dir))
}

fn parse_cc(kind: &str) -> Result<CcConfig> {
    toml::from_str(&format!("kind = {kind:?}"))
        .with_context(|| format!("--cc: unknown congestion controller {kind:?}"))
}

/// Sum of the capacity of every channel's data (`up`) direction over `duration`.
fn capacity_mbps(s: &Scenario, duration: Duration) -> Result<f64> {
    let mut bytes = 0u64;
    for c in &s.channels {
        match c.up.capacity_bytes(duration, &s.base_dir)? {
            Some(b) => bytes += b,
            None => bail!(
                "channel {}: an unlimited link has no capacity to compare with",
                c.name
            ),
        }
    }
    Ok(bytes as f64 * 8.0 / duration.as_secs_f64() / 1e6)
}

/// The scenario with one elastic bulk stream and every channel on `cc`.
fn bulk_scenario(base: &Scenario, cc: &CcConfig, duration: Duration) -> Result<Scenario> {
    let mut s = base.clone();
    s.duration_s = duration.as_secs_f64();
    for c in &mut s.channels {
        c.congestion = cc.clone();
    }
    let mtu = bulk_adu_bytes(&s);
    let mut stream = s
        .streams
        .first()
        .cloned()
        .context("the scenario needs one stream to take hosts from")?;
    stream.rate = horde_sim::scenario::StreamRate::Elastic;
    stream.workload = toml::from_str(&format!("kind = \"bulk\"\nadu_bytes = {mtu}"))?;
    stream.objectives.clear();
    s.streams = vec![stream];
    Ok(s)
}

/// Bulk ADUs fill the smallest slot of the scenario's channels.
fn bulk_adu_bytes(s: &Scenario) -> u32 {
    s.channels.iter().map(|c| c.mtu).min().unwrap_or(1200)
}

fn simulate(base: &Scenario, name: &str, cc: &CcConfig, duration: Duration) -> Result<Row> {
    let s = bulk_scenario(base, cc, duration)?;
    let report = crate::sim::simulate(&s, Duration::from_secs(1))?;
    let goodput: f64 = report.streams.iter().map(|r| r.goodput_kbps).sum::<f64>() / 1e3;
    let sent: u64 = report.channels.iter().map(|c| c.sent).sum();
    let declared: u64 = report.channels.iter().map(|c| c.lost).sum();
    let dropped: u64 = report
        .channels
        .iter()
        .filter_map(|c| c.link.map(|l| l.queue_drops + l.lost))
        .sum();
    let delay = (
        report.packet_delay_ms.median.unwrap_or(0.0),
        report.packet_delay_ms.p95.unwrap_or(0.0),
    );
    let capacity = capacity_mbps(&s, duration)?;
    Ok(Row {
        mode: "sim",
        cc: name.to_string(),
        duration_s: duration.as_secs_f64(),
        capacity_mbps: capacity,
        goodput_mbps: goodput,
        utilization: goodput / capacity,
        delay_p50_ms: delay.0,
        delay_p95_ms: delay.1,
        declared_loss: Some(ratio(declared, sent)),
        actual_loss: ratio(dropped, sent),
        late_acks: None,
        link_mbps: None,
    })
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn realtime(base: &Scenario, name: &str, cc: &CcConfig, duration: Duration) -> Result<Row> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let s = bulk_scenario(base, cc, duration)?;
    let capacity = capacity_mbps(&s, duration)?;
    rt.block_on(realtime_run(&s, name, cc, duration, capacity))
}

const SERVICE: u32 = 9;
const STREAM: u32 = 1;

async fn realtime_run(
    s: &Scenario,
    name: &str,
    cc: &CcConfig,
    duration: Duration,
    capacity: f64,
) -> Result<Row> {
    let sender_key = Keypair::generate();
    let receiver_key = Keypair::generate();
    let lo = "127.0.0.1:0".parse().expect("address literal");
    let mut rcfg = HostConfig::new(receiver_key.clone(), vec![InterfaceConfig::new(lo)]);
    rcfg.allowed_peers = vec![*sender_key.public()];
    let receiver = Host::bind(rcfg).await?;
    let mut listener = receiver.listen(SERVICE);

    let emu = start_emulator(s, receiver.local_addrs()[0], &s.base_dir)?;
    let sender = Host::bind(HostConfig::new(
        sender_key,
        s.channels
            .iter()
            .map(|_| InterfaceConfig::new(lo))
            .collect(),
    ))
    .await?;
    let conn = sender
        .connect(ConnectConfig {
            peer: *receiver_key.public(),
            service: SERVICE,
            channels: s
                .channels
                .iter()
                .enumerate()
                .map(|(i, c)| ChannelTarget {
                    interface: i,
                    remote: emu.client_addr(&c.name).expect("channel exists"),
                    config: ChannelConfig {
                        mtu: c.mtu,
                        congestion: cc.clone(),
                        ..ChannelConfig::default()
                    },
                })
                .collect(),
            handshake_timeout: Duration::from_secs(5),
        })
        .await
        .context("connecting through the emulator")?;
    let mut accepted = tokio::time::timeout(Duration::from_secs(5), listener.accept())
        .await
        .ok()
        .flatten()
        .context("the receiver did not accept the connection")?;

    // The receiver counts payload bytes delivered to it.
    let received = Arc::new(AtomicU64::new(0));
    let counter = received.clone();
    let rx = tokio::spawn(async move {
        while let Some(e) = accepted.next_event().await {
            if let Event::Received { payload, .. } = e {
                counter.fetch_add(payload.len() as u64, Ordering::Relaxed);
            }
        }
    });

    let (handle, mut events) = conn.split();
    handle.open_stream(STREAM, StreamConfig::default()).await?;
    let adu = Bytes::from(vec![0x5a; bulk_adu_bytes(s) as usize]);
    let start = Instant::now();
    while start.elapsed() < duration {
        // Keep the stream's queue filled as far as back-pressure allows.
        let left = duration.saturating_sub(start.elapsed());
        if tokio::time::timeout(left, handle.writable(STREAM))
            .await
            .is_err()
        {
            break;
        }
        for _ in 0..16 {
            handle.send_adu_nowait(STREAM, adu.clone(), Fields::new())?;
        }
        // The sender's events are not needed: its counters say what happened.
        while events.try_recv().is_ok() {}
    }
    let elapsed = start.elapsed();
    let delivered = received.load(Ordering::Relaxed);
    let stats = handle.stats().await?;
    rx.abort();
    let _ = handle.close();
    sender.shutdown().await;
    receiver.shutdown().await;
    let emu_stats = emu.shutdown();

    let sent = stats.adus_sent;
    let mut transit = horde_emu::Histogram::new();
    let mut dropped = 0;
    for c in &emu_stats.channels {
        transit.merge(&c.up.transit);
        dropped += c.up.dropped_queue + c.up.dropped_loss;
    }
    let goodput = delivered as f64 * 8.0 / elapsed.as_secs_f64() / 1e6;
    Ok(Row {
        mode: "realtime",
        cc: name.to_string(),
        duration_s: elapsed.as_secs_f64(),
        capacity_mbps: capacity,
        goodput_mbps: goodput,
        utilization: goodput / capacity,
        delay_p50_ms: transit.quantile(0.5).as_secs_f64() * 1e3,
        delay_p95_ms: transit.quantile(0.95).as_secs_f64() * 1e3,
        declared_loss: Some(ratio(stats.adus_lost - stats.adus_late_acked, sent)),
        actual_loss: ratio(dropped, sent),
        late_acks: Some(stats.adus_late_acked),
        link_mbps: None,
    })
}

/// An emulator with the scenario's links, relaying to `server`.
fn start_emulator(
    s: &Scenario,
    server: std::net::SocketAddr,
    base_dir: &Path,
) -> Result<horde_emu::EmulatorHandle> {
    let toml: String = s
        .channels
        .iter()
        .map(|c| {
            format!(
                "[[channels]]\nname = {:?}\nlisten = \"127.0.0.1:0\"\nforward_to = \"{server}\"\nup = {{}}\n",
                c.name
            )
        })
        .collect();
    let mut cfg =
        EmulatorConfig::from_toml(&format!("seed = {}\n{toml}", s.seed), "bench", base_dir)?;
    for (e, c) in cfg.channels.iter_mut().zip(&s.channels) {
        e.up = c.up.clone();
        e.down = Some(c.down.clone());
    }
    Ok(Emulator::start(&cfg)?)
}

fn print_table(rows: &[Row]) {
    let mut table = vec![vec![
        "mode".to_string(),
        "cc".into(),
        "capacity Mb/s".into(),
        "goodput Mb/s".into(),
        "util".into(),
        "delay p50 ms".into(),
        "p95 ms".into(),
        "declared loss".into(),
        "actual loss".into(),
    ]];
    for r in rows {
        table.push(vec![
            r.mode.to_string(),
            r.cc.clone(),
            format!("{:.2}", r.capacity_mbps),
            format!("{:.2}", r.goodput_mbps),
            format!("{:.1}%", r.utilization * 100.0),
            format!("{:.0}", r.delay_p50_ms),
            format!("{:.0}", r.delay_p95_ms),
            r.declared_loss
                .map_or("-".into(), |l| format!("{:.2}%", l * 100.0)),
            format!("{:.2}%", r.actual_loss * 100.0),
        ]);
        if let Some(links) = &r.link_mbps {
            table.last_mut().expect("row pushed").push(per_link(links));
        }
    }
    if rows.iter().any(|r| r.link_mbps.is_some()) {
        table[0].push("per link Mb/s".into());
    }
    print!("{}", crate::table::render(&table));
}

/// Each link's throughput, `/`-separated.
fn per_link(mbps: &[f64]) -> String {
    mbps.iter()
        .map(|m| format!("{m:.2}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

fn write_outputs(dir: &Path, rows: &[Row]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(rows)?,
    )?;
    let mut csv = String::from(
        "mode,cc,duration_s,capacity_mbps,goodput_mbps,utilization,delay_p50_ms,delay_p95_ms,declared_loss,actual_loss,late_acks,link_mbps\n",
    );
    for r in rows {
        csv.push_str(&format!(
            "{},{},{:.1},{:.3},{:.3},{:.4},{:.1},{:.1},{},{:.5},{},{}\n",
            r.mode,
            r.cc,
            r.duration_s,
            r.capacity_mbps,
            r.goodput_mbps,
            r.utilization,
            r.delay_p50_ms,
            r.delay_p95_ms,
            r.declared_loss.map_or(String::new(), |l| format!("{l:.5}")),
            r.actual_loss,
            r.late_acks.map_or(String::new(), |n| n.to_string()),
            r.link_mbps.as_deref().map_or(String::new(), |l| l
                .iter()
                .map(|m| format!("{m:.3}"))
                .collect::<Vec<_>>()
                .join(";"))
        ));
    }
    std::fs::write(dir.join("results.csv"), csv)?;
    plot(&dir.join("tput_delay.svg"), rows)
}

/// Throughput against p95 one-way delay, one point per controller and mode; delay grows
/// to the left, as Pantheon draws it, so better is up and to the right.
fn plot(path: &Path, rows: &[Row]) -> Result<()> {
    use plotters::prelude::*;
    let max_delay = rows.iter().map(|r| r.delay_p95_ms).fold(10.0, f64::max) * 1.15;
    let max_tput = rows
        .iter()
        .map(|r| r.goodput_mbps.max(r.capacity_mbps))
        .fold(1.0, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (720, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "goodput vs p95 one-way delay (better: up and right)",
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(max_delay..0.0, 0.0..max_tput)?;
    chart
        .configure_mesh()
        .x_desc("p95 per-packet one-way delay (ms)")
        .y_desc("goodput (Mbit/s)")
        .draw()?;
    let palette = [RED, BLUE, GREEN, MAGENTA, CYAN, BLACK];
    // One colour per controller, one marker per mode.
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if !names.contains(&r.cc.as_str()) {
            names.push(&r.cc);
        }
    }
    for (i, name) in names.iter().enumerate() {
        let color = palette[i % palette.len()];
        for r in rows.iter().filter(|r| r.cc == *name) {
            let at = (r.delay_p95_ms, r.goodput_mbps);
            let label = format!("{} ({})", r.cc, r.mode);
            match r.mode {
                "sim" => {
                    chart.draw_series(std::iter::once(Circle::new(at, 6, color.filled())))?;
                }
                "tcp" => {
                    chart.draw_series(std::iter::once(Cross::new(at, 6, color.stroke_width(2))))?;
                }
                "mptcp" => {
                    chart.draw_series(std::iter::once(Circle::new(
                        at,
                        6,
                        color.stroke_width(2),
                    )))?;
                }
                _ => {
                    chart.draw_series(std::iter::once(TriangleMarker::new(
                        at,
                        7,
                        color.filled(),
                    )))?;
                }
            }
            chart.draw_series(std::iter::once(Text::new(
                label,
                (at.0, at.1 + max_tput * 0.02),
                ("sans-serif", 12),
            )))?;
        }
    }
    if let Some(cap) = rows.first().map(|r| r.capacity_mbps) {
        chart.draw_series(LineSeries::new(
            [(max_delay, cap), (0.0, cap)],
            BLACK.mix(0.3).stroke_width(1),
        ))?;
    }
    root.present()?;
    Ok(())
}
