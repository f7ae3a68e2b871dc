//! The composed link: bottleneck (rate + drop-tail buffer) -> loss -> delay.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::bottleneck::Bottleneck;
use crate::delay::DelayProcess;
use crate::loss::LossProcess;
use crate::{Delivery, Link, LinkStats, Verdict};

/// RNG stream numbers, so that the loss and delay draws are independent of each other:
/// changing the loss model of a link leaves its delays unchanged, and vice versa.
const LOSS_STREAM: u64 = 1;
const DELAY_STREAM: u64 = 2;

/// A packet on its way out: ordered by delivery time, then by arrival order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: Duration,
    seq: u64,
    id: u64,
    size: u32,
}

/// A [`Link`] made of a bottleneck, a loss process and a delay process.
///
/// Loss and delay are decided when a packet is accepted: the FIFO bottleneck fixes its
/// departure time then, and packets reach the loss process in arrival order, so this is
/// the same as deciding at departure. Lost packets are counted in [`LinkStats::lost`] once
/// the link is polled at or after their departure from the bottleneck.
#[derive(Debug)]
pub(crate) struct ModelLink {
    bottleneck: Bottleneck,
    loss: LossProcess,
    delay: DelayProcess,
    loss_rng: ChaCha8Rng,
    delay_rng: ChaCha8Rng,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    /// Bottleneck departure times and ids of lost packets (times non-decreasing: FIFO).
    lost: VecDeque<(Duration, u64)>,
    next_seq: u64,
    stats: LinkStats,
}

impl ModelLink {
    pub(crate) fn new(
        bottleneck: Bottleneck,
        loss: LossProcess,
        delay: DelayProcess,
        seed: u64,
    ) -> ModelLink {
        let stream = |n| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(n);
            rng
        };
        ModelLink {
            bottleneck,
            loss,
            delay,
            loss_rng: stream(LOSS_STREAM),
            delay_rng: stream(DELAY_STREAM),
            in_flight: BinaryHeap::new(),
            lost: VecDeque::new(),
            next_seq: 0,
            stats: LinkStats::default(),
        }
    }
}

impl Link for ModelLink {
    fn enqueue(&mut self, now: Duration, id: u64, size: u32) -> Verdict {
        self.stats.offered += 1;
        let Some(departure) = self.bottleneck.offer(now, size) else {
            self.stats.queue_drops += 1;
            return Verdict::QueueFull;
        };
        if self.loss.lose(&mut self.loss_rng) {
            self.lost.push_back((departure, id));
        } else {
            let at = departure.saturating_add(self.delay.sample(&mut self.delay_rng));
            self.in_flight.push(Reverse(InFlight {
                at,
                seq: self.next_seq,
                id,
                size,
            }));
        }
        self.next_seq += 1;
        Verdict::Queued
    }

    fn next_delivery(&self) -> Option<Duration> {
        self.in_flight.peek().map(|Reverse(p)| p.at)
    }

    fn deliver(&mut self, now: Duration, out: &mut Vec<Delivery>) {
        self.deliver_and_report_losses(now, out, &mut Vec::new());
    }

    fn deliver_and_report_losses(
        &mut self,
        now: Duration,
        out: &mut Vec<Delivery>,
        lost: &mut Vec<u64>,
    ) {
        while let Some(&(t, id)) = self.lost.front() {
            if t > now {
                break;
            }
            self.lost.pop_front();
            self.stats.lost += 1;
            lost.push(id);
        }
        while let Some(Reverse(p)) = self.in_flight.peek() {
            if p.at > now {
                break;
            }
            let p = *p;
            self.in_flight.pop();
            self.stats.delivered += 1;
            self.stats.bytes_delivered += u64::from(p.size);
            out.push(Delivery { id: p.id, at: p.at });
        }
    }

    fn stats(&self) -> LinkStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bottleneck::Rate;
    use crate::loss::{BurstMarkov, GilbertElliott};
    use crate::trace::Trace;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn link(
        rate: Rate,
        buffer: Option<u64>,
        loss: LossProcess,
        delay: DelayProcess,
        seed: u64,
    ) -> ModelLink {
        ModelLink::new(Bottleneck::new(rate, buffer), loss, delay, seed)
    }

