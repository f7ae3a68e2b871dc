//! TCP RTT samples and retransmission classes from a sender-side capture, by the rules of
//! thesis 003 §7.1.1 and §7.1.3:
//!
//! - an RTT sample is taken for each cumulative ACK that newly covers data, from the
//!   latest segment it covers, and only if that segment was **sent once** (Karn);
//! - of a run of duplicate ACKs only the **first** is used: if it carries a SACK block
//!   covering a segment sent once, that segment gives a sample;
//! - a sample is stamped with the segment's **send** time;
//! - a retransmission more than **100 ms after the last ACK** is a timeout, otherwise a
//!   fast retransmission (dup-ACK or SACK triggered).
//!
//! The data sender is the endpoint that sent the most payload; only its connection is
//! analysed. Sequence numbers are taken relative to the first one seen (flows up to 4 GiB).

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::pcap::Segment;

/// The retransmission-to-last-ACK gap above which a retransmission is a timeout.
pub const TIMEOUT_GAP_S: f64 = 0.100;

/// An endpoint: address and port.
pub type Endpoint = (IpAddr, u16);

/// One RTT sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RttSample {
    /// When the measured segment was sent (capture clock, s).
    pub sent: f64,
    /// Its round trip, s.
    pub rtt: f64,
}

/// One retransmitted segment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Retransmission {
    /// When it was sent again.
    pub time: f64,
    /// Time since the last ACK from the receiver, s.
    pub since_ack: f64,
    /// `since_ack > 100 ms`.
    pub timeout: bool,
}

/// What the capture says about the sender's connection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TcpReport {
    /// The data sender and receiver.
    pub flow: Option<(Endpoint, Endpoint)>,
    /// Data segments sent (first transmissions and retransmissions).
    pub data_segments: u64,
    /// Payload bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// (time, payload bytes) of every data segment.
    pub sends: Vec<(f64, u32)>,
    /// RTT samples in capture order.
    pub rtts: Vec<RttSample>,
    /// Retransmissions in capture order.
    pub retransmissions: Vec<Retransmission>,
    /// (time, bytes sent and not yet cumulatively acknowledged) after every segment.
    pub outstanding: Vec<(f64, u64)>,
    /// ACKs from the receiver for the sender's data. With none (a capture of one
    /// direction only), retransmissions cannot be told apart: see [`TcpReport::timeouts`].
    pub acks: u64,
}

impl TcpReport {
    /// How many retransmissions were timeouts; `None` when the capture holds no ACK
    /// from the receiver, so that no retransmission can be classed.
    pub fn timeouts(&self) -> Option<usize> {
        (self.acks > 0).then(|| self.retransmissions.iter().filter(|r| r.timeout).count())
    }
}

#[derive(Debug, Clone, Copy)]
struct Sent {
    end: u64,
    at: f64,
    times: u32,
    sacked: bool,
}

/// Analyse the connection of the endpoint that sent the most payload.
pub fn analyze(segments: &[Segment]) -> TcpReport {
    let Some((sender, receiver)) = main_flow(segments) else {
        return TcpReport::default();
    };
    let mut r = TcpReport {
        flow: Some((sender, receiver)),
        ..TcpReport::default()
    };
    let mut isn: Option<u32> = None;
    let rel = |isn: u32, x: u32| u64::from(x.wrapping_sub(isn));
    // Segments sent and not yet cumulatively acknowledged, by start.
    let mut sent: BTreeMap<u64, Sent> = BTreeMap::new();
    let mut highest_end = 0u64;
    let mut cum_ack = 0u64;
    let mut last_ack_time: Option<f64> = None;
    let mut dup_run = 0u32;
    for s in segments {
        if s.src == sender && s.dst == receiver {
            if s.len == 0 {
                continue;
            }
            let base = *isn.get_or_insert(s.seq);
            let start = rel(base, s.seq);
            let end = start + u64::from(s.len);
            r.data_segments += 1;
            r.bytes_sent += u64::from(s.len);
            r.sends.push((s.time, s.len));
            if start < highest_end {
                // Sent before: every segment it overlaps is no longer "sent once".
                for (_, seg) in sent.range_mut(..end) {
                    if seg.end > start {
                        seg.times += 1;
                    }
                }
                let since_ack = last_ack_time.map_or(f64::INFINITY, |t| s.time - t);
                r.retransmissions.push(Retransmission {
                    time: s.time,
                    since_ack,
                    timeout: since_ack > TIMEOUT_GAP_S,
                });
            } else {
                sent.insert(
                    start,
                    Sent {
                        end,
                        at: s.time,
                        times: 1,
                        sacked: false,
                    },
                );
            }
            highest_end = highest_end.max(end);
            r.outstanding
                .push((s.time, highest_end.saturating_sub(cum_ack)));
        } else if s.src == receiver && s.dst == sender && s.ack_flag {
            let Some(base) = isn else {
                continue;
            };
            let ack = rel(base, s.ack);
            // An ack beyond anything sent is from before the capture's first data.
            if ack > highest_end {
                continue;
            }
            last_ack_time = Some(s.time);
            r.acks += 1;
            if ack > cum_ack {
                dup_run = 0;
                cum_ack = ack;
                let covered: Vec<u64> = sent.range(..ack).map(|(k, _)| *k).collect();
                let mut sample = None;
                for k in covered {
                    let seg = sent[&k];
                    if seg.end <= ack {
                        if seg.times == 1 && !seg.sacked {
                            sample = Some(seg.at);
                        }
                        sent.remove(&k);
                    }
                }
                if let Some(at) = sample {
                    r.rtts.push(RttSample {
                        sent: at,
                        rtt: s.time - at,
                    });
                }
            } else if ack == cum_ack && s.len == 0 && !s.control {
                dup_run += 1;
                let mut sample = None;
                for (l, rr) in s.sack.iter().flatten() {
                    let (l, rr) = (rel(base, *l), rel(base, *rr));
                    for (_, seg) in sent.range_mut(l..rr) {
                        if seg.end <= rr && !seg.sacked {
                            seg.sacked = true;
                            if dup_run == 1 && seg.times == 1 {
                                sample = Some(seg.at);
                            }
                        }
                    }
                }
                if let Some(at) = sample {
                    r.rtts.push(RttSample {
                        sent: at,
                        rtt: s.time - at,
                    });
                }
            }
            r.outstanding
                .push((s.time, highest_end.saturating_sub(cum_ack)));
        }
    }
    r
}

