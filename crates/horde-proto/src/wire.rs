//! The wire format, version 1 (documented in `docs/wire.md`).
//!
//! Every datagram starts with one byte: the version in the high nibble and the packet
//! type in the low nibble, then the 64-bit connection id. All integers are big-endian and
//! fixed width: decoding is a handful of bounds-checked loads, which keeps the codec far
//! above the packet rates any set of cellular links can produce. Decoding never panics;
//! anything malformed is a [`WireError`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::Bytes;
use thiserror::Error;

pub const VERSION: u8 = 1;
/// Most address aliases a handshake may carry.
pub const MAX_ALIASES: usize = 16;
/// Most ack ranges one ack carries.
pub const MAX_ACK_RANGES: usize = 32;
/// Bytes before the payload of a data packet.
pub const DATA_HEADER_LEN: usize = 1 + 8 + 1 + 1 + 8 + 4 + 4 + 8;
/// Bytes of an ack before its `(gap, len)` pairs.
const ACK_HEADER_LEN: usize = 1 + 8 + 1 + 8 + 4 + 4 + 8 + 1;
/// Bytes of one `(gap, len)` pair.
const ACK_RANGE_LEN: usize = 16;

const T_HELLO: u8 = 1;
const T_HELLO_ACK: u8 = 2;
const T_DATA: u8 = 3;
const T_ACK: u8 = 4;
const T_PING: u8 = 5;
const T_CLOSE: u8 = 6;
const T_CLOSE_ACK: u8 = 7;
const T_WINDOW: u8 = 8;

/// Flags of a data packet.
pub const FLAG_ORDERED: u8 = 0x01;

/// One decoded packet. Payloads borrow nothing: `Bytes` slices share the input buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    /// Opens a session: the initiator's service id and every address it can be reached at.
    Hello {
        conn: u64,
        channel: u8,
        service: u32,
        aliases: Vec<SocketAddr>,
    },
    /// Accepts a session and lists the responder's aliases.
    HelloAck {
        conn: u64,
        channel: u8,
        aliases: Vec<SocketAddr>,
    },
    /// One ADU in one slot of one channel.
    Data {
        conn: u64,
        channel: u8,
        flags: u8,
        /// Per-channel sequence number.
        seq: u64,
        /// Sender's clock when sent, in microseconds (wrapping); echoed in acks.
        send_ts: u32,
        stream: u32,
        stream_seq: u64,
        payload: Bytes,
    },
    /// Acknowledges data and pings received on one channel.
    Ack(Ack),
    /// A liveness probe in the channel's sequence space, acked like data.
    Ping {
        conn: u64,
        channel: u8,
        seq: u64,
        send_ts: u32,
    },
    /// Ends the session; repeated until a [`Packet::CloseAck`] answers it or a timeout.
    Close { conn: u64 },
    /// Answers every `Close` received, so the closing end can stop repeating it.
    CloseAck { conn: u64 },
    /// Receive-side flow control: how many more payload bytes the receiver's buffer can
    /// hold (0: stop sending data until a larger window or a zero-window probe).
    Window { conn: u64, open: u64 },
}

/// Ranges are QUIC-style: `largest` and `first_range` packets below it are received; then
/// each `(gap, len)` skips `gap + 1` missing numbers and covers `len + 1` received ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub conn: u64,
    pub channel: u8,
    pub largest: u64,
    /// How long the receiver held the ack after receiving `largest`, in microseconds.
    pub ack_delay_us: u32,
    /// The `send_ts` of packet `largest`.
    pub echo_ts: u32,
    pub first_range: u64,
    pub ranges: Vec<(u64, u64)>,
}

impl Ack {
    /// Every acknowledged sequence number range, highest first, as inclusive `(lo, hi)`.
    /// Malformed ranges that would underflow end the iteration.
    pub fn iter_ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let first = self
            .largest
            .checked_sub(self.first_range)
            .map(|lo| (lo, self.largest));
        let mut next_hi = first.and_then(|(lo, _)| lo.checked_sub(1));
        let rest = self.ranges.iter().map_while(move |&(gap, len)| {
            let hi = next_hi?.checked_sub(gap)?.checked_sub(1)?;
            let lo = hi.checked_sub(len)?;
            next_hi = lo.checked_sub(1);
            Some((lo, hi))
        });
        first.into_iter().chain(rest)
    }
}

impl Packet {
    pub fn conn(&self) -> u64 {
        match self {
            Packet::Hello { conn, .. }
            | Packet::HelloAck { conn, .. }
            | Packet::Data { conn, .. }
            | Packet::Ping { conn, .. }
            | Packet::Close { conn }
            | Packet::CloseAck { conn }
            | Packet::Window { conn, .. } => *conn,
            Packet::Ack(a) => a.conn,
        }
    }
}

