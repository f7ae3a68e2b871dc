//! The network between the two hosts: one `horde-links` model per link and direction,
//! and on top of it the packet faults a plan injects (death, extra loss, duplication,
//! reordering, bit flips, truncation).
//!
//! The clock, the links and the datagrams inside them are a [`World`]; the packet
//! faults act on a datagram as it is offered, and a reorder fault holds it back after
//! its link delivered it.
//!
//! What the network carries are the hosts' real datagrams: handshakes and AEAD-sealed
//! protocol packets. A damaged or copied datagram reaches the receiving host as it is,
//! and its secure layer (authentication tag, replay window) decides what becomes of it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use horde_links::Verdict;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::plan::{FaultKind, LinkPlan};
use super::SimFailure;
use crate::world::{earliest, Arrival, World};
pub use crate::world::{DOWN, UP};

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
    /// Each datagram inside a link with the extra delay a reorder fault gave it.
    world: World<(Datagram, Duration)>,
    faults: Vec<LinkFaults>,
    /// Datagrams out of their link, held back by a reorder fault, by release time.
    held: BTreeMap<(Duration, u64), Datagram>,
    rng: ChaCha8Rng,
    arrivals: Vec<Arrival<(Datagram, Duration)>>,
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
            world: World::new(built),
            held: BTreeMap::new(),
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x4E45_5400),
            arrivals: Vec::new(),
            stats: NetStats::default(),
        })
    }

    pub fn link_count(&self) -> usize {
        self.world.link_count()
    }

    /// The virtual time.
    pub fn now(&self) -> Duration {
        self.world.now()
    }

    /// Move the clock to `t` (never back).
    pub fn advance_to(&mut self, t: Duration) {
        self.world.advance_to(t);
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
    pub fn send(&mut self, mut d: Datagram) {
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
            let size = d.bytes.len().max(1) as u32;
            let (link, dir) = (d.link, d.dir);
            let verdict = self.world.offer(link, dir, size, None, (d.clone(), extra));
            if verdict == Verdict::QueueFull {
                self.stats.queue_drops += 1;
            }
        }
    }

    /// The next event: the earliest of the network's next delivery (out of a link or
    /// out of a reorder fault's hold) and `driver` (the hosts', feeds' and faults' next
    /// event), never before now.
    pub fn next_event(&self, driver: Option<Duration>) -> Option<Duration> {
        let held = self.held.keys().next().map(|k| k.0);
        self.world.next_event(earliest(held, driver))
    }

    /// Datagrams arriving by now, in the world's order; those a reorder fault holds
    /// back come after, by release time.
    pub fn deliver(&mut self, out: &mut Vec<Datagram>) {
        let now = self.world.now();
        let mut arrivals = std::mem::take(&mut self.arrivals);
        self.world.deliver(&mut arrivals);
        for a in arrivals.drain(..) {
            let (d, extra) = a.payload;
            if extra > Duration::ZERO {
                self.held.insert((now + extra, a.id), d);
            } else {
                self.arrive(d, out);
            }
        }
        self.arrivals = arrivals;
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
        self.world.in_flight() + self.held.len()
    }
}
