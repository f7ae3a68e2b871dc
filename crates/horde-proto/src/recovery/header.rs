//! The recovery frame at the front of a recovery stream's ADU payload (`docs/recovery.md`,
//! "Wire format"). All integers big-endian.
//!
//! ```text
//! Data    0x00 | seq u64 | payload
//! Xor     0x01 | base u64 | count u8 | count x offset u16 | len_xor u16 | xor of payloads
//! Parity  0x02 | first u64 | data u8 | parity u8 | index u8 | shard (even length)
//! Report  0x03 | count u8 | count x (channel u8 | loss u16 | delay_us i32 | capacity u32)
//! ```

use bytes::{BufMut, Bytes};
use horde_policy::ChannelId;
use thiserror::Error;

use super::config::MAX_BLOCK_DATA;

pub(crate) const KIND_DATA: u8 = 0;
pub(crate) const KIND_XOR: u8 = 1;
pub(crate) const KIND_PARITY: u8 = 2;
pub(crate) const KIND_REPORT: u8 = 3;
/// Most channels one report describes.
pub const MAX_REPORTED: usize = 32;
const REPORT_ENTRY_LEN: usize = 11;
/// `delay_us` of a channel without a delay estimate.
pub const NO_DELAY: i32 = i32::MIN;

/// Most data ADUs one XOR-coded ADU covers. `max(1, floor(-1/ln r))` passes 32 only
/// when r > 0.97, where each extra constituent adds under 1% to the expected yield.
pub const MAX_DEGREE: usize = 32;
/// Largest gap, in tunnel sequence numbers, between the lowest and highest constituent.
pub const MAX_SPAN: u64 = u16::MAX as u64;
pub(crate) const DATA_HEADER_LEN: usize = 9;
/// Header bytes of the largest XOR frame.
pub const MAX_XOR_HEADER_LEN: usize = 1 + 8 + 1 + 2 * MAX_DEGREE + 2;
pub(crate) const PARITY_HEADER_LEN: usize = 12;
/// Parity shards carry a 2-byte length and up to one pad byte besides the payload.
const PARITY_SHARD_EXTRA: usize = 3;
/// What a recovery stream's ADU may carry less than the session's largest ADU: room for
/// the biggest frame any mode builds around a payload of that size.
pub const MAX_OVERHEAD: usize = MAX_XOR_HEADER_LEN;
const _: () = assert!(PARITY_HEADER_LEN + PARITY_SHARD_EXTRA <= MAX_OVERHEAD);

/// One decoded recovery frame. Payloads are zero-copy slices of the ADU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// One application ADU under its tunnel sequence number.
    Data {
        /// The stream's recovery sequence number, from 0, one per data ADU.
        seq: u64,
        /// The application's bytes.
        payload: Bytes,
    },
    /// The XOR of the payloads of data ADUs `seqs` (ascending, distinct), each zero-padded
    /// to the longest, and the XOR of their lengths.
    Xor {
        /// The constituents' sequence numbers (on the wire: a base and u16 offsets).
        seqs: Vec<u64>,
        /// XOR of the constituents' payload lengths, to restore the missing one's.
        len_xor: u16,
        /// XOR of the zero-padded payloads.
        payload: Bytes,
    },
    /// Reed-Solomon recovery shard `index` of `parity` for the block of `data` data ADUs
    /// numbered from `first`.
    Parity {
        /// Sequence number of the block's first data ADU.
        first: u64,
        /// Data ADUs in the block.
        data: u8,
        /// Parity shards the block has in all.
        parity: u8,
        /// Which parity shard this is, below `parity`.
        index: u8,
        /// The shard: the Reed-Solomon code over the block's length-prefixed payloads.
        shard: Bytes,
    },
    /// The receiver's estimates of the sender's channels, sent back on the same stream.
    Report(Vec<ReportEntry>),
}

