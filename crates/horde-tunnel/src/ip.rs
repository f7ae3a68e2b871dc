//! IPv4 and IPv6 headers, read just far enough to route a packet and find its TCP
//! header. Anything that is not a well-formed IP packet of exactly its stated length is
//! refused with the reason, so that the tunnel can count it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use thiserror::Error;

const IPV4_MIN_HEADER: usize = 20;
const IPV6_HEADER: usize = 40;
/// IPv6 extension headers walked to find TCP: hop-by-hop, routing, destination options.
const IPV6_SKIPPABLE: [u8; 3] = [0, 43, 60];
/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;

/// What was read from a packet's IP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpHeader {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// The transport protocol (after IPv6 extension headers).
    pub protocol: u8,
    /// Where the transport header starts, when the packet is the first (or only) piece
    /// of its datagram; `None` for later fragments and IPv6 packets whose extension
    /// headers were not walked (fragments, unknown kinds).
    pub transport_offset: Option<usize>,
}

impl IpHeader {
    /// Whether the packet is IPv6.
    pub fn is_v6(&self) -> bool {
        self.src.is_ipv6()
    }
}

/// Why a packet is not one the tunnel carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PacketError {
    #[error("empty packet")]
    /// A zero-length packet.
    Empty,
    #[error("IP version {0} (only 4 and 6 are carried)")]
    /// An IP version other than 4 or 6.
    Version(u8),
    #[error("{have} bytes, shorter than the {need}-byte header")]
    /// Shorter than its header.
    Truncated {
        /// Bytes the packet has.
        have: usize,
        /// Bytes the header needs.
        need: usize,
    },
    #[error("IPv4 header length {0} words is below 5")]
    /// An IPv4 header length field below the minimum of five words.
    HeaderLength(u8),
    #[error("the header says {stated} bytes, the packet has {actual}")]
    /// The header's total length disagrees with the packet's.
    Length {
        /// Length the header states.
        stated: usize,
        /// Length the packet has.
        actual: usize,
    },
    #[error("bad IPv4 header checksum")]
    /// An IPv4 header whose checksum does not match.
    Checksum,
}

/// Read the IP header of `packet`.
pub fn parse(packet: &[u8]) -> Result<IpHeader, PacketError> {
    let first = *packet.first().ok_or(PacketError::Empty)?;
    match first >> 4 {
        4 => parse_v4(packet),
        6 => parse_v6(packet),
        v => Err(PacketError::Version(v)),
    }
}

fn parse_v4(p: &[u8]) -> Result<IpHeader, PacketError> {
    if p.len() < IPV4_MIN_HEADER {
        return Err(PacketError::Truncated {
            have: p.len(),
            need: IPV4_MIN_HEADER,
        });
    }
    let ihl = p[0] & 0x0f;
    if ihl < 5 {
        return Err(PacketError::HeaderLength(ihl));
    }
    let header = usize::from(ihl) * 4;
    if p.len() < header {
        return Err(PacketError::Truncated {
            have: p.len(),
            need: header,
        });
    }
    let stated = usize::from(u16::from_be_bytes([p[2], p[3]]));
    if stated != p.len() {
        return Err(PacketError::Length {
            stated,
            actual: p.len(),
        });
    }
    if checksum(&p[..header]) != 0 {
        return Err(PacketError::Checksum);
    }
    let fragment_offset = u16::from_be_bytes([p[6], p[7]]) & 0x1fff;
    Ok(IpHeader {
        src: IpAddr::V4(Ipv4Addr::new(p[12], p[13], p[14], p[15])),
        dst: IpAddr::V4(Ipv4Addr::new(p[16], p[17], p[18], p[19])),
        protocol: p[9],
        transport_offset: (fragment_offset == 0).then_some(header),
    })
}

fn parse_v6(p: &[u8]) -> Result<IpHeader, PacketError> {
    if p.len() < IPV6_HEADER {
        return Err(PacketError::Truncated {
            have: p.len(),
            need: IPV6_HEADER,
        });
    }
    let stated = IPV6_HEADER + usize::from(u16::from_be_bytes([p[4], p[5]]));
    if stated != p.len() {
        return Err(PacketError::Length {
            stated,
            actual: p.len(),
        });
    }
    let addr = |at: usize| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&p[at..at + 16]);
        IpAddr::V6(Ipv6Addr::from(a))
    };
    let (mut next, mut at) = (p[6], IPV6_HEADER);
    // Walk the extension headers that may precede TCP in a SYN; stop at anything else.
    while IPV6_SKIPPABLE.contains(&next) {
        if p.len() < at + 8 {
            break;
        }
        let len = (usize::from(p[at + 1]) + 1) * 8;
        next = p[at];
        at += len;
    }
    let walked = !IPV6_SKIPPABLE.contains(&next) && at <= p.len();
    Ok(IpHeader {
        src: addr(8),
        dst: addr(24),
        protocol: next,
        transport_offset: walked.then_some(at),
    })
}

