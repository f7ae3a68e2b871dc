//! `horde-lab chap multi-app`: the CHAP dissertation's headline experiment (seed 001
//! §6.8, Table 6.10) in virtual time; `horde-lab chap p2p`: its P2P background runs
//! (§6.9, Table 6.11); `chap queue-size`, `chap distance` and `chap fairness`: its sweeps
//! (§6.6, §6.7, §6.13). Five wireless stations behind one 802.11g access
//! point run a game, a VoIP call, a video stream, Web browsing and an FTP download (every
//! TCP connection a segment-level Cubic, `bulk_tcp`); the AP's downstream queue is FIFO,
//! CHAP, SPQ or fq_codel. Prints the table beside the dissertation's figures; `--json`
//! for the runs and the table.
//! See `docs/chap-experiments.md`.

mod air;
mod bulk_tcp;
mod experiment;
mod sweeps;
mod table;

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use horde_qdisc::QdiscKind;

use bulk_tcp::Congestion;
use experiment::TestApp;
use sweeps::{Plan, Series, Sweep};

pub use experiment::{run as run_one, Schedule};
pub use table::{build_p2p_table, build_table};

#[derive(Subcommand)]
pub enum Command {
    /// Table 6.10: game, VoIP, video (no, small, large FEC), Web and FTP at once, under
    /// FIFO, CHAP, SPQ and fq_codel.
    MultiApp(RunArgs),
    /// Table 6.11: game, VoIP, video and Web, each in its own run against 10 parallel
    /// TCP downloads to one station (P2P), under FIFO, CHAP, SPQ and fq_codel.
    P2p(RunArgs),
    /// Table 6.5: each application against FTP with the AP's queue at q = 35, 70, ...,
    /// 350 packets.
    QueueSize {
        #[command(flatten)]
        run: SweepArgs,
        /// The applications, each in its own runs.
        #[arg(long, value_delimiter = ',', default_value = "game,voip,video,web")]
        apps: Vec<AppArg>,
        /// Queue limits in packets.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "35,70,105,140,175,210,245,280,315,350"
        )]
        queues: Vec<f64>,
    },
    /// Tables 6.6, 6.7 and 6.8: each application against FTP with the application's node
    /// (or, with `--node ftp`, the FTP node) at each distance, the other at 1 m; with
    /// `--node both`, both nodes at each distance.
    Distance {
        #[command(flatten)]
        run: SweepArgs,
        #[arg(long, value_delimiter = ',', default_value = "game,voip,video,web")]
        apps: Vec<AppArg>,
        /// Distances from the AP in m.
        #[arg(long, value_delimiter = ',', default_value = "1,5,10,15,20,25,30")]
        distances: Vec<f64>,
        /// Which node moves.
        #[arg(long, value_enum, default_value = "app")]
        node: NodeArg,
    },
    /// Table 6.14: two FTP downloads, FTP 1's one-way server-to-AP latency swept against
    /// FTP 2's 2 ms; Jain's index of their goodputs.
    Fairness {
        #[command(flatten)]
        run: SweepArgs,
        /// TCP congestion controls, each in its own runs.
        #[arg(long, value_delimiter = ',', default_value = "cubic,newreno")]
        tcp: Vec<TcpArg>,
        /// FTP 1's latencies in ms (the dissertation's L_1 + 1 ms).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "2,5,10,25,50,75,100,125,150"
        )]
        latencies: Vec<f64>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum AppArg {
    Game,
    Voip,
    Video,
    Web,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum NodeArg {
    App,
    Ftp,
    Both,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum TcpArg {
    Cubic,
    Newreno,
}

#[derive(ClapArgs)]
pub struct SweepArgs {
    /// Number of seeds; each figure is the mean over them.
    #[arg(long, default_value_t = 1)]
    seeds: u32,
    /// The first seed; the others follow it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A 71-second run (measured over 60 s) instead of the dissertation's schedule.
    #[arg(long)]
    short: bool,
    /// Measure over this many seconds from the window's start (90 s, or 10 s with
    /// --short) instead of 180 (60 with --short).
    #[arg(long, value_name = "SECONDS")]
    window: Option<f64>,
    /// Print the runs and the table as JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Disciplines, comma-separated: fifo, chap, spq, fq_codel (default: all four; FIFO
    /// and CHAP for fairness, as in the dissertation).
    #[arg(long, value_delimiter = ',')]
    disciplines: Vec<String>,
}

#[derive(ClapArgs)]
pub struct RunArgs {
    /// Number of seeds; with more than one, each figure is the mean and its spread
    /// (min..max) is shown.
    #[arg(long, default_value_t = 1)]
    seeds: u32,
    /// The first seed; the others follow it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A 71-second run (measured over 60 s) instead of the dissertation's schedule
    /// (applications from 30 s, FTP from 90 s, measured over 90-270 s).
    #[arg(long)]
    short: bool,
    /// Print the runs and the table as JSON instead of the table.
    #[arg(long)]
    json: bool,
}

/// The dissertation's schedule, or the short one, measured over `window` seconds if given.
fn sweep_schedule(short: bool, window: Option<f64>) -> Result<Schedule> {
    let schedule = if short {
        Schedule::short()
    } else {
        Schedule::dissertation()
    };
    match window {
        Some(secs) if !(secs > 0.0 && secs <= 1e5) => {
            anyhow::bail!("--window: {secs} s is out of range (more than 0, at most 100000)")
        }
        Some(secs) => Ok(schedule.with_window(secs)),
        None => Ok(schedule),
    }
}

pub fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::MultiApp(a) => run_table(a, false),
        Command::P2p(a) => run_table(a, true),
        Command::QueueSize { run, apps, queues } => {
            run_sweep(run, Sweep::QueueSize, app_series(&apps), queues)
        }
        Command::Distance {
            run,
            apps,
            distances,
            node,
        } => {
            let sweep = match node {
                NodeArg::App => Sweep::AppDistance,
                NodeArg::Ftp => Sweep::FtpDistance,
                NodeArg::Both => Sweep::BothDistance,
            };
            run_sweep(run, sweep, app_series(&apps), distances)
        }
        Command::Fairness {
            run,
            tcp,
            latencies,
        } => {
            let series = tcp
                .iter()
                .map(|t| {
                    Series::Tcp(match t {
                        TcpArg::Cubic => Congestion::Cubic,
                        TcpArg::Newreno => Congestion::NewReno,
                    })
                })
                .collect();
            run_sweep(run, Sweep::Fairness, series, latencies)
        }
    }
}

