//! `horde demo`: the telemedicine streams of an ambulance over three emulated cellular
//! links, sender and receiver on real sockets (or, with `--sim`, in the simulator),
//! once with objectives and once without, and a verdict per objective.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use horde_crypto::Keypair;
use horde_emu::Emulator;
use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, InterfaceConfig};
use horde_proto::SessionConfig;
use horde_sim::engine::Simulation;
use horde_sim::metrics::{Report, StreamReport};
use horde_sim::scenario::Scenario;

use crate::demo_setup::{self, OBJECTIVE_NOTES};
use crate::screen::Screen;
use crate::verdict::{self, Check, Figures, Losses, Run};
use horde_apps::live::{Live, StreamLive};
use horde_apps::sender as app;

#[derive(clap::Args)]
pub struct Args {
    /// Run time in seconds of each seed, split between the run with objectives and the
    /// one without. 30 s a run gives each per-seed verdict enough ADUs to stand on
    /// (docs/results.md, "How long a run must be").
    #[arg(long, default_value_t = 60.0)]
    duration: f64,
    /// Run only with objectives, skipping the comparison run.
    #[arg(long)]
    no_compare: bool,
    /// Seed of the emulated links and the workloads (the first, with --seeds).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Repeat over this many seeds (seed, seed+1, ...) and give each verdict's spread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    seeds: u64,
    /// Scheduler of both runs (default: the scenario's, directed).
    #[arg(long)]
    scheduler: Option<String>,
    /// Run in the simulator, in virtual time, instead of over real sockets.
    #[arg(long)]
    sim: bool,
    /// Print the results of all runs as one JSON object instead of tables.
    #[arg(long)]
    json: bool,
}

const SERVICE: u32 = 1;
/// Largest ADU the workloads emit: the links' MTU.
const MAX_ADU: u32 = 1200;

