//! TUN offloads, without sockets or devices. With `IFF_VNET_HDR` every packet on the TUN
//! device carries a 10-byte `virtio_net_hdr` in front, and with `TUNSETOFFLOAD` the
//! kernel may hand over a TCP "super packet" of up to 64 KB (one segmentation for many
//! segments, instead of one per segment) whose checksum it left to us. The tunnel's
//! ADUs stay single, checksummed IP packets, so a peer without offloads interoperates:
//! [`split`] turns what was read into such packets, and [`HEADER_NONE`] is the header
//! written in front of a packet that needs nothing done.

use thiserror::Error;

use crate::ip::PROTO_TCP;

/// `sizeof(struct virtio_net_hdr)`, set with `TUNSETVNETHDRSZ`.
pub const VNET_HDR_LEN: usize = 10;
/// The header of a whole, checksummed packet: no segmentation, no checksum to complete.
pub const HEADER_NONE: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];

const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_ECN: u8 = 0x80;

const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

/// Why a packet read with a `virtio_net_hdr` could not be turned into IP packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum OffloadError {
    #[error("{0} bytes, shorter than the 10-byte virtio_net_hdr")]
    Short(usize),
    #[error("unknown gso_type {0}")]
    GsoType(u8),
    #[error("gso_size 0")]
    GsoSize,
    #[error("checksum start {start} and offset {offset} outside the {len}-byte packet")]
    Checksum {
        start: usize,
        offset: usize,
        len: usize,
    },
    #[error("a TCP segmentation request on a packet that is not {0} TCP")]
    NotTcp(&'static str),
}

/// The fields of a `virtio_net_hdr` (legacy layout, native byte order, as TUN uses it
/// unless told otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct VnetHdr {
    flags: u8,
    gso_type: u8,
    gso_size: u16,
    csum_start: u16,
    csum_offset: u16,
}

impl VnetHdr {
    fn read(b: &[u8]) -> VnetHdr {
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            // b[2..4] is hdr_len, a hint: the headers are read from the packet itself.
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        }
    }
}

/// Turn one read from a TUN device with offloads (`virtio_net_hdr` then the packet) into
/// whole IP packets with correct checksums, handing each to `each`: the packet itself
/// when it needs nothing, with its checksum completed when the kernel left it partial,
/// or the TCP segments of a super packet, each at most `gso_size` bytes of payload.
/// `scratch` is reused for the segments. Returns how many packets were handed over.
pub fn split(
    read: &mut [u8],
    scratch: &mut Vec<u8>,
    mut each: impl FnMut(&mut [u8]),
) -> Result<usize, OffloadError> {
    if read.len() < VNET_HDR_LEN {
        return Err(OffloadError::Short(read.len()));
    }
    let (hdr, packet) = read.split_at_mut(VNET_HDR_LEN);
    let hdr = VnetHdr::read(hdr);
    match hdr.gso_type & !GSO_ECN {
        GSO_NONE => {
            if hdr.flags & F_NEEDS_CSUM != 0 {
                complete_checksum(
                    packet,
                    usize::from(hdr.csum_start),
                    usize::from(hdr.csum_offset),
                )?;
            }
            each(packet);
            Ok(1)
        }
        GSO_TCPV4 => segment_tcp(packet, false, &hdr, scratch, each),
        GSO_TCPV6 => segment_tcp(packet, true, &hdr, scratch, each),
        other => Err(OffloadError::GsoType(other)),
    }
}

/// Write the Internet checksum of `packet[start..]` at `start + offset`, where the kernel
/// left the sum of the pseudo-header (`CHECKSUM_PARTIAL`).
fn complete_checksum(packet: &mut [u8], start: usize, offset: usize) -> Result<(), OffloadError> {
    if start > packet.len() || start + offset + 2 > packet.len() {
        return Err(OffloadError::Checksum {
            start,
            offset,
            len: packet.len(),
        });
    }
    let value = transport_checksum(add(0, &packet[start..]));
    let field = start + offset;
    packet[field..field + 2].copy_from_slice(&value.to_be_bytes());
    Ok(())
}

