//! `horde-lab chap multi-app`: the CHAP dissertation's headline experiment (seed 001
//! §6.8, Table 6.10) in virtual time. Five wireless stations behind one 802.11g access
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
pub use table::build_table;

#[derive(Subcommand)]
pub enum Command {
    /// Table 6.10: game, VoIP, video (no, small, large FEC), Web and FTP at once, under
    /// FIFO, CHAP, SPQ and fq_codel.
    MultiApp(MultiAppArgs),
}

#[derive(ClapArgs)]
pub struct MultiAppArgs {
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
        Command::MultiApp(a) => multi_app(a),
    }
}

fn multi_app(a: MultiAppArgs) -> Result<ExitCode> {
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
        for config in table::configs(seed, schedule) {
            let t = Instant::now();
            let r = run_one(&config)?;
            eprintln!(
                "seed {seed} {:>8} fec {:>5}: game {:.2} voip {:.2} video {:.2} fps web {} ftp {:.2} Mbit/s ({:.1} s)",
                config.discipline.name(),
                experiment::fec_label(config.fec),
                r.game_mos,
                r.voip_mos,
                r.video_fps,
                r.web_ms.map_or("-".to_string(), |w| format!("{w:.1} ms")),
                r.ftp_mbps,
                t.elapsed().as_secs_f64()
            );
            runs.push(r);
        }
    }
    let table = build_table(&seeds, schedule, &runs)?;
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
