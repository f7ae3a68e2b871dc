use super::*;

fn addr() -> SocketAddr {
    "127.0.0.1:9".parse().unwrap()
}

fn t(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn lost(out: &[Resolved]) -> Vec<u64> {
    out.iter()
        .filter(|r| matches!(r.resolution, Resolution::Lost(_)))
        .map(|r| r.seq)
        .collect()
}

/// A sender and receiver channel joined by a one-way path whose delivery times the test
/// chooses; acks return instantly.
struct Pair {
    tx: Channel,
    rx: Channel,
    out: Vec<Resolved>,
}

impl Pair {
    fn new(config: ChannelConfig) -> Self {
        Self {
            tx: Channel::new(ChannelId::new(0), 0, addr(), config.clone(), t(0)),
            rx: Channel::new(ChannelId::new(0), 0, addr(), config, t(0)),
            out: Vec::new(),
        }
    }

    fn deliver(&mut self, at: Duration, seq: u64) {
        self.rx.on_receive(at, seq, 0);
        // Ack at once (as the receiver does every few packets) to keep the test exact.
        if let Some(ack) = self.rx.take_ack(at + Duration::from_millis(1), 1) {
            self.tx.on_ack(at, &ack, &mut self.out);
        }
    }

    fn tick(&mut self, now: Duration) -> TimerActions {
        self.tx.on_timeout(now, &mut self.out)
    }
}

#[test]
fn acks_built_by_receiver_resolve_exactly_the_received_packets() {
    let t0 = Duration::ZERO;
    let cfg = ChannelConfig::default();
    let mut tx = Channel::new(ChannelId::new(0), 0, addr(), cfg.clone(), t0);
    let mut rx = Channel::new(ChannelId::new(0), 0, addr(), cfg, t0);
    let seqs: Vec<u64> = (0..10).map(|_| tx.on_send(t0, 1000, &[])).collect();
    let t1 = t(100);
    for &s in &seqs {
        if s != 3 && s != 4 && s != 8 {
            rx.on_receive(t1, s, 0);
        }
    }
    let ack = rx.take_ack(t1, 1).unwrap();
    let mut out = Vec::new();
    tx.on_ack(t1, &ack, &mut out);
    let acked: Vec<u64> = out
        .iter()
        .filter(|r| matches!(r.resolution, Resolution::Acked { .. }))
        .map(|r| r.seq)
        .collect();
    assert_eq!(acked, vec![9, 5, 6, 7, 0, 1, 2]);
    // The holes are declared lost once the RACK round trip and window have passed.
    let mut out = Vec::new();
    tx.detect_losses(t(5_000), &mut out);
    assert_eq!(lost(&out), vec![3, 4, 8]);
    assert_eq!(tx.loss.total(), 10);
    assert_eq!(tx.loss.lost(), 3);
}

#[test]
fn jitter_without_loss_declares_nothing() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut p = Pair::new(ChannelConfig::default());
    // A FIFO cellular-like path: 40 ms base, delay that wanders between 0 and 400 ms
    // extra, one packet every 5 ms, in order.
    let mut arrivals = Vec::new();
    let mut extra = 0.0f64;
    let mut last_arrival = Duration::ZERO;
    for k in 0..4000u64 {
        let now = t(k * 5);
        let seq = p.tx.on_send(now, 1200, &[]);
        extra = (extra + rng.gen_range(-20.0..20.0)).clamp(0.0, 400.0);
        let at = (now + t(40) + Duration::from_secs_f64(extra / 1e3)).max(last_arrival);
        last_arrival = at;
        arrivals.push((at, seq));
    }
    let mut next = 0;
    for ms in 0..25_000 {
        let now = t(ms);
        while next < arrivals.len() && arrivals[next].0 <= now {
            let (at, seq) = arrivals[next];
            p.deliver(at, seq);
            next += 1;
        }
        p.tick(now);
    }
    assert!(lost(&p.out).is_empty(), "{} declared", lost(&p.out).len());
    assert_eq!(p.tx.stats.acked, 4000);
}

