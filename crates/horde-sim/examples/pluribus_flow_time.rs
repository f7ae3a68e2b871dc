//! Where a flow's time goes, through the tunnel and over one link alone: every IP packet
//! the hosts exchange is timed from the moment one host hands it to the carrier to the
//! moment the other receives it, and each TCP flow's completion is split into its
//! phases as the client sees them:
//!
//! - `handshake`: the client's SYN handed over, to the SYN-ACK received;
//! - `to request`: from then to the request handed over (the client's own turn);
//! - `first byte`: the request handed over, to the first answer byte received;
//! - `rest`: the first answer byte to the last one.
//!
//! Per direction it prints the packets' transit (mean, median, 90th percentile, and the
//! share that took longer than 60 ms one way, which a 20 ms path only takes through a
//! queue, a reorder hold, or the 75 ms path).
//!
//! `cargo run --release -p horde-sim --example pluribus_flow_time -- FILE [LOAD] [SECONDS] [ARMS]`
//! e.g. `... -- scenarios/pluribus/a.toml 1 300 none,direct:wimax`

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::time::Duration;

use horde_sim::flows::carrier::{Carrier, CarrierStats, DirectLink, Side};
use horde_sim::flows::tunnel::TunnelCarrier;
use horde_sim::flows::tunnel_scenario::TunnelScenario;
use horde_sim::flows::FlowSim;
use horde_sim::workload::stream_seed;

/// The TCP facts of an IPv4 packet this trace needs.
struct Tcp {
    client_port: u16,
    syn: bool,
    payload: usize,
}

