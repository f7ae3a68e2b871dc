//! TCP segments out of a pcap capture (`pcap-file` for the file, `etherparse` for the
//! headers). Ethernet, Linux cooked (SLL) and raw IPv4/IPv6 link types are read; packets
//! that are not TCP are skipped; a malformed file or header is an error naming the packet.
//! Captures cut short by a snap length (`tcpdump -s 128`) are read: a segment's payload
//! length comes from its IP header, not from the bytes captured, and a packet cut inside
//! its TCP header is skipped.

use std::net::IpAddr;
use std::path::Path;

use etherparse::err::packet::SliceError;
use etherparse::{
    EtherType, LaxNetSlice, LaxSlicedPacket, PacketBuilder, TcpOptionElement, TransportSlice,
};
use pcap_file::pcap::{PcapPacket, PcapParser, PcapWriter};
use pcap_file::{DataLink, PcapError};

use crate::error::AnalyzeError;

/// One TCP segment as captured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Capture time, s since the Unix epoch.
    pub time: f64,
    /// Source address and port.
    pub src: (IpAddr, u16),
    /// Destination address and port.
    pub dst: (IpAddr, u16),
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number (meaningful when `ack_flag`).
    pub ack: u32,
    /// The ACK flag.
    pub ack_flag: bool,
    /// SYN, FIN or RST (segments that take part in set-up or tear-down).
    pub control: bool,
    /// TCP payload bytes.
    pub len: u32,
    /// SACK blocks (left, right), up to four.
    pub sack: [Option<(u32, u32)>; 4],
}

/// Every TCP segment of a capture, in file order.
pub fn read_pcap(path: &Path) -> Result<Vec<Segment>, AnalyzeError> {
    let name = path.display().to_string();
    let data =
        horde_config::input::read(path, horde_config::input::Kind::CAPTURE).map_err(|source| {
            AnalyzeError::Io {
                file: name.clone(),
                source,
            }
        })?;
    parse_pcap(&name, &data)
}

/// [`read_pcap`] on bytes in memory; `name` labels errors.
pub fn parse_pcap(name: &str, data: &[u8]) -> Result<Vec<Segment>, AnalyzeError> {
    let err = |packet: usize, message: String| AnalyzeError::Pcap {
        file: name.to_string(),
        packet,
        message,
    };
    let (mut rest, parser) =
        PcapParser::new(data).map_err(|e| err(0, format!("not a pcap file: {}", describe(&e))))?;
    let link = parser.header().datalink;
    if !matches!(
        link,
        DataLink::ETHERNET | DataLink::LINUX_SLL | DataLink::RAW | DataLink::IPV4 | DataLink::IPV6
    ) {
        return Err(err(0, format!("unsupported link type {link:?}")));
    }
    let mut out = Vec::with_capacity(data.len() / 100);
    let mut n = 0;
    while !rest.is_empty() {
        n += 1;
        let (next, pkt) = parser.next_packet(rest).map_err(|e| err(n, describe(&e)))?;
        rest = next;
        let sliced = lax_slice(link, &pkt.data).map_err(|m| err(n, format!("bad headers: {m}")))?;
        if let Some((e, _)) = &sliced.stop_err {
            // Cut short by the snap length: what was captured is still read below.
            if !matches!(e, SliceError::Len(_)) {
                return Err(err(n, format!("bad headers: {e}")));
            }
        }
        let (Some(net), Some(TransportSlice::Tcp(tcp))) = (&sliced.net, &sliced.transport) else {
            continue;
        };
        let (src, dst, ip_start, ip_total): (IpAddr, IpAddr, *const u8, usize) = match net {
            LaxNetSlice::Ipv4(ip) => (
                ip.header().source_addr().into(),
                ip.header().destination_addr().into(),
                ip.header().slice().as_ptr(),
                usize::from(ip.header().total_len()),
            ),
            LaxNetSlice::Ipv6(ip) => (
                ip.header().source_addr().into(),
                ip.header().destination_addr().into(),
                ip.header().slice().as_ptr(),
                40 + usize::from(ip.header().payload_length()),
            ),
        };
        // The payload's length as the IP header gives it: everything after the TCP
        // header, whether or not the capture kept it.
        let headers = tcp.payload().as_ptr() as usize - ip_start as usize;
        let len = ip_total.saturating_sub(headers).max(tcp.payload().len());
        let mut sack = [None; 4];
        for opt in tcp.options_iterator() {
            let Ok(TcpOptionElement::SelectiveAcknowledgement(first, more)) = opt else {
                continue;
            };
            sack[0] = Some(first);
            sack[1..].copy_from_slice(&more);
        }
        out.push(Segment {
            time: pkt.timestamp.as_secs_f64(),
            src: (src, tcp.source_port()),
            dst: (dst, tcp.destination_port()),
            seq: tcp.sequence_number(),
            ack: tcp.acknowledgment_number(),
            ack_flag: tcp.ack(),
            control: tcp.syn() || tcp.fin() || tcp.rst(),
            len: len as u32,
            sack,
        });
    }
    Ok(out)
}

