//! The tunnel carrier end to end: a smoltcp TCP download through two Horde hosts over
//! two lossy simulated links arrives byte for byte, and the hosts' touched walk misses
//! nothing.

use std::time::Duration;

use horde_links::{DelaySpec, LinkSpec, LossSpec, RateSpec};
use horde_policy::registry::scheduler;
use horde_proto::{
    CcConfig, ChannelConfig, RecoveryConfig, RecoveryMode, SessionConfig, StreamConfig,
};
use horde_sim::flows::host::{SimHost, CLIENT_ADDR, SERVER_ADDR};
use horde_sim::flows::tunnel::{TunnelCarrier, TunnelLink, TunnelSetup, TunnelStats};
use horde_sim::flows::{Carrier, Side};
use smoltcp::socket::tcp;
use smoltcp::wire::IpAddress;

fn link(kbps: f64, ms: f64, loss: LossSpec) -> LinkSpec {
    LinkSpec {
        rate: Some(RateSpec::Constant { kbps }),
        buffer_bytes: Some(200_000),
        loss: Some(loss),
        delay: Some(DelaySpec::Constant { ms }),
        qdisc: None,
    }
}

fn channel(kbps: f64) -> ChannelConfig {
    ChannelConfig {
        mtu: horde_sim::flows::tunnel_scenario::TUNNEL_MTU,
        congestion: CcConfig::Cbr {
            kbps,
            burst_ms: 10.0,
        },
        ..ChannelConfig::default()
    }
}

fn two_lossy_links() -> Vec<TunnelLink> {
    let bursty = LossSpec::GilbertElliott {
        p_good_to_bad: 0.01,
        p_bad_to_good: 0.3,
        loss_in_good: 0.0,
        loss_in_bad: 0.8,
    };
    vec![
        TunnelLink {
            name: "fast-lossy".into(),
            up: link(1000.0, 20.0, bursty.clone()),
            down: link(3000.0, 20.0, bursty),
            up_channel: channel(1000.0),
            down_channel: channel(3000.0),
        },
        TunnelLink {
            name: "slow".into(),
            up: link(500.0, 60.0, LossSpec::Bernoulli { p: 0.03 }),
            down: link(1500.0, 60.0, LossSpec::Bernoulli { p: 0.03 }),
            up_channel: channel(500.0),
            down_channel: channel(1500.0),
        },
    ]
}

/// Deterministic, non-repeating content (xorshift), so that a lost, duplicated or
/// reordered segment would show.
fn content(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn socket() -> tcp::Socket<'static> {
    let buf = || tcp::SocketBuffer::new(vec![0; 256 * 1024]);
    tcp::Socket::new(buf(), buf())
}

/// How a download through the carrier went.
#[derive(Debug, PartialEq)]
struct Download {
    received: Vec<u8>,
    done_at: Duration,
    stats: TunnelStats,
}

/// `file` downloaded over TCP through the carrier on [`two_lossy_links`], its stream
/// recovering losses by `mode`; with `walk_all` each end visits every connection at
/// every step instead of only those touched or due.
fn download(file: &[u8], mode: RecoveryMode, walk_all: bool) -> Download {
    const PORT: u16 = 80;
    let mut carrier = TunnelCarrier::new(TunnelSetup {
        links: two_lossy_links(),
        session: SessionConfig::default(),
        stream: StreamConfig {
            ordered: true,
            max_queue_bytes: 1 << 20,
            recovery: RecoveryConfig {
                mode,
                ..RecoveryConfig::default()
            },
            ..StreamConfig::default()
        },
        scheduler: scheduler("rrr", None).unwrap(),
        seed: 7,
        base_dir: ".".into(),
    })
    .unwrap();
    carrier.set_walk_all(walk_all);
    let mut client = SimHost::new(CLIENT_ADDR, 1);
    let mut server = SimHost::new(SERVER_ADDR, 2);
    let mut listener = socket();
    listener.listen(PORT).unwrap();
    let sh = server.add(listener);
    let mut opener = socket();
    opener
        .connect(
            client.iface.context(),
            (IpAddress::Ipv4(SERVER_ADDR), PORT),
            40_000,
        )
        .unwrap();
    let ch = client.add(opener);

    let mut now = Duration::ZERO;
    let mut written = 0;
    let mut received = Vec::new();
    let mut inbox = Vec::new();
    let end = Duration::from_secs(60);
    while now < end {
        let next = [
            carrier.next_delivery(),
            client.poll_at(now),
            server.poll_at(now),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(end);
        now = next.max(now + Duration::from_micros(1));
        carrier.deliver(now, &mut inbox);
        for (to, p) in inbox.drain(..) {
            match to {
                Side::Client => client.device.rx.push_back(p),
                Side::Server => server.device.rx.push_back(p),
            }
        }
        client.poll(now);
        server.poll(now);
        let s = server.tcp(sh);
        while written < file.len() && s.can_send() {
            written += s.send_slice(&file[written..]).unwrap();
        }
        if written == file.len() && s.send_queue() == 0 && s.state() == tcp::State::Established {
            s.close();
        }
        let c = client.tcp(ch);
        while c.can_recv() {
            c.recv(|b| {
                received.extend_from_slice(b);
                (b.len(), ())
            })
            .unwrap();
        }
        if received.len() == file.len() {
            break;
        }
        client.poll(now);
        server.poll(now);
        for p in client.device.tx.drain(..) {
            carrier.send(now, Side::Client, p);
        }
        for p in server.device.tx.drain(..) {
            carrier.send(now, Side::Server, p);
        }
    }
    Download {
        received,
        done_at: now,
        stats: carrier.tunnel_stats(),
    }
}

#[test]
fn a_tcp_download_crosses_two_lossy_links_intact() {
    let file = content(400_000);
    let d = download(&file, RecoveryMode::None, false);
    assert_eq!(
        d.received.len(),
        file.len(),
        "download incomplete at {:?}",
        d.done_at
    );
    assert_eq!(fnv1a(&d.received), fnv1a(&file));
    assert!(d.received == file);
    // Both links carried the download and both lost some of it on the way.
    for (name, _, down) in &d.stats.links {
        assert!(down.delivered > 20, "{name} carried {down:?}");
        assert!(down.lost > 0, "{name} lost nothing: {down:?}");
    }
    assert!(d.stats.down.packets_out > 250);
}

/// The hosts visit only the connections something touched or whose deadline passed; a
/// run that visits every connection at every step must come out the same, datagram for
/// datagram, with every kind of loss recovery (each wakes its session its own way).
#[test]
fn walking_every_connection_at_every_step_changes_no_download() {
    let file = content(150_000);
    let modes = [
        RecoveryMode::None,
        RecoveryMode::Oec,
        RecoveryMode::Fec { percent: 10.0 },
        RecoveryMode::Retransmit,
        RecoveryMode::Block { data: 8 },
    ];
    for mode in modes {
        let touched = download(&file, mode, false);
        assert!(touched.received == file, "{mode:?}: download incomplete");
        let all = download(&file, mode, true);
        assert!(
            all == touched,
            "{mode:?}: walking every connection: done at {:?}, {:?}; touched only: done at {:?}, {:?}",
            all.done_at,
            all.stats,
            touched.done_at,
            touched.stats
        );
    }
}
