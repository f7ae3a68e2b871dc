//! Counting TCP retransmissions from the packets themselves, as a trace tool would:
//! a data segment that starts below the highest sequence number its sender has already
//! sent on that connection is a retransmission. smoltcp keeps no such counter.

use std::collections::HashMap;

use smoltcp::wire::{IpProtocol, Ipv4Packet, TcpPacket, TcpSeqNumber};

use super::carrier::Side;

/// Per connection direction: the end of the highest sequence range sent so far.
#[derive(Default)]
pub struct RetransmitWatcher {
    highest: HashMap<(Side, u16, u16), TcpSeqNumber>,
}

/// What the watcher learned from one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// The client's port: it names the flow.
    pub client_port: u16,
    pub retransmission: bool,
}

impl RetransmitWatcher {
    /// Look at a packet `from` one side; `None` for anything but a TCP data segment.
    pub fn observe(&mut self, from: Side, packet: &[u8]) -> Option<Segment> {
        let ip = Ipv4Packet::new_checked(packet).ok()?;
        if ip.next_header() != IpProtocol::Tcp {
            return None;
        }
        let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
        let len = tcp.payload().len();
        if len == 0 {
            return None;
        }
        let (src, dst) = (tcp.src_port(), tcp.dst_port());
        let client_port = match from {
            Side::Client => src,
            Side::Server => dst,
        };
        let start = tcp.seq_number();
        let end = start + len;
        let retransmission = match self.highest.get_mut(&(from, src, dst)) {
            Some(high) => {
                let again = start < *high;
                if end > *high {
                    *high = end;
                }
                again
            }
            None => {
                self.highest.insert((from, src, dst), end);
                false
            }
        };
        Some(Segment {
            client_port,
            retransmission,
        })
    }

    /// Forget a connection (its ports may be reused by a later flow).
    pub fn forget(&mut self, client_port: u16, server_port: u16) {
        self.highest
            .remove(&(Side::Client, client_port, server_port));
        self.highest
            .remove(&(Side::Server, server_port, client_port));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{IpAddress, Ipv4Address, Ipv4Repr, TcpControl, TcpRepr};

    fn segment(seq: i32, payload: &[u8]) -> Vec<u8> {
        let (a, b) = (
            Ipv4Address::new(192, 0, 2, 1),
            Ipv4Address::new(192, 0, 2, 2),
        );
        let tcp = TcpRepr {
            src_port: 1000,
            dst_port: 80,
            control: TcpControl::None,
            seq_number: TcpSeqNumber(seq),
            ack_number: None,
            window_len: 1000,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload,
        };
        let ip = Ipv4Repr {
            src_addr: a,
            dst_addr: b,
            next_header: IpProtocol::Tcp,
            payload_len: tcp.buffer_len(),
            hop_limit: 64,
        };
        let mut buf = vec![0; ip.buffer_len() + tcp.buffer_len()];
        let caps = ChecksumCapabilities::ignored();
        let mut p = Ipv4Packet::new_unchecked(&mut buf);
        ip.emit(&mut p, &caps);
        tcp.emit(
            &mut TcpPacket::new_unchecked(p.payload_mut()),
            &IpAddress::Ipv4(a),
            &IpAddress::Ipv4(b),
            &caps,
        );
        buf
    }

    #[test]
    fn resent_ranges_count_and_new_ones_do_not() {
        let mut w = RetransmitWatcher::default();
        let seen = |w: &mut RetransmitWatcher, seq, len: usize| {
            w.observe(Side::Client, &segment(seq, &vec![0; len]))
                .map(|s| s.retransmission)
        };
        assert_eq!(seen(&mut w, 100, 10), Some(false));
        assert_eq!(seen(&mut w, 110, 10), Some(false));
        assert_eq!(seen(&mut w, 100, 10), Some(true), "the first range again");
        assert_eq!(seen(&mut w, 115, 10), Some(true), "overlaps what was sent");
        assert_eq!(seen(&mut w, 125, 10), Some(false));
        assert_eq!(seen(&mut w, 135, 0), None, "a pure ack");
        // Wrap-around of the sequence space is not a retransmission.
        assert_eq!(seen(&mut w, i32::MAX - 4, 10), Some(false));
        w.forget(1000, 80);
        assert_eq!(seen(&mut w, 100, 10), Some(false));
        assert_eq!(
            w.observe(Side::Server, &segment(1, b"x")),
            Some(Segment {
                client_port: 80,
                retransmission: false
            })
        );
    }
}
