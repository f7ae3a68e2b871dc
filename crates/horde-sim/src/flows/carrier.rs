//! What carries the simulated hosts' IP packets from one to the other.
//!
//! A [`Carrier`] takes whole IP packets from either side and hands them to the other
//! side later (or never). [`DirectLink`] is the single-path baseline: one `horde-links`
//! model per direction. A tunnel that stripes packets over several channels implements
//! the same trait.

use std::time::Duration;

use horde_links::{Link, LinkStats};

use crate::world::{Arrival, World, DOWN, UP};

/// The two ends of a simulated path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// Opens connections (the host inside the namespace in `horde shell`).
    Client,
    /// Accepts them.
    Server,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// Counters of one direction, client to server (`up`) or back (`down`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CarrierStats {
    pub up: LinkStats,
    pub down: LinkStats,
}

/// Moves IP packets between the client and the server host.
pub trait Carrier {
    /// Offer a packet sent by `from` at `now` (non-decreasing across calls).
    fn send(&mut self, now: Duration, from: Side, packet: Vec<u8>);
    /// When the next packet comes out, if one is on its way.
    fn next_delivery(&self) -> Option<Duration>;
    /// Append `(receiving side, packet)` for every packet due by `now`, in order.
    fn deliver(&mut self, now: Duration, out: &mut Vec<(Side, Vec<u8>)>);
    fn stats(&self) -> CarrierStats;
    /// Mean rates a scheduler assigned so far, up and down, for scheduled links (the
    /// CDMA model; [`Link::mean_assigned_kbps`]).
    fn assigned_kbps(&self) -> AssignedRates {
        AssignedRates::default()
    }
}

/// Mean assigned rates (kbit/s) of the two directions; absent for fixed-rate links.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct AssignedRates {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub up_kbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down_kbps: Option<f64>,
}

impl AssignedRates {
    pub fn is_empty(&self) -> bool {
        self.up_kbps.is_none() && self.down_kbps.is_none()
    }
}

/// One link model per direction: the single-path baseline.
pub struct DirectLink {
    /// One link, `up` carrying client-to-server packets, with the packets' bytes.
    world: World<Vec<u8>>,
    arrivals: Vec<Arrival<Vec<u8>>>,
}

impl DirectLink {
    /// `up` carries client-to-server packets, `down` the others.
    pub fn new(up: Box<dyn Link>, down: Box<dyn Link>) -> Self {
        DirectLink {
            world: World::new(vec![[up, down]]),
            arrivals: Vec::new(),
        }
    }
}

impl Carrier for DirectLink {
    fn send(&mut self, now: Duration, from: Side, packet: Vec<u8>) {
        self.world.advance_to(now);
        let dir = match from {
            Side::Client => UP,
            Side::Server => DOWN,
        };
        self.world.offer(0, dir, packet.len() as u32, None, packet);
    }

    fn next_delivery(&self) -> Option<Duration> {
        self.world.next_delivery()
    }

    fn deliver(&mut self, now: Duration, out: &mut Vec<(Side, Vec<u8>)>) {
        self.world.advance_to(now);
        self.world.deliver(&mut self.arrivals);
        for a in self.arrivals.drain(..) {
            let to = if a.dir == UP {
                Side::Server
            } else {
                Side::Client
            };
            out.push((to, a.payload));
        }
    }

    fn stats(&self) -> CarrierStats {
        CarrierStats {
            up: self.world.link_stats(0, UP),
            down: self.world.link_stats(0, DOWN),
        }
    }

    fn assigned_kbps(&self) -> AssignedRates {
        AssignedRates {
            up_kbps: self.world.link(0, UP).mean_assigned_kbps(),
            down_kbps: self.world.link(0, DOWN).mean_assigned_kbps(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_links::{DelaySpec, LinkSpec, LossSpec, RateSpec};

    fn link(kbps: f64, ms: f64, loss: Option<LossSpec>) -> Box<dyn Link> {
        LinkSpec {
            rate: Some(RateSpec::Constant { kbps }),
            buffer_bytes: None,
            loss,
            delay: Some(DelaySpec::Constant { ms }),
            qdisc: None,
        }
        .build(1, std::path::Path::new("."))
        .unwrap()
    }

    #[test]
    fn packets_cross_in_their_direction_with_the_models_timing() {
        // 8 Mbit/s: 1000 B take 1 ms, then 10 ms (up) or 30 ms (down) of delay.
        let mut c = DirectLink::new(link(8_000.0, 10.0, None), link(8_000.0, 30.0, None));
        c.send(Duration::ZERO, Side::Client, vec![1; 1000]);
        c.send(Duration::ZERO, Side::Server, vec![2; 1000]);
        assert_eq!(c.next_delivery(), Some(Duration::from_millis(11)));
        let mut out = Vec::new();
        c.deliver(Duration::from_millis(11), &mut out);
        assert_eq!(out, vec![(Side::Server, vec![1; 1000])]);
        assert_eq!(c.next_delivery(), Some(Duration::from_millis(31)));
        c.deliver(Duration::from_millis(31), &mut out);
        assert_eq!(out[1], (Side::Client, vec![2; 1000]));
        assert_eq!(c.stats().up.delivered, 1);
    }

    #[test]
    fn lost_packets_release_their_payloads() {
        let lossy = Some(LossSpec::Bernoulli { p: 1.0 });
        let mut c = DirectLink::new(link(8_000.0, 1.0, lossy), link(8_000.0, 1.0, None));
        for _ in 0..10 {
            c.send(Duration::ZERO, Side::Client, vec![0; 500]);
        }
        let mut out = Vec::new();
        c.deliver(Duration::from_secs(1), &mut out);
        assert!(out.is_empty());
        assert_eq!(c.world.in_flight(), 0);
        assert_eq!(c.stats().up.lost, 10);
    }
}