/// The checksum field's value for an unfolded sum. A computed zero goes out as 0xffff,
/// as the kernel writes it: UDP reads zero as "no checksum", and the two are the same
/// number to TCP. One rule for every path, so a packet's bytes do not depend on whether
/// it was segmented here or completed whole.
fn transport_checksum(sum: u64) -> u16 {
    match !fold(sum) {
        0 => 0xffff,
        v => v,
    }
}

/// Cut a TCP super packet into segments of `gso_size` payload bytes each, as a NIC's TSO
/// would: IP lengths, IPv4 ids and header checksums, sequence numbers, PSH and FIN on the
/// last segment only, CWR on the first only, and every TCP checksum computed in full.
fn segment_tcp(
    packet: &mut [u8],
    v6: bool,
    hdr: &VnetHdr,
    scratch: &mut Vec<u8>,
    mut each: impl FnMut(&mut [u8]),
) -> Result<usize, OffloadError> {
    let version = if v6 { "IPv6" } else { "IPv4" };
    let not_tcp = OffloadError::NotTcp(version);
    if hdr.gso_size == 0 {
        return Err(OffloadError::GsoSize);
    }
    let (ip_len, protocol) = match (v6, packet.first().map(|b| b >> 4)) {
        (false, Some(4)) if packet.len() >= 20 => (usize::from(packet[0] & 0x0f) * 4, packet[9]),
        (true, Some(6)) if packet.len() >= 40 => (40, packet[6]),
        _ => return Err(not_tcp),
    };
    // IPv6 extension headers are not segmented: the kernel does not send them through
    // TSO on a TUN device, and the checksum start must be the TCP header.
    let tcp_at = usize::from(hdr.csum_start);
    if protocol != PROTO_TCP || ip_len < 20 || tcp_at != ip_len || packet.len() < tcp_at + 20 {
        return Err(not_tcp);
    }
    let tcp_len = usize::from(packet[tcp_at + 12] >> 4) * 4;
    let headers = tcp_at + tcp_len;
    if tcp_len < 20 || headers > packet.len() {
        return Err(not_tcp);
    }
    let mss = usize::from(hdr.gso_size);
    let payload_len = packet.len() - headers;
    if payload_len <= mss {
        // Nothing to cut: one segment, whose checksum is still to be done.
        finish_segment(packet, v6, tcp_at);
        each(packet);
        return Ok(1);
    }
    let seq0 = u32::from_be_bytes(packet[tcp_at + 4..tcp_at + 8].try_into().unwrap());
    let id0 = u16::from_be_bytes([packet[4], packet[5]]);
    let flags0 = packet[tcp_at + 13];
    let mut n = 0;
    for (i, chunk) in packet[headers..].chunks(mss).enumerate() {
        let last = (i + 1) * mss >= payload_len;
        scratch.clear();
        scratch.extend_from_slice(&packet[..headers]);
        scratch.extend_from_slice(chunk);
        let seg = &mut scratch[..];
        let seq = seq0.wrapping_add((i * mss) as u32);
        seg[tcp_at + 4..tcp_at + 8].copy_from_slice(&seq.to_be_bytes());
        let mut flags = flags0;
        if !last {
            flags &= !(TCP_PSH | TCP_FIN);
        }
        if i > 0 {
            flags &= !TCP_CWR;
        }
        seg[tcp_at + 13] = flags;
        if !v6 {
            let id = id0.wrapping_add(i as u16);
            seg[4..6].copy_from_slice(&id.to_be_bytes());
        }
        finish_segment(seg, v6, tcp_at);
        each(seg);
        n += 1;
    }
    Ok(n)
}

