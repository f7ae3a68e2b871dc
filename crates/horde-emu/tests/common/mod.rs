//! Helpers shared by the integration tests: a constant-delay link and UDP endpoints.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use horde_emu::{ChannelSetup, IdealLink};
use horde_links::{Delivery, Link, LinkStats, Verdict};

/// Delivers every packet exactly `delay` after it was offered.
pub struct DelayLink {
    delay: Duration,
    queue: VecDeque<(u64, Duration, u32)>,
    stats: LinkStats,
}

impl DelayLink {
    pub fn new(delay: Duration) -> Self {
        Self {
            delay,
            queue: VecDeque::new(),
            stats: LinkStats::default(),
        }
    }
}

impl Link for DelayLink {
    fn enqueue(&mut self, now: Duration, id: u64, size: u32) -> Verdict {
        self.stats.offered += 1;
        self.queue.push_back((id, now + self.delay, size));
        Verdict::Queued
    }

    fn next_delivery(&self) -> Option<Duration> {
        self.queue.front().map(|q| q.1)
    }

    fn deliver(&mut self, now: Duration, out: &mut Vec<Delivery>) {
        while let Some(&(id, at, size)) = self.queue.front() {
            if at > now {
                break;
            }
            self.queue.pop_front();
            self.stats.delivered += 1;
            self.stats.bytes_delivered += u64::from(size);
            out.push(Delivery { id, at });
        }
    }

    fn stats(&self) -> LinkStats {
        self.stats
    }
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