/// (sender, receiver) of the direction that carried the most payload.
fn main_flow(segments: &[Segment]) -> Option<(Endpoint, Endpoint)> {
    let mut bytes: BTreeMap<(Endpoint, Endpoint), u64> = BTreeMap::new();
    for s in segments {
        *bytes.entry((s.src, s.dst)).or_default() += u64::from(s.len);
    }
    bytes
        .into_iter()
        .filter(|(_, b)| *b > 0)
        .max_by_key(|(_, b)| *b)
        .map(|(k, _)| k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const S: (IpAddr, u16) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 80);
    const C: (IpAddr, u16) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 5000);

    fn data(time: f64, seq: u32, len: u32) -> Segment {
        Segment {
            time,
            src: S,
            dst: C,
            seq,
            ack: 0,
            ack_flag: true,
            control: false,
            len,
            sack: [None; 4],
        }
    }

    fn ack(time: f64, ack: u32, sack: Option<(u32, u32)>) -> Segment {
        Segment {
            time,
            src: C,
            dst: S,
            seq: 0,
            ack,
            ack_flag: true,
            control: false,
            len: 0,
            sack: [sack, None, None, None],
        }
    }

    #[test]
    fn rtt_and_timeouts_by_the_thesis_rules_by_hand() {
        let b = 1000; // initial sequence number
        let segs = vec![
            data(0.0, b, 100),                            // [0,100)
            data(0.1, b + 100, 100),                      // [100,200)
            data(0.2, b + 200, 100),                      // [200,300)
            data(0.3, b + 300, 100),                      // [300,400)
            ack(0.5, b + 100, None),                      // covers seg 0: rtt 0.5
            ack(0.9, b + 100, Some((b + 200, b + 300))),  // first dup, SACKs seg 2: rtt 0.7
            ack(0.95, b + 100, Some((b + 200, b + 400))), // second dup: ignored
            data(0.96, b + 100, 100), // fast retransmission (10 ms after the last ack)
            ack(1.5, b + 400, None),  // covers seg 1 (sent twice) and seg 3 (sacked): no sample
            data(1.6, b + 400, 100),  // [400,500)
            data(2.0, b + 400, 100),  // timeout retransmission (500 ms after the ack)
            ack(2.5, b + 500, None),  // seg 4 sent twice: no sample
        ];
        let r = analyze(&segs);
        assert_eq!(r.flow, Some((S, C)));
        assert_eq!(r.data_segments, 7);
        assert_eq!(r.bytes_sent, 700);
        let rtts: Vec<(f64, f64)> = r
            .rtts
            .iter()
            .map(|s| (s.sent, (s.rtt * 1e3).round() / 1e3))
            .collect();
        assert_eq!(rtts, [(0.0, 0.5), (0.2, 0.7)]);
        assert_eq!(r.retransmissions.len(), 2);
        assert!(!r.retransmissions[0].timeout);
        assert!((r.retransmissions[0].since_ack - 0.01).abs() < 1e-9);
        assert!(r.retransmissions[1].timeout);
        assert_eq!(r.timeouts(), Some(1));
        assert_eq!(r.outstanding.last().unwrap().1, 0);
        // The sender's direction alone holds no ACK: no retransmission can be classed.
        let one_way: Vec<Segment> = segs.iter().copied().filter(|s| s.src == S).collect();
        let r = analyze(&one_way);
        assert_eq!(
            (r.acks, r.retransmissions.len(), r.timeouts()),
            (0, 2, None)
        );
    }
}