/// The connection id of a datagram without decoding the rest, for routing.
pub fn peek_conn(datagram: &[u8]) -> Option<u64> {
    let b = datagram.get(1..9)?;
    (datagram[0] >> 4 == VERSION).then(|| u64::from_be_bytes(b.try_into().unwrap()))
}

/// Whether a datagram is a session-opening hello (so an endpoint may accept it).
pub fn is_hello(datagram: &[u8]) -> bool {
    datagram.first() == Some(&header(T_HELLO))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum WireError {
    #[error("datagram truncated")]
    Truncated,
    #[error("unsupported version {0}")]
    Version(u8),
    #[error("unknown packet type {0}")]
    UnknownType(u8),
    #[error("bad address family {0}")]
    AddressFamily(u8),
    #[error("too many entries ({0})")]
    TooMany(usize),
    #[error("trailing bytes after packet")]
    Trailing,
}

fn header(t: u8) -> u8 {
    (VERSION << 4) | t
}

/// Append the encoding of `packet` to `out`.
pub fn encode(packet: &Packet, out: &mut Vec<u8>) {
    match packet {
        Packet::Hello {
            conn,
            channel,
            service,
            aliases,
        } => {
            out.push(header(T_HELLO));
            out.extend_from_slice(&conn.to_be_bytes());
            out.push(*channel);
            out.extend_from_slice(&service.to_be_bytes());
            put_aliases(aliases, out);
        }
        Packet::HelloAck {
            conn,
            channel,
            aliases,
        } => {
            out.push(header(T_HELLO_ACK));
            out.extend_from_slice(&conn.to_be_bytes());
            out.push(*channel);
            put_aliases(aliases, out);
        }
        Packet::Data {
            conn,
            channel,
            flags,
            seq,
            send_ts,
            stream,
            stream_seq,
            payload,
        } => {
            out.reserve(DATA_HEADER_LEN + payload.len());
            encode_data_header(
                *conn,
                *channel,
                *flags,
                *seq,
                *send_ts,
                *stream,
                *stream_seq,
                out,
            );
            out.extend_from_slice(payload);
        }
        Packet::Ack(a) => {
            let n = a.ranges.len().min(MAX_ACK_RANGES);
            let mut h = [0u8; ACK_HEADER_LEN];
            h[0] = header(T_ACK);
            h[1..9].copy_from_slice(&a.conn.to_be_bytes());
            h[9] = a.channel;
            h[10..18].copy_from_slice(&a.largest.to_be_bytes());
            h[18..22].copy_from_slice(&a.ack_delay_us.to_be_bytes());
            h[22..26].copy_from_slice(&a.echo_ts.to_be_bytes());
            h[26..34].copy_from_slice(&a.first_range.to_be_bytes());
            h[34] = n as u8;
            out.reserve(ACK_HEADER_LEN + n * ACK_RANGE_LEN);
            out.extend_from_slice(&h);
            for &(gap, len) in &a.ranges[..n] {
                let mut r = [0u8; ACK_RANGE_LEN];
                r[..8].copy_from_slice(&gap.to_be_bytes());
                r[8..].copy_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&r);
            }
        }
        Packet::Ping {
            conn,
            channel,
            seq,
            send_ts,
        } => {
            out.push(header(T_PING));
            out.extend_from_slice(&conn.to_be_bytes());
            out.push(*channel);
            out.extend_from_slice(&seq.to_be_bytes());
            out.extend_from_slice(&send_ts.to_be_bytes());
        }
        Packet::Close { conn } => {
            out.push(header(T_CLOSE));
            out.extend_from_slice(&conn.to_be_bytes());
        }
        Packet::CloseAck { conn } => {
            out.push(header(T_CLOSE_ACK));
            out.extend_from_slice(&conn.to_be_bytes());
        }
        Packet::Window { conn, open } => {
            out.push(header(T_WINDOW));
            out.extend_from_slice(&conn.to_be_bytes());
            out.extend_from_slice(&open.to_be_bytes());
        }
    }
}

/// Write a data header; the caller appends the payload. Avoids building a `Packet` on
/// the send hot path.
#[allow(clippy::too_many_arguments)]
pub fn encode_data_header(
    conn: u64,
    channel: u8,
    flags: u8,
    seq: u64,
    send_ts: u32,
    stream: u32,
    stream_seq: u64,
    out: &mut Vec<u8>,
) {
    // One fixed-size store instead of eight growing pushes.
    let mut h = [0u8; DATA_HEADER_LEN];
    h[0] = header(T_DATA);
    h[1..9].copy_from_slice(&conn.to_be_bytes());
    h[9] = channel;
    h[10] = flags;
    h[11..19].copy_from_slice(&seq.to_be_bytes());
    h[19..23].copy_from_slice(&send_ts.to_be_bytes());
    h[23..27].copy_from_slice(&stream.to_be_bytes());
    h[27..35].copy_from_slice(&stream_seq.to_be_bytes());
    out.extend_from_slice(&h);
}

