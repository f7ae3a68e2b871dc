//! The wire format, version 3 (documented in `docs/wire.md`).
//!
//! Every datagram starts with one byte: the version in the high nibble and the packet
//! type in the low nibble, then the 64-bit connection id. All integers are big-endian and
//! fixed width: decoding is a handful of bounds-checked loads, which keeps the codec far
//! above the packet rates any set of cellular links can produce. Decoding never panics;
//! anything malformed is a [`WireError`].
//!
//! Version 2 adds [`Packet::Packed`]: several ADUs in one packet. A packet with one ADU
//! is still a [`Packet::Data`], laid out exactly as in version 1, so one-ADU-per-slot
//! sessions send the same bytes (and the same packet sizes) as before. Version 3 keeps
//! every layout and changes what [`Packet::Window`] means: a cumulative credit limit
//! instead of the room left now, so a version-2 peer would misread it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::Bytes;
use horde_policy::ChannelId;
use thiserror::Error;

/// The wire version this end speaks, the high nibble of every datagram's first byte.
pub const VERSION: u8 = 3;
/// Most address aliases a handshake may carry.
pub const MAX_ALIASES: usize = 16;
/// Most ack ranges one ack carries.
pub const MAX_ACK_RANGES: usize = 32;
/// Bytes before the payload of a data packet.
pub const DATA_HEADER_LEN: usize = 1 + 8 + 1 + 1 + 8 + 4 + 4 + 8;
/// Bytes of a packed data packet before its first ADU entry.
pub(crate) const PACKED_HEADER_LEN: usize = 1 + 8 + 1 + 8 + 4 + 1;
/// Bytes of one ADU entry of a packed data packet before its payload.
pub(crate) const PACKED_ENTRY_LEN: usize = 1 + 4 + 8 + 2;
/// Most ADUs one packed data packet carries.
pub const MAX_PACKED_ADUS: usize = 32;
/// Bytes of an ack before its `(gap, len)` pairs.
pub(crate) const ACK_HEADER_LEN: usize = 1 + 8 + 1 + 8 + 4 + 4 + 8 + 1;
/// Bytes of one `(gap, len)` pair.
const ACK_RANGE_LEN: usize = 16;

const T_HELLO: u8 = 1;
const T_HELLO_ACK: u8 = 2;
const T_DATA: u8 = 3;
const T_ACK: u8 = 4;
const T_PING: u8 = 5;
const T_CLOSE: u8 = 6;
const T_PACKED: u8 = 7;
const T_CLOSE_ACK: u8 = 8;
const T_WINDOW: u8 = 9;
const T_REFUSED: u8 = 10;

/// Flags of a data packet.
pub const FLAG_ORDERED: u8 = 0x01;
/// The ADU's payload starts with a recovery frame (`docs/recovery.md`).
pub(crate) const FLAG_RECOVERY: u8 = 0x02;