/// Set the IP length fields (and the IPv4 header checksum) of a segment from its size,
/// and compute its TCP checksum in full.
fn finish_segment(seg: &mut [u8], v6: bool, tcp_at: usize) {
    let total = seg.len();
    let tcp_bytes = total - tcp_at;
    let pseudo = if v6 {
        seg[4..6].copy_from_slice(&((total - 40) as u16).to_be_bytes());
        let s = add(0, &seg[8..40]);
        s + tcp_bytes as u64 + u64::from(PROTO_TCP)
    } else {
        seg[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        seg[10..12].copy_from_slice(&[0, 0]);
        let c = !fold(add(0, &seg[..tcp_at]));
        seg[10..12].copy_from_slice(&c.to_be_bytes());
        let s = add(0, &seg[12..20]);
        s + tcp_bytes as u64 + u64::from(PROTO_TCP)
    };
    seg[tcp_at + 16..tcp_at + 18].copy_from_slice(&[0, 0]);
    let c = transport_checksum(add(pseudo, &seg[tcp_at..]));
    seg[tcp_at + 16..tcp_at + 18].copy_from_slice(&c.to_be_bytes());
}

/// Add `data` to a one's-complement sum kept unfolded in 64 bits, as big-endian 16-bit
/// words (a last odd byte padded with zero). Eight bytes at a time: this runs over every
/// byte of every segment.
pub(crate) fn add(mut sum: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let v = u64::from_be_bytes(w.try_into().unwrap());
        // Sum the two 32-bit halves: each is two big-endian 16-bit words, and carries
        // out of 32 bits fold back in at the end.
        sum += (v >> 32) + (v & 0xffff_ffff);
    }
    let mut rest = words.remainder().chunks_exact(2);
    for w in &mut rest {
        sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [b] = rest.remainder() {
        sum += u64::from(*b) << 8;
    }
    sum
}

/// Fold a sum from [`add`] to 16 bits.
pub(crate) fn fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip::checksum;
    use proptest::prelude::*;

    const PROTO_UDP: u8 = 17;
    const SRC4: [u8; 4] = [10, 77, 0, 2];
    const DST4: [u8; 4] = [10, 77, 0, 1];

    fn vnet(flags: u8, gso_type: u8, gso_size: u16, start: u16, offset: u16) -> Vec<u8> {
        let mut h = vec![flags, gso_type, 0, 0];
        h.extend_from_slice(&gso_size.to_ne_bytes());
        h.extend_from_slice(&start.to_ne_bytes());
        h.extend_from_slice(&offset.to_ne_bytes());
        h
    }

    /// A TCP segment with `options` bytes of options (a multiple of 4) and `payload`,
    /// its TCP checksum field holding only the pseudo-header sum, as the kernel leaves
    /// it for offload (and its IP length fields covering everything).
    fn tcp_packet(v6: bool, seq: u32, flags: u8, options: usize, payload: &[u8]) -> Vec<u8> {
        let tcp_len = 20 + options;
        let mut tcp = vec![0u8; tcp_len];
        tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&seq.to_be_bytes());
        tcp[8..12].copy_from_slice(&7u32.to_be_bytes());
        tcp[12] = ((tcp_len / 4) as u8) << 4;
        tcp[13] = flags;
        tcp[14..16].copy_from_slice(&64240u16.to_be_bytes());
        for (i, b) in tcp[20..].iter_mut().enumerate() {
            *b = 1 + (i as u8 % 3); // NOPs and other bytes: never read, only copied
        }
        tcp.extend_from_slice(payload);
        let mut p = if v6 {
            let mut h = vec![0u8; 40];
            h[0] = 0x60;
            h[4..6].copy_from_slice(&(tcp.len() as u16).to_be_bytes());
            h[6] = PROTO_TCP;
            h[7] = 64;
            h[8..24].copy_from_slice(&[0xfd, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
            h[24..40].copy_from_slice(&[0xfd, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            h
        } else {
            let mut h = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, PROTO_TCP, 0, 0];
            h[2..4].copy_from_slice(&((20 + tcp.len()) as u16).to_be_bytes());
            h.extend_from_slice(&SRC4);
            h.extend_from_slice(&DST4);
            let c = checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h
        };
        let at = p.len();
        p.extend_from_slice(&tcp);
        // The pseudo-header sum, not complemented, as CHECKSUM_PARTIAL leaves it.
        let pseudo = pseudo_sum(&p, at, v6);
        p[at + 16..at + 18].copy_from_slice(&pseudo.to_be_bytes());
        p
    }

    fn pseudo_sum(p: &[u8], at: usize, v6: bool) -> u16 {
        let addrs = if v6 { &p[8..40] } else { &p[12..20] };
        let proto = if v6 { p[6] } else { p[9] };
        fold(add(0, addrs) + (p.len() - at) as u64 + u64::from(proto))
    }

    /// Whether the transport checksum of a whole packet verifies.
    fn transport_ok(p: &[u8], v6: bool) -> bool {
        let at = if v6 { 40 } else { usize::from(p[0] & 0x0f) * 4 };
        let addrs = if v6 { &p[8..40] } else { &p[12..20] };
        let proto = if v6 { p[6] } else { p[9] };
        let s = add(0, addrs) + (p.len() - at) as u64 + u64::from(proto);
        fold(add(s, &p[at..])) == 0xffff
    }

    fn ip_ok(p: &[u8], v6: bool) -> bool {
        crate::parse(p).is_ok() && (v6 || checksum(&p[..20]) == 0)
    }

    fn run(read: &mut [u8]) -> Result<Vec<Vec<u8>>, OffloadError> {
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        let n = split(read, &mut scratch, |p| out.push(p.to_vec()))?;
        assert_eq!(n, out.len());
        Ok(out)
    }

    fn with_header(h: Vec<u8>, p: &[u8]) -> Vec<u8> {
        let mut r = h;
        r.extend_from_slice(p);
        r
    }

    #[test]
    fn a_plain_packet_passes_unchanged() {
        let mut p = tcp_packet(false, 1, 0x10, 0, b"hello");
        finish_segment(&mut p, false, 20);
        let out = run(&mut with_header(HEADER_NONE.to_vec(), &p)).unwrap();
        assert_eq!(out, vec![p]);
    }

    #[test]
    fn a_partial_tcp_checksum_is_completed() {
        for v6 in [false, true] {
            let p = tcp_packet(v6, 1, 0x18, 12, b"some bytes, odd count");
            assert!(!transport_ok(&p, v6));
            let at = if v6 { 40 } else { 20 };
            let out = run(&mut with_header(vnet(1, 0, 0, at, 16), &p)).unwrap();
            assert_eq!(out.len(), 1);
            assert!(transport_ok(&out[0], v6), "v6 {v6}");
            assert_eq!(out[0][..at as usize + 16], p[..at as usize + 16]);
        }
    }

    #[test]
    fn a_partial_udp_checksum_is_completed() {
        let mut p = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, PROTO_UDP, 0, 0];
        p.extend_from_slice(&SRC4);
        p.extend_from_slice(&DST4);
        let udp_payload = b"abc";
        p.extend_from_slice(&[0x13, 0x88, 0x13, 0x89, 0, 11, 0, 0]);
        p.extend_from_slice(udp_payload);
        let len = p.len() as u16;
        p[2..4].copy_from_slice(&len.to_be_bytes());
        let c = checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        let pseudo = pseudo_sum(&p, 20, false);
        p[26..28].copy_from_slice(&pseudo.to_be_bytes());
        let out = run(&mut with_header(vnet(1, 0, 0, 20, 6), &p)).unwrap();
        assert_eq!(out[0][9], PROTO_UDP);
        assert!(transport_ok(&out[0], false));
        assert_ne!(&out[0][26..28], &[0, 0]);
    }

    #[test]
    fn a_super_packet_is_cut_into_segments() {
        let payload: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
        // PSH, FIN, CWR and ACK set on the super packet.
        let p = tcp_packet(false, 0xffff_fff0, 0x80 | 0x18 | 0x01, 12, &payload);
        let out = run(&mut with_header(vnet(1, 1, 1000, 20, 16), &p)).unwrap();
        assert_eq!(out.len(), 3);
        for (i, s) in out.iter().enumerate() {
            assert_eq!(s.len(), 20 + 32 + 1000);
            assert!(ip_ok(s, false));
            assert!(transport_ok(s, false));
            let seq = u32::from_be_bytes(s[24..28].try_into().unwrap());
            assert_eq!(seq, 0xffff_fff0u32.wrapping_add(1000 * i as u32));
            assert_eq!(u16::from_be_bytes([s[4], s[5]]), 0x1234 + i as u16);
            let flags = s[33];
            assert_eq!(flags & TCP_PSH != 0, i == 2, "PSH on segment {i}");
            assert_eq!(flags & TCP_FIN != 0, i == 2, "FIN on segment {i}");
            assert_eq!(flags & TCP_CWR != 0, i == 0, "CWR on segment {i}");
            assert_eq!(flags & 0x10, 0x10, "ACK on every segment");
            assert_eq!(&s[52..], &payload[i * 1000..(i + 1) * 1000]);
            // Options are copied as they are.
            assert_eq!(s[40..52], p[40..52]);
        }
    }

    #[test]
    fn an_ipv6_super_packet_with_a_short_last_segment() {
        let payload = vec![0xab; 2500];
        let p = tcp_packet(true, 5, 0x18, 0, &payload);
        let out = run(&mut with_header(vnet(1, 4 | GSO_ECN, 1200, 40, 16), &p)).unwrap();
        let sizes: Vec<usize> = out.iter().map(|s| s.len() - 60).collect();
        assert_eq!(sizes, vec![1200, 1200, 100]);
        for s in &out {
            assert!(ip_ok(s, true));
            assert!(transport_ok(s, true));
        }
    }

    #[test]
    fn bad_headers_are_named_errors() {
        assert_eq!(run(&mut [0u8; 4]), Err(OffloadError::Short(4)));
        let p = tcp_packet(false, 1, 0x10, 0, &[0; 100]);
        let cases = [
            (vnet(1, 3, 50, 20, 16), OffloadError::GsoType(3)),
            (vnet(1, 1, 0, 20, 16), OffloadError::GsoSize),
            (vnet(1, 4, 50, 20, 16), OffloadError::NotTcp("IPv6")),
            (vnet(1, 1, 50, 24, 16), OffloadError::NotTcp("IPv4")),
            (
                vnet(1, 0, 0, 130, 16),
                OffloadError::Checksum {
                    start: 130,
                    offset: 16,
                    len: 140,
                },
            ),
        ];
        for (h, want) in cases {
            assert_eq!(run(&mut with_header(h, &p)), Err(want));
        }
    }

    proptest! {
        #[test]
        fn segments_check_and_concatenate_to_the_original(
            v6 in any::<bool>(),
            seq in any::<u32>(),
            flags in any::<u8>(),
            options in 0usize..=10,
            mss in 1u16..=1500,
            payload in proptest::collection::vec(any::<u8>(), 0..8_000),
        ) {
            let p = tcp_packet(v6, seq, flags, options * 4, &payload);
            let at: u16 = if v6 { 40 } else { 20 };
            let gso = if v6 { GSO_TCPV6 } else { GSO_TCPV4 };
            let out = run(&mut with_header(vnet(1, gso, mss, at, 16), &p)).unwrap();
            let headers = usize::from(at) + 20 + options * 4;
            prop_assert_eq!(out.len(), payload.len().div_ceil(usize::from(mss)).max(1));
            let mut joined = Vec::new();
            let mut next = seq;
            for s in &out {
                prop_assert!(ip_ok(s, v6));
                prop_assert!(transport_ok(s, v6));
                prop_assert!(s.len() - headers <= usize::from(mss));
                prop_assert_eq!(u32::from_be_bytes(s[usize::from(at) + 4..usize::from(at) + 8].try_into().unwrap()), next);
                next = next.wrapping_add((s.len() - headers) as u32);
                joined.extend_from_slice(&s[headers..]);
            }
            prop_assert_eq!(joined, payload);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut b = bytes;
            let _ = run(&mut b);
        }
    }
}
