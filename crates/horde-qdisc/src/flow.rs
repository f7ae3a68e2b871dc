//! What a queued packet carries: its flow's 5-tuple, its length and its arrival time.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

/// A flow's 5-tuple. Ports are 0 for protocols without them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// IP protocol number ([`PROTO_TCP`], [`PROTO_UDP`], ...).
    pub protocol: u8,
}

impl FlowKey {
    /// A UDP flow between two IPv4 hosts.
    pub fn udp(src: [u8; 4], src_port: u16, dst: [u8; 4], dst_port: u16) -> FlowKey {
        FlowKey::v4(src, src_port, dst, dst_port, PROTO_UDP)
    }

    /// A TCP flow between two IPv4 hosts.
    pub fn tcp(src: [u8; 4], src_port: u16, dst: [u8; 4], dst_port: u16) -> FlowKey {
        FlowKey::v4(src, src_port, dst, dst_port, PROTO_TCP)
    }

    fn v4(src: [u8; 4], src_port: u16, dst: [u8; 4], dst_port: u16, protocol: u8) -> FlowKey {
        FlowKey {
            src: IpAddr::V4(Ipv4Addr::from(src)),
            dst: IpAddr::V4(Ipv4Addr::from(dst)),
            src_port,
            dst_port,
            protocol,
        }
    }

    /// The same flow with both ports cleared: a host pair and protocol.
    pub fn host_pair(&self) -> FlowKey {
        FlowKey {
            src_port: 0,
            dst_port: 0,
            ..*self
        }
    }
}

/// A packet waiting in a queue. `payload` is whatever the caller needs back (an id, the
/// bytes themselves); the disciplines never look at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T> {
    /// The flow it belongs to.
    pub flow: FlowKey,
    /// Its size in bytes, as it occupies the buffer and the link.
    pub len: u32,
    /// When it was enqueued.
    pub arrival: Duration,
    /// The caller's handle.
    pub payload: T,
}

impl<T> Packet<T> {
    /// A packet of `flow`, `len` bytes, arriving at `arrival`.
    pub fn new(flow: FlowKey, len: u32, arrival: Duration, payload: T) -> Packet<T> {
        Packet {
            flow,
            len,
            arrival,
            payload,
        }
    }
}