/// One decoded packet. Payloads borrow nothing: `Bytes` slices share the input buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    /// Opens a session: the initiator's service id and every address it can be reached at.
    Hello {
        /// The connection id (the client's choice), in every packet.
        conn: u64,
        /// The channel the packet belongs to (the same id at both ends).
        channel: ChannelId,
        /// Which service of the responder the session is for (a listening port, of sorts).
        service: u32,
        /// The initiator's addresses, at most [`MAX_ALIASES`].
        aliases: Vec<SocketAddr>,
    },
    /// Accepts a session and lists the responder's aliases.
    HelloAck {
        /// The connection id (the client's choice), in every packet.
        conn: u64,
        /// The channel the packet belongs to (the same id at both ends).
        channel: ChannelId,
        /// The responder's addresses, at most [`MAX_ALIASES`].
        aliases: Vec<SocketAddr>,
    },
    /// One ADU in one slot of one channel.
    Data {
        /// The connection id (the client's choice), in every packet.
        conn: u64,
        /// The channel the packet belongs to (the same id at both ends).
        channel: ChannelId,
        /// [`FLAG_ORDERED`] and the recovery-frame flag.
        flags: u8,
        /// Per-channel sequence number.
        seq: u64,
        /// Sender's clock when sent, in microseconds (wrapping); echoed in acks.
        send_ts: u32,
        /// The application stream the ADU belongs to.
        stream: u32,
        /// The ADU's sequence number within its stream, for ordering and duplicates.
        stream_seq: u64,
        /// The ADU's bytes.
        payload: Bytes,
    },
    /// Acknowledges data and pings received on one channel.
    Ack(Ack),
    /// A liveness probe in the channel's sequence space, acked like data.
    Ping {
        /// The connection id (the client's choice), in every packet.
        conn: u64,
        /// The channel the packet belongs to (the same id at both ends).
        channel: ChannelId,
        /// Per-channel sequence number, shared with `Data` and `Packed`.
        seq: u64,
        /// Sender's clock when sent, in microseconds (wrapping); echoed in acks.
        send_ts: u32,
    },
    /// Ends the session; repeated until a [`Packet::CloseAck`] answers it or a timeout.
    Close {
        /// The connection being closed.
        conn: u64,
    },
    /// Answers every `Close` received, so the closing end can stop repeating it.
    CloseAck {
        /// The connection whose `Close` is answered.
        conn: u64,
    },
    /// The responder's answer to a hello for a service it does not serve: the session
    /// is refused, and the initiator stops. (Added within version 3: a peer that does
    /// not know the type drops it as malformed, as before.)
    Refused {
        /// The connection whose hello is refused.
        conn: u64,
        /// The service the hello asked for.
        service: u32,
    },
    /// Receive-side flow control, by credit: the receiver's cumulative limit on the
    /// payload bytes of data packets it takes in over the session (what it has taken
    /// in plus the room left in its buffer). It only grows; the sender keeps what it has
    /// sent, less what it saw declared lost, within it.
    Window {
        /// The connection the window is for.
        conn: u64,
        /// Payload bytes the receiver may take in since the session began.
        limit: u64,
    },
    /// Several ADUs in one slot of one channel (version 2). Acked, and declared lost, as
    /// one packet; each ADU is delivered on its own.
    Packed {
        /// The connection id (the client's choice), in every packet.
        conn: u64,
        /// The channel the packet belongs to (the same id at both ends).
        channel: ChannelId,
        /// Per-channel sequence number, shared with `Data` and `Ping`.
        seq: u64,
        /// Sender's clock when sent, in microseconds (wrapping); echoed in acks.
        send_ts: u32,
        /// The ADUs, two or more.
        adus: PackedAdus,
    },
}

/// One ADU of a [`Packet::Packed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedAdu {
    /// Data flags of this ADU ([`FLAG_ORDERED`]).
    pub flags: u8,
    /// The application stream it belongs to.
    pub stream: u32,
    /// Its sequence number within the stream.
    pub stream_seq: u64,
    /// Its bytes (under 64 KiB: the entry's length field is 16 bits).
    pub payload: Bytes,
}

/// The ADU entries of a packed packet, kept in their wire encoding: decoding checks them
/// once and then hands out zero-copy slices, so receiving a packed packet allocates
/// nothing.
#[derive(Clone, PartialEq, Eq)]
pub struct PackedAdus {
    count: u8,
    /// `count` entries, each `flags u8, stream u32, stream_seq u64, len u16, payload`.
    body: Bytes,
}

impl PackedAdus {
    /// Encode `adus` (at most [`MAX_PACKED_ADUS`], each payload under 64 KiB; tests and
    /// tools: the session writes entries straight into the datagram).
    pub fn new(adus: &[PackedAdu]) -> Result<Self, WireError> {
        if adus.is_empty() || adus.len() > MAX_PACKED_ADUS {
            return Err(WireError::TooMany(adus.len()));
        }
        let mut body = Vec::new();
        for a in adus {
            let len = u16::try_from(a.payload.len()).map_err(|_| WireError::TooLong)?;
            put_packed_entry(a.flags, a.stream, a.stream_seq, len, &mut body);
            body.extend_from_slice(&a.payload);
        }
        Ok(Self {
            count: adus.len() as u8,
            body: Bytes::from(body),
        })
    }

