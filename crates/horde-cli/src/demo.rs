//! `horde demo`: the telemedicine streams of an ambulance over three emulated cellular
//! links, sender and receiver on real sockets, once with objectives and once without.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use horde_crypto::Keypair;
use horde_emu::{Emulator, EmulatorConfig};
use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, InterfaceConfig};
use horde_proto::{CcConfig, ChannelConfig, StreamConfig};
use horde_sim::workload::WorkloadSpec;

use crate::app::{self, StreamPlan};
use crate::live::{Live, StreamLive};

#[derive(clap::Args)]
pub struct Args {
    /// Total run time in seconds, split between the run with objectives and the one without.
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// Run only with objectives, skipping the comparison run.
    #[arg(long)]
    no_compare: bool,
    /// Seed of the emulated links and the workloads.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Scheduler used in both runs.
    #[arg(long, default_value = DEFAULT_SCHEDULER)]
    scheduler: String,
    /// Print the results of both runs as one JSON object instead of tables.
    #[arg(long)]
    json: bool,
}

const DEFAULT_SCHEDULER: &str = "directed";
const SERVICE: u32 = 1;
const VIDEO: u32 = 1;
const AUDIO: u32 = 2;
const EKG: u32 = 3;

/// The emulated links: the thesis's simulated channel set (cdma1, cdma2, gprs) scaled to
/// modern cellular rates. `{seed}` and `{receiver}` are filled in.
const LINKS: &str = r#"
[[channels]]
# Like the thesis's cdma1: steady, low loss, medium latency.
name = "lte-a"
listen = "127.0.0.1:0"
forward_to = "{receiver}"
up = { rate = { model = "constant", kbps = 3000 }, buffer_bytes = 90000, delay = { model = "gaussian", mean_ms = 45, sd_ms = 5 }, loss = { model = "burst_markov", rate = 0.005, max_burst = 4 } }
down = { rate = { model = "constant", kbps = 3000 }, delay = { model = "constant", ms = 40 } }

[[channels]]
# Like cdma2: the lowest latency, but lossy (no link-layer retransmission).
name = "lte-b"
listen = "127.0.0.1:0"
forward_to = "{receiver}"
up = { rate = { model = "constant", kbps = 3000 }, buffer_bytes = 45000, delay = { model = "gaussian", mean_ms = 15, sd_ms = 2 }, loss = { model = "burst_markov", rate = 0.08, max_burst = 4 } }
down = { rate = { model = "constant", kbps = 3000 }, delay = { model = "constant", ms = 15 } }

[[channels]]
# Like gprs: slower and slower to answer.
name = "hspa"
listen = "127.0.0.1:0"
forward_to = "{receiver}"
up = { rate = { model = "constant", kbps = 1000 }, buffer_bytes = 30000, delay = { model = "gaussian", mean_ms = 110, sd_ms = 15 }, loss = { model = "burst_markov", rate = 0.02, max_burst = 2 } }
down = { rate = { model = "constant", kbps = 1000 }, delay = { model = "constant", ms = 100 } }
"#;

/// I-frames on low-loss slots; voice at low latency.
const OBJECTIVES: &[(&str, &str)] = &[
    (
        "iframes",
        r#"objective {
  context { adu:frame { (stream_id == 1) && (frame_type == "I") } }
  goal { prob(frame::lost?) < 2 }
  utility { frame { 300 } }
}"#,
    ),
    (
        "voice",
        r#"objective {
  context { adu:voice { stream_id == 2 } }
  goal { expected(voice::latency) <= 200 }
  utility { voice { 3 * (200 - expected(voice::latency)) } }
}"#,
    ),
];