fn parse_tcp(p: &[u8], from: Side) -> Option<Tcp> {
    if p.len() < 20 || p[0] >> 4 != 4 || p[9] != 6 {
        return None;
    }
    let ihl = usize::from(p[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
    let t = p.get(ihl..)?;
    if t.len() < 20 {
        return None;
    }
    let (src, dst) = (
        u16::from_be_bytes([t[0], t[1]]),
        u16::from_be_bytes([t[2], t[3]]),
    );
    let off = usize::from(t[12] >> 4) * 4;
    Some(Tcp {
        client_port: if from == Side::Client { src } else { dst },
        syn: t[13] & 0x02 != 0,
        payload: total.saturating_sub(ihl + off),
    })
}

/// Per flow (client port), when each phase boundary happened, seconds.
#[derive(Default, Clone, Copy)]
struct FlowMarks {
    syn: Option<f64>,
    syn_ack: Option<f64>,
    request: Option<f64>,
    first_byte: Option<f64>,
    last_byte: Option<f64>,
}

/// A carrier that times every packet through the carrier it wraps.
struct Traced<C> {
    inner: C,
    /// Entry times of packets on their way, by content (FIFO for identical copies).
    entered: HashMap<Vec<u8>, VecDeque<f64>>,
    /// One-way transit, ms: `[up, down]`.
    transit: [Vec<f64>; 2],
    flows: HashMap<u16, FlowMarks>,
    /// Flows in order of their SYN (a client port is reused after a flow ends).
    done: Vec<FlowMarks>,
    now: f64,
}

impl<C: Carrier> Traced<C> {
    fn new(inner: C) -> Self {
        Self {
            inner,
            entered: HashMap::new(),
            transit: [Vec::new(), Vec::new()],
            flows: HashMap::new(),
            done: Vec::new(),
            now: 0.0,
        }
    }
}

impl<C: Carrier> Carrier for Traced<C> {
    fn send(&mut self, now: Duration, from: Side, packet: Vec<u8>) {
        self.now = now.as_secs_f64();
        if let Some(t) = parse_tcp(&packet, from) {
            if from == Side::Client && t.syn {
                if let Some(old) = self.flows.remove(&t.client_port) {
                    self.done.push(old);
                }
                self.flows.entry(t.client_port).or_default().syn = Some(self.now);
            }
            if from == Side::Client && t.payload > 0 {
                let f = self.flows.entry(t.client_port).or_default();
                f.request.get_or_insert(self.now);
            }
        }
        self.entered
            .entry(packet.clone())
            .or_default()
            .push_back(self.now);
        self.inner.send(now, from, packet);
    }

    fn next_delivery(&self) -> Option<Duration> {
        self.inner.next_delivery()
    }

    fn deliver(&mut self, now: Duration, out: &mut Vec<(Side, Vec<u8>)>) {
        self.now = now.as_secs_f64();
        let first = out.len();
        self.inner.deliver(now, out);
        for (to, p) in &out[first..] {
            if let Some(q) = self.entered.get_mut(p) {
                if let Some(t0) = q.pop_front() {
                    let dir = usize::from(*to == Side::Client);
                    self.transit[dir].push((self.now - t0) * 1e3);
                }
                if q.is_empty() {
                    self.entered.remove(p);
                }
            }
            if *to != Side::Client {
                continue;
            }
            if let Some(t) = parse_tcp(p, Side::Server) {
                let f = self.flows.entry(t.client_port).or_default();
                if t.syn {
                    f.syn_ack.get_or_insert(self.now);
                }
                if t.payload > 0 {
                    f.first_byte.get_or_insert(self.now);
                    f.last_byte = Some(self.now);
                }
            }
        }
    }

    fn stats(&self) -> CarrierStats {
        self.inner.stats()
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn report<C: Carrier>(name: &str, t: &Traced<C>) {
    println!("== {name}");
    for (dir, label) in [(0, "up"), (1, "down")] {
        let mut v = t.transit[dir].clone();
        v.sort_by(f64::total_cmp);
        let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
        let slow = v.iter().filter(|x| **x > 60.0).count();
        println!(
            "  {label:4} packets {:6}  transit mean {mean:6.1} ms, median {:6.1}, p90 {:6.1}, over 60 ms {:5.1}%",
            v.len(),
            percentile(&v, 0.5),
            percentile(&v, 0.9),
            100.0 * slow as f64 / v.len().max(1) as f64
        );
    }
    let all: Vec<FlowMarks> = t.done.iter().chain(t.flows.values()).copied().collect();
    let mut phases = [0.0f64; 4];
    let mut n = 0usize;
    for f in &all {
        let (Some(a), Some(b), Some(c), Some(d), Some(e)) =
            (f.syn, f.syn_ack, f.request, f.first_byte, f.last_byte)
        else {
            continue;
        };
        for (p, x) in phases.iter_mut().zip([b - a, c - b, d - c, e - d]) {
            *p += x * 1e3;
        }
        n += 1;
    }
    let n_f = n.max(1) as f64;
    println!(
        "  flows {n}: mean ms per flow: handshake {:.1}, to request {:.1}, first byte {:.1}, rest {:.1}, total {:.1}",
        phases[0] / n_f,
        phases[1] / n_f,
        phases[2] / n_f,
        phases[3] / n_f,
        phases.iter().sum::<f64>() / n_f
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let file = PathBuf::from(args.first().ok_or("usage: FILE [LOAD] [SECONDS] [ARMS]")?);
    let load: f64 = args.get(1).map_or(Ok(1.0), |a| a.parse())?;
    let mut s = TunnelScenario::load(&file)?;
    if let Some(d) = args.get(2) {
        s.duration_s = d.parse()?;
    }
    let arms: Vec<String> = args.get(3).map_or(vec!["none".into()], |m| {
        m.split(',').map(String::from).collect()
    });
    let links = s.links_at(None);
    for arm in &arms {
        let label = format!("{arm} at {load}x");
        if let Some(name) = arm.strip_prefix("direct:") {
            let (i, l) = links
                .iter()
                .enumerate()
                .find(|(_, l)| l.name == name)
                .ok_or_else(|| format!("no link {name}"))?;
            // The seeds the sweep gives the same baseline.
            let seed = |dir: u32| stream_seed(s.seed ^ 0xd1 << 40, 2 * i as u32 + dir);
            let carrier = Traced::new(DirectLink::new(
                l.up.build(seed(0), &s.base_dir)?,
                l.down.build(seed(1), &s.base_dir)?,
            ));
            let mut sim = FlowSim::new(carrier, s.tcp, s.scaled_flows(load), s.plan(load)?, s.seed);
            sim.run_in_place(s.end())?;
            report(&label, sim.carrier());
        } else {
            let mode = s
                .modes
                .iter()
                .find(|m| &m.name == arm)
                .ok_or_else(|| format!("no mode {arm}"))?
                .clone();
            let carrier = Traced::new(TunnelCarrier::new(s.setup(&mode, links.clone()))?);
            let mut sim = FlowSim::new(carrier, s.tcp, s.scaled_flows(load), s.plan(load)?, s.seed);
            sim.run_in_place(s.end())?;
            report(&label, sim.carrier());
            let t = &sim.carrier().inner;
            for (end, sess) in [
                ("client", Some(t.client_session())),
                ("server", t.server_session()),
            ] {
                for (id, c) in sess.map(|x| x.channel_stats()).unwrap_or_default() {
                    println!("  {end} channel {id:?}: {c:?}");
                }
            }
        }
    }
    Ok(())
}