    /// Offer `n` packets of `size` bytes every `gap`, then drain everything.
    fn drive(link: &mut dyn Link, n: u64, gap: Duration, size: u32) -> Vec<Delivery> {
        let mut out = Vec::new();
        for i in 0..n {
            let now = gap * i as u32;
            link.deliver(now, &mut out);
            link.enqueue(now, i, size);
        }
        link.deliver(Duration::MAX, &mut out);
        out
    }

    #[test]
    fn deliveries_come_in_time_order_ties_by_arrival() {
        // Large jitter relative to the spacing forces heavy reordering.
        let mut l = link(
            Rate::Unlimited,
            None,
            LossProcess::None,
            DelayProcess::gaussian_ms(50.0, 30.0),
            9,
        );
        let out = drive(&mut l, 5_000, ms(1), 100);
        assert_eq!(out.len(), 5_000);
        assert!(out.windows(2).all(|w| w[0].at <= w[1].at));
        let reordered = out.windows(2).filter(|w| w[0].id > w[1].id).count();
        assert!(reordered > 1_000, "{reordered}");
        // Ties (constant delay, same arrival time) keep arrival order.
        let mut l = link(
            Rate::Unlimited,
            None,
            LossProcess::None,
            DelayProcess::constant_ms(5.0),
            1,
        );
        for id in [7, 3, 9] {
            l.enqueue(ms(0), id, 10);
        }
        let mut out = Vec::new();
        assert_eq!(l.next_delivery(), Some(ms(5)));
        l.deliver(ms(4), &mut out);
        assert!(out.is_empty());
        l.deliver(ms(5), &mut out);
        assert_eq!(out.iter().map(|d| d.id).collect::<Vec<_>>(), [7, 3, 9]);
        assert!(out.iter().all(|d| d.at == ms(5)));
        assert_eq!(l.next_delivery(), None);
    }

    #[test]
    fn delay_is_added_after_the_bottleneck() {
        // 80 kbit/s: 1000 B take 100 ms; then 20 ms of propagation.
        let mut l = link(
            Rate::constant_kbps(80.0),
            None,
            LossProcess::None,
            DelayProcess::constant_ms(20.0),
            1,
        );
        let out = drive(&mut l, 3, Duration::ZERO, 1000);
        let at: Vec<_> = out.iter().map(|d| d.at).collect();
        assert_eq!(at, [ms(120), ms(220), ms(320)]);
    }

    #[test]
    fn lost_packets_still_use_capacity() {
        // 80 kbit/s, 1000 B packets back to back: the k-th leaves at 100 k ms whether or
        // not the ones before it were lost.
        let mut l = link(
            Rate::constant_kbps(80.0),
            None,
            LossProcess::Bernoulli(0.5),
            DelayProcess::constant_ms(0.0),
            3,
        );
        let out = drive(&mut l, 1_000, Duration::ZERO, 1000);
        assert!(out.len() > 400 && out.len() < 600, "{}", out.len());
        for d in &out {
            assert_eq!(d.at, ms(100 * (d.id + 1)));
        }
        let s = l.stats();
        assert_eq!(s.lost + s.delivered, 1_000);
    }

    #[test]
    fn stats_account_for_every_packet() {
        let mut l = link(
            Rate::Trace(Trace::parse("t", "2\n4\n").unwrap()),
            Some(6_000),
            LossProcess::Bernoulli(0.1),
            DelayProcess::gaussian_ms(20.0, 5.0),
            4,
        );
        let mut out = Vec::new();
        let mut sizes = std::collections::HashMap::new();
        for i in 0..10_000u64 {
            let now = Duration::from_micros(i * 700);
            l.deliver(now, &mut out);
            let size = 200 + (i % 13) as u32 * 100;
            sizes.insert(i, size);
            l.enqueue(now, i, size);
            let s = l.stats();
            let pending = l.in_flight.len() + l.lost.len();
            assert_eq!(
                s.offered,
                s.queue_drops + s.lost + s.delivered + pending as u64
            );
        }
        l.deliver(Duration::MAX, &mut out);
        let s = l.stats();
        assert_eq!(s.offered, 10_000);
        assert!(s.queue_drops > 0 && s.lost > 0);
        assert_eq!(s.offered, s.queue_drops + s.lost + s.delivered);
        assert_eq!(s.delivered, out.len() as u64);
        assert_eq!(
            s.bytes_delivered,
            out.iter().map(|d| u64::from(sizes[&d.id])).sum::<u64>()
        );
        // Loss applies to what left the queue.
        let loss = s.lost as f64 / (s.lost + s.delivered) as f64;
        assert!((loss - 0.1).abs() < 0.015, "{loss}");
    }

