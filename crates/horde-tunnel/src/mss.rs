//! TCP MSS clamping: a SYN whose maximum segment size option would let the other end
//! send segments larger than the tunnel carries gets the option lowered (and its TCP
//! checksum patched, RFC 1624), in both directions, so that TCP through the tunnel never
//! depends on path MTU discovery.

use super::ip::{IpHeader, PROTO_TCP};

const TCP_MIN_HEADER: usize = 20;
const SYN: u8 = 0x02;
const OPT_END: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_MSS: u8 = 2;

/// The largest MSS whose segments fit a tunnel MTU of `mtu` bytes: the MTU less the
/// smallest IP and TCP headers (20 + 20 for IPv4, 40 + 20 for IPv6).
pub fn max_mss(mtu: u32, v6: bool) -> u16 {
    let headers = if v6 { 60 } else { 40 };
    mtu.saturating_sub(headers).min(u32::from(u16::MAX)) as u16
}

/// Lower the MSS option of a TCP SYN in `packet` to at most `limit`. Returns whether
/// the packet was changed. Anything else (not TCP, not a SYN, no MSS option, already
/// small enough, a truncated header) is left alone.
pub fn clamp_mss(packet: &mut [u8], header: &IpHeader, limit: u16) -> bool {
    if header.protocol != PROTO_TCP {
        return false;
    }
    let Some(at) = header.transport_offset else {
        return false;
    };
    let Some(tcp) = packet.get_mut(at..) else {
        return false;
    };
    if tcp.len() < TCP_MIN_HEADER || tcp[13] & SYN == 0 {
        return false;
    }
    let data_offset = usize::from(tcp[12] >> 4) * 4;
    if data_offset < TCP_MIN_HEADER || data_offset > tcp.len() {
        return false;
    }
    let mut i = TCP_MIN_HEADER;
    while i < data_offset {
        match tcp[i] {
            OPT_END => return false,
            OPT_NOP => i += 1,
            kind => {
                let Some(&len) = tcp.get(i + 1) else {
                    return false;
                };
                let len = usize::from(len);
                if len < 2 || i + len > data_offset {
                    return false;
                }
                if kind == OPT_MSS && len == 4 {
                    let old = u16::from_be_bytes([tcp[i + 2], tcp[i + 3]]);
                    if old <= limit {
                        return false;
                    }
                    tcp[i + 2..i + 4].copy_from_slice(&limit.to_be_bytes());
                    let sum = u16::from_be_bytes([tcp[16], tcp[17]]);
                    // The checksum sums 16-bit words from the header's start: a value at
                    // an odd offset straddles two of them, so its bytes count swapped.
                    let (old, new) = if i.is_multiple_of(2) {
                        (old, limit)
                    } else {
                        (old.swap_bytes(), limit.swap_bytes())
                    };
                    let patched = patch_checksum(sum, old, new);
                    tcp[16..18].copy_from_slice(&patched.to_be_bytes());
                    return true;
                }
                i += len;
            }
        }
    }
    false
}

