//! The building blocks together: fig7-5's channels as `horde-links` links, its bulk
//! workloads, a minimal randomized-round-robin loop standing in for the protocol, and
//! the metrics report. Checks that the scenario file reproduces the thesis's S0
//! numbers and that the report is deterministic.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::Duration;

use horde_links::{Delivery, Link};
use horde_sim::metrics::{Metrics, MetricsChannel, Report};
use horde_sim::scenario::{Congestion, Direction, Scenario};
use horde_sim::workload::{stream_seed, AduSpec, Workload};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

struct Chan {
    link: Box<dyn Link>,
    id: MetricsChannel,
    period: Duration,
    next_slot: Duration,
    seq: u64,
    /// Link packet id -> ADU id.
    in_flight: BTreeMap<u64, u64>,
}

/// Every slot goes to a random stream (all are backlogged, so over a cycle this is a
/// random matching of streams to slots); acks come back the instant a packet arrives
/// (the `down` links are ideal); packets still missing 5 s after the run are nacked.
fn run(s: &Scenario) -> Report {
    let mut m = Metrics::new();
    let mut chans: Vec<Chan> = s
        .channels
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let Congestion::Cbr { kbps, .. } = c.congestion else {
                panic!("fig7-5 is CBR")
            };
            Chan {
                link: c
                    .link(Direction::Up)
                    .build(stream_seed(s.seed ^ 0xC4A7, i as u32), &s.base_dir)
                    .unwrap(),
                id: m.add_channel(&c.name),
                period: Duration::from_secs_f64(f64::from(c.mtu) * 8.0 / (kbps * 1000.0)),
                next_slot: Duration::ZERO,
                seq: 0,
                in_flight: BTreeMap::new(),
            }
        })
        .collect();
    let mut sources: Vec<(u32, Box<dyn Workload>, VecDeque<AduSpec>)> = s
        .streams
        .iter()
        .map(|st| {
            m.add_stream(st.id);
            let w = st
                .workload
                .build(stream_seed(s.seed, st.id), s.max_adu(st))
                .unwrap();
            (st.id, w, VecDeque::new())
        })
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(s.seed);
    let mut next_adu = 0u64;
    let mut out = Vec::new();
    let mut deliveries: Vec<Delivery> = Vec::new();
    let end = s.duration();
    loop {
        let (ci, now) = chans
            .iter()
            .enumerate()
            .map(|(i, c)| (i, c.next_slot))
            .min_by_key(|&(i, t)| (t, i))
            .unwrap();
        if now >= end {
            break;
        }
        for c in chans.iter_mut() {
            deliveries.clear();
            c.link.deliver(now, &mut deliveries);
            for d in &deliveries {
                let adu = c.in_flight.remove(&d.id).unwrap();
                m.adu_delivered(adu, d.at);
                m.adu_acked(adu, d.at);
            }
        }
        let order: Vec<usize> = {
            let mut v: Vec<usize> = (0..sources.len()).collect();
            v.shuffle(&mut rng);
            v
        };
        let (stream, w, queue) = &mut sources[order[0]];
        if queue.is_empty() {
            // The bulk contract: top up when the queue runs dry.
            out.clear();
            w.emit(now, &mut out);
            for a in out.drain(..) {
                m.adu_inserted(*stream, next_adu, a.size, now);
                queue.push_back(a);
                next_adu += 1;
            }
        }
        let adu = queue.pop_front().unwrap();
        let id = next_adu - 1 - queue.len() as u64;
        let c = &mut chans[ci];
        m.adu_sent(id, c.id, c.seq, now);
        c.link.enqueue(now, c.seq, adu.size);
        c.in_flight.insert(c.seq, id);
        c.seq += 1;
        c.next_slot += c.period;
    }
    for c in chans.iter_mut() {
        deliveries.clear();
        c.link
            .deliver(end + Duration::from_secs(5), &mut deliveries);
        for d in &deliveries {
            let adu = c.in_flight.remove(&d.id).unwrap();
            m.adu_acked(adu, d.at);
        }
        for (_, adu) in std::mem::take(&mut c.in_flight) {
            m.adu_nacked(adu, end + Duration::from_secs(5));
        }
        m.link_stats(c.id, c.link.stats());
    }
    let mut r = m.report(end);
    r.scenario = Some(s.name.clone());
    r
}

