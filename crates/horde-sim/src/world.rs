//! The virtual-time world every simulator drives: a nanosecond clock, the links (one
//! `horde-links` model per link and direction, queue disciplines included), the datagrams
//! inside them, and the step that moves the clock to the next event and hands out what
//! has arrived.
//!
//! The world knows nothing of what it carries: each datagram's payload `P` is whatever
//! its driver needs to hand it over on arrival (the receiving host and interface, the
//! bytes, a fault's extra delay). The simulator engine, the tunnel carrier and the fault
//! simulator each put their own payload in it and keep only what is theirs: sessions or
//! hosts, workloads, faults, metrics.
//!
//! Order is part of the contract, so that a run is the same bit for bit: a datagram is
//! numbered when it is offered (refused ones use up their number too), and datagrams due
//! at one instant are handed out link by link in link order, `up` before `down` within a
//! link, and in the link model's own delivery order within one direction.

use std::collections::BTreeMap;
use std::time::Duration;

use horde_links::{Delivery, FlowKey, Link, LinkStats, Verdict};

/// Index of a link's direction from its first end to its second.
pub const UP: usize = 0;
/// Index of a link's direction from its second end to its first.
pub const DOWN: usize = 1;

/// A datagram that came out of its link.
#[derive(Debug)]
pub struct Arrival<P> {
    /// The link it crossed, and in which direction ([`UP`] or [`DOWN`]).
    pub link: usize,
    pub dir: usize,
    /// The number it was offered under: offers are numbered from 0 in order.
    pub id: u64,
    pub payload: P,
}

/// The clock, the links and what is inside them.
pub struct World<P> {
    now: Duration,
    /// Per link: `[up, down]`.
    links: Vec<[Box<dyn Link>; 2]>,
    /// Payloads of the datagrams inside the links, by the number each was offered under.
    in_flight: BTreeMap<u64, P>,
    next_id: u64,
    /// Scratch for one link's deliveries and losses.
    deliveries: Vec<Delivery>,
    lost: Vec<u64>,
}

impl<P> World<P> {
    /// A world at time zero over `links` (`[up, down]` each).
    pub fn new(links: Vec<[Box<dyn Link>; 2]>) -> Self {
        Self {
            now: Duration::ZERO,
            links,
            in_flight: BTreeMap::new(),
            next_id: 0,
            deliveries: Vec::new(),
            lost: Vec::new(),
        }
    }

    /// The virtual time.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Move the clock to `t`; it never goes back.
    pub fn advance_to(&mut self, t: Duration) {
        self.now = self.now.max(t);
    }

    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    /// The model of link `link` in direction `dir`.
    pub fn link(&self, link: usize, dir: usize) -> &dyn Link {
        self.links[link][dir].as_ref()
    }

    /// The counters of link `link` in direction `dir`.
    pub fn link_stats(&self, link: usize, dir: usize) -> LinkStats {
        self.links[link][dir].stats()
    }

    /// Datagrams inside the links now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Offer a datagram of `size` bytes to link `link` in direction `dir` now. `flow`
    /// names its flow for a link whose queue tells flows apart; without one the link
    /// queues it as it queues every datagram. A refused datagram's payload is dropped.
    pub fn offer(
        &mut self,
        link: usize,
        dir: usize,
        size: u32,
        flow: Option<&FlowKey>,
        payload: P,
    ) -> Verdict {
        let id = self.next_id;
        self.next_id += 1;
        let model = &mut self.links[link][dir];
        let verdict = match flow {
            Some(flow) => model.enqueue_flow(self.now, id, size, flow),
            None => model.enqueue(self.now, id, size),
        };
        if verdict == Verdict::Queued {
            self.in_flight.insert(id, payload);
        }
        verdict
    }

    /// When the next datagram comes out of a link, if any is inside one. It may be
    /// before [`World::now`] when a link is late.
    pub fn next_delivery(&self) -> Option<Duration> {
        let mut t = None;
        for l in &self.links {
            t = earliest(t, l[UP].next_delivery());
            t = earliest(t, l[DOWN].next_delivery());
        }
        t
    }

    /// The next event: the earliest of the links' next delivery and `driver` (the
    /// driver's own next event: a timer, a workload, a fault), never before now.
    pub fn next_event(&self, driver: Option<Duration>) -> Option<Duration> {
        earliest(self.next_delivery(), driver).map(|t| t.max(self.now))
    }

    /// Advance the clock to the next event (see [`World::next_event`]) unless it is
    /// after `end`, and hand out what the links deliver by then into `out`. Returns the
    /// new time, or `None` (and leaves the clock alone) when nothing happens by `end`.
    pub fn step(
        &mut self,
        driver: Option<Duration>,
        end: Duration,
        out: &mut Vec<Arrival<P>>,
    ) -> Option<Duration> {
        let t = self.next_event(driver).filter(|&t| t <= end)?;
        self.now = t;
        self.deliver(out);
        Some(t)
    }

