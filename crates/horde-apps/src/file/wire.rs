//! The messages of a file transfer, each one ADU on [`STREAM`]: the sender's offer, data
//! pieces and end, the receiver's resume point, confirmations and verdict, and either
//! side's abort. Every message names its transfer, so that a receiver never mixes the
//! pieces of two transfers.

use bytes::{BufMut, Bytes, BytesMut};

/// The stream both ends use, each for its own direction.
pub const STREAM: u32 = 1;
/// Bytes a data message adds in front of its piece.
pub const DATA_HEADER: usize = 1 + 8 + 8;
/// A SHA-256 digest.
pub type Digest = [u8; 32];

// Message types: far from the first byte of a synthetic ADU's stamp (a send time in
// microseconds since 1970, whose top byte is 0), so that a file receiver fed by a
// synthetic sender says so instead of writing its stamps.
const OFFER: u8 = 0xF1;
const DATA: u8 = 0xF2;
const END: u8 = 0xF3;
const ABORT: u8 = 0xF4;
const RESUME: u8 = 0xFA;
const CONFIRM: u8 = 0xFB;
const VERDICT: u8 = 0xFC;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// Sender: "I send transfer `transfer`; where do you stand?" At the start and after
    /// every reconnection, until a [`Msg::Resume`] answers.
    Offer { transfer: u64 },
    /// Sender: the bytes at `offset` of the file.
    Data {
        transfer: u64,
        offset: u64,
        bytes: Bytes,
    },
    /// Sender: the file is `total` bytes long and this is its SHA-256.
    End {
        transfer: u64,
        total: u64,
        sha256: Digest,
    },
    /// Either side gives the transfer up, and says why.
    Abort { transfer: u64, reason: String },
    /// Receiver: it has every byte below `from` written; send the rest.
    Resume { transfer: u64, from: u64 },
    /// Receiver: every byte below `upto` is written and flushed; the sender may forget
    /// them.
    Confirm { transfer: u64, upto: u64 },
    /// Receiver: what it holds, `total` bytes with this SHA-256, after the end.
    Verdict {
        transfer: u64,
        total: u64,
        sha256: Digest,
    },
}

/// A payload that is not a file transfer's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotFileMessage;

impl Msg {
    pub fn transfer(&self) -> u64 {
        match self {
            Msg::Offer { transfer }
            | Msg::Data { transfer, .. }
            | Msg::End { transfer, .. }
            | Msg::Abort { transfer, .. }
            | Msg::Resume { transfer, .. }
            | Msg::Confirm { transfer, .. }
            | Msg::Verdict { transfer, .. } => *transfer,
        }
    }

    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(64);
        let (kind, transfer) = (self.kind(), self.transfer());
        b.put_u8(kind);
        b.put_u64(transfer);
        match self {
            Msg::Offer { .. } => {}
            Msg::Data { offset, bytes, .. } => {
                b.reserve(8 + bytes.len());
                b.put_u64(*offset);
                b.put_slice(bytes);
            }
            Msg::End { total, sha256, .. } | Msg::Verdict { total, sha256, .. } => {
                b.put_u64(*total);
                b.put_slice(sha256);
            }
            Msg::Abort { reason, .. } => b.put_slice(reason.as_bytes()),
            Msg::Resume { from: n, .. } | Msg::Confirm { upto: n, .. } => b.put_u64(*n),
        }
        b.freeze()
    }

    fn kind(&self) -> u8 {
        match self {
            Msg::Offer { .. } => OFFER,
            Msg::Data { .. } => DATA,
            Msg::End { .. } => END,
            Msg::Abort { .. } => ABORT,
            Msg::Resume { .. } => RESUME,
            Msg::Confirm { .. } => CONFIRM,
            Msg::Verdict { .. } => VERDICT,
        }
    }

    pub fn decode(p: &Bytes) -> Result<Msg, NotFileMessage> {
        if p.len() < 9 {
            return Err(NotFileMessage);
        }
        let transfer = u64_at(p, 1)?;
        let rest = p.slice(9..);
        let with_digest = |rest: &Bytes| -> Result<(u64, Digest), NotFileMessage> {
            if rest.len() != 8 + 32 {
                return Err(NotFileMessage);
            }
            let digest = rest[8..].try_into().map_err(|_| NotFileMessage)?;
            Ok((u64_at(rest, 0)?, digest))
        };
        let exactly_u64 = |rest: &Bytes| {
            if rest.len() == 8 {
                u64_at(rest, 0)
            } else {
                Err(NotFileMessage)
            }
        };
        Ok(match p[0] {
            OFFER if rest.is_empty() => Msg::Offer { transfer },
            DATA if rest.len() > 8 => Msg::Data {
                transfer,
                offset: u64_at(&rest, 0)?,
                bytes: rest.slice(8..),
            },
            END => {
                let (total, sha256) = with_digest(&rest)?;
                Msg::End {
                    transfer,
                    total,
                    sha256,
                }
            }
            VERDICT => {
                let (total, sha256) = with_digest(&rest)?;
                Msg::Verdict {
                    transfer,
                    total,
                    sha256,
                }
            }
            ABORT => Msg::Abort {
                transfer,
                reason: String::from_utf8_lossy(&rest).into_owned(),
            },
            RESUME => Msg::Resume {
                transfer,
                from: exactly_u64(&rest)?,
            },
            CONFIRM => Msg::Confirm {
                transfer,
                upto: exactly_u64(&rest)?,
            },
            _ => return Err(NotFileMessage),
        })
    }
}

fn u64_at(b: &[u8], at: usize) -> Result<u64, NotFileMessage> {
    let bytes = b.get(at..at + 8).ok_or(NotFileMessage)?;
    Ok(u64::from_be_bytes(
        bytes.try_into().map_err(|_| NotFileMessage)?,
    ))
}

/// A digest as `sha256sum` prints it.
pub fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_decodes_to_itself() {
        let all = [
            Msg::Offer { transfer: 7 },
            Msg::Data {
                transfer: 7,
                offset: 1 << 40,
                bytes: Bytes::from_static(b"piece"),
            },
            Msg::End {
                transfer: 7,
                total: 50_000_000,
                sha256: [3; 32],
            },
            Msg::Abort {
                transfer: 7,
                reason: "disk full".into(),
            },
            Msg::Resume {
                transfer: 7,
                from: 1200,
            },
            Msg::Confirm {
                transfer: 7,
                upto: 2400,
            },
            Msg::Verdict {
                transfer: 7,
                total: 9,
                sha256: [9; 32],
            },
        ];
        for m in all {
            assert_eq!(Msg::decode(&m.encode()), Ok(m.clone()), "{m:?}");
        }
        let data = Msg::Data {
            transfer: 1,
            offset: 0,
            bytes: Bytes::from_static(b"x"),
        };
        assert_eq!(data.encode().len(), DATA_HEADER + 1);
    }

    #[test]
    fn a_synthetic_adu_or_a_cut_message_is_not_a_file_message() {
        // A stamp: send time in microseconds, then a sequence number.
        let mut stamp = 1_790_000_000_000_000u64.to_be_bytes().to_vec();
        stamp.extend_from_slice(&5u64.to_be_bytes());
        assert_eq!(Msg::decode(&Bytes::from(stamp)), Err(NotFileMessage));
        let end = Msg::End {
            transfer: 1,
            total: 2,
            sha256: [0; 32],
        }
        .encode();
        assert_eq!(Msg::decode(&end.slice(..20)), Err(NotFileMessage));
        assert_eq!(Msg::decode(&Bytes::new()), Err(NotFileMessage));
    }
}
