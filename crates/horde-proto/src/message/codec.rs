//! The bytes of a message item inside one ADU: a piece (header, then the slice) or a
//! control item. Big-endian, fixed layout:
//!
//! ```text
//! piece:  kind=1 (1) | message (8) | offset (8) | total (8) | priority (1) | slice bytes
//! cancel: kind=2 (1) | message (8)
//! ```
//!
//! The slice's length is what follows the header in the ADU.

use bytes::{Buf, BufMut, Bytes};

use super::{ControlItem, MessageId, PRIORITY_LEVELS};

const KIND_PIECE: u8 = 1;
const KIND_CANCEL: u8 = 2;

/// Bytes in front of a piece's slice.
pub const PIECE_HEADER_LEN: usize = 1 + 8 + 8 + 8 + 1;
/// Bytes of a cancel item.
pub const CANCEL_LEN: usize = 1 + 8;

/// What travels in front of a piece's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PieceHeader {
    /// The message.
    pub message: MessageId,
    /// Where the slice starts in it.
    pub offset: u64,
    /// The message's whole length.
    pub total: u64,
    /// Its priority when the piece was cut.
    pub priority: u8,
}

/// A decoded message item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A piece and its slice.
    Piece(PieceHeader, Bytes),
    /// A control item.
    Control(ControlItem),
}

/// Why an ADU is not a message item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// Shorter than its kind's fixed part.
    #[error("message item of kind {kind} is {len} bytes, shorter than its {need}-byte header")]
    Truncated {
        /// The kind byte (0 if the ADU was empty).
        kind: u8,
        /// Its length.
        len: usize,
        /// The length its kind needs.
        need: usize,
    },
    /// An unknown kind byte.
    #[error("unknown message item kind {0}")]
    UnknownKind(u8),
    /// A cancel with bytes after it.
    #[error("cancel item has {0} trailing bytes")]
    Trailing(usize),
    /// A piece whose priority is not a level.
    #[error("piece priority {0} is not a level")]
    BadPriority(u8),
}

/// Appends a piece header.
pub fn encode_piece_header(header: &PieceHeader, out: &mut impl BufMut) {
    out.put_u8(KIND_PIECE);
    out.put_u64(header.message.0);
    out.put_u64(header.offset);
    out.put_u64(header.total);
    out.put_u8(header.priority);
}

/// Appends a control item.
pub fn encode_control(item: &ControlItem, out: &mut Vec<u8>) {
    match item {
        ControlItem::Cancel(id) => {
            out.put_u8(KIND_CANCEL);
            out.put_u64(id.0);
        }
    }
}

/// Decodes one ADU; a piece's slice shares `adu`'s buffer.
pub fn decode(adu: Bytes) -> Result<Item, CodecError> {
    let len = adu.len();
    let kind = adu.first().copied().unwrap_or(0);
    let need = match kind {
        KIND_PIECE => PIECE_HEADER_LEN,
        KIND_CANCEL => CANCEL_LEN,
        _ if len == 0 => return Err(CodecError::Truncated { kind, len, need: 1 }),
        other => return Err(CodecError::UnknownKind(other)),
    };
    if len < need {
        return Err(CodecError::Truncated { kind, len, need });
    }
    let mut buf = adu;
    buf.advance(1);
    let message = MessageId(buf.get_u64());
    if kind == KIND_CANCEL {
        if !buf.is_empty() {
            return Err(CodecError::Trailing(buf.len()));
        }
        return Ok(Item::Control(ControlItem::Cancel(message)));
    }
    let offset = buf.get_u64();
    let total = buf.get_u64();
    let priority = buf.get_u8();
    if priority >= PRIORITY_LEVELS {
        return Err(CodecError::BadPriority(priority));
    }
    Ok(Item::Piece(
        PieceHeader {
            message,
            offset,
            total,
            priority,
        },
        buf,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn piece_and_cancel_round_trip() {
        let header = PieceHeader {
            message: MessageId(7),
            offset: 2400,
            total: 100_000_000,
            priority: 3,
        };
        let mut out = Vec::new();
        encode_piece_header(&header, &mut out);
        assert_eq!(out.len(), PIECE_HEADER_LEN);
        out.extend_from_slice(b"slice");
        assert_eq!(
            decode(Bytes::from(out)),
            Ok(Item::Piece(header, Bytes::from_static(b"slice")))
        );
        let mut out = Vec::new();
        encode_control(&ControlItem::Cancel(MessageId(9)), &mut out);
        assert_eq!(
            decode(Bytes::from(out)),
            Ok(Item::Control(ControlItem::Cancel(MessageId(9))))
        );
    }

    #[test]
    fn bad_items_are_typed_errors() {
        assert!(matches!(
            decode(Bytes::new()),
            Err(CodecError::Truncated { .. })
        ));
        assert_eq!(
            decode(Bytes::from_static(&[9])),
            Err(CodecError::UnknownKind(9))
        );
        assert!(matches!(
            decode(Bytes::from_static(&[1, 0, 0])),
            Err(CodecError::Truncated {
                kind: 1,
                len: 3,
                ..
            })
        ));
        let mut out = Vec::new();
        encode_control(&ControlItem::Cancel(MessageId(1)), &mut out);
        out.push(0);
        assert_eq!(decode(Bytes::from(out)), Err(CodecError::Trailing(1)));
        let mut out = Vec::new();
        let header = PieceHeader {
            message: MessageId(1),
            offset: 0,
            total: 1,
            priority: PRIORITY_LEVELS,
        };
        encode_piece_header(&header, &mut out);
        assert_eq!(
            decode(Bytes::from(out)),
            Err(CodecError::BadPriority(PRIORITY_LEVELS))
        );
    }
}
