//! Where a PluriBus tunnel run's packets went: per direction the hosts' packets in and
//! out, per link and direction the link's random losses and queue drops, and per end
//! the recovery layer's counters (data and coded ADUs sent, rebuilt, held late, lost),
//! and what IP packets found in the tunnel entries' stream queues.
//!
//! `cargo run --release -p horde-sim --example pluribus_counters -- FILE [LOAD] [SECONDS] [MODES]`
//! e.g. `... -- scenarios/pluribus/a.toml 1 60 none,retransmit,oec`

use std::path::PathBuf;

use horde_sim::flows::tunnel::{TunnelCarrier, DOWN_STREAM, UP_STREAM};
use horde_sim::flows::tunnel_scenario::TunnelScenario;
use horde_sim::flows::FlowSim;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let file = PathBuf::from(args.first().ok_or("usage: FILE [LOAD] [SECONDS] [MODES]")?);
    let load: f64 = args.get(1).map_or(Ok(1.0), |a| a.parse())?;
    let mut s = TunnelScenario::load(&file)?;
    if let Some(d) = args.get(2) {
        s.duration_s = d.parse()?;
    }
    let all: Vec<String> = s.modes.iter().map(|m| m.name.clone()).collect();
    let modes: Vec<String> = args
        .get(3)
        .map_or(all, |m| m.split(',').map(String::from).collect());
    for name in &modes {
        let mode = s
            .modes
            .iter()
            .find(|m| &m.name == name)
            .ok_or_else(|| format!("no mode {name}"))?
            .clone();
        let carrier = TunnelCarrier::new(s.setup(&mode, s.links_at(None)))?;
        let mut sim = FlowSim::new(carrier, s.tcp, s.scaled_flows(load), s.plan(load)?, s.seed);
        let (records, _) = sim.run_in_place(s.end())?;
        let mut fct: Vec<f64> = records.iter().filter_map(|r| r.completion_ms).collect();
        fct.sort_by(f64::total_cmp);
        let t = sim.carrier().tunnel_stats();
        println!(
            "== {name} at {load}x: {}/{} flows, mean {:.0} ms, median {:.0} ms, TCP retransmissions {}",
            fct.len(),
            records.len(),
            fct.iter().sum::<f64>() / fct.len().max(1) as f64,
            fct.get(fct.len() / 2).copied().unwrap_or(f64::NAN),
            records.iter().map(|r| r.retransmits).sum::<u64>()
        );
        println!("  hosts up:   {:?}", t.up);
        println!("  hosts down: {:?}", t.down);
        for (link, up, down) in &t.links {
            println!("  link {link} up:   {up:?}");
            println!("  link {link} down: {down:?}");
        }
        let [qu, qd] = sim.carrier().queue_traces();
        println!(
            "  entry queue (bytes an IP packet found) up: mean {:.0}, peak {}; down: mean {:.0}, peak {}",
            qu.mean(),
            qu.queued_peak,
            qd.mean(),
            qd.queued_peak
        );
        let c = sim.carrier().client_session();
        println!("  client session: {:?}", c.stats());
        if let Some(sv) = sim.carrier().server_session() {
            println!("  server session: {:?}", sv.stats());
        }
        println!("  client sends: {:?}", c.recovery_stats(UP_STREAM));
        println!("  client gets:  {:?}", c.recovery_stats(DOWN_STREAM));
        if let Some(sv) = sim.carrier().server_session() {
            println!("  server sends: {:?}", sv.recovery_stats(DOWN_STREAM));
            println!("  server gets:  {:?}", sv.recovery_stats(UP_STREAM));
        }
    }
    Ok(())
}