    /// Hand out into `out` every datagram the links deliver by now, in the world's order
    /// (see the module doc). The payloads of datagrams a link lost are let go.
    pub fn deliver(&mut self, out: &mut Vec<Arrival<P>>) {
        for link in 0..self.links.len() {
            for dir in [UP, DOWN] {
                self.deliveries.clear();
                self.lost.clear();
                self.links[link][dir].deliver_and_report_losses(
                    self.now,
                    &mut self.deliveries,
                    &mut self.lost,
                );
                // A lost packet's payload would otherwise be held until the end.
                for id in &self.lost {
                    self.in_flight.remove(id);
                }
                for d in &self.deliveries {
                    if let Some(payload) = self.in_flight.remove(&d.id) {
                        out.push(Arrival {
                            link,
                            dir,
                            id: d.id,
                            payload,
                        });
                    }
                }
            }
        }
    }
}

/// The earlier of two times, either of which may be absent.
pub fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_links::{DelaySpec, LinkSpec, RateSpec};

    fn link(kbps: f64, ms: f64, buffer_bytes: u64) -> Box<dyn Link> {
        LinkSpec {
            rate: Some(RateSpec::Constant { kbps }),
            buffer_bytes: Some(buffer_bytes),
            loss: None,
            delay: Some(DelaySpec::Constant { ms }),
            qdisc: None,
        }
        .build(1, std::path::Path::new("."))
        .unwrap()
    }

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    #[test]
    fn the_step_moves_to_the_next_delivery_and_hands_out_in_link_order() {
        // 8 kbit/s: a 100-byte datagram takes 100 ms to serialize, then 10 ms of delay.
        let mut w: World<&str> = World::new(vec![
            [link(8.0, 10.0, 10_000), link(8.0, 10.0, 10_000)],
            [link(8.0, 10.0, 10_000), link(8.0, 10.0, 10_000)],
        ]);
        assert_eq!(w.offer(1, UP, 100, None, "1up"), Verdict::Queued);
        assert_eq!(w.offer(0, DOWN, 100, None, "0down"), Verdict::Queued);
        assert_eq!(w.offer(0, UP, 100, None, "0up"), Verdict::Queued);
        assert_eq!(w.in_flight(), 3);
        let mut out = Vec::new();
        // A driver event comes first.
        assert_eq!(w.step(Some(ms(50)), ms(1000), &mut out), Some(ms(50)));
        assert!(out.is_empty());
        assert_eq!(w.step(None, ms(1000), &mut out), Some(ms(110)));
        let got: Vec<_> = out
            .iter()
            .map(|a| (a.link, a.dir, a.id, a.payload))
            .collect();
        assert_eq!(
            got,
            vec![(0, UP, 2, "0up"), (0, DOWN, 1, "0down"), (1, UP, 0, "1up")]
        );
        assert_eq!(w.now(), ms(110));
        assert_eq!(w.in_flight(), 0);
        assert_eq!(w.link_stats(0, UP).delivered, 1);
    }

    #[test]
    fn nothing_happens_past_the_end_and_a_refused_datagram_uses_up_its_number() {
        let mut w: World<u64> = World::new(vec![[link(8.0, 10.0, 150), link(8.0, 10.0, 150)]]);
        // Fill the link until it refuses one.
        let mut queued = 0;
        while w.offer(0, UP, 100, None, queued) == Verdict::Queued {
            queued += 1;
            assert!(
                queued < 10,
                "a 150-byte queue holds fewer than ten datagrams"
            );
        }
        assert_eq!(w.in_flight(), queued as usize);
        let mut out = Vec::new();
        // The first datagram arrives at 110 ms.
        assert_eq!(w.step(None, ms(100), &mut out), None);
        assert_eq!(w.now(), Duration::ZERO);
        assert_eq!(w.step(Some(ms(500)), ms(1000), &mut out), Some(ms(110)));
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].id, out[0].payload), (0, 0));
        // The clock never goes back, and a late event runs now.
        w.advance_to(ms(50));
        assert_eq!(w.now(), ms(110));
        assert_eq!(w.next_event(Some(ms(20))), Some(ms(110)));
        while w.step(None, ms(10_000), &mut out).is_some() {}
        let ids: Vec<u64> = out.iter().map(|a| a.id).collect();
        assert_eq!(ids, (0..queued).collect::<Vec<_>>());
        // The refused datagram used up number `queued`.
        out.clear();
        assert_eq!(w.offer(0, UP, 100, None, 99), Verdict::Queued);
        w.step(None, ms(20_000), &mut out);
        assert_eq!((out[0].id, out[0].payload), (queued + 1, 99));
    }
}