fn put_aliases(aliases: &[SocketAddr], out: &mut Vec<u8>) {
    let n = aliases.len().min(MAX_ALIASES);
    out.push(n as u8);
    for a in &aliases[..n] {
        match a.ip() {
            IpAddr::V4(ip) => {
                out.push(4);
                out.extend_from_slice(&ip.octets());
            }
            IpAddr::V6(ip) => {
                out.push(6);
                out.extend_from_slice(&ip.octets());
            }
        }
        out.extend_from_slice(&a.port().to_be_bytes());
    }
}

/// A bounds-checked reader over a datagram.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// The next `N` bytes as an array reference: one bounds check for a whole fixed-size
    /// group of fields, which are then read at constant offsets.
    fn array<const N: usize>(&mut self) -> Result<&'a [u8; N], WireError> {
        let (a, _) = self
            .buf
            .get(self.pos..)
            .and_then(<[u8]>::split_first_chunk::<N>)
            .ok_or(WireError::Truncated)?;
        self.pos += N;
        Ok(a)
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(WireError::Truncated)?;
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn finish(&self) -> Result<(), WireError> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(WireError::Trailing)
        }
    }
    fn aliases(&mut self) -> Result<Vec<SocketAddr>, WireError> {
        let n = self.u8()? as usize;
        if n > MAX_ALIASES {
            return Err(WireError::TooMany(n));
        }
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let ip = match self.u8()? {
                4 => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(self.take(4)?).unwrap())),
                6 => IpAddr::V6(Ipv6Addr::from(
                    <[u8; 16]>::try_from(self.take(16)?).unwrap(),
                )),
                f => return Err(WireError::AddressFamily(f)),
            };
            v.push(SocketAddr::new(ip, self.u16()?));
        }
        Ok(v)
    }
}

