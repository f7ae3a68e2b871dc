//! The network between the two hosts: one `horde-links` model per link and direction,
//! and on top of it the packet faults a plan injects (death, extra loss, duplication,
//! reordering, bit flips, truncation).
//!
//! What the network carries are the hosts' real datagrams: handshakes and AEAD-sealed
//! protocol packets. A damaged or copied datagram reaches the receiving host as it is,
//! and its secure layer (authentication tag, replay window) decides what becomes of it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use horde_links::{Delivery, Link, Verdict};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::plan::{FaultKind, LinkPlan};
use super::SimFailure;

/// Direction indices.
pub const UP: usize = 0;
pub const DOWN: usize = 1;

/// A datagram in the network.
#[derive(Debug, Clone)]
pub struct Datagram {
    pub link: usize,
    pub dir: usize,
    pub from: SocketAddr,
    pub dst: SocketAddr,
    pub bytes: Bytes,
}

/// Packet faults holding on one link now.
#[derive(Debug, Clone, Copy, Default)]
struct LinkFaults {
    dead: bool,
    loss: f64,
    duplicate: f64,
    reorder: f64,
    reorder_extra: Duration,
    corrupt: f64,
    truncate: f64,
}

/// What the network did, per run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NetStats {
    pub sent: u64,
    pub delivered: u64,
    pub queue_drops: u64,
    pub dead_drops: u64,
    pub fault_losses: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    pub truncated: u64,
    /// Datagrams the receiving host's secure layer refused as not authentic (damaged,
    /// or for a session that is gone).
    pub integrity_drops: u64,
    /// Copies the receiving host's secure layer refused as replays.
    pub replay_drops: u64,
}

pub struct Net {
    links: Vec<[Box<dyn Link>; 2]>,
    faults: Vec<LinkFaults>,
    in_flight: BTreeMap<u64, (Datagram, Duration)>,
    /// Datagrams out of their link, held back by a reorder fault, by release time.
    held: BTreeMap<(Duration, u64), Datagram>,
    next_id: u64,
    rng: ChaCha8Rng,
    deliveries: Vec<Delivery>,
    lost: Vec<u64>,
    pub stats: NetStats,
    /// Wire bytes delivered per link in the up direction, for throughput figures.
    pub up_bytes: Vec<u64>,
}