    #[test]
    fn lost_counted_when_the_packet_leaves_the_bottleneck() {
        let mut l = link(
            Rate::constant_kbps(80.0),
            None,
            LossProcess::Bernoulli(1.0),
            DelayProcess::constant_ms(0.0),
            1,
        );
        l.enqueue(ms(0), 1, 1000);
        assert_eq!(l.next_delivery(), None);
        let mut out = Vec::new();
        l.deliver(ms(99), &mut out);
        assert_eq!(l.stats().lost, 0);
        l.deliver(ms(100), &mut out);
        assert_eq!(l.stats().lost, 1);
        assert!(out.is_empty());
        // The id of a lost packet is reported once, when it is counted.
        l.enqueue(ms(100), 2, 1000);
        let mut lost = Vec::new();
        l.deliver_and_report_losses(ms(199), &mut out, &mut lost);
        assert!(lost.is_empty());
        l.deliver_and_report_losses(ms(300), &mut out, &mut lost);
        assert_eq!((lost, l.stats().lost), (vec![2], 2));
        assert!(out.is_empty());
    }

    fn varied(seed: u64) -> ModelLink {
        link(
            Rate::constant_kbps(500.0),
            Some(20_000),
            LossProcess::GilbertElliott(GilbertElliott {
                p_good_to_bad: 0.05,
                p_bad_to_good: 0.3,
                loss_in_good: 0.01,
                loss_in_bad: 0.5,
                bad: false,
            }),
            DelayProcess::gaussian_ms(40.0, 10.0),
            seed,
        )
    }

    #[test]
    fn same_seed_same_deliveries() {
        let a = drive(&mut varied(42), 3_000, ms(10), 900);
        let b = drive(&mut varied(42), 3_000, ms(10), 900);
        assert_eq!(a, b);
        let c = drive(&mut varied(43), 3_000, ms(10), 900);
        assert_ne!(a, c);
    }

    #[test]
    fn polling_pattern_does_not_change_the_outcome() {
        let mut a = varied(5);
        let dense = drive(&mut a, 2_000, ms(10), 900);
        // Same offers, but only poll once at the end.
        let mut b = varied(5);
        for i in 0..2_000u64 {
            b.enqueue(ms(10) * i as u32, i, 900);
        }
        let mut sparse = Vec::new();
        b.deliver(Duration::MAX, &mut sparse);
        assert_eq!(dense, sparse);
        assert_eq!(a.stats(), b.stats());
    }

    #[test]
    fn loss_model_does_not_perturb_delays() {
        let delays = |loss| {
            let mut l = link(
                Rate::Unlimited,
                None,
                loss,
                DelayProcess::gaussian_ms(100.0, 20.0),
                8,
            );
            drive(&mut l, 200, ms(1), 100)
        };
        let clean = delays(LossProcess::None);
        let lossy = delays(LossProcess::BurstMarkov(BurstMarkov::new(0.2, 4)));
        assert!(lossy.len() < clean.len());
        // Surviving packets keep the delay sequence: the i-th survivor gets the i-th draw.
        let mut clean_by_arrival = clean.clone();
        clean_by_arrival.sort_by_key(|d| d.id);
        let mut lossy_by_arrival = lossy.clone();
        lossy_by_arrival.sort_by_key(|d| d.id);
        for (k, d) in lossy_by_arrival.iter().enumerate() {
            let c = &clean_by_arrival[k];
            assert_eq!(d.at - ms(d.id), c.at - ms(c.id));
        }
    }
}