pub fn run(args: Args) -> Result<ExitCode> {
    let total = crate::emu::seconds(args.duration)?;
    let each = if args.no_compare { total } else { total / 2 };
    let variants: &[bool] = if args.no_compare {
        &[true]
    } else {
        &[true, false]
    };
    if !args.json {
        print_intro(&args, each);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut seeds_json = Vec::new();
    let mut verdicts = Vec::new();
    for seed in args.seed..args.seed + args.seeds {
        let mut scenario = demo_setup::scenario(seed)?;
        scenario.duration_s = each.as_secs_f64();
        if let Some(k) = &args.scheduler {
            scenario.scheduler.kind = k.clone();
        }
        let mut runs = Vec::new();
        for &with in variants {
            if !args.json {
                println!(
                    "\n== seed {seed}, {} objectives, {:.0} s{} ==",
                    if with { "with" } else { "without" },
                    each.as_secs_f64(),
                    if args.sim { " simulated" } else { "" }
                );
            }
            let run = if args.sim {
                run_sim(&scenario, with)?
            } else {
                rt.block_on(run_real(&scenario, with, each, args.json))?
            };
            runs.push((with, run));
        }
        let (checks, costs) = match runs.as_slice() {
            [(true, on), (false, off)] => (verdict::judge(on, off), verdict::costs(on, off)),
            _ => (Vec::new(), Vec::new()),
        };
        if !args.json {
            print_summary(seed, &runs, &checks, &costs);
        }
        let mut entry = serde_json::Map::new();
        entry.insert("seed".into(), seed.into());
        for (with, r) in &runs {
            let key = if *with {
                "with_objectives"
            } else {
                "without_objectives"
            };
            entry.insert(key.into(), serde_json::to_value(r)?);
        }
        entry.insert("verdicts".into(), serde_json::to_value(&checks)?);
        entry.insert("costs".into(), serde_json::to_value(&costs)?);
        seeds_json.push(serde_json::Value::Object(entry));
        verdicts.push(checks);
    }
    let spread = verdict::spread(&verdicts);
    if args.json {
        let out = serde_json::json!({
            "mode": if args.sim { "simulated" } else { "real time" },
            "seconds_each": each.as_secs_f64(),
            "seeds": seeds_json,
            "spread": spread,
        });
        println!("{out}");
    } else if args.seeds > 1 && !spread.is_empty() {
        println!(
            "\n== verdicts over seeds {}..={} (difference = with - without; negative is better) ==",
            args.seed,
            args.seed + args.seeds - 1
        );
        print!("{}", verdict::render_spread(&spread));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_intro(args: &Args, each: Duration) {
    let secs = each.as_secs_f64();
    println!("Telemedicine streams (video 1.5 Mbit/s, audio, EKG) over three emulated");
    println!("links (lte-a steady, lte-b fast but lossy, hspa slow): {secs:.0} s with");
    if args.no_compare {
        println!("objectives, and no run without them (--no-compare). What each asks for:");
    } else {
        println!("objectives, then {secs:.0} s without. What each objective asks for:");
    }
    for (name, lines) in OBJECTIVE_NOTES {
        for (i, line) in lines.iter().enumerate() {
            let label = if i == 0 { *name } else { "" };
            println!("  {label:8} {line}");
        }
    }
    if !args.sim {
        println!("Live rows are cumulative since the start of each run.");
    }
}

/// One run in virtual time.
fn run_sim(s: &Scenario, with_objectives: bool) -> Result<Run> {
    let topo = demo_setup::topology(s, with_objectives)?;
    let mut sim = Simulation::new(topo)?;
    let report = sim.run(|_| {});
    Ok(sim_figures(s, &report))
}

fn sim_figures(s: &Scenario, report: &Report) -> Run {
    let names: Vec<String> = s.channels.iter().map(|c| c.name.clone()).collect();
    let of = |r: &StreamReport| Figures {
        sent: r.sent,
        acked: r.acked,
        lost: r.lost,
        loss_rate: r.loss_rate.unwrap_or(0.0),
        mean_ms: r.latency_ms.mean,
        p95_ms: r.latency_ms.p95,
        goodput_kbps: Some(r.goodput_kbps),
        channels: names
            .iter()
            .map(|n| (n.clone(), r.channels.get(n).copied().unwrap_or(0)))
            .collect(),
        losses: None,
    };
    let mut run = Run::default();
    for r in &report.streams {
        let name = demo_setup::name(r.id);
        if let Some(i) = r.frame_types.get("I") {
            run.classes.insert(
                format!("{name} I-frames"),
                Figures {
                    sent: i.sent,
                    acked: i.acked,
                    lost: i.lost,
                    loss_rate: i.loss_rate.unwrap_or(0.0),
                    mean_ms: None,
                    p95_ms: None,
                    goodput_kbps: None,
                    channels: BTreeMap::new(),
                    losses: None,
                },
            );
        }
        run.streams.insert(name, of(r));
    }
    run
}

/// One run over real sockets through the emulator, with a live display.
async fn run_real(
    s: &Scenario,
    with_objectives: bool,
    duration: Duration,
    json: bool,
) -> Result<Run> {
    let scheduler = horde_apps::hose::scheduler(&s.scheduler.kind)?;
    let sender_key = Keypair::generate();
    let receiver_key = Keypair::generate();
    let lo = "127.0.0.1:0".parse().expect("address literal");

    let mut rcfg = HostConfig::new(receiver_key.clone(), vec![InterfaceConfig::new(lo)]);
    rcfg.allowed_peers = vec![*sender_key.public()];
    rcfg.scheduler = Some(scheduler.clone());
    let receiver = Host::bind(rcfg).await?;
    let mut listener = receiver.listen(SERVICE);

    let emu = Emulator::start(&demo_setup::emulator(s, receiver.local_addrs()[0]))?;
    let names: Vec<String> = emu.channels().to_vec();

    let mut scfg = HostConfig::new(
        sender_key,
        names.iter().map(|_| InterfaceConfig::new(lo)).collect(),
    );
    scfg.scheduler = Some(scheduler);
    scfg.session = SessionConfig {
        seed: s.seed,
        cycle_ms: s.scheduler.cycle_ms,
        lookahead_ms: s.scheduler.lookahead_ms,
        pack_adus: s.scheduler.pack_adus,
        phantom_wait_ms: s.scheduler.phantom_wait_ms,
        ..SessionConfig::default()
    };
    let sender = Host::bind(scfg).await?;
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
                    config: demo_setup::channel_config(c),
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
    let plans = demo_setup::streams(s, with_objectives)?;
    let stream_names = app::names(&plans);
    let l2 = live.clone();
    let channel_names = names.clone();
    let mut screen = Screen::stdout();
    app::run_sender(
        conn,
        &plans,
        duration,
        s.seed,
        MAX_ADU,
        live.clone(),
        move |t| {
            if json {
                return;
            }
            let table = crate::live::table(
                &l2.lock().expect("live lock"),
                t,
                &stream_names,
                &channel_names,
            );
            let heading = format!(
                "{:.0} of {:.0} s, cumulative since the start:",
                t.as_secs_f64(),
                duration.as_secs_f64()
            );
            // A closed stdout ends nothing here; the summary will fail loudly.
            let _ = screen.show(&heading, &table);
        },
    )
    .await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    rx.abort();
    sender.shutdown().await;
    receiver.shutdown().await;
    emu.shutdown();
    let l = live.lock().expect("live lock").clone();
    Ok(live_figures(&l, &demo_setup::names(), &names, duration))
}

fn live_figures(
    l: &Live,
    names: &BTreeMap<u32, String>,
    channels: &[String],
    secs: Duration,
) -> Run {
    let secs = secs.as_secs_f64().max(1e-3);
    let channel_name = |c: u8| {
        channels
            .get(usize::from(c))
            .cloned()
            .unwrap_or_else(|| format!("ch{c}"))
    };
    let by_name = |m: &BTreeMap<u8, u64>| -> BTreeMap<String, u64> {
        m.iter().map(|(c, n)| (channel_name(*c), *n)).collect()
    };
    let of = |s: &StreamLive, goodput: bool| Figures {
        sent: s.queued,
        acked: s.acked,
        lost: s.lost.saturating_sub(s.late_acked) + s.dropped + s.abandoned,
        loss_rate: s.loss_rate(),
        mean_ms: s.mean(),
        p95_ms: s.percentile(95),
        goodput_kbps: goodput.then(|| s.bytes_received as f64 * 8.0 / secs / 1e3),
        channels: by_name(&s.by_channel),
        losses: Some(Losses {
            declared_by_channel: by_name(&s.lost_by_channel),
            late_acked_by_channel: by_name(&s.late_by_channel),
            dropped: s.dropped,
            abandoned: s.abandoned,
            unsent_at_close: s.unsent_at_close,
        }),
    };
    Run {
        streams: l
            .streams
            .iter()
            .map(|(id, s)| {
                let name = names.get(id).cloned().unwrap_or_else(|| id.to_string());
                (name, of(s, true))
            })
            .collect(),
        classes: l
            .classes
            .iter()
            .map(|(c, s)| (c.clone(), of(s, false)))
            .collect(),
    }
}

fn print_summary(seed: u64, runs: &[(bool, Run)], checks: &[Check], costs: &[verdict::Cost]) {
    println!("\n== seed {seed}: summary (whole runs) ==");
    let mut rows = vec![vec![
        "stream".to_string(),
        "objectives".into(),
        "mean ms".into(),
        "p95 ms".into(),
        "loss %".into(),
        "acked".into(),
    ]];
    let f = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.0}"));
    let mut push = |name: &str, with: bool, s: &Figures| {
        rows.push(vec![
            name.to_string(),
            if with { "on" } else { "off" }.into(),
            f(s.mean_ms),
            f(s.p95_ms),
            format!("{:.2}", 100.0 * s.loss_rate),
            s.acked.to_string(),
        ]);
    };
    if let Some((_, first)) = runs.first() {
        for name in first.streams.keys() {
            for (with, r) in runs {
                if let Some(s) = r.streams.get(name) {
                    push(name, *with, s);
                }
            }
        }
        for name in first.classes.keys() {
            for (with, r) in runs {
                if let Some(s) = r.classes.get(name) {
                    push(name, *with, s);
                }
            }
        }
    }
    print!("{}", crate::table::render(&rows));
    if !checks.is_empty() {
        println!("\nverdicts (difference = with - without; negative is better):");
        print!("{}", verdict::render_checks(checks));
    }
    if !costs.is_empty() {
        println!("\nwhat the objectives cost (with objectives, and without):");
        print!("{}", verdict::render_costs(costs));
    }
}
