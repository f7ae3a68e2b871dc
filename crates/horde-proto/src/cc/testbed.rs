//! A simulated bottleneck for controller tests: one sender, a FIFO queue served at a
//! (possibly time-varying) rate with a drop-tail buffer, a fixed propagation delay each
//! way, and an ack per delivered packet carrying the delivery-rate sample the channel
//! would compute (same algorithm as `channel::sent`). Losses are declared when a later
//! packet is acked, or after two round trips if none is; overflow drops are reported as
//! [`LossKind::Congestion`], random radio drops as [`LossKind::Link`]. Deterministic: the
//! only randomness is a seeded xorshift.

use std::collections::VecDeque;
use std::time::Duration;

use super::{AckSample, CongestionControl, LossKind, LossSample, RateSample};

/// Bytes on the wire per packet: a 1200-byte slot plus the Horde header.
pub const MSS: u32 = 1235;

pub fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

pub fn mbps(x: f64) -> f64 {
    x * 1e6 / 8.0
}

/// The path: bottleneck rate over time, propagation delay and buffer.
#[derive(Debug, Clone)]
pub struct Link {
    /// (from, bytes/s) steps, sorted by time; the first starts at zero.
    pub rates: Vec<(Duration, f64)>,
    /// Propagation delay of each direction.
    pub one_way: Duration,
    /// Drop-tail buffer in bytes.
    pub buffer: u64,
    /// Probability that a packet that left the queue is lost on the radio.
    pub link_loss: f64,
}

impl Link {
    pub fn constant(rate: f64, rtt: Duration, buffer: u64) -> Self {
        Self {
            rates: vec![(Duration::ZERO, rate)],
            one_way: rtt / 2,
            buffer,
            link_loss: 0.0,
        }
    }

    /// A cellular-like uplink over a deep buffer: every 100 ms the rate moves by a
    /// random factor of 0.75 to 1.33 within 1 to 20 Mbit/s, and one step in fifty is a
    /// fade to a quarter of it.
    pub fn cellular(one_way: Duration, seed: u64) -> Self {
        Self::variable(one_way, seed, 0.02, 4.0)
    }

    /// As [`Link::cellular`], with a fade one step in twenty, to a tenth of the rate: a
    /// harsh radio.
    pub fn fading(one_way: Duration, seed: u64) -> Self {
        Self::variable(one_way, seed, 0.05, 10.0)
    }

    fn variable(one_way: Duration, seed: u64, fades: f64, depth: f64) -> Self {
        let mut rng = Rng(seed | 1);
        let mut rate: f64 = 8.0;
        let rates = (0..600)
            .map(|i| {
                rate = (rate * (0.75 + 0.58 * rng.next_f64())).clamp(1.0, 20.0);
                let now = if rng.next_f64() < fades {
                    rate / depth
                } else {
                    rate
                };
                (ms(i * 100), mbps(now))
            })
            .collect();
        Self {
            rates,
            one_way,
            buffer: 2_000_000,
            link_loss: 0.0,
        }
    }

    pub fn rate_at(&self, t: Duration) -> f64 {
        let i = self.rates.partition_point(|&(from, _)| from <= t);
        self.rates[i.saturating_sub(1)].1
    }