#[test]
fn an_outage_is_probed_not_declared_lost() {
    let mut p = Pair::new(ChannelConfig::default());
    // Steady traffic with 50 ms one way...
    for k in 0..100u64 {
        let seq = p.tx.on_send(t(k * 10), 1200, &[]);
        p.deliver(t(k * 10 + 50), seq);
    }
    // ...then 20 packets sent into a 300 ms outage, all delivered when it ends.
    let start = 1000;
    let seqs: Vec<u64> = (0..20)
        .map(|k| p.tx.on_send(t(start + k * 10), 1200, &[]))
        .collect();
    let mut probes = Vec::new();
    for ms in start..start + 300 {
        if p.tick(t(ms)).probe {
            probes.push(p.tx.on_send(t(ms), 40, &[]));
        }
    }
    assert!(!probes.is_empty(), "the probe timeout fired in the outage");
    assert!(p.tx.stats.probe_timeouts >= 1);
    for (i, &s) in seqs.iter().chain(&probes).enumerate() {
        p.deliver(t(start + 300 + i as u64), s);
    }
    for ms in start + 300..start + 2000 {
        p.tick(t(ms));
    }
    assert!(lost(&p.out).is_empty(), "declared {:?}", lost(&p.out));
    assert!(p.tx.is_alive());
}

#[test]
fn reordering_is_forgiven_and_the_window_restored() {
    let mut p = Pair::new(ChannelConfig::default());
    let window = |p: &Pair| p.tx.congestion_control().window().unwrap();
    for k in 0..200u64 {
        let seq = p.tx.on_send(t(k * 2), 1200, &[]);
        p.deliver(t(k * 2 + 50), seq);
    }
    let before = window(&p);
    // Packet a is overtaken by b and arrives 200 ms late: declared lost, then late-acked.
    let a = p.tx.on_send(t(400), 1200, &[]);
    let b = p.tx.on_send(t(401), 1200, &[]);
    p.deliver(t(451), b);
    for ms in 451..600 {
        p.tick(t(ms));
    }
    assert_eq!(lost(&p.out), vec![a]);
    assert!(window(&p) < before, "the loss halved the window");
    p.deliver(t(600), a);
    let late: Vec<_> = p
        .out
        .iter()
        .filter(|r| matches!(r.resolution, Resolution::LateAcked { .. }))
        .collect();
    assert_eq!(late.len(), 1);
    assert_eq!(p.tx.stats.late_acked, 1);
    assert_eq!(window(&p), before, "the reduction was undone");
    assert_eq!(
        p.tx.loss.lost(),
        0,
        "the loss was taken out of the estimate"
    );
    assert_eq!(p.tx.reordering_multiplier(), 2);
}

