//! Loss recovery end to end: two sessions over an in-memory network in virtual time, one
//! recovery stream from client to server, random loss on the data direction.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;
use horde_proto::recovery::estimators::PathEstimate;
use horde_proto::recovery::RecoveryStats;
use horde_proto::{
    CcConfig, ChannelConfig, ChannelSpec, Event, RecoveryConfig, RecoveryMode, Session,
    SessionConfig, StreamConfig,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const MTU: u32 = 600;
const ADU: usize = 400;
const DELAY: Duration = Duration::from_millis(30);

fn addr(host: u8) -> SocketAddr {
    SocketAddr::from(([127, 0, host + 1, 1], 4000))
}

fn channel(kbps: f64) -> ChannelConfig {
    ChannelConfig {
        mtu: MTU,
        congestion: CcConfig::Cbr {
            kbps,
            burst_ms: 20.0,
        },
        ..ChannelConfig::default()
    }
}

/// One channel of `kbps` both ways, `loss` on client-to-server datagrams; optionally a
/// bottleneck with an unbounded FIFO on the client-to-server direction.
struct Net {
    now: Duration,
    in_flight: BTreeMap<(Duration, u64), (bool, Bytes)>,
    order: u64,
    client: Session,
    server: Option<Session>,
    kbps: f64,
    loss: f64,
    rng: ChaCha8Rng,
    received: Vec<(u64, Bytes)>,
    /// When each `received` ADU reached the application.
    received_at: Vec<Duration>,
    lost_datagrams: u64,
    /// A client-to-server bottleneck (kbit/s) and when its queue next empties.
    bottleneck: Option<(f64, Duration)>,
    /// The server's channel config, when not a `cbr` one of `kbps`.
    server_channel: Option<ChannelConfig>,
}

impl Net {
    fn new(kbps: f64, loss: f64, seed: u64) -> Self {
        let client = Session::connect(
            SessionConfig::default(),
            42,
            7,
            vec![ChannelSpec {
                local: 0,
                remote: addr(1),
                config: channel(kbps),
            }],
            vec![addr(0)],
            Duration::ZERO,
        )
        .unwrap();
        Net {
            now: Duration::ZERO,
            in_flight: BTreeMap::new(),
            order: 0,
            client,
            server: None,
            kbps,
            loss,
            rng: ChaCha8Rng::seed_from_u64(seed),
            received: Vec::new(),
            received_at: Vec::new(),
            lost_datagrams: 0,
            bottleneck: None,
            server_channel: None,
        }
    }

    fn flush(&mut self) {
        let mut buf = Vec::new();
        while let Some(t) = self.client.poll_transmit(self.now, &mut buf) {
            if !t.adus.is_empty() && self.rng.gen_bool(self.loss) {
                self.lost_datagrams += 1;
                continue;
            }
            self.order += 1;
            let data = Bytes::copy_from_slice(&buf);
            let mut leaves = self.now;
            if let Some((kbps, free_at)) = self.bottleneck.as_mut() {
                let serialize = Duration::from_secs_f64(buf.len() as f64 * 8.0 / (*kbps * 1e3));
                *free_at = (*free_at).max(self.now) + serialize;
                leaves = *free_at;
            }
            self.in_flight
                .insert((leaves + DELAY, self.order), (true, data));
        }
        if let Some(s) = self.server.as_mut() {
            while s.poll_transmit(self.now, &mut buf).is_some() {
                self.order += 1;
                let data = Bytes::copy_from_slice(&buf);
                self.in_flight
                    .insert((self.now + DELAY, self.order), (false, data));
            }
            while let Some(e) = s.poll_event() {
                if let Event::Received {
                    stream: 1,
                    stream_seq,
                    payload,
                    ..
                } = e
                {
                    self.received.push((stream_seq, payload));
                    self.received_at.push(self.now);
                }
            }
        }
        while self.client.poll_event().is_some() {}
    }

    fn run_until(&mut self, end: Duration) {
        self.flush();
        loop {
            let mut t = self.in_flight.keys().next().map(|k| k.0);
            for s in std::iter::once(&self.client).chain(self.server.as_ref()) {
                if let Some(x) = s.poll_timeout(self.now) {
                    t = Some(t.map_or(x, |t: Duration| t.min(x)));
                }
            }
            let Some(t) = t.filter(|&t| t <= end) else {
                break;
            };
            self.now = self.now.max(t);
            while let Some(entry) = self.in_flight.first_entry() {
                if entry.key().0 > self.now {
                    break;
                }
                let (to_server, data) = entry.remove();
                if !to_server {
                    self.client.handle_datagram(self.now, 0, addr(1), data);
                } else if let Some(s) = self.server.as_mut() {
                    s.handle_datagram(self.now, 0, addr(0), data);
                } else {
                    let kbps = self.kbps;
                    let config = self.server_channel.clone();
                    self.server = Some(
                        Session::accept(
                            SessionConfig::default(),
                            self.now,
                            0,
                            addr(0),
                            data,
                            vec![addr(1)],
                            Arc::new(move |_| config.clone().unwrap_or_else(|| channel(kbps))),
                        )
                        .unwrap(),
                    );
                }
            }
            let now = self.now;
            self.client.handle_timeout(now);
            if let Some(s) = self.server.as_mut() {
                s.handle_timeout(now);
            }
            self.flush();
        }
        self.now = end;
    }
}

fn payload(i: u64) -> Bytes {
    let mut p = vec![(i % 251) as u8; ADU - 8];
    p.extend_from_slice(&i.to_be_bytes());
    Bytes::from(p)
}

struct Run {
    sent: u64,
    client: RecoveryStats,
    server: RecoveryStats,
    /// Distinct ADUs the application received, each checked byte for byte.
    delivered: u64,
    lost_datagrams: u64,
    /// Coded ADUs sent while the sender's queue was never empty.
    coded_while_saturated: u64,
    paths: Vec<PathEstimate>,
    /// What the server reported back to the client about the client's channel.
    reported: Vec<PathEstimate>,
}

/// Send `n` ADUs, one every `gap`, on a channel of `kbps` with `loss`.
fn run(mode: RecoveryMode, kbps: f64, loss: f64, n: u64, gap: Duration) -> Run {
    run_with(mode, kbps, loss, n, gap, false)
}

/// As [`run`]; with `both_ways`, the server opens the stream too (with the same
/// recovery), as a tunnel's far end does, and so reports its measurements back.
fn run_with(
    mode: RecoveryMode,
    kbps: f64,
    loss: f64,
    n: u64,
    gap: Duration,
    both_ways: bool,
) -> Run {
    let mut net = Net::new(kbps, loss, 11);
    let config = StreamConfig {
        recovery: RecoveryConfig::new(mode),
        max_queue_bytes: 4 << 20,
        ..StreamConfig::default()
    };
    net.client.open_stream(1, config.clone()).unwrap();
    let start = Duration::from_millis(300);
    net.run_until(start);
    assert!(net.client.is_connected());
    if both_ways {
        let server = net.server.as_mut().unwrap();
        server.open_stream(1, config.clone()).unwrap();
    }
    let mut coded_at_half = None;
    for i in 0..n {
        let t = start + gap * i as u32;
        net.run_until(t);
        if i == n / 2 {
            coded_at_half = Some(net.client.recovery_stats(1).unwrap_or_default().coded_sent);
        }
        net.client
            .send_adu(t, 1, payload(i), Fields::new())
            .unwrap();
    }
    let end_of_sending = net.client.recovery_stats(1).unwrap_or_default().coded_sent;
    net.run_until(start + gap * n as u32 + Duration::from_secs(3));
    let mut seen = std::collections::BTreeSet::new();
    for (seq, p) in &net.received {
        assert_eq!(p, &payload(*seq), "ADU {seq} intact");
        assert!(seen.insert(*seq), "ADU {seq} delivered once");
    }
    Run {
        sent: n,
        client: net.client.recovery_stats(1).unwrap_or_default(),
        server: net
            .server
            .as_ref()
            .unwrap()
            .recovery_stats(1)
            .unwrap_or_default(),
        delivered: seen.len() as u64,
        lost_datagrams: net.lost_datagrams,
        coded_while_saturated: end_of_sending - coded_at_half.unwrap(),
        paths: net.server.as_ref().unwrap().path_estimates(),
        reported: net.client.reported_path_estimates(),
    }
}

const GAP: Duration = Duration::from_millis(5);

#[test]
fn oec_recovers_most_losses_on_a_five_percent_path_using_spare_capacity() {
    // 640 kbit/s of ADUs on a 2 Mbit/s channel: room to spare.
    let none = run(RecoveryMode::None, 2000.0, 0.05, 2000, GAP);
    let oec = run(RecoveryMode::Oec, 2000.0, 0.05, 2000, GAP);
    let missing_none = none.sent - none.delivered;
    let missing_oec = oec.sent - oec.delivered;
    eprintln!(
        "none: {missing_none} missing; oec: {missing_oec} missing after {} losses, {:?}",
        oec.lost_datagrams, oec.server
    );
    eprintln!(
        "oec sender: {:?}, overhead {:.2}",
        oec.client,
        oec.client.coding_overhead()
    );
    assert!(missing_none > 60, "no recovery loses ~5%: {missing_none}");
    assert!(
        missing_oec * 10 < missing_none,
        "OEC leaves {missing_oec} of {} data losses unrecovered against {missing_none} without",
        oec.lost_datagrams
    );
    assert!(oec.server.recovered > 60, "{:?}", oec.server);
    assert_eq!(oec.server.lost, missing_oec, "{:?}", oec.server);
    assert!(oec.client.coded_sent > 0 && oec.client.coding_overhead() > 0.1);
    // The receiver measured the path: ~5% loss, 30 ms one way (both clocks count from
    // their session's start, the server's one one-way delay later: d + δ is about 0).
    let p = oec.paths[0];
    eprintln!("path estimates: {p:?}");
    // The loss average spans about 20 packets, so at 5% its last value is noisy.
    assert!((0.002..0.15).contains(&p.loss), "{p:?}");
    assert!(p.delay_ms.unwrap().abs() < 5.0, "{p:?}");
    assert!(p.capacity.unwrap() > 640e3 / 8.0, "{p:?}");
    // Recovery stream statistics count data once, whatever was coded.
    assert_eq!(oec.client.data_sent, oec.sent);
}

#[test]
fn a_saturated_path_gets_no_coded_packets() {
    // 1.28 Mbit/s of ADUs into 800 kbit/s: the queue never empties while sending.
    let oec = run(
        RecoveryMode::Oec,
        800.0,
        0.05,
        1000,
        Duration::from_micros(2500),
    );
    eprintln!("saturated: {:?}", oec.client);
    assert_eq!(oec.coded_while_saturated, 0, "{:?}", oec.client);
    // Once the backlog drains, the tail is protected.
    assert!(oec.client.coded_sent > 0);
}

#[test]
fn fec_retransmission_and_blocks_each_recover_losses() {
    for mode in [
        RecoveryMode::Fec { percent: 100.0 },
        RecoveryMode::Fec { percent: 10.0 },
        RecoveryMode::Retransmit,
        RecoveryMode::Block { data: 8 },
    ] {
        let r = run(mode, 2000.0, 0.05, 800, GAP);
        let missing = r.sent - r.delivered;
        let lost = r.lost_datagrams;
        eprintln!(
            "{mode:?}: {missing} missing after {lost} losses; {:?}",
            r.client
        );
        assert!(lost > 20, "{mode:?}: {lost}");
        assert!(
            missing * 2 < lost,
            "{mode:?}: {missing} missing after {lost} losses"
        );
        match mode {
            RecoveryMode::Retransmit => {
                assert!(r.client.retransmitted > 0 && r.client.coded_sent == 0)
            }
            RecoveryMode::Fec { percent } => {
                let expect = (r.client.data_sent as f64 * percent / 100.0) as u64;
                assert!(
                    r.client.coded_sent.abs_diff(expect) <= expect / 10 + 2,
                    "{:?}",
                    r.client
                );
            }
            _ => assert!(r.server.recovered > 0),
        }
    }
}

#[test]
fn the_receiver_reports_its_path_estimates_back() {
    let one_way = run(RecoveryMode::Oec, 2000.0, 0.05, 600, GAP);
    assert!(one_way.reported.is_empty(), "nothing to report on");
    assert_eq!(one_way.server.reports_sent, 0);
    let r = run_with(RecoveryMode::Oec, 2000.0, 0.05, 600, GAP, true);
    eprintln!("reported: {:?}; server {:?}", r.reported, r.server);
    // About one report per 100 ms of arrivals (3 s of sending).
    assert!((20..=40).contains(&r.server.reports_sent), "{:?}", r.server);
    assert_eq!(r.client.reports_received, r.server.reports_sent);
    let p = r.reported[0];
    assert_eq!(p.channel, 0);
    // The report is the server's own estimate of the channel at its last report (the
    // loss average is short and noisy, so only its range is checked).
    let own = r.paths[0];
    assert!((0.0..0.15).contains(&p.loss), "{p:?}");
    assert!(
        (p.delay_ms.unwrap() - own.delay_ms.unwrap()).abs() < 1.0,
        "{p:?} {own:?}"
    );
    let (cap, own_cap) = (p.capacity.unwrap(), own.capacity.unwrap());
    assert!((cap - own_cap).abs() < 0.05 * own_cap, "{p:?} {own:?}");
    // Reports are the layer's own: none reaches the application, and the recovery
    // still delivers all but a stray unrepaired loss or two.
    assert!(
        r.delivered <= r.sent && r.delivered + 3 >= r.sent,
        "{} of {}",
        r.delivered,
        r.sent
    );
}

/// Sparse data after idle spells, as a tunnel's TCP acks and last segments are, on a
/// lossy path: every idle spell lets OEC code into the channel's free slots. The coded
/// ADUs must not delay the next data ADU, and the receiver must hold nothing past its
/// reorder wait once traffic stops (the reorder cache's timer releases it).
#[test]
fn coded_adus_never_delay_data_and_nothing_is_held_past_the_wait() {
    let gap = Duration::from_millis(40);
    let n = 200;
    let mut net = Net::new(2000.0, 0.05, 5);
    let config = StreamConfig {
        recovery: RecoveryConfig::new(RecoveryMode::Oec),
        ..StreamConfig::default()
    };
    net.client.open_stream(1, config).unwrap();
    let start = Duration::from_millis(300);
    net.run_until(start);
    let mut sent_at = BTreeMap::new();
    for i in 0..n {
        // Sent 1 ms after a cycle, when the spare slots have just been filled.
        let t = start + gap * i as u32 + Duration::from_millis(1);
        net.run_until(t);
        net.client
            .send_adu(t, 1, payload(i), Fields::new())
            .unwrap();
        // The receiver numbers a recovery stream's data ADUs 0, 1, 2...
        sent_at.insert(i, t);
        net.flush();
    }
    net.run_until(start + gap * n as u32 + Duration::from_secs(2));
    let stats = net.client.recovery_stats(1).unwrap();
    eprintln!("sparse OEC: {stats:?}");
    // Each idle spell gets coded ADUs until another would yield under MIN_YIELD: about
    // one per lone ADU at 5% loss.
    assert!(
        stats.coded_sent > n / 2,
        "OEC coded into the idle spells: {stats:?}"
    );
    // The reorder wait (50 ms) bounds how long a received ADU can be held; one slot of
    // 600 bytes at 2 Mbit/s (2.4 ms) bounds how long data may wait for the channel.
    let wait = Duration::from_millis(50);
    let mut worst = Duration::ZERO;
    let mut seen = std::collections::BTreeSet::new();
    for (&(seq, ref p), &at) in net.received.iter().zip(&net.received_at) {
        assert_eq!(p, &payload(seq), "ADU {seq} intact");
        assert!(seen.insert(seq), "ADU {seq} delivered once");
        let took = at - sent_at[&seq];
        worst = worst.max(took);
        assert!(
            took <= DELAY + wait + Duration::from_millis(5),
            "ADU {seq} took {took:?}"
        );
    }
    eprintln!("worst one-way delivery {worst:?}");
    assert!(seen.len() as u64 > n - 3, "{} of {n} delivered", seen.len());
}

/// `mode` over a window-based channel (CUBIC, the default) in front of a 2 Mbit/s
/// bottleneck with an unbounded buffer, 640 kbit/s of data for 10 s; returns the median
/// and 95th percentile of the data's one-way delivery time, and the sender's counts.
fn behind_a_bottleneck(mode: RecoveryMode) -> (Duration, Duration, RecoveryStats) {
    let mut net = Net::new(2000.0, 0.0, 9);
    net.bottleneck = Some((2000.0, Duration::ZERO));
    let cubic = ChannelConfig {
        mtu: MTU,
        ..ChannelConfig::default()
    };
    let spec = ChannelSpec {
        local: 0,
        remote: addr(1),
        config: cubic.clone(),
    };
    net.client = Session::connect(
        SessionConfig::default(),
        42,
        7,
        vec![spec],
        vec![addr(0)],
        Duration::ZERO,
    )
    .unwrap();
    net.server_channel = Some(cubic);
    let config = StreamConfig {
        recovery: RecoveryConfig::new(mode),
        ..StreamConfig::default()
    };
    net.client.open_stream(1, config).unwrap();
    let start = Duration::from_millis(300);
    net.run_until(start);
    let n = 2000u64;
    let mut sent_at = BTreeMap::new();
    for i in 0..n {
        let t = start + GAP * i as u32;
        net.run_until(t);
        net.client
            .send_adu(t, 1, payload(i), Fields::new())
            .unwrap();
        sent_at.insert(i, t);
    }
    net.run_until(start + GAP * n as u32 + Duration::from_secs(3));
    let mut delays: Vec<Duration> = net
        .received
        .iter()
        .zip(&net.received_at)
        .map(|((seq, _), at)| *at - sent_at[seq])
        .collect();
    delays.sort_unstable();
    let stats = net.client.recovery_stats(1).unwrap_or_default();
    (
        delays[delays.len() / 2],
        delays[delays.len() * 95 / 100],
        stats,
    )
}

/// OEC in front of a deep buffer, as a tunnel over a cellular link has. Coded ADUs must
/// use only capacity the data leaves: coding into whatever the window allows grows the
/// window into the buffer, and the data then waits behind a standing queue of coded
/// ADUs (the tunnel's one-second round trips).
#[test]
fn coding_builds_no_standing_queue_in_front_of_data() {
    let (none_median, none_p95, _) = behind_a_bottleneck(RecoveryMode::None);
    let (median, p95, stats) = behind_a_bottleneck(RecoveryMode::Oec);
    eprintln!(
        "behind a bottleneck: none median {none_median:?} p95 {none_p95:?}; \
         OEC median {median:?} p95 {p95:?}, {stats:?}"
    );
    assert!(stats.coded_sent > 200, "OEC still codes: {stats:?}");
    assert!(
        median < none_median + Duration::from_millis(20),
        "OEC median {median:?} against {none_median:?} without"
    );
    // The reorder wait (50 ms) may hold an ADU behind a loss OEC did not repair.
    assert!(
        p95 < none_p95.max(median) + Duration::from_millis(60),
        "OEC p95 {p95:?} against {none_p95:?} without"
    );
}
