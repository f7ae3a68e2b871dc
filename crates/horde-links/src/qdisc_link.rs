//! A link whose bottleneck queue is a [`horde_qdisc`] discipline other than FIFO.
//!
//! With FIFO a packet's departure is fixed when it arrives; with a discipline that picks
//! among flows it is not, since a later arrival may go first. So the server decides when
//! it becomes free: at that moment it dequeues the discipline's choice, serves it at the
//! link's current rate, charges its flow that transmission time (what CHAP debits
//! without an airtime model), and only then applies loss and delay to it.
//!
//! With an 802.11 airtime model ([`AirtimeServer`]) the service time of a packet is its
//! frame's airtime, retries and backoffs included; that is what its flow is charged, and
//! a frame that failed every attempt is lost (before the loss process is consulted).
//!
//! Packets the discipline drops after accepting them (CHAP's head drop, CoDel) are
//! counted in [`LinkStats::queue_drops`] and reported through
//! [`Link::deliver_and_report_losses`] with the loss process's victims.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use horde_qdisc::{
    Chap, ChapConfig, Fifo, FlowKey, FqCodel, FqCodelConfig, Limit, Packet, Qdisc, QdiscKind, Spq,
    SpqConfig, SpqRule, PROTO_UDP,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::bottleneck::Rate;
use crate::delay::DelayProcess;
use crate::error::LinkError;
use crate::loss::LossProcess;
use crate::wifi_rate::AirtimeServer;
use crate::{Delivery, Link, LinkStats, Verdict};

const LOSS_STREAM: u64 = 1;
const DELAY_STREAM: u64 = 2;

/// The flow of packets offered through [`Link::enqueue`], which names none.
const NO_FLOW: FlowKey = FlowKey {
    src: std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    dst: std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    src_port: 0,
    dst_port: 0,
    protocol: 0,
};

/// The discipline `kind` behind a buffer of `buffer_bytes` (`None`: unbounded;
/// fq_codel then keeps its own 32 MiB). Strict priority puts UDP in the first band and
/// everything else in the second; CHAP and fq_codel use their defaults.
pub(crate) fn build_qdisc(
    kind: QdiscKind,
    buffer_bytes: Option<u64>,
) -> Result<Box<dyn Qdisc<u64> + Send>, LinkError> {
    let limit = Limit::bytes(buffer_bytes.unwrap_or(u64::MAX));
    let built: Result<Box<dyn Qdisc<u64> + Send>, _> = match kind {
        QdiscKind::Fifo => Fifo::new(limit).map(|q| Box::new(q) as _),
        QdiscKind::Spq => Spq::new(SpqConfig {
            bands: 2,
            rules: vec![SpqRule {
                band: 0,
                protocol: Some(PROTO_UDP),
                ..SpqRule::default()
            }],
            default_band: 1,
            limit,
        })
        .map(|q| Box::new(q) as _),
        QdiscKind::Chap => Chap::new(ChapConfig {
            limit,
            ..ChapConfig::default()
        })
        .map(|q| Box::new(q) as _),
        QdiscKind::FqCodel => {
            let mut config = FqCodelConfig::default();
            if buffer_bytes.is_some() {
                config.limit.bytes = buffer_bytes;
            }
            FqCodel::new(config).map(|q| Box::new(q) as _)
        }
    };
    built.map_err(|e| LinkError::invalid("qdisc", "a valid configuration", e))
}

/// (delivery time, order of service, id, size).
type InFlight = (Duration, u64, u64, u32);

pub(crate) struct QdiscLink {
    qdisc: Box<dyn Qdisc<u64> + Send>,
    /// Constant, stepped or unlimited (traces are refused when the link is built).
    rate: Rate,
    /// Serves each packet as an 802.11 frame instead of at `rate`.
    airtime: Option<AirtimeServer>,
    /// When the packet being served finishes.
    busy_until: Duration,
    /// When the server next picks a packet; `None` while the queue is empty.
    next_pick: Option<Duration>,
    loss: LossProcess,
    delay: DelayProcess,
    loss_rng: ChaCha8Rng,
    delay_rng: ChaCha8Rng,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    /// Service end times and ids of packets the loss process took (times non-decreasing).
    lost: VecDeque<(Duration, u64)>,
    /// Ids of packets the discipline dropped after accepting them, not yet reported.
    dropped: Vec<u64>,
    drops: Vec<Packet<u64>>,
    next_seq: u64,
    stats: LinkStats,
}

