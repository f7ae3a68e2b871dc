//! `horde-lab chap multi-app`: the CHAP dissertation's headline experiment (seed 001
//! §6.8, Table 6.10) in virtual time; `horde-lab chap p2p`: its P2P background runs
//! (§6.9, Table 6.11). Five wireless stations behind one 802.11g access
//! point run a game, a VoIP call, a video stream, Web browsing and an FTP download
//! (smoltcp Cubic); the AP's downstream queue is FIFO, CHAP, SPQ or fq_codel. Prints the
//! table beside the dissertation's figures; `--json` for the runs and the table.
//! See `docs/chap-experiments.md`.

mod air;
mod bulk_tcp;
mod experiment;
mod table;

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::{Args as ClapArgs, Subcommand};

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

pub fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::MultiApp(a) => run_table(a, false),
        Command::P2p(a) => run_table(a, true),
    }
}

fn run_table(a: RunArgs, p2p: bool) -> Result<ExitCode> {
    if a.seeds == 0 || a.seeds > 1000 {
        bail!("--seeds must be between 1 and 1000, got {}", a.seeds);
    }
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