/// RFC 1624 eqn. 3: the checksum after one 16-bit word changed from `old` to `new`.
fn patch_checksum(sum: u16, old: u16, new: u16) -> u16 {
    let mut s = u32::from(!sum) + u32::from(!old) + u32::from(new);
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip::tests::{v4, v6};
    use crate::ip::{checksum, parse};
    use std::net::Ipv6Addr;

    /// A TCP header with `flags` and options `opts`, checksummed over the pseudo-header
    /// `pseudo` (source, destination, zero, protocol, length as the version wants).
    fn tcp(flags: u8, opts: &[u8]) -> Vec<u8> {
        let words = (20 + opts.len()).div_ceil(4);
        let mut t = vec![0u8; 20];
        t[0..2].copy_from_slice(&40000u16.to_be_bytes());
        t[2..4].copy_from_slice(&80u16.to_be_bytes());
        t[12] = (words as u8) << 4;
        t[13] = flags;
        t.extend_from_slice(opts);
        t.resize(words * 4, 0);
        t
    }

    fn pseudo_v4(p: &[u8]) -> Vec<u8> {
        let mut ph = p[12..20].to_vec();
        ph.extend_from_slice(&[0, 6]);
        ph.extend_from_slice(&((p.len() - 20) as u16).to_be_bytes());
        ph.extend_from_slice(&p[20..]);
        ph
    }

    fn pseudo_v6(p: &[u8]) -> Vec<u8> {
        let mut ph = p[8..40].to_vec();
        ph.extend_from_slice(&((p.len() - 40) as u32).to_be_bytes());
        ph.extend_from_slice(&[0, 0, 0, 6]);
        ph.extend_from_slice(&p[40..]);
        ph
    }

    /// Fill in the TCP checksum of packet `p` whose TCP header starts at `at`.
    fn seal(p: &mut [u8], at: usize, pseudo: fn(&[u8]) -> Vec<u8>) {
        p[at + 16] = 0;
        p[at + 17] = 0;
        let c = checksum(&pseudo(p));
        p[at + 16..at + 18].copy_from_slice(&c.to_be_bytes());
    }

    fn mss_of(p: &[u8], at: usize) -> u16 {
        let t = &p[at..];
        let off = usize::from(t[12] >> 4) * 4;
        let mut i = 20;
        while i < off {
            match t[i] {
                0 => break,
                1 => i += 1,
                2 => return u16::from_be_bytes([t[i + 2], t[i + 3]]),
                _ => i += usize::from(t[i + 1]),
            }
        }
        0
    }

    const OPTS: [u8; 12] = [1, 1, 4, 2, 2, 4, 0x05, 0xb4, 3, 3, 7, 0];

    #[test]
    fn an_ipv4_syn_is_clamped_and_its_checksum_stays_right() {
        let mut p = v4([10, 0, 0, 2], [10, 0, 0, 1], &tcp(SYN, &OPTS));
        seal(&mut p, 20, pseudo_v4);
        let h = parse(&p).unwrap();
        assert!(clamp_mss(&mut p, &h, 1340));
        assert_eq!(mss_of(&p, 20), 1340);
        assert_eq!(checksum(&pseudo_v4(&p)), 0, "TCP checksum broken");
        assert!(!clamp_mss(&mut p, &h, 1340), "already small enough");
        assert!(!clamp_mss(&mut p, &h, 1460));
    }

    #[test]
    fn an_ipv6_syn_ack_is_clamped() {
        let (a, b): (Ipv6Addr, Ipv6Addr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let mut p = v6(a, b, &tcp(SYN | 0x10, &OPTS));
        seal(&mut p, 40, pseudo_v6);
        let h = parse(&p).unwrap();
        assert!(clamp_mss(&mut p, &h, max_mss(1380, true)));
        assert_eq!(mss_of(&p, 40), 1320);
        assert_eq!(checksum(&pseudo_v6(&p)), 0, "TCP checksum broken");
    }

    #[test]
    fn an_mss_option_at_an_odd_offset_keeps_the_checksum_right() {
        // A NOP first puts the MSS value at bytes 23-24 of the header.
        let mut p = v4(
            [10, 0, 0, 2],
            [10, 0, 0, 1],
            &tcp(SYN, &[1, 2, 4, 0x05, 0xb4]),
        );
        seal(&mut p, 20, pseudo_v4);
        let h = parse(&p).unwrap();
        assert!(clamp_mss(&mut p, &h, 1340));
        assert_eq!(mss_of(&p, 20), 1340);
        assert_eq!(checksum(&pseudo_v4(&p)), 0, "TCP checksum broken");
    }

    #[test]
    fn non_syns_and_odd_options_are_left_alone() {
        let mut p = v4([10, 0, 0, 2], [10, 0, 0, 1], &tcp(0x10, &OPTS));
        let h = parse(&p).unwrap();
        assert!(!clamp_mss(&mut p, &h, 500), "an ACK has no MSS to clamp");
        // An option whose length runs past the header.
        let mut p = v4([10, 0, 0, 2], [10, 0, 0, 1], &tcp(SYN, &[8, 40, 0, 0]));
        let h = parse(&p).unwrap();
        let before = p.clone();
        assert!(!clamp_mss(&mut p, &h, 500));
        assert_eq!(p, before);
        // A zero-length option would loop forever if taken at its word.
        let mut p = v4(
            [10, 0, 0, 2],
            [10, 0, 0, 1],
            &tcp(SYN, &[8, 0, 2, 4, 5, 0xb4]),
        );
        let h = parse(&p).unwrap();
        assert!(!clamp_mss(&mut p, &h, 500));
    }

    #[test]
    fn the_limit_follows_the_ip_version() {
        assert_eq!(max_mss(1380, false), 1340);
        assert_eq!(max_mss(1380, true), 1320);
        assert_eq!(max_mss(30, false), 0);
    }

    proptest::proptest! {
        /// Any SYN's options, clamped or not, leave the TCP checksum right.
        #[test]
        fn clamping_keeps_checksums_right(
            opts in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            limit in 0u16..2000,
        ) {
            let mut p = v4([10, 0, 0, 2], [10, 0, 0, 1], &tcp(SYN, &opts));
            seal(&mut p, 20, pseudo_v4);
            let h = parse(&p).unwrap();
            clamp_mss(&mut p, &h, limit);
            proptest::prop_assert_eq!(checksum(&pseudo_v4(&p)), 0);
        }
    }
}
