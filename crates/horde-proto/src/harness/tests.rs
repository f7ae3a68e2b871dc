use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;

use super::*;
use crate::channel::ChannelConfig;
use crate::session::ChannelSpec;
use crate::stream::StreamConfig;

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

fn connect_to(net: &mut Harness, from: NodeId, to: NodeId, channels: u16) -> SessionHandle {
    let channels = (0..channels)
        .map(|i| ChannelSpec {
            local: i,
            remote: Harness::addr(to, i),
            config: ChannelConfig::default(),
        })
        .collect();
    net.connect(
        from,
        ConnectOptions {
            service: 7,
            channels,
            ..ConnectOptions::default()
        },
    )
    .unwrap()
}

fn server(net: &mut Harness, interfaces: u16) -> NodeId {
    let s = net.add_node(EndpointConfig::default(), interfaces);
    net.listen(s, 7, ServerConfig::uniform(ChannelConfig::default()));
    s
}

fn received(net: &Harness, node: NodeId, h: SessionHandle) -> Vec<u64> {
    net.events(node, h)
        .iter()
        .filter_map(|e| match e {
            Event::Received { stream_seq, .. } => Some(*stream_seq),
            _ => None,
        })
        .collect()
}

#[test]
fn two_clients_reach_one_server_and_each_stream_lands_in_its_own_session() {
    let mut net = Harness::new(1);
    let srv = server(&mut net, 1);
    let a = net.add_node(EndpointConfig::default(), 1);
    let b = net.add_node(EndpointConfig::default(), 1);
    net.set_default_path(PathConfig::delay(ms(5)));
    let ca = connect_to(&mut net, a, srv, 1);
    let cb = connect_to(&mut net, b, srv, 1);
    for (node, h, n) in [(a, ca, 3u8), (b, cb, 5)] {
        let s = net.session_mut(node, h);
        s.open_stream(1, StreamConfig::default()).unwrap();
        for i in 0..n {
            s.send_adu(ms(0), 1, Bytes::from(vec![i; 100]), Fields::new())
                .unwrap();
        }
    }
    assert!(net.run_until_quiet(ms(500)));
    let first = net.accept(srv).unwrap();
    let second = net.accept(srv).unwrap();
    assert_eq!(net.accept(srv), None);
    let mut counts = [
        received(&net, srv, first).len(),
        received(&net, srv, second).len(),
    ];
    counts.sort_unstable();
    assert_eq!(counts, [3, 5]);
    assert_eq!(net.endpoint(srv).stats().accepted, 2);
}

#[test]
fn the_drop_filter_sees_every_datagram_and_drops_what_it_picks() {
    let mut net = Harness::new(2);
    let srv = server(&mut net, 1);
    let cli = net.add_node(EndpointConfig::default(), 1);
    let c = connect_to(&mut net, cli, srv, 1);
    // Every hello (type 1) is dropped: the client never connects.
    net.set_drop_filter(|s| s.bytes[0] & 0x0f == 1);
    net.run_until(ms(2_000));
    assert!(!net.session(cli, c).is_connected());
    let stats = net.stats();
    assert!(stats.filtered >= 4, "{stats:?}");
    assert_eq!(stats.delivered, 0);
    assert!(net.handles(srv).is_empty());
}

#[test]
fn lossy_jittered_paths_lose_and_reorder() {
    let mut net = Harness::new(3);
    let srv = server(&mut net, 1);
    let cli = net.add_node(EndpointConfig::default(), 1);
    let c = connect_to(&mut net, cli, srv, 1);
    assert!(net.run_until_pred(ms(1_000), |n| n.session(cli, c).is_connected()));
    net.set_link(
        (cli, 0),
        (srv, 0),
        PathConfig {
            delay: ms(10),
            jitter: ms(20),
            loss: 0.2,
            rate_kbps: None,
        },
    );
    net.session_mut(cli, c)
        .open_stream(1, StreamConfig::default())
        .unwrap();
    for i in 0..200u64 {
        let t = ms(1_000 + i);
        net.run_until(t);
        net.session_mut(cli, c)
            .send_adu(t, 1, Bytes::from(vec![0; 200]), Fields::new())
            .unwrap();
    }
    net.run_until(ms(3_000));
    let s = net.accept(srv).unwrap();
    let got = received(&net, srv, s);
    assert!(net.stats().lost > 0);
    assert!(
        got.len() < 200 && got.len() > 100,
        "{} delivered",
        got.len()
    );
    assert!(
        got.windows(2).any(|w| w[1] < w[0]),
        "an unordered stream over a jittered path arrives out of order"
    );
}

#[test]
fn steps_count_the_instants_the_network_ran_at_and_nothing_else() {
    let mut net = Harness::new(1);
    net.set_default_path(PathConfig::delay(ms(10)));
    let client = net.add_node(EndpointConfig::default(), 1);
    let s = server(&mut net, 1);
    connect_to(&mut net, client, s, 1);
    assert_eq!(net.stats().steps, 0);
    net.run_until(ms(100));
    let after_handshake = net.stats().steps;
    // Hellos out, hello reply back, and whatever the session answered at each.
    assert!(after_handshake >= 2, "{after_handshake} steps");
    // Nothing due before the keepalive: running on to 200 ms takes no step.
    net.run_until(ms(200));
    assert_eq!(net.stats().steps, after_handshake);
}
