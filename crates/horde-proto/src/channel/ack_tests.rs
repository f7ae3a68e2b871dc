//! The sender's round trip and probe timeout when the receiver holds its acks.

use super::*;

fn addr() -> SocketAddr {
    "127.0.0.1:9".parse().unwrap()
}

fn config(acks: AckFrequency) -> ChannelConfig {
    ChannelConfig {
        congestion: CcConfig::Cbr {
            kbps: 1350.0,
            burst_ms: 10.0,
        },
        acks,
        // The secure layer's and UDP/IPv4's bytes per datagram, as on a real link.
        datagram_overhead: 57,
        ..ChannelConfig::default()
    }
}

/// A 1.35 Mbit/s download (a packet every 8 ms) over 20 ms each way, the receiver's
/// reverse path paced at 180 kbit/s, for two seconds, without loss; returns the sender
/// and how many acks the receiver sent. Asserts that no packet was declared lost and no
/// probe timeout fired: the held acks must not look like losses.
fn download(sender: AckFrequency, receiver: AckFrequency) -> (Channel, usize) {
    let id = ChannelId::new(0);
    let mut tx = Channel::new(id, 0, addr(), config(sender), Duration::ZERO);
    let mut rx_config = config(receiver);
    rx_config.congestion = CcConfig::Cbr {
        kbps: 180.0,
        burst_ms: 60.0,
    };
    let mut rx = Channel::new(id, 0, addr(), rx_config, Duration::ZERO);
    let one_way = Duration::from_millis(20);
    let mut to_rx: Vec<(Duration, u64)> = Vec::new();
    let mut to_tx: Vec<(Duration, Ack)> = Vec::new();
    let mut out = Vec::new();
    let mut acks = 0;
    for step in 0..2000u64 {
        let now = Duration::from_millis(step);
        if step % 8 == 0 {
            let seq = tx.on_send(now, 1200, &[]);
            to_rx.push((now + one_way, seq));
        }
        for &(_, seq) in to_rx.iter().filter(|(at, _)| *at == now) {
            rx.on_receive(now, seq, 0);
        }
        to_rx.retain(|(at, _)| *at > now);
        if let Some(ack) = rx.take_ack(now, 1) {
            rx.on_ack_sent(now, 35 + 16 * ack.ranges.len());
            to_tx.push((now + one_way, ack));
            acks += 1;
        }
        for (_, ack) in to_tx.iter().filter(|(at, _)| *at == now) {
            tx.on_ack(now, ack, &mut out);
        }
        to_tx.retain(|(at, _)| *at > now);
        let actions = tx.on_timeout(now, &mut out);
        assert!(!actions.probe, "probe at {now:?}");
    }
    let lost = out
        .iter()
        .filter(|r| matches!(r.resolution, Resolution::Lost(_)))
        .count();
    assert_eq!(lost, 0, "declared lost");
    (tx, acks)
}

#[test]
fn delayed_acks_halve_the_acks_and_leave_the_round_trip_true() {
    let (fixed, fixed_acks) = download(AckFrequency::Fixed, AckFrequency::Fixed);
    let (paced, paced_acks) = download(AckFrequency::ReversePath, AckFrequency::ReversePath);
    assert!(
        fixed_acks >= 245,
        "the fixed policy acks every packet: {fixed_acks}"
    );
    assert!(paced_acks <= 130, "{paced_acks} acks for 250 packets");
    let srtt = paced.srtt().as_secs_f64() * 1e3;
    assert!((40.0..41.5).contains(&srtt), "srtt {srtt} ms");
    let fixed_srtt = fixed.srtt().as_secs_f64() * 1e3;
    assert!(
        (40.0..41.5).contains(&fixed_srtt),
        "fixed srtt {fixed_srtt} ms"
    );
    // The probe timeout allows for the peer's longest hold.
    assert!(paced.pto() >= paced.srtt() + Duration::from_millis(25));
}

#[test]
fn sampling_every_packet_of_a_delayed_ack_inflates_the_round_trip() {
    // A sender that samples every packet (the fixed policy's reading) against a receiver
    // that holds its acks: the earlier packets of each ack carry its wait.
    let (tx, _) = download(AckFrequency::Fixed, AckFrequency::ReversePath);
    let srtt = tx.srtt().as_secs_f64() * 1e3;
    assert!(srtt > 42.0, "srtt {srtt} ms");
}