/// A record's headers, read laxly so that a payload cut short by the snap length is
/// not an error.
fn lax_slice(link: DataLink, data: &[u8]) -> Result<LaxSlicedPacket<'_>, String> {
    match link {
        DataLink::ETHERNET => LaxSlicedPacket::from_ethernet(data).map_err(|e| e.to_string()),
        DataLink::LINUX_SLL => {
            // 16-byte cooked header; its last two bytes are the EtherType.
            if data.len() < 16 {
                return Err(format!(
                    "{} bytes: shorter than a Linux cooked header",
                    data.len()
                ));
            }
            let ether_type = EtherType(u16::from_be_bytes([data[14], data[15]]));
            Ok(LaxSlicedPacket::from_ether_type(ether_type, &data[16..]))
        }
        _ => LaxSlicedPacket::from_ip(data).map_err(|e| e.to_string()),
    }
}

/// An Ethernet pcap of IPv4 `segments` (zero-filled payloads), for tests and benchmarks.
pub fn encode_pcap(segments: &[Segment]) -> Vec<u8> {
    encode_pcap_snapped(segments, usize::MAX)
}

/// [`encode_pcap`] keeping at most `snaplen` bytes of each frame, as `tcpdump -s` does.
pub fn encode_pcap_snapped(segments: &[Segment], snaplen: usize) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new()).expect("writing to memory");
    let v4 = |a: IpAddr| match a {
        IpAddr::V4(a) => a.octets(),
        IpAddr::V6(_) => [0; 4],
    };
    let zeros = vec![0u8; 65_536];
    let mut frame = Vec::new();
    for s in segments {
        let mut b = PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv4(v4(s.src.0), v4(s.dst.0), 64)
            .tcp(s.src.1, s.dst.1, s.seq, 65_535);
        if s.ack_flag {
            b = b.ack(s.ack);
        }
        if let Some(first) = s.sack[0] {
            let more = [s.sack[1], s.sack[2], s.sack[3]];
            b = b
                .options(&[TcpOptionElement::SelectiveAcknowledgement(first, more)])
                .expect("one SACK option fits");
        }
        frame.clear();
        b.write(&mut frame, &zeros[..s.len as usize])
            .expect("writing to memory");
        let ts = std::time::Duration::from_secs_f64(s.time.max(0.0));
        let kept = &frame[..frame.len().min(snaplen)];
        w.write_packet(&PcapPacket::new(ts, frame.len() as u32, kept))
            .expect("writing to memory");
    }
    w.into_writer()
}

fn describe(e: &PcapError) -> String {
    match e {
        PcapError::IncompleteBuffer => "truncated (the file ends inside a record)".into(),
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn seg(time: f64, seq: u32, len: u32, sack: Option<(u32, u32)>) -> Segment {
        Segment {
            time,
            src: (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 80),
            dst: (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 5000),
            seq,
            ack: 77,
            ack_flag: true,
            control: false,
            len,
            sack: [sack, None, None, None],
        }
    }

    #[test]
    fn round_trips_segments_through_a_capture() {
        let segs = vec![
            seg(1.5, 1000, 1400, None),
            seg(2.25, 2400, 0, Some((5000, 6000))),
        ];
        let bytes = encode_pcap(&segs);
        assert_eq!(parse_pcap("t.pcap", &bytes).unwrap(), segs);
    }

    #[test]
    fn a_capture_cut_by_its_snap_length_keeps_the_true_payload_lengths() {
        let segs = vec![
            seg(1.5, 1000, 1400, None),
            seg(2.25, 2400, 0, Some((5000, 6000))),
        ];
        // 128 bytes keep the headers (14 + 20 + 20 + SACK) and a little payload; 60
        // bytes cut the second segment inside its TCP options.
        let bytes = encode_pcap_snapped(&segs, 128);
        assert_eq!(parse_pcap("t.pcap", &bytes).unwrap(), segs);
        let bytes = encode_pcap_snapped(&segs, 60);
        assert_eq!(parse_pcap("t.pcap", &bytes).unwrap(), segs[..1]);
    }

    #[test]
    fn malformed_captures_name_the_packet() {
        let bytes = encode_pcap(&[seg(1.0, 1, 10, None), seg(2.0, 11, 10, None)]);
        // Cut inside the second record.
        let cut = &bytes[..bytes.len() - 5];
        let e = parse_pcap("t.pcap", cut).unwrap_err().to_string();
        assert_eq!(
            e,
            "t.pcap:packet 2: truncated (the file ends inside a record)"
        );
        let e = parse_pcap("t.pcap", b"hello, not a capture")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.pcap:packet 0: not a pcap file"), "{e}");
        // A record whose IP header is garbage.
        let mut bad = bytes.clone();
        bad[24 + 16 + 14] = 0x45 ^ 0xF0; // IP version nibble of packet 1
        let e = parse_pcap("t.pcap", &bad).unwrap_err().to_string();
        assert!(e.starts_with("t.pcap:packet 1: bad headers"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_mangled_captures(flips in proptest::collection::vec((0usize..200, 0u8..=255), 0..8), cut in 0usize..200) {
            let mut bytes = encode_pcap(&[seg(1.0, 1, 10, Some((3, 9))), seg(2.0, 11, 10, None)]);
            for (i, v) in flips {
                if i < bytes.len() {
                    bytes[i] = v;
                }
            }
            bytes.truncate(cut.min(bytes.len()));
            let _ = parse_pcap("p.pcap", &bytes);
        }
    }
}
