//! Every channel keeps itself alive, not only the session as a whole: the stall the
//! tunnel's download test hit when one link died for good and the other had changed
//! address while the scheduler was not using it.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use horde_proto::harness::{Harness, NodeId};
use horde_proto::{
    ChannelConfig, ChannelId, ChannelSpec, ConnectOptions, EndpointConfig, Event, ServerConfig,
    SessionHandle,
};

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// Connects `cli` to service 7 on `srv` with one channel per interface, `channels` of
/// them.
fn connect(net: &mut Harness, cli: NodeId, srv: NodeId, channels: u16) -> SessionHandle {
    let channels = (0..channels)
        .map(|i| ChannelSpec {
            local: i,
            remote: Harness::addr(srv, i),
            config: ChannelConfig::default(),
        })
        .collect();
    net.connect(
        cli,
        ConnectOptions {
            service: 7,
            channels,
            ..ConnectOptions::default()
        },
    )
    .unwrap()
}

/// Two channels; from 2 s on, channel 0 loses everything both ways, so the client only
/// probes it. Channel 1 is never chosen by anything but keepalives (no data flows), as a
/// link the scheduler leaves idle. The client's datagrams on channel 1 must keep coming
/// at the keepalive interval, so that its peer would follow an address change and the
/// session does not idle out.
#[test]
fn an_unused_channel_is_kept_alive_while_another_channel_probes() {
    let mut net = Harness::new(3);
    let srv = net.add_node(EndpointConfig::default(), 2);
    net.listen(srv, 7, ServerConfig::uniform(ChannelConfig::default()));
    let cli = net.add_node(EndpointConfig::default(), 2);
    let c = connect(&mut net, cli, srv, 2);
    // When the client sent on channel 1 (on the wire: its second interface).
    let on_channel_1 = Rc::new(RefCell::new(Vec::new()));
    let seen = on_channel_1.clone();
    let (client_if0, client_if1) = (Harness::addr(cli, 0), Harness::addr(cli, 1));
    let server_if0 = Harness::addr(srv, 0);
    net.set_drop_filter(move |s| {
        if s.src == client_if1 {
            seen.borrow_mut().push(s.at);
        }
        let channel_0 = s.src == client_if0 || s.src == server_if0;
        channel_0 && s.at >= ms(2_000)
    });
    net.run_until(ms(1_000));
    assert!(net.session(cli, c).is_connected());
    net.run_until(ms(16_000));
    let session = net.session(cli, c);
    assert!(
        session.is_connected(),
        "the session idled out: {:?}",
        session.close_reason()
    );
    assert!(
        net.events(cli, c).iter().any(|e| *e
            == Event::ChannelDown {
                channel: ChannelId::new(0)
            }),
        "channel 0 was declared dead"
    );
    // From the moment channel 0 went dark, the longest the client left channel 1 silent.
    let times: Vec<Duration> = on_channel_1
        .borrow()
        .iter()
        .copied()
        .filter(|&t| t >= ms(2_000))
        .collect();
    let longest = times
        .windows(2)
        .map(|w| w[1] - w[0])
        .chain(times.first().map(|&t| t - ms(2_000)))
        .chain(times.last().map(|&t| ms(16_000) - t))
        .max()
        .unwrap_or(ms(14_000));
    eprintln!(
        "{} datagrams on channel 1 after 2 s; longest silence {longest:?}",
        times.len()
    );
    // Keepalive 1 s, plus the ack delay and a timer's rounding.
    assert!(longest <= ms(1_100), "channel 1 silent for {longest:?}");
}

/// What one end sent in the idle window, by packet type (the low nibble of a datagram's
/// first byte), per channel: `[initiator, responder]`.
type Counts = [std::collections::BTreeMap<(u16, u8), u32>; 2];

