//! Every channel keeps itself alive, not only the session as a whole: the stall the
//! tunnel's download test hit when one link died for good and the other had changed
//! address while the scheduler was not using it.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use horde_proto::harness::Harness;
use horde_proto::{
    ChannelConfig, ChannelId, ChannelSpec, ConnectOptions, EndpointConfig, Event, ServerConfig,
};

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
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
    let channels = (0..2)
        .map(|i| ChannelSpec {
            local: i,
            remote: Harness::addr(srv, i),
            config: ChannelConfig::default(),
        })
        .collect();
    let c = net
        .connect(
            cli,
            ConnectOptions {
                service: 7,
                channels,
                ..ConnectOptions::default()
            },
        )
        .unwrap();
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
