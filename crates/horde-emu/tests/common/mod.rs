//! Helpers shared by the integration tests: a constant-delay link and UDP endpoints.

#![allow(dead_code)]

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::time::Duration;

use horde_emu::{ChannelSetup, IdealLink};
use horde_links::{Link, LinkSpec};

/// A link built from TOML `LinkSpec` text, e.g. `delay = { model = "constant", ms = 20 }`.
pub fn link(spec: &str, seed: u64) -> Box<dyn Link> {
    let spec: LinkSpec = toml::from_str(spec).unwrap();
    spec.build(seed, Path::new(".")).unwrap()
}

/// A UDP socket on loopback with a read timeout.
pub fn udp() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    s
}

/// A channel with the given links, listening on an ephemeral loopback port.
pub fn channel(
    name: &str,
    forward_to: SocketAddr,
    up: Box<dyn Link>,
    down: Box<dyn Link>,
) -> ChannelSetup {
    ChannelSetup {
        name: name.to_string(),
        listen: "127.0.0.1:0".parse().unwrap(),
        forward_to,
        up,
        down,
        schedule: Vec::new(),
    }
}

pub fn ideal() -> Box<dyn Link> {
    Box::new(IdealLink::new())
}

/// Receive one datagram or `None` on timeout.
pub fn recv(s: &UdpSocket) -> Option<(Vec<u8>, SocketAddr)> {
    let mut buf = [0u8; 2048];
    s.recv_from(&mut buf)
        .ok()
        .map(|(n, a)| (buf[..n].to_vec(), a))
}

/// Receive until a timeout of `quiet` passes with nothing.
pub fn drain(s: &UdpSocket, quiet: Duration) -> Vec<Vec<u8>> {
    s.set_read_timeout(Some(quiet)).unwrap();
    let mut got = Vec::new();
    while let Some((p, _)) = recv(s) {
        got.push(p);
    }
    got
}