fn app_series(apps: &[AppArg]) -> Vec<Series> {
    apps.iter()
        .map(|a| {
            Series::App(match a {
                AppArg::Game => TestApp::Game,
                AppArg::Voip => TestApp::Voip,
                AppArg::Video => TestApp::Video,
                AppArg::Web => TestApp::Web,
            })
        })
        .collect()
}

fn check_seeds(seeds: u32) -> Result<()> {
    if seeds == 0 || seeds > 1000 {
        bail!("--seeds must be between 1 and 1000, got {seeds}");
    }
    Ok(())
}

fn run_sweep(a: SweepArgs, sweep: Sweep, series: Vec<Series>, xs: Vec<f64>) -> Result<ExitCode> {
    check_seeds(a.seeds)?;
    let disciplines = if a.disciplines.is_empty() {
        match sweep {
            Sweep::Fairness => vec![QdiscKind::Fifo, QdiscKind::Chap],
            _ => table::DISCIPLINES.to_vec(),
        }
    } else {
        a.disciplines
            .iter()
            .map(|d| {
                d.parse::<QdiscKind>().map_err(|_| {
                    anyhow::anyhow!(
                        "--disciplines: unknown discipline {d:?} (fifo, chap, spq, fq_codel)"
                    )
                })
            })
            .collect::<Result<_>>()?
    };
    let plan = Plan {
        sweep,
        series,
        xs,
        disciplines,
        seeds: (0..u64::from(a.seeds))
            .map(|k| a.seed.wrapping_add(k))
            .collect(),
        schedule: sweep_schedule(a.short, a.window)?,
    };
    plan.validate()?;
    let configs = plan.configs();
    let started = Instant::now();
    let mut runs = Vec::with_capacity(configs.len());
    for (k, config) in configs.iter().enumerate() {
        let t = Instant::now();
        let r = run_one(config)?;
        eprintln!(
            "[{}/{}] seed {} {:?} {:>8} q {} D {}/{} m: download {} Mbit/s ({:.1} s)",
            k + 1,
            configs.len(),
            config.seed,
            config.scenario,
            config.discipline.name(),
            config.queue_packets,
            config.distance_m,
            config.ftp_distance_m,
            r.download_mbps
                .iter()
                .map(|v| format!("{v:.2}"))
                .collect::<Vec<_>>()
                .join("/"),
            t.elapsed().as_secs_f64()
        );
        runs.push(r);
    }
    let table = sweeps::build(&plan, &runs)?;
    if a.json {
        let out = serde_json::json!({ "table": table, "runs": runs });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", table.render());
        println!(
            "{} runs of {:.0} s simulated each; wall time {:.0} s",
            runs.len(),
            plan.schedule.end_s,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn run_table(a: RunArgs, p2p: bool) -> Result<ExitCode> {
    check_seeds(a.seeds)?;
    let schedule = if a.short {
        Schedule::short()
    } else {
        Schedule::dissertation()
    };
    let seeds: Vec<u64> = (0..u64::from(a.seeds))
        .map(|k| a.seed.wrapping_add(k))
        .collect();
    let started = Instant::now();
    let mut runs = Vec::new();
    for &seed in &seeds {
        let configs = if p2p {
            table::p2p_configs(seed, schedule)
        } else {
            table::configs(seed, schedule)
        };
        for config in configs {
            let t = Instant::now();
            let r = run_one(&config)?;
            let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
            eprintln!(
                "seed {seed} {:?} {:>8} fec {:>5}: game {} voip {} video {} fps web {} ms download {:.2} Mbit/s ({:.1} s)",
                config.scenario,
                config.discipline.name(),
                experiment::fec_label(config.fec),
                show(r.game_mos),
                show(r.voip_mos),
                show(r.video_fps),
                show(r.web_ms),
                r.ftp_mbps,
                t.elapsed().as_secs_f64()
            );
            runs.push(r);
        }
    }
    let table = if p2p {
        build_p2p_table(&seeds, schedule, &runs)?
    } else {
        build_table(&seeds, schedule, &runs)?
    };
    let wall = started.elapsed().as_secs_f64();
    if a.json {
        let out = serde_json::json!({ "table": table, "runs": runs });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", table.render());
        println!(
            "{} runs of {:.0} s simulated each; wall time {:.0} s",
            runs.len(),
            schedule.end_s,
            wall
        );
    }
    Ok(ExitCode::SUCCESS)
}