    /// Mean rate over `[from, to)` in bytes/s.
    pub fn mean_rate(&self, from: Duration, to: Duration) -> f64 {
        let step = Duration::from_millis(1);
        let (mut t, mut sum, mut n) = (from, 0.0, 0.0);
        while t < to {
            sum += self.rate_at(t);
            n += 1.0;
            t += step;
        }
        sum / n
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Record {
    pub sent_at: Duration,
    pub size: u32,
    /// Time spent waiting in the bottleneck queue before service, if it got in.
    pub queue_delay: Option<Duration>,
    /// When it reached the receiver, if it did.
    pub arrival: Option<Duration>,
}

/// Everything that happened in a run.
#[derive(Debug, Default)]
pub struct Trace {
    pub packets: Vec<Record>,
    pub congestion_losses: u64,
    pub link_losses: u64,
}

impl Trace {
    /// Bytes/s that reached the receiver in `[from, to)`.
    pub fn goodput(&self, from: Duration, to: Duration) -> f64 {
        let bytes: u64 = self
            .packets
            .iter()
            .filter(|p| p.arrival.is_some_and(|a| a >= from && a < to))
            .map(|p| u64::from(p.size))
            .sum();
        bytes as f64 / (to - from).as_secs_f64()
    }

    fn sent_in(&self, from: Duration, to: Duration) -> impl Iterator<Item = &Record> {
        self.packets
            .iter()
            .filter(move |p| p.sent_at >= from && p.sent_at < to)
    }

    /// Mean bottleneck queueing delay of the packets sent in `[from, to)`.
    pub fn mean_queue_delay(&self, from: Duration, to: Duration) -> Duration {
        let d: Vec<Duration> = self
            .sent_in(from, to)
            .filter_map(|p| p.queue_delay)
            .collect();
        d.iter().sum::<Duration>() / d.len().max(1) as u32
    }

    /// The `q` quantile of one-way delay of the delivered packets sent in `[from, to)`.
    pub fn owd_quantile(&self, from: Duration, to: Duration, q: f64) -> Duration {
        let mut d: Vec<Duration> = self
            .sent_in(from, to)
            .filter_map(|p| p.arrival.map(|a| a - p.sent_at))
            .collect();
        d.sort();
        d.get(((d.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or_default()
    }
}

struct InFlight {
    sent_at: Duration,
    size: u32,
    /// When its ack reaches the sender; `None` if it was dropped.
    ack_at: Option<Duration>,
    loss: LossKind,
    delivered: u64,
    delivered_time: Duration,
    first_sent_time: Duration,
}

/// Run `cc` as a greedy sender over `link` for `duration`; `observe` sees the controller
/// after every ack.
pub fn run<C: CongestionControl>(
    cc: &mut C,
    link: &Link,
    duration: Duration,
    mut observe: impl FnMut(&C, &AckSample),
) -> Trace {
    let mut trace = Trace::default();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut flight: VecDeque<InFlight> = VecDeque::new();
    let mut in_flight = 0u64;
    // The bottleneck queue: departure times and sizes of what is in it.
    let mut queue: VecDeque<(Duration, u32)> = VecDeque::new();
    let mut link_free = Duration::ZERO;
    let (mut srtt, mut min_rtt): (Option<Duration>, Option<Duration>) = (None, None);
    let (mut delivered, mut delivered_time, mut first_sent_time) =
        (0u64, Duration::ZERO, Duration::ZERO);
    let mut now = Duration::ZERO;

    while now < duration {
        // Acks (and the losses they reveal) due by now, oldest first.
        while let Some(i) = flight.iter().position(|p| p.ack_at.is_some()) {
            let ack_at = flight[i].ack_at.unwrap();
            if ack_at > now {
                break;
            }
            let lost: Vec<InFlight> = flight.drain(..i).collect();
            let p = flight.pop_front().unwrap();
            let prior_in_flight = in_flight;
            in_flight -= u64::from(p.size);
            let rtt = ack_at - p.sent_at;
            let rate = rate_sample(&p, ack_at, min_rtt, &mut delivered, &mut delivered_time);
            first_sent_time = p.sent_at;
            min_rtt = Some(min_rtt.map_or(rtt, |m| m.min(rtt)));
            srtt = Some(srtt.map_or(rtt, |s| (s * 7 + rtt) / 8));
            let ack = AckSample {
                now: ack_at,
                acked_bytes: u64::from(p.size),
                rtt,
                min_rtt: min_rtt.unwrap(),
                srtt: srtt.unwrap(),
                prior_in_flight,
                in_flight,
                rate,
            };
            cc.on_ack(&ack);
            observe(cc, &ack);
            for l in lost {
                in_flight -= u64::from(l.size);
                declare(cc, &mut trace, &l, ack_at, in_flight);
            }
        }
        // A tail of drops that no later ack will reveal.
        let timeout = srtt.unwrap_or(ms(100)) * 2;
        while flight
            .front()
            .is_some_and(|p| p.ack_at.is_none() && p.sent_at + timeout <= now)
            && flight.iter().all(|p| p.ack_at.is_none())
        {
            let l = flight.pop_front().unwrap();
            in_flight -= u64::from(l.size);
            declare(cc, &mut trace, &l, now, in_flight);
        }

        // Send what the controller allows.
        while cc.allowance(now, in_flight) >= u64::from(MSS) {
            if in_flight == 0 {
                first_sent_time = now;
                delivered_time = now;
            }
            while queue.front().is_some_and(|&(d, _)| d <= now) {
                queue.pop_front();
            }
            let backlog: u64 = queue.iter().map(|&(_, s)| u64::from(s)).sum();
            let mut record = Record {
                sent_at: now,
                size: MSS,
                queue_delay: None,
                arrival: None,
            };
            let (ack_at, loss) = if backlog + u64::from(MSS) > link.buffer {
                (None, LossKind::Congestion)
            } else {
                let start = now.max(link_free);
                let departure =
                    start + Duration::from_secs_f64(f64::from(MSS) / link.rate_at(start));
                link_free = departure;
                queue.push_back((departure, MSS));
                record.queue_delay = Some(start - now);
                if rng.next_f64() < link.link_loss {
                    (None, LossKind::Link)
                } else {
                    let arrival = departure + link.one_way;
                    record.arrival = Some(arrival);
                    (Some(arrival + link.one_way), LossKind::Link)
                }
            };
            trace.packets.push(record);
            in_flight += u64::from(MSS);
            flight.push_back(InFlight {
                sent_at: now,
                size: MSS,
                ack_at,
                loss,
                delivered,
                delivered_time,
                first_sent_time,
            });
            cc.on_sent(now, MSS, in_flight);
        }

        // The next thing to happen: an ack, a loss timeout, or pacing credit.
        let mut next = flight.iter().find_map(|p| p.ack_at);
        if let Some(p) = flight.front() {
            if flight.iter().all(|p| p.ack_at.is_none()) {
                next = Some(p.sent_at + timeout);
            }
        }
        if let Some(t) = cc.next_allowance_at(now).filter(|&t| t > now) {
            next = Some(next.map_or(t, |n| n.min(t)));
        }
        now = next.expect("the controller neither sends nor waits for anything");
    }
    trace
}

/// The delivery-rate sample `channel::sent` takes for an ack of `p` at `now`.
fn rate_sample(
    p: &InFlight,
    now: Duration,
    min_rtt: Option<Duration>,
    delivered: &mut u64,
    delivered_time: &mut Duration,
) -> Option<RateSample> {
    *delivered += u64::from(p.size);
    *delivered_time = now;
    let interval = p
        .sent_at
        .saturating_sub(p.first_sent_time)
        .max(now.saturating_sub(p.delivered_time));
    if interval.is_zero() || min_rtt.is_some_and(|m| interval < m) {
        return None;
    }
    let bytes = *delivered - p.delivered;
    Some(RateSample {
        delivery_rate: bytes as f64 / interval.as_secs_f64(),
        delivered: bytes,
        interval,
        app_limited: false,
        total_delivered: *delivered,
        prior_delivered: p.delivered,
    })
}

fn declare(
    cc: &mut impl CongestionControl,
    trace: &mut Trace,
    p: &InFlight,
    now: Duration,
    in_flight: u64,
) {
    match p.loss {
        LossKind::Congestion => trace.congestion_losses += 1,
        LossKind::Link => trace.link_losses += 1,
    }
    cc.on_loss(&LossSample {
        now,
        bytes: p.size,
        sent_at: p.sent_at,
        kind: p.loss,
        in_flight,
    });
}

/// xorshift64: enough randomness for link models, and reproducible.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Sanity of the testbed itself, with a fixed-window sender.
#[cfg(test)]
mod tests {
    use super::*;

    /// Sends a fixed window, unpaced.
    #[derive(Debug)]
    struct FixedWindow(u64);

    impl CongestionControl for FixedWindow {
        fn name(&self) -> &'static str {
            "fixed"
        }
        fn on_sent(&mut self, _: Duration, _: u32, _: u64) {}
        fn on_ack(&mut self, _: &AckSample) {}
        fn on_loss(&mut self, _: &LossSample) {}
        fn allowance(&self, _: Duration, in_flight: u64) -> u64 {
            self.0.saturating_sub(in_flight)
        }
        fn next_allowance_at(&self, _: Duration) -> Option<Duration> {
            None
        }
        fn rate(&self, srtt: Duration) -> f64 {
            self.0 as f64 / srtt.as_secs_f64()
        }
        fn reset(&mut self, _: Duration) {}
    }

    #[test]
    fn a_window_of_two_bdp_fills_the_link_and_queues_one_bdp() {
        let rate = mbps(10.0);
        let link = Link::constant(rate, ms(40), 1_000_000);
        let bdp = (rate * 0.040) as u64;
        let mut samples = Vec::new();
        let trace = run(&mut FixedWindow(2 * bdp), &link, ms(3000), |_, a| {
            samples.push(a.rate)
        });
        let goodput = trace.goodput(ms(1000), ms(3000));
        assert!((goodput / rate - 1.0).abs() < 0.02, "{goodput}");
        let q = trace.mean_queue_delay(ms(1000), ms(3000));
        assert!((q.as_secs_f64() - 0.040).abs() < 0.003, "{q:?}");
        let last = samples.last().unwrap().expect("a rate sample");
        assert!((last.delivery_rate / rate - 1.0).abs() < 0.03, "{last:?}");
        assert_eq!(trace.congestion_losses, 0);
    }

    #[test]
    fn a_window_beyond_the_buffer_overflows() {
        let rate = mbps(10.0);
        let link = Link::constant(rate, ms(40), 20_000);
        let trace = run(&mut FixedWindow(200_000), &link, ms(1000), |_, _| {});
        assert!(trace.congestion_losses > 0);
        assert!(trace.goodput(ms(200), ms(1000)) > 0.9 * rate);
    }

    /// Every controller over the same links, side by side (run with `--nocapture` for
    /// the table): the delay-targeting one must keep the cellular tail far below the
    /// buffer-filling ones without giving up much throughput.
    #[test]
    fn controllers_side_by_side() {
        use crate::cc::CcConfig;
        let kinds = [
            ("aimd", CcConfig::default()),
            ("cubic", toml("kind = 'cubic'")),
            ("bbr", toml("kind = 'bbr'")),
            ("bbr1", toml("kind = 'bbr1'")),
            ("copa", toml("kind = 'copa'")),
            ("copa-nocap", toml("kind = 'copa'\ndrain_cap = false")),
            ("ontime", toml("kind = 'ontime'")),
        ];
        let links = [
            (
                "10M/40ms/1MB",
                Link::constant(mbps(10.0), ms(40), 1_000_000),
            ),
            ("cellular 30ms", Link::cellular(ms(30), 7)),
            ("cellular 30ms b", Link::cellular(ms(30), 11)),
            ("fading 30ms", Link::fading(ms(30), 7)),
            (
                "cellular 150kB",
                Link {
                    buffer: 150_000,
                    ..Link::cellular(ms(30), 7)
                },
            ),
        ];
        let (from, to) = (ms(2000), ms(30_000));
        let mut p95 = std::collections::HashMap::new();
        eprintln!(
            "{:<16} {:<11} {:>6} {:>9} {:>9} {:>9}",
            "link", "cc", "util", "queue", "owd p95", "drops"
        );
        for (link_name, link) in &links {
            for (name, config) in &kinds {
                let mut cc = Boxed(config.build(MSS, Duration::ZERO));
                let trace = run(&mut cc, link, to, |_, _| {});
                let util = trace.goodput(from, to) / link.mean_rate(from, to);
                let owd = trace.owd_quantile(from, to, 0.95);
                eprintln!(
                    "{link_name:<16} {name:<11} {:>5.0}% {:>7.1}ms {:>7.1}ms {:>9}",
                    util * 100.0,
                    trace.mean_queue_delay(from, to).as_secs_f64() * 1e3,
                    owd.as_secs_f64() * 1e3,
                    trace.congestion_losses,
                );
                assert!(util > 0.6, "{link_name} {name}: {util}");
                p95.insert((*link_name, *name), owd);
            }
        }
        for link in ["cellular 30ms", "cellular 30ms b"] {
            let copa = p95[&(link, "copa")];
            assert!(copa < ms(130), "{link}: copa p95 {copa:?}");
            assert!(copa * 2 < p95[&(link, "cubic")], "{link}");
        }
    }

    fn toml(s: &str) -> crate::cc::CcConfig {
        ::toml::from_str(s).unwrap()
    }

    /// A boxed controller as a sized one, for [`run`].
    #[derive(Debug)]
    struct Boxed(Box<dyn CongestionControl>);

    impl CongestionControl for Boxed {
        fn name(&self) -> &'static str {
            self.0.name()
        }
        fn on_sent(&mut self, now: Duration, bytes: u32, in_flight: u64) {
            self.0.on_sent(now, bytes, in_flight)
        }
        fn on_ack(&mut self, ack: &AckSample) {
            self.0.on_ack(ack)
        }
        fn on_loss(&mut self, loss: &LossSample) {
            self.0.on_loss(loss)
        }
        fn on_spurious_loss(&mut self, now: Duration, sent_at: Duration) {
            self.0.on_spurious_loss(now, sent_at)
        }
        fn allowance(&self, now: Duration, in_flight: u64) -> u64 {
            self.0.allowance(now, in_flight)
        }
        fn next_allowance_at(&self, now: Duration) -> Option<Duration> {
            self.0.next_allowance_at(now)
        }
        fn rate(&self, srtt: Duration) -> f64 {
            self.0.rate(srtt)
        }
        fn reset(&mut self, now: Duration) {
            self.0.reset(now)
        }
    }
}