#[test]
fn overflow_losses_are_congestion_and_random_ones_link() {
    let mut p = Pair::new(ChannelConfig::default());
    // Round trips from 50 ms (empty queue) up to 150 ms (full queue).
    for k in 0..100u64 {
        let seq = p.tx.on_send(t(k), 1200, &[]);
        p.deliver(t(k + 50 + k), seq);
    }
    // A loss revealed by a packet that queued 95 ms: the queue was full.
    let a = p.tx.on_send(t(200), 1200, &[]);
    let b = p.tx.on_send(t(201), 1200, &[]);
    p.deliver(t(201 + 145), b);
    let _ = a;
    for ms in 346..700 {
        p.tick(t(ms));
    }
    // A loss revealed by a packet that did not queue: the link lost it.
    let c = p.tx.on_send(t(700), 1200, &[]);
    let d = p.tx.on_send(t(701), 1200, &[]);
    p.deliver(t(701 + 52), d);
    let _ = c;
    for ms in 753..1100 {
        p.tick(t(ms));
    }
    let kinds: Vec<LossKind> = p
        .out
        .iter()
        .filter_map(|r| match r.resolution {
            Resolution::Lost(k) => Some(k),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, vec![LossKind::Congestion, LossKind::Link]);
    assert_eq!(p.tx.stats.lost_congestion, 1);
    // Only the link loss counts towards the loss rate that slots advertise.
    assert_eq!(p.tx.loss.lost(), 1);
}

#[test]
fn silent_channel_dies_and_comes_back_on_ack() {
    let mut ch = Channel::new(ChannelId::new(0), 0, addr(), ChannelConfig::default(), t(0));
    let mut out = Vec::new();
    ch.on_send(t(0), 500, &[]);
    assert!(!ch.on_timeout(t(500), &mut out).died);
    let died = ch.on_timeout(t(20_000), &mut out);
    assert!(died.died && died.probe);
    assert_eq!(
        lost(&out),
        vec![0],
        "what was in flight is lost with the channel"
    );
    assert!(!ch.is_alive());
    // Fast probes for a second after the death, then slower ones.
    assert!(!ch.on_timeout(t(20_030), &mut out).probe);
    assert!(ch.on_timeout(t(20_050), &mut out).probe);
    assert!(!ch.on_timeout(t(20_080), &mut out).probe);
    assert!(ch.on_timeout(t(20_100), &mut out).probe);
    assert!(ch.on_timeout(t(21_000), &mut out).probe);
    assert!(!ch.on_timeout(t(21_200), &mut out).probe);
    assert!(ch.on_timeout(t(21_250), &mut out).probe);
    let seq = ch.on_send(t(21_250), 40, &[]);
    let mut rx = Channel::new(ChannelId::new(0), 0, addr(), ChannelConfig::default(), t(0));
    rx.on_receive(t(21_300), seq, 0);
    assert!(
        rx.take_ack(t(21_300), 1).is_none(),
        "a lone packet is acked after the ack delay"
    );
    let ack = rx.take_ack(t(21_301), 1).unwrap();
    ch.on_ack(t(21_350), &ack, &mut out);
    assert!(ch.is_alive());
}

#[test]
fn a_loss_prior_is_the_slots_loss_until_packets_say_otherwise() {
    let prior = crate::estimator::LossPrior {
        rate: 0.08,
        packets: 100.0,
    };
    let mut p = Pair::new(ChannelConfig {
        loss_prior: Some(prior),
        ..ChannelConfig::default()
    });
    let mut slots = Vec::new();
    p.tx.real_slots(t(0), &mut slots);
    assert!(!slots.is_empty());
    for s in &slots {
        assert!((s.loss_probability - 0.08).abs() < 1e-12, "{s:?}");
    }
    // Without a prior, a channel with no samples says 0%.
    let bare = Pair::new(ChannelConfig::default());
    let mut bare_slots = Vec::new();
    bare.tx.real_slots(t(0), &mut bare_slots);
    assert!(bare_slots.iter().all(|s| s.loss_probability == 0.0));
    // 100 packets delivered: the prior and the measured 0% weigh the same.
    for k in 0..100 {
        let seq = p.tx.on_send(t(10 * k), 1000, &[]);
        p.deliver(t(10 * k + 5), seq);
    }
    assert_eq!(p.tx.loss.total(), 100);
    let slot = p.tx.slot(p.tx.next_seq_peek(), 0.0, None);
    assert!((slot.loss_probability - 0.04).abs() < 1e-12, "{slot:?}");
}

#[test]
fn a_bounded_channel_keeps_reserved_slots_past_its_queue_bound() {
    let mut p = Pair::new(ChannelConfig::default());
    let full = p.tx.max_adu();
    // Twenty packets, each delivered 20 ms after it left: the channel measures a rate.
    for k in 0..20 {
        let seq = p.tx.on_send(t(k * 5), full, &[]);
        p.deliver(t(k * 5 + 20), seq);
    }
    assert_eq!(
        p.tx.reserved_slot_count(t(120)),
        0,
        "unbounded: nothing reserved"
    );
    p.tx.set_queue_budget(Some(t(10)));
    // Fill up to the bound: then only the reserved slots are open.
    let now = t(120);
    let slot = u64::from(p.tx.slot_wire_bytes());
    while p.tx.bound_room() >= slot {
        p.tx.on_send(now, full, &[]);
    }
    assert_eq!(p.tx.real_slot_count(now), 0);
    assert_eq!(p.tx.reserved_slot_count(now), RESERVED_SLOTS);
    for _ in 0..RESERVED_SLOTS {
        p.tx.on_send(now, full, &[]);
    }
    assert_eq!(p.tx.reserved_slot_count(now), 0, "the reserve is used up");
    p.tx.set_queue_budget(None);
    assert_eq!(p.tx.reserved_slot_count(now), 0);
}

#[test]
fn a_link_silent_with_data_in_flight_stalls_by_the_silence() {
    let mut p = Pair::new(ChannelConfig::default());
    let seq = p.tx.on_send(t(0), 500, &[]);
    p.deliver(t(20), seq);
    assert_eq!(p.tx.stall(t(500)), Duration::ZERO, "nothing in flight");
    p.tx.on_send(t(30), 500, &[]);
    // Acks are batched: a short silence is no stall.
    assert_eq!(p.tx.stall(t(35)), Duration::ZERO);
    // The silence counts from the send that ended the idle spell, at 30 ms, less the
    // gap batched acks are allowed.
    let gap = (p.tx.srtt() / 4).max(MIN_ACK_GAP);
    assert_eq!(p.tx.stall(t(400)), t(370) - gap);
}