    /// How many ADUs the packet carries.
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    /// Whether it carries none (never true of a decoded packet).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The ADUs in packet order; payloads share the datagram's buffer.
    pub fn iter(&self) -> impl Iterator<Item = PackedAdu> + '_ {
        let mut pos = 0;
        (0..self.count).map(move |_| {
            let h = &self.body[pos..pos + PACKED_ENTRY_LEN];
            let len = usize::from(u16::from_be_bytes([h[13], h[14]]));
            let start = pos + PACKED_ENTRY_LEN;
            pos = start + len;
            PackedAdu {
                flags: h[0],
                stream: be32(h, 1),
                stream_seq: be64(h, 5),
                payload: self.body.slice(start..pos),
            }
        })
    }

    /// Check `count` entries that fill `body` exactly.
    fn parse(count: u8, body: Bytes) -> Result<Self, WireError> {
        if count == 0 || usize::from(count) > MAX_PACKED_ADUS {
            return Err(WireError::TooMany(usize::from(count)));
        }
        let mut pos = 0usize;
        for _ in 0..count {
            let h = body
                .get(pos..pos + PACKED_ENTRY_LEN)
                .ok_or(WireError::Truncated)?;
            let len = usize::from(u16::from_be_bytes([h[13], h[14]]));
            pos += PACKED_ENTRY_LEN + len;
            if pos > body.len() {
                return Err(WireError::Truncated);
            }
        }
        if pos != body.len() {
            return Err(WireError::Trailing);
        }
        Ok(Self { count, body })
    }
}