/// One channel in a [`Frame::Report`]: loss in units of 1/65535, `d + δ` in µs
/// ([`NO_DELAY`] when unknown), capacity in bytes/s (0 when unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportEntry {
    /// The sender's channel the estimates are for.
    pub channel: ChannelId,
    /// Loss rate, in units of 1/65535.
    pub loss: u16,
    /// One-way delay estimate `d + δ`, µs; [`NO_DELAY`] when unknown.
    pub delay_us: i32,
    /// Capacity estimate, bytes/s; 0 when unknown.
    pub capacity: u32,
}

/// Why a recovery frame does not decode. Malformed frames are counted and dropped; they
/// never reach the application.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    /// The ADU has no bytes, so no kind byte.
    #[error("recovery frame is empty")]
    Empty,
    /// The kind byte is none of data, xor, parity or report.
    #[error("unknown recovery frame kind {0:#04x}")]
    UnknownKind(u8),
    /// The ADU ends inside the frame's header.
    #[error("recovery frame truncated: {need} header bytes, {have} present")]
    Truncated {
        /// Header bytes the frame kind needs.
        need: usize,
        /// Bytes the ADU has.
        have: usize,
    },
    /// An XOR frame with no constituents or more than the largest degree.
    #[error("xor frame covers {0} ADUs (1..={MAX_DEGREE} allowed)")]
    BadDegree(usize),
    /// An XOR frame's offsets do not start at 0 and rise strictly.
    #[error("xor frame offsets are not strictly increasing from 0")]
    BadOffsets,
    /// A parity frame's block shape is impossible (too large, or index past `parity`).
    #[error("parity frame block of {data} data and {parity} parity, index {index}: out of range")]
    BadBlock {
        /// Data ADUs claimed.
        data: u8,
        /// Parity shards claimed.
        parity: u8,
        /// The shard's index.
        index: u8,
    },
    /// A parity shard that is empty or of odd length (the code works on 2-byte words).
    #[error("parity shard of {0} bytes (must be non-zero and even)")]
    BadShard(usize),
    /// A report whose length does not match its entry count.
    #[error("report of {count} channels in {len} bytes")]
    BadReport {
        /// Entries claimed.
        count: usize,
        /// Bytes after the header.
        len: usize,
    },
}