impl QdiscLink {
    pub(crate) fn new(
        qdisc: Box<dyn Qdisc<u64> + Send>,
        rate: Rate,
        loss: LossProcess,
        delay: DelayProcess,
        seed: u64,
    ) -> QdiscLink {
        let stream = |n| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(n);
            rng
        };
        QdiscLink {
            qdisc,
            rate,
            airtime: None,
            busy_until: Duration::ZERO,
            next_pick: None,
            loss,
            delay,
            loss_rng: stream(LOSS_STREAM),
            delay_rng: stream(DELAY_STREAM),
            in_flight: BinaryHeap::new(),
            lost: VecDeque::new(),
            dropped: Vec::new(),
            drops: Vec::new(),
            next_seq: 0,
            stats: LinkStats::default(),
        }
    }

    /// Serves packets as 802.11 frames through `server` (the rate is then unused).
    pub(crate) fn with_airtime(mut self, server: AirtimeServer) -> QdiscLink {
        self.airtime = Some(server);
        self
    }

    fn finish(&self, start: Duration, size: u32) -> Duration {
        match &self.rate {
            Rate::Constant { ns_per_byte } => start.saturating_add(Duration::from_nanos(
                (f64::from(size) * ns_per_byte).round() as u64,
            )),
            Rate::Steps(steps) => steps.finish(start, size),
            Rate::Unlimited | Rate::Trace(_) => start,
        }
    }

    /// Records packets the discipline dropped after accepting them.
    fn take_drops(&mut self) {
        for d in self.drops.drain(..) {
            self.stats.queue_drops += 1;
            self.dropped.push(d.payload);
        }
    }

    /// Serves every pick due before `until` (or at it, if `inclusive`).
    fn serve(&mut self, until: Duration, inclusive: bool) {
        while let Some(pick) = self.next_pick {
            if pick > until || (pick == until && !inclusive) {
                break;
            }
            let packet = self.qdisc.dequeue(pick, &mut self.drops);
            self.take_drops();
            let Some(packet) = packet else {
                self.next_pick = None;
                break;
            };
            let (done, sent) = match &mut self.airtime {
                Some(air) => {
                    let frame = air.send(&packet.flow, packet.len);
                    (pick.saturating_add(frame.airtime), frame.delivered)
                }
                None => (self.finish(pick, packet.len), true),
            };
            self.qdisc.charge(&packet.flow, done - pick);
            self.busy_until = done;
            self.next_pick = (!self.qdisc.is_empty()).then_some(done);
            if !sent || self.loss.lose(&mut self.loss_rng) {
                self.lost.push_back((done, packet.payload));
            } else {
                let at = done.saturating_add(self.delay.sample(&mut self.delay_rng));
                self.in_flight
                    .push(Reverse((at, self.next_seq, packet.payload, packet.len)));
            }
            self.next_seq += 1;
        }
    }
}

impl Link for QdiscLink {
    fn enqueue(&mut self, now: Duration, id: u64, size: u32) -> Verdict {
        self.enqueue_flow(now, id, size, &NO_FLOW)
    }

    fn enqueue_flow(&mut self, now: Duration, id: u64, size: u32, flow: &FlowKey) -> Verdict {
        self.stats.offered += 1;
        // Picks made before this arrival cannot see it.
        self.serve(now, false);
        self.qdisc
            .enqueue(Packet::new(*flow, size, now, id), &mut self.drops);
        let refused = self.drops.iter().position(|d| d.payload == id);
        if let Some(i) = refused {
            self.drops.swap_remove(i);
            self.stats.queue_drops += 1;
        }
        self.take_drops();
        if self.next_pick.is_none() && !self.qdisc.is_empty() {
            self.next_pick = Some(now.max(self.busy_until));
        }
        if refused.is_some() {
            Verdict::QueueFull
        } else {
            Verdict::Queued
        }
    }

    fn next_delivery(&self) -> Option<Duration> {
        // The next pick is when something may next change; a caller polling then makes
        // the pick, after which this is the packet's delivery time.
        let flying = self.in_flight.peek().map(|Reverse(p)| p.0);
        [flying, self.next_pick].into_iter().flatten().min()
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
        self.serve(now, true);
        lost.append(&mut self.dropped);
        while let Some(&(t, id)) = self.lost.front() {
            if t > now {
                break;
            }
            self.lost.pop_front();
            self.stats.lost += 1;
            lost.push(id);
        }
        while let Some(Reverse((at, _, id, size))) = self.in_flight.peek().copied() {
            if at > now {
                break;
            }
            self.in_flight.pop();
            self.stats.delivered += 1;
            self.stats.bytes_delivered += u64::from(size);
            out.push(Delivery { id, at });
        }
    }

