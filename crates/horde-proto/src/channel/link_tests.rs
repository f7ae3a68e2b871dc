//! A channel against a link that counts every byte it carries: the pacing holds to its
//! share of the link with small datagrams and acks, and a standing queue never passes
//! for the path's base round trip.

use std::collections::VecDeque;

use super::*;

fn addr() -> SocketAddr {
    "127.0.0.1:9".parse().unwrap()
}

fn t(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn cbr(kbps: f64, burst_ms: f64, overhead: u32) -> ChannelConfig {
    ChannelConfig {
        congestion: CcConfig::Cbr { kbps, burst_ms },
        datagram_overhead: overhead,
        pace_acks: true,
        ..ChannelConfig::default()
    }
}

/// Secure layer (29 bytes) plus UDP and IPv4 headers (28): the tunnel's overhead.
const OVERHEAD: u32 = 57;

#[test]
fn pacing_holds_to_the_rate_in_link_bytes_with_small_datagrams_and_acks() {
    // 200 kbit/s: 25,000 bytes/s on the link. 150-byte datagrams sent whenever a slot
    // opens, and a 40-byte ack every 10 ms, as on a tunnel's up link under load.
    let rate = 25_000.0;
    let mut ch = Channel::new(
        ChannelId::new(0),
        0,
        addr(),
        cbr(rate * 8.0 / 1e3, 100.0, OVERHEAD),
        t(0),
    );
    let mut wire = 0u64;
    let secs = 10;
    for ms in 0..secs * 1000 {
        let now = t(ms);
        if ms.is_multiple_of(10) {
            ch.on_ack_sent(now, 40);
            wire += 40 + u64::from(OVERHEAD);
        }
        while ch.real_slot_count(now) > 0 {
            ch.on_send(now, 150, &[]);
            wire += 150 + u64::from(OVERHEAD);
        }
    }
    let sent_rate = wire as f64 / secs as f64;
    // The bucket's banked depth (100 ms) and one slot are all it may exceed the rate by.
    let slack = rate * 0.1 + 1600.0;
    assert!(
        sent_rate <= rate + slack / secs as f64,
        "the link was offered {sent_rate:.0} bytes/s for a pacing rate of {rate:.0}"
    );
    assert!(
        sent_rate >= rate * 0.9,
        "{sent_rate:.0} bytes/s: the pacing starved"
    );
}

/// A drop-tail FIFO link: `rate` bytes/s, `buffer` bytes of queue, `one_way` of
/// propagation; acks return after another `one_way`, at once on arrival.
struct Link {
    rate: f64,
    buffer: f64,
    one_way: Duration,
    /// (sequence number, size, when it leaves the queue).
    queue: VecDeque<(u64, u32, Duration)>,
    busy_until: Duration,
    /// (when the ack reaches the sender, sequence number).
    acks: VecDeque<(Duration, u64)>,
}

impl Link {
    fn new(rate: f64, buffer: f64, one_way: Duration) -> Self {
        Self {
            rate,
            buffer,
            one_way,
            queue: VecDeque::new(),
            busy_until: Duration::ZERO,
            acks: VecDeque::new(),
        }
    }

    fn queued_bytes(&self, now: Duration) -> f64 {
        self.queue
            .iter()
            .filter(|p| p.2 > now)
            .map(|p| f64::from(p.1))
            .sum()
    }

    fn send(&mut self, now: Duration, seq: u64, size: u32) {
        if self.queued_bytes(now) + f64::from(size) > self.buffer {
            return; // tail drop
        }
        let start = self.busy_until.max(now);
        let leaves = start + Duration::from_secs_f64(f64::from(size) / self.rate);
        self.busy_until = leaves;
        self.queue.push_back((seq, size, leaves));
    }

    /// Move what has left the queue on to the receiver and ack it back.
    fn run(&mut self, now: Duration, rx: &mut Channel, tx: &mut Channel, out: &mut Vec<Resolved>) {
        while self
            .queue
            .front()
            .is_some_and(|p| p.2 + self.one_way <= now)
        {
            let (seq, _, left) = self.queue.pop_front().expect("front");
            self.acks.push_back((left + self.one_way * 2, seq));
        }
        while self.acks.front().is_some_and(|a| a.0 <= now) {
            let (at, seq) = self.acks.pop_front().expect("front");
            rx.on_receive(at, seq, 0);
            if let Some(ack) = rx.take_ack(at + Duration::from_millis(1), 1) {
                tx.on_ack(at, &ack, out);
            }
        }
        tx.detect_losses(now, out);
    }
}

#[test]
fn a_standing_queue_never_passes_for_the_base_round_trip() {
    // A sender paced above its link (30,000 against 25,000 bytes/s, as the tunnel's
    // pacing was when it counted neither the datagrams' overhead nor its acks) keeps a
    // queue of over a second standing in front of a 40 ms path from 8 s to 40 s: longer
    // than the 10-20 s
    // that the windowed minimum RTT remembers.
    let config = cbr(240.0, 50.0, 0);
    let mut tx = Channel::new(ChannelId::new(0), 0, addr(), config.clone(), t(0));
    let mut rx = Channel::new(ChannelId::new(0), 0, addr(), config, t(0));
    let mut link = Link::new(25_000.0, 40_000.0, t(20));
    let mut out = Vec::new();
    let mut checked = 0;
    for ms in 0..40_000 {
        let now = t(ms);
        link.run(now, &mut rx, &mut tx, &mut out);
        while tx.real_slot_count(now) > 0 {
            let seq = tx.on_send(now, 500, &[]);
            link.send(now, seq, 500);
        }
        if ms >= 8_000 && ms.is_multiple_of(10) {
            assert!(
                tx.rtt.latest_ms() > 1_000.0,
                "at {ms} ms the queue was expected to stand: latest RTT {} ms",
                tx.rtt.latest_ms()
            );
            assert!(
                !tx.looks_queue_free(),
                "at {ms} ms a {:.0} ms round trip looked queue-free (base {:?}, windowed minimum {:?})",
                tx.rtt.latest_ms(),
                tx.base_rtt_ms(),
                tx.rtt.min_ms()
            );
            assert_eq!(tx.spare_bytes(now), 0, "spare bytes at {ms} ms");
            checked += 1;
        }
    }
    assert!(checked > 3_000, "{checked}");
    // The windowed minimum did age out, as the test means it to.
    assert!(tx.rtt.min_ms().unwrap() > 500.0, "{:?}", tx.rtt.min_ms());

    // The sender stops; once the queue has drained, one packet into the empty path
    // measures the base again and the channel offers spare capacity.
    let mut now = t(40_000);
    while now < t(45_000) {
        link.run(now, &mut rx, &mut tx, &mut out);
        now += t(1);
    }
    let seq = tx.on_send(now, 500, &[]);
    link.send(now, seq, 500);
    while now < t(46_000) {
        link.run(now, &mut rx, &mut tx, &mut out);
        now += t(1);
    }
    // 40 ms of path and 20 ms to send 500 bytes at 25,000 bytes/s.
    assert!(tx.base_rtt_ms().unwrap() < 70.0, "{:?}", tx.base_rtt_ms());
    assert!(tx.looks_queue_free());
    assert!(tx.spare_bytes(now) > 0);

    // The path's base delay really grows (200 ms round trip): light traffic, each
    // packet into an empty path, and the base follows within the filter's window.
    link.one_way = t(100);
    while now < t(80_000) {
        if now.as_millis().is_multiple_of(500) {
            let seq = tx.on_send(now, 500, &[]);
            link.send(now, seq, 500);
        }
        link.run(now, &mut rx, &mut tx, &mut out);
        now += t(1);
    }
    let base = tx.base_rtt_ms().unwrap();
    assert!((200.0..260.0).contains(&base), "base {base} ms");
    assert!(tx.looks_queue_free());
}

/// What the message layer is told of `ch`: its rate, half its round trip, and its
/// start-up while that counts.
fn message_estimate(ch: &Channel) -> crate::message::ChannelEstimate {
    crate::message::ChannelEstimate {
        rate: ch.rate(),
        delay: ch.srtt() / 2,
        startup: ch.startup(),
    }
}

/// A packet's ADUs when it carries one: the start-up counts only round trips of data.
fn one_adu(adu: u64) -> [SentAdu; 1] {
    [SentAdu {
        adu,
        stream: 1,
        stream_seq: adu,
        inserted: Duration::ZERO,
        history: None,
        payload: 1_000,
    }]
}

/// The number the channel's next packet will carry, as an ADU number that never repeats.
fn seq_no(ch: &Channel) -> u64 {
    ch.stats.packets_sent
}

#[test]
fn an_application_limited_channel_long_after_its_start_is_not_judged_on_a_doubling() {
    use crate::message::{MessageConfig, MessageError, MessageScheduler, MessageSpec, Refusal};

    // A cubic channel over 100 000 B/s and a 100 ms round trip, offered a steady
    // 30 000 B/s (one 1200-byte packet every 40 ms): no loss and no queue, so its
    // controller never leaves slow start. At 3 s the link's rate halves; the offer still
    // fits.
    let config = ChannelConfig::default();
    let mut tx = Channel::new(ChannelId::new(0), 0, addr(), config.clone(), t(0));
    let mut rx = Channel::new(ChannelId::new(0), 0, addr(), config, t(0));
    let mut link = Link::new(100_000.0, 40_000.0, t(50));
    let mut out = Vec::new();
    let mut backlog = 0u32;
    for ms in 0..4_000 {
        let now = t(ms);
        if ms == 3_000 {
            link.rate = 50_000.0;
        }
        if ms.is_multiple_of(40) {
            backlog += 1;
        }
        link.run(now, &mut rx, &mut tx, &mut out);
        while backlog > 0 && tx.real_slot_count(now) > 0 {
            let seq = tx.on_send(now, 1200, &one_adu(seq_no(&tx)));
            link.send(now, seq, 1200);
            backlog -= 1;
        }
        if backlog == 0 && tx.real_slot_count(now) > 0 {
            tx.mark_app_limited();
        }
    }
    assert!(
        tx.congestion_control().in_startup(),
        "the controller left its start-up; the case needs one that did not"
    );

    // 400 kB due in 2 s: the halved path carries 100 kB by then, the controller's rate
    // held flat (its window over the round trip) under 300 kB, a doubling any amount.
    let estimate = message_estimate(&tx);
    let mut sender = MessageScheduler::new(MessageConfig::default()).unwrap();
    let now = t(4_000);
    sender.set_channels(now, &[estimate]).unwrap();
    let spec = MessageSpec::new(0, 400_000).with_deadline(now + t(2_000));
    let refused = sender.submit(now, spec);
    assert!(
        matches!(
            refused,
            Err(MessageError::Refused(Refusal::Unreachable { .. }))
        ),
        "admitted on {estimate:?}: {refused:?}"
    );
    assert_eq!(tx.startup(), None, "judged on a doubling 40 round trips in");
}

#[test]
fn a_first_burst_counts_its_start_up_doubling_until_the_path_is_met() {
    // The same path, and a first message far larger than the start window: while the
    // window is filled the start-up counts, with fewer rounds left as they pass; once
    // the controller meets the path it is over.
    let config = ChannelConfig::default();
    let mut tx = Channel::new(ChannelId::new(0), 0, addr(), config.clone(), t(0));
    let mut rx = Channel::new(ChannelId::new(0), 0, addr(), config, t(0));
    let mut link = Link::new(100_000.0, 20_000.0, t(50));
    let mut out = Vec::new();
    let first = tx.startup().expect("a new channel counts its start-up");
    assert_eq!(first.rounds_left, STARTUP_ROUNDS);
    let mut seen_fewer = false;
    let mut over_at = None;
    for ms in 0..5_000 {
        let now = t(ms);
        link.run(now, &mut rx, &mut tx, &mut out);
        while tx.real_slot_count(now) > 0 {
            let seq = tx.on_send(now, 1200, &one_adu(seq_no(&tx)));
            link.send(now, seq, 1200);
        }
        match tx.startup() {
            Some(s) => seen_fewer |= s.rounds_left < STARTUP_ROUNDS,
            None => {
                over_at.get_or_insert(ms);
            }
        }
    }
    assert!(seen_fewer, "the rounds left never went down");
    let over_at = over_at.expect("the start-up never ended");
    // Ten packets to a 10 kB path plus 20 kB of queue: a few round trips of 100 ms.
    assert!((200..=1_500).contains(&over_at), "over at {over_at} ms");
}

#[test]
fn keepalives_on_an_idle_channel_leave_its_start_up_whole() {
    // A channel that carries nothing but a keepalive ping a second for 30 s: thirty
    // acked round trips, none of them the application's. A large first message after
    // the idle spell is still judged on the start-up's full doubling.
    let config = ChannelConfig::default();
    let mut tx = Channel::new(ChannelId::new(0), 0, addr(), config.clone(), t(0));
    let mut rx = Channel::new(ChannelId::new(0), 0, addr(), config, t(0));
    let mut link = Link::new(100_000.0, 40_000.0, t(50));
    let mut out = Vec::new();
    for ms in 0..30_000 {
        let now = t(ms);
        link.run(now, &mut rx, &mut tx, &mut out);
        if ms.is_multiple_of(1_000) {
            tx.mark_app_limited();
            let seq = tx.on_send(now, 40, &[]);
            link.send(now, seq, 40);
        }
    }
    assert!(tx.stats.acked >= 29, "the pings were not acked");
    let startup = tx.startup().expect("keepalives used up the start-up");
    assert_eq!(startup.rounds_left, STARTUP_ROUNDS);
}