fn fig7_5() -> Scenario {
    Scenario::load(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/fig7-5.toml"))
        .unwrap()
}

#[test]
fn fig7_5_under_random_round_robin_matches_the_thesis_s0() {
    let r = run(&fig7_5());
    assert_eq!(r.unmatched_events, 0);
    // Channel loss rates are the table's (bursty, so a generous tolerance).
    for (c, want) in r.channels.iter().zip([0.005, 0.2, 0.03, 0.03, 0.03, 0.03]) {
        let got = c.loss_rate.unwrap();
        assert!(
            (got - want).abs() < want * 0.35 + 0.002,
            "{}: loss {got}",
            c.name
        );
        let link = c.link.unwrap();
        assert_eq!(link.lost, c.lost, "{}: sender saw every link loss", c.name);
        assert_eq!(
            link.queue_drops, 0,
            "{}: CBR at link rate never queues",
            c.name
        );
    }
    let total_sent: u64 = r.channels.iter().map(|c| c.sent).sum();
    for st in &r.streams {
        // Each stream gets a quarter of the slots and of the 328 kbit/s.
        let share = st.transmissions as f64 / total_sent as f64;
        assert!((share - 0.25).abs() < 0.01, "stream {}: {share}", st.id);
        // Over acked ADUs only: lossy cdma2 (300 ms) delivers 20% less, so the mean is
        // the delivered-rate-weighted one, (119.4*600 + 96*300 + 42.68*900 + 42.68*1000)
        // / 300.76 = 603.6 ms.
        let mean = st.rtt_ms.mean.unwrap();
        assert!(
            (mean - 603.6).abs() < 12.0,
            "stream {}: mean RTT {mean}",
            st.id
        );
        assert_eq!(
            st.latency_ms, st.rtt_ms,
            "bulk ADUs go out the moment they are made"
        );
        // cdma1 carries about 120/22 times what gprs1 does for each stream (§7.2.2).
        let ratio = st.channels["cdma1"] as f64 / st.channels["gprs1"] as f64;
        assert!(
            (ratio - 120.0 / 22.0).abs() < 0.6,
            "stream {}: {ratio}",
            st.id
        );
        // cdma2's bursts make some losses correlated.
        assert!(st.lost_correlated > 0 && st.lost_correlated < st.lost);
        assert!(
            st.goodput_kbps > 60.0 && st.goodput_kbps < 82.0,
            "{}",
            st.goodput_kbps
        );
    }
}

#[test]
fn without_loss_rrr_mean_rtt_is_the_thesis_580_ms() {
    // The look-ahead sweep (§7.3, Fig. 7-24) set losses to zero and measured 580 ms
    // under RRR; the bandwidth-weighted mean of Fig. 7-5's RTTs is 584 ms.
    let mut s = fig7_5();
    s.duration_s = 300.0;
    for c in &mut s.channels {
        c.up.loss = None;
    }
    let r = run(&s);
    for st in &r.streams {
        assert_eq!(st.lost, 0);
        let mean = st.rtt_ms.mean.unwrap();
        assert!(
            (mean - 584.1).abs() < 12.0,
            "stream {}: mean RTT {mean}",
            st.id
        );
    }
}

#[test]
fn the_whole_pipeline_is_deterministic() {
    let mut s = fig7_5();
    s.duration_s = 60.0;
    let a = run(&s);
    let b = run(&s);
    assert_eq!(a.to_json(), b.to_json());
    assert_eq!(a.latency_cdf_csv(), b.latency_cdf_csv());
    assert_eq!(a.cdf_svg().unwrap(), b.cdf_svg().unwrap());
    s.seed += 1;
    assert_ne!(a.to_json(), run(&s).to_json());
}