/// Big-endian u64 at `at`; callers pass constant offsets inside a checked array.
#[inline(always)]
fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// Big-endian u32 at `at`; callers pass constant offsets inside a checked array.
#[inline(always)]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// Decode one datagram. `datagram` is shared so data payloads are zero-copy slices.
pub fn decode(datagram: &Bytes) -> Result<Packet, WireError> {
    let mut r = Reader {
        buf: datagram,
        pos: 0,
    };
    let h = r.u8()?;
    if h >> 4 != VERSION {
        return Err(WireError::Version(h >> 4));
    }
    let conn = u64::from_be_bytes(*r.array::<8>()?);
    let packet = match h & 0x0f {
        T_HELLO => Packet::Hello {
            conn,
            channel: r.u8()?,
            service: r.u32()?,
            aliases: r.aliases()?,
        },
        T_HELLO_ACK => Packet::HelloAck {
            conn,
            channel: r.u8()?,
            aliases: r.aliases()?,
        },
        T_DATA => {
            let h = r.array::<{ DATA_HEADER_LEN - 9 }>()?;
            let payload = datagram.slice(r.pos..);
            r.pos = datagram.len();
            Packet::Data {
                conn,
                channel: h[0],
                flags: h[1],
                seq: be64(h, 2),
                send_ts: be32(h, 10),
                stream: be32(h, 14),
                stream_seq: be64(h, 18),
                payload,
            }
        }
        T_ACK => {
            let h = r.array::<{ ACK_HEADER_LEN - 9 }>()?;
            let n = h[25] as usize;
            if n > MAX_ACK_RANGES {
                return Err(WireError::TooMany(n));
            }
            let body = r.take(n * ACK_RANGE_LEN)?;
            let ranges = body
                .chunks_exact(ACK_RANGE_LEN)
                .map(|c| (be64(c, 0), be64(c, 8)))
                .collect();
            Packet::Ack(Ack {
                conn,
                channel: h[0],
                largest: be64(h, 1),
                ack_delay_us: be32(h, 9),
                echo_ts: be32(h, 13),
                first_range: be64(h, 17),
                ranges,
            })
        }
        T_PING => Packet::Ping {
            conn,
            channel: r.u8()?,
            seq: r.u64()?,
            send_ts: r.u32()?,
        },
        T_CLOSE => Packet::Close { conn },
        T_CLOSE_ACK => Packet::CloseAck { conn },
        T_WINDOW => Packet::Window {
            conn,
            open: r.u64()?,
        },
        t => return Err(WireError::UnknownType(t)),
    };
    r.finish()?;
    Ok(packet)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn addr() -> impl Strategy<Value = SocketAddr> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<u16>())
                .prop_map(|(ip, p)| SocketAddr::new(IpAddr::V4(ip.into()), p)),
            (any::<[u8; 16]>(), any::<u16>())
                .prop_map(|(ip, p)| SocketAddr::new(IpAddr::V6(ip.into()), p)),
        ]
    }

    fn packet() -> impl Strategy<Value = Packet> {
        let aliases = || prop::collection::vec(addr(), 0..=MAX_ALIASES);
        prop_oneof![
            (any::<u64>(), any::<u8>(), any::<u32>(), aliases()).prop_map(
                |(conn, channel, service, aliases)| Packet::Hello {
                    conn,
                    channel,
                    service,
                    aliases
                }
            ),
            (any::<u64>(), any::<u8>(), aliases()).prop_map(|(conn, channel, aliases)| {
                Packet::HelloAck {
                    conn,
                    channel,
                    aliases,
                }
            }),
            (
                any::<(u64, u8, u8, u64, u32, u32, u64)>(),
                prop::collection::vec(any::<u8>(), 0..1500)
            )
                .prop_map(
                    |((conn, channel, flags, seq, send_ts, stream, stream_seq), p)| {
                        Packet::Data {
                            conn,
                            channel,
                            flags,
                            seq,
                            send_ts,
                            stream,
                            stream_seq,
                            payload: Bytes::from(p),
                        }
                    }
                ),
            (
                any::<(u64, u8, u64, u32, u32, u64)>(),
                prop::collection::vec(any::<(u64, u64)>(), 0..=MAX_ACK_RANGES)
            )
                .prop_map(
                    |((conn, channel, largest, ack_delay_us, echo_ts, first_range), ranges)| {
                        Packet::Ack(Ack {
                            conn,
                            channel,
                            largest,
                            ack_delay_us,
                            echo_ts,
                            first_range,
                            ranges,
                        })
                    }
                ),
            any::<(u64, u8, u64, u32)>().prop_map(|(conn, channel, seq, send_ts)| Packet::Ping {
                conn,
                channel,
                seq,
                send_ts
            }),
            any::<u64>().prop_map(|conn| Packet::Close { conn }),
            any::<u64>().prop_map(|conn| Packet::CloseAck { conn }),
            any::<(u64, u64)>().prop_map(|(conn, open)| Packet::Window { conn, open }),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(p in packet()) {
            let mut buf = Vec::new();
            encode(&p, &mut buf);
            let back = decode(&Bytes::from(buf)).unwrap();
            prop_assert_eq!(back, p);
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&Bytes::from(b));
        }

        #[test]
        fn every_truncation_is_an_error(p in packet()) {
            let mut buf = Vec::new();
            encode(&p, &mut buf);
            // Data payloads are open-ended, so only cuts inside the header must fail.
            let must_fail = match p { Packet::Data { .. } => DATA_HEADER_LEN, _ => buf.len() };
            for cut in 0..must_fail {
                prop_assert!(decode(&Bytes::copy_from_slice(&buf[..cut])).is_err(), "cut {}", cut);
            }
        }
    }

    #[test]
    fn rejects_wrong_version_and_type() {
        let mut buf = Vec::new();
        encode(&Packet::Close { conn: 7 }, &mut buf);
        let mut bad = buf.clone();
        bad[0] = (2 << 4) | T_CLOSE;
        assert_eq!(decode(&Bytes::from(bad)), Err(WireError::Version(2)));
        let mut bad = buf.clone();
        bad[0] = (VERSION << 4) | 0x0f;
        assert_eq!(decode(&Bytes::from(bad)), Err(WireError::UnknownType(15)));
        buf.push(0);
        assert_eq!(decode(&Bytes::from(buf)), Err(WireError::Trailing));
    }

    #[test]
    fn lifecycle_packets_match_the_documented_bytes() {
        let conn = 0x0102_0304_0506_0708;
        let mut buf = Vec::new();
        encode(&Packet::CloseAck { conn }, &mut buf);
        assert_eq!(buf, [0x17, 1, 2, 3, 4, 5, 6, 7, 8]);
        buf.clear();
        encode(&Packet::Window { conn, open: 65536 }, &mut buf);
        assert_eq!(buf, [0x18, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(
            decode(&Bytes::from(buf)),
            Ok(Packet::Window { conn, open: 65536 })
        );
    }

    #[test]
    fn ack_ranges_expand() {
        let a = Ack {
            conn: 1,
            channel: 0,
            largest: 20,
            ack_delay_us: 0,
            echo_ts: 0,
            first_range: 2,
            ranges: vec![(1, 3), (0, 0)],
        };
        // 18..=20, skip 16..=17, 12..=15, skip 11, 10..=10
        let got: Vec<_> = a.iter_ranges().collect();
        assert_eq!(got, vec![(18, 20), (12, 15), (10, 10)]);
        let hostile = Ack {
            first_range: 50,
            ..a
        };
        assert_eq!(hostile.iter_ranges().count(), 0);
    }
}