fn plans(with_objectives: bool) -> Result<Vec<StreamPlan>> {
    let objective = |name: &str| -> Result<Vec<_>> {
        if !with_objectives {
            return Ok(vec![]);
        }
        let (_, src) = OBJECTIVES
            .iter()
            .find(|(n, _)| *n == name)
            .expect("known objective");
        Ok(vec![horde_sim::objectives::compile(name, src)?])
    };
    Ok(vec![
        StreamPlan {
            id: VIDEO,
            name: "video".into(),
            config: StreamConfig::default(),
            workload: WorkloadSpec::Video {
                fps: 25.0,
                gop: "IPPPPPPPPPPPPPPPPPPPPPPPP".into(),
                kbps: Some(2500.0),
                ratios: None,
                frame_bytes: None,
                jitter: 0.2,
            },
            objectives: objective("iframes")?,
        },
        StreamPlan {
            id: AUDIO,
            name: "audio".into(),
            config: StreamConfig {
                max_kbps: Some(100.0),
                ..StreamConfig::default()
            },
            workload: WorkloadSpec::Audio {
                frame_ms: 20.0,
                frame_bytes: 160,
            },
            objectives: objective("voice")?,
        },
        StreamPlan {
            id: EKG,
            name: "ekg".into(),
            config: StreamConfig {
                max_kbps: Some(20.0),
                ..StreamConfig::default()
            },
            workload: WorkloadSpec::Ekg {
                sample_hz: 250.0,
                bytes_per_sample: 2,
                batch_ms: 40.0,
            },
            objectives: vec![],
        },
    ])
}

pub fn run(args: Args) -> Result<ExitCode> {
    let total = crate::emu::seconds(args.duration)?;
    let each = if args.no_compare { total } else { total / 2 };
    let scheduler = crate::hose::scheduler(&args.scheduler)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut runs = Vec::new();
    let variants: &[bool] = if args.no_compare {
        &[true]
    } else {
        &[true, false]
    };
    for &with in variants {
        if !args.json {
            println!(
                "== {} objectives: {:.0} s ==",
                if with { "with" } else { "without" },
                each.as_secs_f64()
            );
        }
        let live = rt.block_on(run_once(&args, with, each, scheduler.clone()))?;
        runs.push((with, live));
    }
    let names = app::names(&plans(false)?);
    if args.json {
        let obj: serde_json::Map<String, serde_json::Value> = runs
            .iter()
            .map(|(with, l)| {
                let key = if *with {
                    "with_objectives"
                } else {
                    "without_objectives"
                };
                (key.to_string(), summary_json(l, &names, each.as_secs_f64()))
            })
            .collect();
        println!("{}", serde_json::Value::Object(obj));
    } else {
        print_comparison(&runs, &names);
    }
    Ok(ExitCode::SUCCESS)
}

