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

    /// The 5-tuple of an IPv4 or IPv6 packet, `None` if `packet` is not one. Ports are read
    /// for TCP and UDP when the transport header is there (not in a later fragment; IPv6
    /// extension headers are not walked, so such a packet is its host pair and next
    /// header).
    pub fn from_ip(packet: &[u8]) -> Option<FlowKey> {
        let (src, dst, protocol, transport) = match packet.first()? >> 4 {
            4 if packet.len() >= 20 => {
                let ihl = usize::from(packet[0] & 0x0f) * 4;
                let later_fragment = u16::from_be_bytes([packet[6], packet[7]]) & 0x1fff != 0;
                let four = |at: usize| -> [u8; 4] { packet[at..at + 4].try_into().unwrap() };
                (
                    IpAddr::from(four(12)),
                    IpAddr::from(four(16)),
                    packet[9],
                    (ihl >= 20 && !later_fragment).then_some(ihl),
                )
            }
            6 if packet.len() >= 40 => {
                let sixteen = |at: usize| -> [u8; 16] { packet[at..at + 16].try_into().unwrap() };
                (
                    IpAddr::from(sixteen(8)),
                    IpAddr::from(sixteen(24)),
                    packet[6],
                    Some(40),
                )
            }
            _ => return None,
        };
        let ports = transport
            .filter(|_| protocol == PROTO_TCP || protocol == PROTO_UDP)
            .and_then(|at| packet.get(at..at + 4))
            .map(|p| {
                (
                    u16::from_be_bytes([p[0], p[1]]),
                    u16::from_be_bytes([p[2], p[3]]),
                )
            });
        let (src_port, dst_port) = ports.unwrap_or((0, 0));
        Some(FlowKey {
            src,
            dst,
            src_port,
            dst_port,
            protocol,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(protocol: u8, fragment_offset: u16) -> Vec<u8> {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[6..8].copy_from_slice(&fragment_offset.to_be_bytes());
        p[9] = protocol;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p[20..22].copy_from_slice(&4000u16.to_be_bytes());
        p[22..24].copy_from_slice(&443u16.to_be_bytes());
        p
    }

    #[test]
    fn ip_packets_give_their_five_tuple() {
        assert_eq!(
            FlowKey::from_ip(&v4(PROTO_TCP, 0)),
            Some(FlowKey::tcp([10, 0, 0, 1], 4000, [10, 0, 0, 2], 443))
        );
        // A later fragment and ICMP have no ports.
        let frag = FlowKey::from_ip(&v4(PROTO_UDP, 3)).unwrap();
        assert_eq!((frag.src_port, frag.dst_port), (0, 0));
        assert_eq!(FlowKey::from_ip(&v4(1, 0)).unwrap().src_port, 0);
        let mut six = vec![0u8; 48];
        six[0] = 0x60;
        six[6] = PROTO_UDP;
        six[23] = 1;
        six[39] = 2;
        six[40..42].copy_from_slice(&53u16.to_be_bytes());
        let k = FlowKey::from_ip(&six).unwrap();
        assert_eq!(
            (k.src, k.src_port, k.protocol),
            ("::1".parse().unwrap(), 53, PROTO_UDP)
        );
        for not_ip in [
            &[][..],
            &[0x45; 10][..],
            &[0x30; 40][..],
            &[3u8, 1, 2, 3][..],
        ] {
            assert_eq!(FlowKey::from_ip(not_ip), None);
        }
    }
}
