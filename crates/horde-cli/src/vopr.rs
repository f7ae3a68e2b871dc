//! `horde vopr`: the deterministic fault-injection simulator (see `docs/vopr.md`). Runs
//! seeds, checks every run's invariants, and prints the command that replays a failure.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use horde_sim::faults::{self, SeedReport, VoprOptions};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(clap::Args)]
pub struct Args {
    /// Run this one seed (and print its plan and report).
    #[arg(long, conflicts_with_all = ["seeds", "from"])]
    seed: Option<u64>,
    /// Run this many seeds, from `--from`.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    seeds: u64,
    /// The first seed of `--seeds`.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Keep only these faults of the seed's drawn plan (indices, comma-separated): the
    /// replay of a shrunk failure.
    #[arg(long, value_delimiter = ',', requires = "seed")]
    keep_faults: Option<Vec<usize>>,
    /// Shrink a failing `--seed`: drop faults while it still fails the same way.
    #[arg(long, requires = "seed")]
    shrink: bool,
    /// One JSON report per seed (one line each) on stdout.
    #[arg(long)]
    json: bool,
    /// Measure the link-death figure instead (one link of three dies at 10 s).
    #[arg(long, conflicts_with_all = ["seed", "shrink"])]
    link_death: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    if a.link_death {
        return link_death(a.json);
    }
    if let Some(seed) = a.seed {
        return one(seed, &a);
    }
    let Some(last) = a.from.checked_add(a.seeds - 1) else {
        bail!(
            "--from {} --seeds {} runs past the last seed, {}: at most {} seeds from there",
            a.from,
            a.seeds,
            u64::MAX,
            u64::MAX - a.from + 1
        );
    };
    let opts = VoprOptions::default();
    let bar = if a.json || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(a.seeds)
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} seeds [{bar:30}] {pos}/{len} ({eta}) {msg}")
            .context("progress template")?,
    );
    let mut failed = Vec::new();
    let mut faults_run = 0usize;
    let mut every = 0u64;
    for seed in a.from..=last {
        let r = faults::run_seed(seed, &opts);
        faults_run += r.faults.len();
        if a.json {
            println!("{}", serde_json::to_string(&r)?);
        } else if !r.passed() {
            bar.suspend(|| print_failure(&r));
        }
        if !r.passed() {
            failed.push(seed);
            bar.set_message(format!("{} failing", failed.len()));
        }
        bar.inc(1);
        every += 1;
        if bar.is_hidden() && !a.json && every.is_multiple_of(100) {
            eprintln!("{every}/{} seeds, {} failing", a.seeds, failed.len());
        }
    }
    bar.finish_and_clear();
    if !a.json {
        println!(
            "{} seeds from {}, {} faults injected, {} failing{}",
            a.seeds,
            a.from,
            faults_run,
            failed.len(),
            if failed.is_empty() {
                String::new()
            } else {
                format!(": {failed:?}")
            }
        );
    }
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn one(seed: u64, a: &Args) -> Result<ExitCode> {
    let opts = VoprOptions {
        keep_faults: a.keep_faults.clone(),
        ..VoprOptions::default()
    };
    let drawn = faults::RunPlan::draw(seed, opts.limits).faults.len();
    if let Some(k) = a
        .keep_faults
        .as_ref()
        .and_then(|k| k.iter().find(|&&i| i >= drawn))
    {
        bail!(
            "--keep-faults: seed {seed} draws {drawn} faults (0..{drawn}); there is no fault {k}"
        );
    }
    let r = if a.shrink {
        let (keep, r) = faults::shrink(seed, &opts);
        if !a.json {
            println!("shrunk to faults {keep:?}");
        }
        r
    } else {
        faults::run_seed(seed, &opts)
    };
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        print_report(&r);
    }
    Ok(if r.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn print_failure(r: &SeedReport) {
    for v in &r.violations {
        println!("seed {}: {}: {}", r.seed, v.kind, v.detail);
    }
    println!("  replay: {}", r.replay);
}

fn print_report(r: &SeedReport) {
    println!(
        "seed {}: {} links, {} streams, {:.1} simulated s, digest {}",
        r.seed, r.links, r.streams, r.simulated_s, r.digest
    );
    for (i, f) in r.faults.iter().enumerate() {
        println!(
            "  fault {i}: {:?} at {:.3} s for {:.3} s",
            f.kind,
            f.at.as_secs_f64(),
            f.length.as_secs_f64()
        );
    }
    let t = r.adus;
    println!(
        "  ADUs: {} queued, {} acked, {} lost, {} dropped, {} abandoned, {} with a crashed client; {} delivered ({} again on a new session)",
        t.queued, t.acked, t.lost, t.dropped, t.abandoned, t.crashed, t.delivered, t.redelivered
    );
    let l = r.lifecycle;
    println!(
        "  sessions: {} client ({} reconnects), {} server ({} replaced); flow blocked {} times",
        l.client_sessions, l.reconnects, l.server_sessions, l.replaced, l.flow_blocked
    );
    let n = r.net;
    println!(
        "  network: {} sent, {} delivered, {} queue drops, {} dead-link drops, {} fault losses, {} duplicated, {} reordered, {} corrupted, {} truncated",
        n.sent, n.delivered, n.queue_drops, n.dead_drops, n.fault_losses, n.duplicated, n.reordered, n.corrupted, n.truncated
    );
    match r.resumed_after_s {
        Some(s) => println!("  delivery resumed {s:.3} s after the last fault"),
        None => println!("  no delivery after the last fault"),
    }
    let w = r.window;
    println!(
        "  stable window: {:.0} B/s sent of {:.0} allocated, over links of {:.0} B/s; sender idle {:.3} s",
        w.sent, w.allocated, w.links, w.idle_s
    );
    if r.passed() {
        println!("  all invariants hold");
    } else {
        print_failure(r);
    }
}

fn link_death(json: bool) -> Result<ExitCode> {
    use faults::link_death::{measure, LinkDeathSetup};
    let mut setups = Vec::new();
    for kind in ["cubic", "bbr"] {
        let congestion = horde_proto::CcConfig::with_defaults(kind).context("known controller")?;
        setups.push((
            kind,
            LinkDeathSetup {
                congestion: congestion.clone(),
                ..LinkDeathSetup::default()
            },
        ));
        setups.push((
            kind,
            LinkDeathSetup {
                kbps: vec![2000.0, 2000.0],
                dies: 0,
                congestion,
                ..LinkDeathSetup::default()
            },
        ));
    }
    for (kind, setup) in setups {
        let f = measure(&setup).map_err(|e| anyhow::anyhow!("{e}"))?;
        if json {
            println!("{}", serde_json::to_string(&f)?);
            continue;
        }
        println!(
            "{kind}: links {:?} kbit/s, link {} dies at 10 s",
            setup.kbps, setup.dies
        );
        let before: Vec<String> = f
            .before
            .iter()
            .map(|x| format!("{:.0}%", x * 100.0))
            .collect();
        println!(
            "  5-10 s, share of each link's capacity carried: {}",
            before.join(", ")
        );
        println!(
            "  12-20 s, surviving links: {:.1}% of their capacity on the wire (worst second {:.1}%), goodput {:.1}%",
            f.after * 100.0,
            f.worst_second * 100.0,
            f.goodput * 100.0
        );
        let per: Vec<String> = f
            .per_second
            .iter()
            .map(|x| format!("{:.0}", x * 100.0))
            .collect();
        println!("  per second from 10 s (%): {}", per.join(" "));
    }
    Ok(ExitCode::SUCCESS)
}