    fn stats(&self) -> LinkStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::wifi_rate::{WifiPhy, WifiRate, WifiStation};

    type Charges = Arc<Mutex<HashMap<FlowKey, Duration>>>;

    /// A discipline that adds up what each flow is charged, then passes everything on.
    struct Recording {
        inner: Box<dyn Qdisc<u64> + Send>,
        charges: Charges,
    }

    impl Qdisc<u64> for Recording {
        fn enqueue(&mut self, packet: Packet<u64>, drops: &mut Vec<Packet<u64>>) {
            self.inner.enqueue(packet, drops)
        }
        fn dequeue(&mut self, now: Duration, drops: &mut Vec<Packet<u64>>) -> Option<Packet<u64>> {
            self.inner.dequeue(now, drops)
        }
        fn charge(&mut self, flow: &FlowKey, airtime: Duration) {
            *self.charges.lock().unwrap().entry(*flow).or_default() += airtime;
            self.inner.charge(flow, airtime)
        }
        fn len(&self) -> usize {
            self.inner.len()
        }
        fn bytes(&self) -> u64 {
            self.inner.bytes()
        }
    }

    #[test]
    fn chap_with_airtime_charges_a_far_flow_more_per_byte_than_a_near_one() {
        let near = FlowKey::udp([10, 0, 0, 1], 4000, [10, 0, 0, 2], 5000);
        let far = FlowKey::udp([10, 0, 0, 1], 4001, [10, 0, 0, 3], 5001);
        let wifi = WifiRate {
            phy: WifiPhy::Dot11g,
            mbps: None,
            distance_m: Some(1.0),
            fer: None,
            stations: vec![WifiStation {
                addr: Some(far.dst),
                port: None,
                distance_m: Some(15.0),
                fer: None,
            }],
        };
        let charges = Charges::default();
        let chap = build_qdisc(QdiscKind::Chap, None).unwrap();
        let mut link = QdiscLink::new(
            Box::new(Recording {
                inner: chap,
                charges: charges.clone(),
            }),
            Rate::Unlimited,
            LossProcess::None,
            DelayProcess::Constant(Duration::ZERO),
            7,
        )
        .with_airtime(wifi.server(7).unwrap());
        // 1000 packets of 1200 B per flow, a few at a time, so the link stays busy.
        let mut out = Vec::new();
        let mut lost = Vec::new();
        for i in 0..1000u64 {
            let now = Duration::from_millis(i * 5);
            link.enqueue_flow(now, 2 * i, 1200, &near);
            link.enqueue_flow(now, 2 * i + 1, 1200, &far);
            link.deliver_and_report_losses(now, &mut out, &mut lost);
        }
        link.deliver_and_report_losses(Duration::from_secs(3600), &mut out, &mut lost);
        let stats = link.stats();
        assert_eq!(stats.queue_drops, 0, "{stats:?}");
        assert_eq!(stats.delivered + stats.lost, 2000, "{stats:?}");
        let charges = charges.lock().unwrap();
        let per_byte = |f: &FlowKey| charges[f].as_secs_f64() / (1000.0 * 1200.0);
        let phy = crate::wifi::Phy::dot11g(54.0);
        // The near flow's frames go through at once: one attempt each.
        let one_attempt = phy.attempt_time(1200).as_secs_f64() / 1200.0;
        assert!(
            (per_byte(&near) - one_attempt).abs() < 0.05 * one_attempt,
            "near: {} s/B against one attempt {one_attempt}",
            per_byte(&near)
        );
        // At 15 m most attempts fail (FER 0.57): retries and backoffs cost several times
        // as much, and some frames fail every attempt and are lost.
        assert!(
            per_byte(&far) > 3.0 * per_byte(&near),
            "far {} s/B against near {}",
            per_byte(&far),
            per_byte(&near)
        );
        assert!(stats.lost > 0, "frames failing all attempts are lost");
        assert!(
            lost.iter().all(|id| id % 2 == 1),
            "only the far flow loses frames"
        );
    }
}