/// The Internet checksum (RFC 1071) of `data`: zero when `data` holds a correct one.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for pair in data.chunks(2) {
        let word = match pair {
            [a, b] => u16::from_be_bytes([*a, *b]),
            [a] => u16::from_be_bytes([*a, 0]),
            _ => 0,
        };
        sum += u32::from(word);
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An IPv4 TCP packet from `src` to `dst` with `tcp` as its transport bytes.
    pub fn v4(src: [u8; 4], dst: [u8; 4], tcp: &[u8]) -> Vec<u8> {
        let len = (20 + tcp.len()) as u16;
        let mut p = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, PROTO_TCP, 0, 0];
        p[2..4].copy_from_slice(&len.to_be_bytes());
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        let c = checksum(&p);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p.extend_from_slice(tcp);
        p
    }

    /// An IPv6 TCP packet with `tcp` as its transport bytes.
    pub fn v6(src: Ipv6Addr, dst: Ipv6Addr, tcp: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0];
        p.extend_from_slice(&(tcp.len() as u16).to_be_bytes());
        p.extend_from_slice(&[PROTO_TCP, 64]);
        p.extend_from_slice(&src.octets());
        p.extend_from_slice(&dst.octets());
        p.extend_from_slice(tcp);
        p
    }

    #[test]
    fn both_versions_are_read() {
        let p = v4([10, 0, 0, 2], [10, 0, 0, 1], &[0; 20]);
        let h = parse(&p).unwrap();
        assert_eq!(h.src, "10.0.0.2".parse::<IpAddr>().unwrap());
        assert_eq!(h.dst, "10.0.0.1".parse::<IpAddr>().unwrap());
        assert_eq!((h.protocol, h.transport_offset), (PROTO_TCP, Some(20)));
        let p = v6(
            "fd00::2".parse().unwrap(),
            "fd00::1".parse().unwrap(),
            &[0; 20],
        );
        let h = parse(&p).unwrap();
        assert!(h.is_v6());
        assert_eq!(h.dst, "fd00::1".parse::<IpAddr>().unwrap());
        assert_eq!(h.transport_offset, Some(40));
    }

    #[test]
    fn malformed_packets_are_named() {
        assert_eq!(parse(&[]), Err(PacketError::Empty));
        assert_eq!(parse(&[0x20; 40]), Err(PacketError::Version(2)));
        assert!(matches!(
            parse(&[0x45; 10]),
            Err(PacketError::Truncated { need: 20, .. })
        ));
        let mut p = v4([10, 0, 0, 2], [10, 0, 0, 1], &[0; 20]);
        p.push(0);
        assert_eq!(
            parse(&p),
            Err(PacketError::Length {
                stated: 40,
                actual: 41
            })
        );
        let mut p = v4([10, 0, 0, 2], [10, 0, 0, 1], &[0; 20]);
        p[15] ^= 1;
        assert_eq!(parse(&p), Err(PacketError::Checksum));
        let mut p = v4([10, 0, 0, 2], [10, 0, 0, 1], &[0; 20]);
        p[0] = 0x44;
        assert_eq!(parse(&p), Err(PacketError::HeaderLength(4)));
        let mut p = v6(
            "fd00::2".parse().unwrap(),
            "fd00::1".parse().unwrap(),
            &[0; 8],
        );
        p.truncate(44);
        assert!(matches!(parse(&p), Err(PacketError::Length { .. })));
    }

    #[test]
    fn a_later_fragment_has_no_transport_header() {
        let mut p = v4([10, 0, 0, 2], [10, 0, 0, 1], &[0; 20]);
        p[6] = 0;
        p[7] = 10; // offset 80 bytes
        p[10] = 0;
        p[11] = 0;
        let c = checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(parse(&p).unwrap().transport_offset, None);
    }

    proptest! {
        /// Arbitrary bytes never panic the reader, and what it accepts is consistent.
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(h) = parse(&bytes) {
                prop_assert!(h.transport_offset.is_none_or(|o| o <= bytes.len()));
            }
        }
    }
}