async fn run_once(
    args: &Args,
    with_objectives: bool,
    duration: Duration,
    scheduler: horde_net::SchedulerFactory,
) -> Result<Live> {
    let sender_key = Keypair::generate();
    let receiver_key = Keypair::generate();
    let lo = "127.0.0.1:0".parse().expect("address literal");

    let mut rcfg = HostConfig::new(receiver_key.clone(), vec![InterfaceConfig::new(lo)]);
    rcfg.allowed_peers = vec![*sender_key.public()];
    rcfg.scheduler = Some(scheduler.clone());
    let receiver = Host::bind(rcfg).await?;
    let mut listener = receiver.listen(SERVICE);

    let emu_toml = format!(
        "seed = {}\n{}",
        args.seed,
        LINKS.replace("{receiver}", &receiver.local_addrs()[0].to_string())
    );
    let emu_cfg = EmulatorConfig::from_toml(&emu_toml, "demo links", &PathBuf::from("."))?;
    let emu = Emulator::start(&emu_cfg)?;
    let names: Vec<String> = emu.channels().to_vec();

    let mut scfg = HostConfig::new(
        sender_key,
        names.iter().map(|_| InterfaceConfig::new(lo)).collect(),
    );
    scfg.scheduler = Some(scheduler);
    let sender = Host::bind(scfg).await?;
    let conn = sender
        .connect(ConnectConfig {
            peer: *receiver_key.public(),
            service: SERVICE,
            channels: names
                .iter()
                .enumerate()
                .map(|(i, n)| ChannelTarget {
                    interface: i,
                    remote: emu.client_addr(n).expect("channel exists"),
                    config: ChannelConfig {
                        mtu: 1200,
                        congestion: CcConfig::default(),
                        ..ChannelConfig::default()
                    },
                })
                .collect(),
            handshake_timeout: Duration::from_secs(5),
        })
        .await
        .context("connecting through the emulator")?;
    let accepted = tokio::time::timeout(Duration::from_secs(5), listener.accept())
        .await
        .ok()
        .flatten()
        .context("the receiver did not accept the connection")?;

    let live = Arc::new(Mutex::new(Live::default()));
    let rx = tokio::spawn(app::run_receiver(accepted, live.clone(), None));
    let plans = plans(with_objectives)?;
    let stream_names = app::names(&plans);
    let tty = std::io::stdout().is_terminal() && !args.json;
    let l2 = live.clone();
    let json = args.json;
    app::run_sender(
        conn,
        &plans,
        duration,
        args.seed,
        1200,
        live.clone(),
        move |t| {
            if json {
                return;
            }
            let table = l2
                .lock()
                .expect("live lock")
                .table(t, &stream_names, &names);
            if tty {
                // Redraw in place: clear the screen below the heading.
                print!("\x1b[J{table}\x1b[{}A", table.lines().count());
            } else {
                print!("--- {:.0} s\n{table}", t.as_secs_f64());
            }
        },
    )
    .await?;
    if tty {
        println!("{}", "\n".repeat(8));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    rx.abort();
    sender.shutdown().await;
    receiver.shutdown().await;
    emu.shutdown();
    let l = live.lock().expect("live lock").clone();
    Ok(l)
}

fn stream_json(s: &StreamLive, secs: f64) -> serde_json::Value {
    serde_json::json!({
        "sent": s.queued,
        "acked": s.acked,
        "lost": s.lost + s.dropped,
        "loss_rate": s.loss_rate(),
        "latency_ms": { "mean": s.mean(), "median": s.percentile(50.0), "p95": s.percentile(95.0) },
        "goodput_kbps": s.bytes_received as f64 * 8.0 / secs / 1e3,
        "channels": s.by_channel,
    })
}

fn summary_json(l: &Live, names: &BTreeMap<u32, String>, secs: f64) -> serde_json::Value {
    let streams: serde_json::Map<String, serde_json::Value> = l
        .streams
        .iter()
        .map(|(id, s)| {
            (
                names.get(id).cloned().unwrap_or_else(|| id.to_string()),
                stream_json(s, secs),
            )
        })
        .chain(
            l.classes
                .iter()
                .map(|(c, s)| (c.clone(), stream_json(s, secs))),
        )
        .collect();
    serde_json::Value::Object(streams)
}

fn print_comparison(runs: &[(bool, Live)], names: &BTreeMap<u32, String>) {
    println!("\n== summary ==");
    let mut rows = vec![vec![
        "stream".to_string(),
        "objectives".into(),
        "mean ms".into(),
        "p95 ms".into(),
        "loss %".into(),
        "acked".into(),
    ]];
    for id in names.keys() {
        for (with, l) in runs {
            let Some(s) = l.streams.get(id) else { continue };
            let f = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.0}"));
            rows.push(vec![
                names[id].clone(),
                if *with { "on" } else { "off" }.into(),
                f(s.mean()),
                f(s.percentile(95.0)),
                format!("{:.2}", 100.0 * s.loss_rate()),
                s.acked.to_string(),
            ]);
        }
    }
    let classes: std::collections::BTreeSet<&String> =
        runs.iter().flat_map(|(_, l)| l.classes.keys()).collect();
    for class in classes {
        for (with, l) in runs {
            let Some(s) = l.classes.get(class) else {
                continue;
            };
            let f = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.0}"));
            rows.push(vec![
                class.clone(),
                if *with { "on" } else { "off" }.into(),
                f(s.mean()),
                f(s.percentile(95.0)),
                format!("{:.2}", 100.0 * s.loss_rate()),
                s.acked.to_string(),
            ]);
        }
    }
    print!("{}", crate::table::render(&rows));
}