/// A client with three channels sends one ADU, then nothing. The server's keepalive is
/// 1 s and its idle timeout three of them; the client's keepalive is `client_keepalive_ms`
/// (0: off). Counts every datagram either end sends on each channel over `intervals`
/// whole seconds once the first rounds are over; also returns how many channel-seconds
/// that is.
fn idle_datagrams(client_keepalive_ms: f64, intervals: u64) -> (Counts, u64) {
    const CHANNELS: u16 = 3;
    let endpoint = |keepalive_ms| EndpointConfig {
        session: horde_proto::SessionConfig {
            keepalive_ms,
            idle_timeout_ms: 3_000.0,
            ..horde_proto::SessionConfig::default()
        },
        ..EndpointConfig::default()
    };
    let mut net = Harness::new(5);
    net.set_default_path(horde_proto::harness::PathConfig::delay(ms(10)));
    let srv = net.add_node(endpoint(1_000.0), CHANNELS);
    net.listen(srv, 7, ServerConfig::uniform(ChannelConfig::default()));
    let cli = net.add_node(endpoint(client_keepalive_ms), CHANNELS);
    let c = connect(&mut net, cli, srv, CHANNELS);
    let (start, end) = (ms(5_000), ms(5_000 + 1_000 * intervals));
    let counts: Rc<RefCell<Counts>> = Rc::default();
    let seen = counts.clone();
    net.set_drop_filter(move |s| {
        if s.at >= start && s.at < end {
            let end = usize::from(s.from != cli);
            let key = (s.src.port() % 100, s.bytes[0] & 0x0f);
            *seen.borrow_mut()[end].entry(key).or_default() += 1;
        }
        false
    });
    net.run_until(ms(500));
    let now = net.now();
    let session = net.session_mut(cli, c);
    session
        .open_stream(1, horde_proto::StreamConfig::default())
        .unwrap();
    session
        .send_adu(
            now,
            1,
            bytes::Bytes::from_static(b"one ADU"),
            horde_policy::Fields::new(),
        )
        .unwrap();
    net.run_until(end + ms(100));
    assert!(net.session(cli, c).is_connected(), "the session ended");
    let counts = counts.borrow().clone();
    (counts, intervals * u64::from(CHANNELS))
}

/// An idle channel costs one ping and its ack per keepalive interval: the initiator
/// pings, and the responder, whose ack of that ping is what it sends on the channel,
/// has no keepalive of its own to send.
#[test]
fn an_idle_channel_costs_one_ping_and_one_ack_per_interval() {
    let (counts, channel_intervals) = idle_datagrams(1_000.0, 10);
    let total: u32 = counts.iter().flat_map(|c| c.values()).sum();
    eprintln!(
        "initiator sent {:?}, responder sent {:?}: {total} datagrams over {channel_intervals} \
         channel intervals (types: 3 data, 4 ack, 5 ping, 9 window)",
        counts[0], counts[1]
    );
    // Two per channel and interval, and a channel's phase may put one more round of
    // each in the window.
    assert!(
        u64::from(total) <= 2 * channel_intervals + 6,
        "{total} datagrams over {channel_intervals} idle channel intervals"
    );
}

/// A client that sends no keepalives still keeps its session: the server, waiting twice
/// its interval when it is not pinged, pings each channel itself (before its idle timeout
/// of three intervals), and the client's acks keep the server's idle timer going.
#[test]
fn the_responder_pings_an_initiator_that_does_not() {
    let (counts, channel_intervals) = idle_datagrams(0.0, 10);
    eprintln!(
        "initiator sent {:?}, responder sent {:?}",
        counts[0], counts[1]
    );
    let pings = |end: usize| -> u32 {
        counts[end]
            .iter()
            .filter(|((_, kind), _)| *kind == 5)
            .map(|(_, n)| n)
            .sum()
    };
    assert_eq!(pings(0), 0, "the client's keepalive is off");
    // One ping per channel every two intervals.
    let expected = channel_intervals / 2;
    assert!(
        (expected - 3..=expected + 3).contains(&u64::from(pings(1))),
        "the server sent {} pings over {channel_intervals} channel intervals",
        pings(1)
    );
}