fn need(buf: &[u8], n: usize) -> Result<(), FrameError> {
    if buf.len() < n {
        Err(FrameError::Truncated {
            need: n,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Bytes of a recovery stream's ADU past its recovery header: the application's payload
/// in a data frame, the coded bytes in the others. The session charges a stream's rate
/// with these, so the layer's own headers do not eat into what the application declared
/// (`max_kbps`). Only for frames this end built; a short or unknown one counts whole.
pub fn carried_len(adu: &[u8]) -> usize {
    let header = match adu.first() {
        Some(&KIND_DATA) => DATA_HEADER_LEN,
        Some(&KIND_XOR) => adu
            .get(9)
            .map_or(0, |&count| 10 + 2 * usize::from(count) + 2),
        Some(&KIND_PARITY) => PARITY_HEADER_LEN,
        _ => 0,
    };
    adu.len().saturating_sub(header)
}

/// Parse a recovery stream's ADU. Never panics; every malformed input is an error.
pub fn decode(adu: &Bytes) -> Result<Frame, FrameError> {
    let b = &adu[..];
    let kind = *b.first().ok_or(FrameError::Empty)?;
    match kind {
        KIND_DATA => {
            need(b, DATA_HEADER_LEN)?;
            Ok(Frame::Data {
                seq: u64_at(b, 1),
                payload: adu.slice(DATA_HEADER_LEN..),
            })
        }
        KIND_XOR => {
            need(b, 10)?;
            let base = u64_at(b, 1);
            let count = usize::from(b[9]);
            if !(1..=MAX_DEGREE).contains(&count) {
                return Err(FrameError::BadDegree(count));
            }
            let header = 10 + 2 * count + 2;
            need(b, header)?;
            let mut seqs = Vec::with_capacity(count);
            let mut prev: Option<u16> = None;
            for i in 0..count {
                let off = u16_at(b, 10 + 2 * i);
                let ok = match prev {
                    None => off == 0,
                    Some(p) => off > p,
                };
                if !ok {
                    return Err(FrameError::BadOffsets);
                }
                prev = Some(off);
                seqs.push(
                    base.checked_add(u64::from(off))
                        .ok_or(FrameError::BadOffsets)?,
                );
            }
            Ok(Frame::Xor {
                seqs,
                len_xor: u16_at(b, 10 + 2 * count),
                payload: adu.slice(header..),
            })
        }
        KIND_PARITY => {
            need(b, PARITY_HEADER_LEN)?;
            let (data, parity, index) = (b[9], b[10], b[11]);
            if !(1..=MAX_BLOCK_DATA).contains(&usize::from(data))
                || parity == 0
                || parity > data
                || index >= parity
            {
                return Err(FrameError::BadBlock {
                    data,
                    parity,
                    index,
                });
            }
            let shard = adu.slice(PARITY_HEADER_LEN..);
            if shard.is_empty() || !shard.len().is_multiple_of(2) {
                return Err(FrameError::BadShard(shard.len()));
            }
            Ok(Frame::Parity {
                first: u64_at(b, 1),
                data,
                parity,
                index,
                shard,
            })
        }
        KIND_REPORT => {
            need(b, 2)?;
            let count = usize::from(b[1]);
            if count > MAX_REPORTED || b.len() != 2 + count * REPORT_ENTRY_LEN {
                return Err(FrameError::BadReport {
                    count,
                    len: b.len(),
                });
            }
            Ok(Frame::Report(
                b[2..]
                    .chunks_exact(REPORT_ENTRY_LEN)
                    .map(|e| ReportEntry {
                        channel: ChannelId::new(e[0]),
                        loss: u16_at(e, 1),
                        delay_us: i32::from_be_bytes([e[3], e[4], e[5], e[6]]),
                        capacity: u32::from_be_bytes([e[7], e[8], e[9], e[10]]),
                    })
                    .collect(),
            ))
        }
        k => Err(FrameError::UnknownKind(k)),
    }
}

/// Frame a report (at most [`MAX_REPORTED`] entries; extra ones are left out).
pub fn encode_report(entries: &[ReportEntry]) -> Bytes {
    let entries = &entries[..entries.len().min(MAX_REPORTED)];
    let mut out = Vec::with_capacity(2 + entries.len() * REPORT_ENTRY_LEN);
    out.put_u8(KIND_REPORT);
    out.put_u8(entries.len() as u8);
    for e in entries {
        out.put_u8(u8::from(e.channel));
        out.put_u16(e.loss);
        out.put_i32(e.delay_us);
        out.put_u32(e.capacity);
    }
    out.into()
}

/// Frame a data ADU.
pub fn encode_data(seq: u64, payload: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(DATA_HEADER_LEN + payload.len());
    out.put_u8(KIND_DATA);
    out.put_u64(seq);
    out.extend_from_slice(payload);
    out.into()
}

/// Frame an XOR-coded ADU. `seqs` must be ascending, distinct, at most [`MAX_DEGREE`]
/// and within [`MAX_SPAN`] of each other (the encoder guarantees it).
pub fn encode_xor(seqs: &[u64], len_xor: u16, payload: &[u8]) -> Bytes {
    debug_assert!((1..=MAX_DEGREE).contains(&seqs.len()));
    let base = seqs[0];
    let mut out = Vec::with_capacity(12 + 2 * seqs.len() + payload.len());
    out.put_u8(KIND_XOR);
    out.put_u64(base);
    out.put_u8(seqs.len() as u8);
    for &s in seqs {
        out.put_u16((s - base) as u16);
    }
    out.put_u16(len_xor);
    out.extend_from_slice(payload);
    out.into()
}

/// Frame parity shard `index` of `parity` for the block of `data` data ADUs from
/// `first`.
pub fn encode_parity(first: u64, data: u8, parity: u8, index: u8, shard: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(PARITY_HEADER_LEN + shard.len());
    out.put_u8(KIND_PARITY);
    out.put_u64(first);
    out.put_u8(data);
    out.put_u8(parity);
    out.put_u8(index);
    out.extend_from_slice(shard);
    out.into()
}

/// Encode any frame (tests, fuzzing).
pub fn encode(frame: &Frame) -> Bytes {
    match frame {
        Frame::Data { seq, payload } => encode_data(*seq, payload),
        Frame::Xor {
            seqs,
            len_xor,
            payload,
        } => encode_xor(seqs, *len_xor, payload),
        Frame::Parity {
            first,
            data,
            parity,
            index,
            shard,
        } => encode_parity(*first, *data, *parity, *index, shard),
        Frame::Report(entries) => encode_report(entries),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame() -> impl Strategy<Value = Frame> {
        let payload = proptest::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from);
        prop_oneof![
            (any::<u64>(), payload.clone()).prop_map(|(seq, payload)| Frame::Data { seq, payload }),
            (
                0..u64::MAX - MAX_SPAN,
                proptest::collection::btree_set(0..u16::MAX, 1..=MAX_DEGREE),
                any::<u16>(),
                payload.clone()
            )
                .prop_map(|(base, offs, len_xor, payload)| {
                    let first = *offs.iter().next().unwrap();
                    Frame::Xor {
                        seqs: offs.iter().map(|&o| base + u64::from(o - first)).collect(),
                        len_xor,
                        payload,
                    }
                }),
            proptest::collection::vec(
                (any::<u8>(), any::<u16>(), any::<i32>(), any::<u32>()).prop_map(
                    |(channel, loss, delay_us, capacity)| ReportEntry {
                        channel: ChannelId::new(channel),
                        loss,
                        delay_us,
                        capacity
                    }
                ),
                0..=MAX_REPORTED
            )
            .prop_map(Frame::Report),
            (any::<u64>(), 2u8..=128, 1usize..32, payload)
                .prop_flat_map(|(first, data, half, p)| {
                    (Just(first), Just(data), 1..=data, Just(half), Just(p))
                })
                .prop_flat_map(|(first, data, parity, half, p)| {
                    (0..parity).prop_map(move |index| {
                        let mut shard = p.to_vec();
                        shard.resize(2 * half, 7);
                        Frame::Parity {
                            first,
                            data,
                            parity,
                            index,
                            shard: shard.into(),
                        }
                    })
                }),
        ]
    }

    proptest! {
        #[test]
        fn frames_round_trip(f in frame()) {
            prop_assert_eq!(decode(&encode(&f)).unwrap(), f);
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&Bytes::from(b));
        }

        #[test]
        fn the_carried_length_is_what_follows_the_header(f in frame()) {
            let full = encode(&f);
            let carried = match &f {
                Frame::Data { payload, .. } | Frame::Xor { payload, .. } => payload.len(),
                Frame::Parity { shard, .. } => shard.len(),
                Frame::Report(_) => full.len(),
            };
            prop_assert_eq!(carried_len(&full), carried);
        }

        #[test]
        fn every_truncation_of_a_header_is_an_error(f in frame()) {
            let full = encode(&f);
            let header = full.len() - match &f {
                Frame::Data { payload, .. } | Frame::Xor { payload, .. } => payload.len(),
                Frame::Parity { shard, .. } => shard.len(),
                Frame::Report(_) => 0,
            };
            for cut in 0..header {
                prop_assert!(decode(&full.slice(..cut)).is_err());
            }
        }
    }

    #[test]
    fn malformed_frames_are_named() {
        assert_eq!(decode(&Bytes::new()), Err(FrameError::Empty));
        assert_eq!(
            decode(&Bytes::from_static(&[9])),
            Err(FrameError::UnknownKind(9))
        );
        let mut x = encode_xor(&[5, 7], 3, b"ab").to_vec();
        x[9] = 0;
        assert_eq!(decode(&x.into()), Err(FrameError::BadDegree(0)));
        let mut x = encode_xor(&[5, 7], 3, b"ab").to_vec();
        x[11] = 1; // first offset must be 0
        assert_eq!(decode(&x.into()), Err(FrameError::BadOffsets));
        let p = encode_parity(1, 4, 2, 2, b"ab");
        assert!(matches!(decode(&p), Err(FrameError::BadBlock { .. })));
        let p = encode_parity(1, 4, 2, 1, b"abc");
        assert_eq!(decode(&p), Err(FrameError::BadShard(3)));
    }
}