impl std::fmt::Debug for PackedAdus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Ranges are QUIC-style: `largest` and `first_range` packets below it are received; then
/// each `(gap, len)` skips `gap + 1` missing numbers and covers `len + 1` received ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    /// The connection id.
    pub conn: u64,
    /// The channel whose sequence numbers are acknowledged.
    pub channel: ChannelId,
    /// The highest sequence number received on the channel.
    pub largest: u64,
    /// How long the receiver held the ack after receiving `largest`, in microseconds.
    pub ack_delay_us: u32,
    /// The `send_ts` of packet `largest`.
    pub echo_ts: u32,
    /// How many packets directly below `largest` were received too.
    pub first_range: u64,
    /// Further `(gap, len)` pairs, descending, at most [`MAX_ACK_RANGES`].
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
    /// The packet's type, by name, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Packet::Hello { .. } => "hello",
            Packet::HelloAck { .. } => "hello-ack",
            Packet::Data { .. } => "data",
            Packet::Packed { .. } => "packed",
            Packet::Ack(_) => "ack",
            Packet::Ping { .. } => "ping",
            Packet::Close { .. } => "close",
            Packet::CloseAck { .. } => "close-ack",
            Packet::Window { .. } => "window",
            Packet::Refused { .. } => "refused",
        }
    }

    /// The connection id, which every packet type carries.
    pub fn conn(&self) -> u64 {
        match self {
            Packet::Hello { conn, .. }
            | Packet::HelloAck { conn, .. }
            | Packet::Data { conn, .. }
            | Packet::Ping { conn, .. }
            | Packet::Close { conn }
            | Packet::CloseAck { conn }
            | Packet::Window { conn, .. }
            | Packet::Refused { conn, .. }
            | Packet::Packed { conn, .. } => *conn,
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

/// The version of a datagram that is a hello of a version this end does not speak: the
/// hello type and the connection id sit where they always have, so an endpoint can refuse
/// an old peer by name ([`SessionError::UnsupportedVersion`]) instead of dropping its
/// hellos as noise.
///
/// [`SessionError::UnsupportedVersion`]: crate::SessionError::UnsupportedVersion
pub(crate) fn foreign_hello_version(datagram: &[u8]) -> Option<u8> {
    let first = *datagram.first()?;
    let version = first >> 4;
    (first & 0x0f == T_HELLO && version != VERSION && datagram.len() >= 9).then_some(version)
}

/// Why a datagram does not decode (or a packed packet cannot be built).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum WireError {
    /// The datagram ends before a field it must hold.
    #[error("datagram truncated")]
    Truncated,
    /// The version nibble is not [`VERSION`].
    #[error("unsupported version {0}")]
    Version(u8),
    /// The type nibble names no packet type.
    #[error("unknown packet type {0}")]
    UnknownType(u8),
    /// An alias's address family byte is neither IPv4 nor IPv6.
    #[error("bad address family {0}")]
    AddressFamily(u8),
    /// More aliases, ack ranges or packed ADUs than the limits allow (or no packed ADU).
    #[error("too many entries ({0})")]
    TooMany(usize),
    /// Bytes left over after a complete packet.
    #[error("trailing bytes after packet")]
    Trailing,
    /// A packed ADU's payload does not fit its 16-bit length field.
    #[error("ADU too long for a packed entry")]
    TooLong,
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
            out.push(u8::from(*channel));
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
            out.push(u8::from(*channel));
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
        Packet::Ack(a) => encode_ack(a, out),
        Packet::Ping {
            conn,
            channel,
            seq,
            send_ts,
        } => {
            out.push(header(T_PING));
            out.extend_from_slice(&conn.to_be_bytes());
            out.push(u8::from(*channel));
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
        Packet::Window { conn, limit } => {
            out.push(header(T_WINDOW));
            out.extend_from_slice(&conn.to_be_bytes());
            out.extend_from_slice(&limit.to_be_bytes());
        }
        Packet::Refused { conn, service } => {
            out.push(header(T_REFUSED));
            out.extend_from_slice(&conn.to_be_bytes());
            out.extend_from_slice(&service.to_be_bytes());
        }
        Packet::Packed {
            conn,
            channel,
            seq,
            send_ts,
            adus,
        } => {
            out.reserve(PACKED_HEADER_LEN + adus.body.len());
            encode_packed_header(*conn, *channel, *seq, *send_ts, adus.count, out);
            out.extend_from_slice(&adus.body);
        }
    }
}

/// Append the encoding of an ack (as [`encode`] of a [`Packet::Ack`], without moving it).
pub(crate) fn encode_ack(a: &Ack, out: &mut Vec<u8>) {
    let n = a.ranges.len().min(MAX_ACK_RANGES);
    let mut h = [0u8; ACK_HEADER_LEN];
    h[0] = header(T_ACK);
    h[1..9].copy_from_slice(&a.conn.to_be_bytes());
    h[9] = u8::from(a.channel);
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

/// Write a packed data header for `count` ADUs; the caller appends each entry with
/// [`encode_packed_entry`] and its payload.
pub(crate) fn encode_packed_header(
    conn: u64,
    channel: ChannelId,
    seq: u64,
    send_ts: u32,
    count: u8,
    out: &mut Vec<u8>,
) {
    let mut h = [0u8; PACKED_HEADER_LEN];
    h[0] = header(T_PACKED);
    h[1..9].copy_from_slice(&conn.to_be_bytes());
    h[9] = u8::from(channel);
    h[10..18].copy_from_slice(&seq.to_be_bytes());
    h[18..22].copy_from_slice(&send_ts.to_be_bytes());
    h[22] = count;
    out.extend_from_slice(&h);
}

/// Write one packed ADU entry followed by its payload.
pub(crate) fn encode_packed_entry(
    flags: u8,
    stream: u32,
    stream_seq: u64,
    payload: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), WireError> {
    let len = u16::try_from(payload.len()).map_err(|_| WireError::TooLong)?;
    put_packed_entry(flags, stream, stream_seq, len, out);
    out.extend_from_slice(payload);
    Ok(())
}

fn put_packed_entry(flags: u8, stream: u32, stream_seq: u64, len: u16, out: &mut Vec<u8>) {
    let mut h = [0u8; PACKED_ENTRY_LEN];
    h[0] = flags;
    h[1..5].copy_from_slice(&stream.to_be_bytes());
    h[5..13].copy_from_slice(&stream_seq.to_be_bytes());
    h[13..15].copy_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&h);
}

/// Write a data header; the caller appends the payload. Avoids building a `Packet` on
/// the send hot path.
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode_data_header(
    conn: u64,
    channel: ChannelId,
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
    h[9] = u8::from(channel);
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
    decode_reusing(datagram, &mut Vec::new())
}

/// [`decode`], building an ack's range list in `spare` (taken from it) rather than a new
/// `Vec`: a receiver that hands each ack's list back decodes acks without allocating.
pub(crate) fn decode_reusing(
    datagram: &Bytes,
    spare: &mut Vec<(u64, u64)>,
) -> Result<Packet, WireError> {
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
            channel: ChannelId::new(r.u8()?),
            service: r.u32()?,
            aliases: r.aliases()?,
        },
        T_HELLO_ACK => Packet::HelloAck {
            conn,
            channel: ChannelId::new(r.u8()?),
            aliases: r.aliases()?,
        },
        T_DATA => {
            let h = r.array::<{ DATA_HEADER_LEN - 9 }>()?;
            let payload = datagram.slice(r.pos..);
            r.pos = datagram.len();
            Packet::Data {
                conn,
                channel: ChannelId::new(h[0]),
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
            let mut ranges = std::mem::take(spare);
            ranges.clear();
            ranges.extend(
                body.chunks_exact(ACK_RANGE_LEN)
                    .map(|c| (be64(c, 0), be64(c, 8))),
            );
            Packet::Ack(Ack {
                conn,
                channel: ChannelId::new(h[0]),
                largest: be64(h, 1),
                ack_delay_us: be32(h, 9),
                echo_ts: be32(h, 13),
                first_range: be64(h, 17),
                ranges,
            })
        }
        T_PING => Packet::Ping {
            conn,
            channel: ChannelId::new(r.u8()?),
            seq: r.u64()?,
            send_ts: r.u32()?,
        },
        T_CLOSE => Packet::Close { conn },
        T_CLOSE_ACK => Packet::CloseAck { conn },
        T_WINDOW => Packet::Window {
            conn,
            limit: r.u64()?,
        },
        T_REFUSED => Packet::Refused {
            conn,
            service: r.u32()?,
        },
        T_PACKED => {
            let h = r.array::<{ PACKED_HEADER_LEN - 9 }>()?;
            let body = datagram.slice(r.pos..);
            r.pos = datagram.len();
            Packet::Packed {
                conn,
                channel: ChannelId::new(h[0]),
                seq: be64(h, 1),
                send_ts: be32(h, 9),
                adus: PackedAdus::parse(h[13], body)?,
            }
        }
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
                    channel: ChannelId::new(channel),
                    service,
                    aliases
                }
            ),
            (any::<u64>(), any::<u8>(), aliases()).prop_map(|(conn, channel, aliases)| {
                Packet::HelloAck {
                    conn,
                    channel: ChannelId::new(channel),
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
                            channel: ChannelId::new(channel),
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
                            channel: ChannelId::new(channel),
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
                channel: ChannelId::new(channel),
                seq,
                send_ts
            }),
            any::<u64>().prop_map(|conn| Packet::Close { conn }),
            any::<u64>().prop_map(|conn| Packet::CloseAck { conn }),
            any::<(u64, u64)>().prop_map(|(conn, limit)| Packet::Window { conn, limit }),
            any::<(u64, u32)>().prop_map(|(conn, service)| Packet::Refused { conn, service }),
            (any::<(u64, u8, u64, u32)>(), packed_adus()).prop_map(
                |((conn, channel, seq, send_ts), adus)| Packet::Packed {
                    conn,
                    channel: ChannelId::new(channel),
                    seq,
                    send_ts,
                    adus: PackedAdus::new(&adus).unwrap(),
                }
            ),
        ]
    }

    /// 1 to 32 ADUs of mixed sizes: mostly small (speech frames, samples, acks), some
    /// empty, some large.
    fn packed_adus() -> impl Strategy<Value = Vec<PackedAdu>> {
        let payload = prop_oneof![
            4 => prop::collection::vec(any::<u8>(), 0..64),
            1 => prop::collection::vec(any::<u8>(), 64..1400),
        ];
        let adu =
            (any::<(u8, u32, u64)>(), payload).prop_map(|((flags, stream, stream_seq), p)| {
                PackedAdu {
                    flags,
                    stream,
                    stream_seq,
                    payload: Bytes::from(p),
                }
            });
        prop::collection::vec(adu, 1..=MAX_PACKED_ADUS)
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
        fn packed_round_trip_through_the_session_encoder(
            (conn, channel, seq, send_ts) in any::<(u64, u8, u64, u32)>(),
            adus in packed_adus(),
        ) {
            // The session writes the header and each entry itself; the decoder must give
            // back every ADU, in order, with its flags and payload.
            let mut buf = Vec::new();
            encode_packed_header(conn, ChannelId::new(channel), seq, send_ts, adus.len() as u8, &mut buf);
            for a in &adus {
                encode_packed_entry(a.flags, a.stream, a.stream_seq, &a.payload, &mut buf).unwrap();
            }
            let expected_len = PACKED_HEADER_LEN
                + adus.iter().map(|a| PACKED_ENTRY_LEN + a.payload.len()).sum::<usize>();
            prop_assert_eq!(buf.len(), expected_len);
            let Packet::Packed { conn: c, channel: ch, seq: q, send_ts: ts, adus: got } =
                decode(&Bytes::from(buf)).unwrap()
            else {
                return Err(TestCaseError::fail("not a packed packet"));
            };
            prop_assert_eq!((c, u8::from(ch), q, ts), (conn, channel, seq, send_ts));
            prop_assert_eq!(got.len(), adus.len());
            prop_assert_eq!(got.iter().collect::<Vec<_>>(), adus);
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
            // Packed entries carry their lengths, so every cut of a packed packet fails.
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
        bad[0] = (1 << 4) | T_CLOSE;
        assert_eq!(decode(&Bytes::from(bad)), Err(WireError::Version(1)));
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
        assert_eq!(buf, [0x38, 1, 2, 3, 4, 5, 6, 7, 8]);
        buf.clear();
        encode(&Packet::Window { conn, limit: 65536 }, &mut buf);
        assert_eq!(buf, [0x39, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(
            decode(&Bytes::from(buf)),
            Ok(Packet::Window { conn, limit: 65536 })
        );
    }

    #[test]
    fn packed_counts_and_lengths_are_checked() {
        let adu = |n: usize| PackedAdu {
            flags: 0,
            stream: 1,
            stream_seq: 2,
            payload: Bytes::from(vec![7; n]),
        };
        assert_eq!(PackedAdus::new(&[]), Err(WireError::TooMany(0)));
        let many: Vec<_> = (0..=MAX_PACKED_ADUS).map(|_| adu(1)).collect();
        assert_eq!(
            PackedAdus::new(&many),
            Err(WireError::TooMany(MAX_PACKED_ADUS + 1))
        );
        assert_eq!(PackedAdus::new(&[adu(70_000)]), Err(WireError::TooLong));
        let p = Packet::Packed {
            conn: 9,
            channel: ChannelId::new(1),
            seq: 3,
            send_ts: 4,
            adus: PackedAdus::new(&[adu(3), adu(0)]).unwrap(),
        };
        let mut buf = Vec::new();
        encode(&p, &mut buf);
        assert_eq!(buf.len(), PACKED_HEADER_LEN + 2 * PACKED_ENTRY_LEN + 3);
        // A count of zero, or one past the entries present, is refused.
        let mut zero = buf.clone();
        zero[PACKED_HEADER_LEN - 1] = 0;
        assert_eq!(decode(&Bytes::from(zero)), Err(WireError::TooMany(0)));
        let mut more = buf.clone();
        more[PACKED_HEADER_LEN - 1] = 3;
        assert_eq!(decode(&Bytes::from(more)), Err(WireError::Truncated));
        let mut fewer = buf.clone();
        fewer[PACKED_HEADER_LEN - 1] = 1;
        assert_eq!(decode(&Bytes::from(fewer)), Err(WireError::Trailing));
        // A length that runs past the datagram.
        let mut long = buf;
        long[PACKED_HEADER_LEN + 14] = 200;
        assert_eq!(decode(&Bytes::from(long)), Err(WireError::Truncated));
    }

    #[test]
    fn packed_example_of_the_documentation() {
        let adu = |flags, stream, stream_seq, p: &'static [u8]| PackedAdu {
            flags,
            stream,
            stream_seq,
            payload: Bytes::from_static(p),
        };
        let p = Packet::Packed {
            conn: 0x0102_0304_0506_0708,
            channel: ChannelId::new(2),
            seq: 7,
            send_ts: 1_000_000,
            adus: PackedAdus::new(&[adu(FLAG_ORDERED, 5, 3, b"hi"), adu(0, 6, 0, b"abc")]).unwrap(),
        };
        let mut buf = Vec::new();
        encode(&p, &mut buf);
        let hex: String = buf.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            concat!(
                "37",
                "0102030405060708",
                "02",
                "0000000000000007",
                "000f4240",
                "02",
                "01",
                "00000005",
                "0000000000000003",
                "0002",
                "6869",
                "00",
                "00000006",
                "0000000000000000",
                "0003",
                "616263",
            )
        );
        assert_eq!(buf.len(), 58);
    }

    #[test]
    fn an_old_hello_is_recognised_as_such() {
        let hello = Packet::Hello {
            conn: 5,
            channel: ChannelId::new(0),
            service: 1,
            aliases: Vec::new(),
        };
        let mut buf = Vec::new();
        encode(&hello, &mut buf);
        assert_eq!(foreign_hello_version(&buf), None, "our own version");
        buf[0] = (1 << 4) | T_HELLO;
        assert_eq!(foreign_hello_version(&buf), Some(1));
        assert_eq!(
            decode(&Bytes::from(buf.clone())),
            Err(WireError::Version(1))
        );
        buf[0] = (1 << 4) | T_DATA;
        assert_eq!(foreign_hello_version(&buf), None, "not a hello");
        assert_eq!(
            foreign_hello_version(&[0x11]),
            None,
            "too short for a conn id"
        );
    }

    #[test]
    fn ack_ranges_expand() {
        let a = Ack {
            conn: 1,
            channel: ChannelId::new(0),
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