impl Net {
    pub fn new(links: &[LinkPlan], seed: u64) -> Result<Self, SimFailure> {
        let mut built = Vec::new();
        for (i, l) in links.iter().enumerate() {
            let build = |spec: &horde_links::LinkSpec, dir: u64| {
                spec.build(
                    seed ^ ((i as u64 * 2 + dir + 1) * 0x9E37),
                    std::path::Path::new("."),
                )
                .map_err(|e| SimFailure::Setup(format!("link {i}: {e}")))
            };
            built.push([build(&l.up, 0)?, build(&l.down, 1)?]);
        }
        Ok(Self {
            faults: vec![LinkFaults::default(); built.len()],
            up_bytes: vec![0; built.len()],
            links: built,
            in_flight: BTreeMap::new(),
            held: BTreeMap::new(),
            next_id: 0,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x4E45_5400),
            deliveries: Vec::new(),
            lost: Vec::new(),
            stats: NetStats::default(),
        })
    }

    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    /// Start (`on`) or end a link-level fault.
    pub fn set_fault(&mut self, kind: &FaultKind, on: bool) {
        let p = |x: f64| if on { x } else { 0.0 };
        let link = match *kind {
            FaultKind::LinkDeath { link }
            | FaultKind::Loss { link, .. }
            | FaultKind::Duplicate { link, .. }
            | FaultKind::Reorder { link, .. }
            | FaultKind::Corrupt { link, .. }
            | FaultKind::Truncate { link, .. } => link,
            _ => return,
        };
        let Some(f) = self.faults.get_mut(link) else {
            return;
        };
        match *kind {
            FaultKind::LinkDeath { .. } => f.dead = on,
            FaultKind::Loss { p: x, .. } => f.loss = p(x),
            FaultKind::Duplicate { p: x, .. } => f.duplicate = p(x),
            FaultKind::Reorder { p: x, extra_ms, .. } => {
                f.reorder = p(x);
                f.reorder_extra = Duration::from_millis(extra_ms);
            }
            FaultKind::Corrupt { p: x, .. } => f.corrupt = p(x),
            FaultKind::Truncate { p: x, .. } => f.truncate = p(x),
            _ => {}
        }
    }

    /// Whether the link carries nothing now.
    pub fn is_dead(&self, link: usize) -> bool {
        self.faults.get(link).is_some_and(|f| f.dead)
    }

    /// Put a datagram on its link, applying the faults that hold now.
    pub fn send(&mut self, now: Duration, mut d: Datagram) {
        self.stats.sent += 1;
        let Some(f) = self.faults.get(d.link).copied() else {
            return;
        };
        if f.dead {
            self.stats.dead_drops += 1;
            return;
        }
        if f.loss > 0.0 && self.rng.gen_bool(f.loss) {
            self.stats.fault_losses += 1;
            return;
        }
        if f.corrupt > 0.0 && self.rng.gen_bool(f.corrupt) && !d.bytes.is_empty() {
            let mut v = d.bytes.to_vec();
            let bit = self.rng.gen_range(0..v.len() * 8);
            v[bit / 8] ^= 1 << (bit % 8);
            d.bytes = Bytes::from(v);
            self.stats.corrupted += 1;
        }
        if f.truncate > 0.0 && self.rng.gen_bool(f.truncate) && !d.bytes.is_empty() {
            let keep = self.rng.gen_range(0..d.bytes.len());
            d.bytes.truncate(keep);
            self.stats.truncated += 1;
        }
        let copies = if f.duplicate > 0.0 && self.rng.gen_bool(f.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let extra = if f.reorder > 0.0 && self.rng.gen_bool(f.reorder) {
                self.stats.reordered += 1;
                f.reorder_extra
            } else {
                Duration::ZERO
            };
            let id = self.next_id;
            self.next_id += 1;
            let size = d.bytes.len().max(1) as u32;
            match self.links[d.link][d.dir].enqueue(now, id, size) {
                Verdict::Queued => {
                    self.in_flight.insert(id, (d.clone(), extra));
                }
                Verdict::QueueFull => self.stats.queue_drops += 1,
            }
        }
    }

    pub fn next_delivery(&self) -> Option<Duration> {
        let mut t = self.held.keys().next().map(|k| k.0);
        for l in &self.links {
            for x in [l[0].next_delivery(), l[1].next_delivery()]
                .into_iter()
                .flatten()
            {
                t = Some(t.map_or(x, |t: Duration| t.min(x)));
            }
        }
        t
    }

    /// Datagrams arriving by `now`, in a deterministic order.
    pub fn deliver(&mut self, now: Duration, out: &mut Vec<Datagram>) {
        for link in 0..self.links.len() {
            for dir in [UP, DOWN] {
                self.deliveries.clear();
                self.lost.clear();
                self.links[link][dir].deliver_and_report_losses(
                    now,
                    &mut self.deliveries,
                    &mut self.lost,
                );
                for id in &self.lost {
                    self.in_flight.remove(id);
                }
                for k in 0..self.deliveries.len() {
                    let id = self.deliveries[k].id;
                    let Some((d, extra)) = self.in_flight.remove(&id) else {
                        continue;
                    };
                    if extra > Duration::ZERO {
                        self.held.insert((now + extra, id), d);
                    } else {
                        self.arrive(d, out);
                    }
                }
            }
        }
        while let Some(entry) = self.held.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let d = entry.remove();
            self.arrive(d, out);
        }
    }

    fn arrive(&mut self, d: Datagram, out: &mut Vec<Datagram>) {
        // A link that died takes what it was carrying with it.
        if self.is_dead(d.link) {
            self.stats.dead_drops += 1;
            return;
        }
        if d.dir == UP {
            self.up_bytes[d.link] += d.bytes.len() as u64;
        }
        self.stats.delivered += 1;
        out.push(d);
    }

    /// Datagrams inside the network now (a bound the harness checks).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len() + self.held.len()
    }
}
