//! The application header `horde send` puts at the start of every message, so that `horde
//! recv` can measure its delay and its lateness against its deadline: the sender's
//! wall-clock time at submission (unix-epoch microseconds) and the deadline from then
//! (microseconds, 0 for none), both 8-byte big-endian. The rest of the message is zeros,
//! made a piece at a time as it is sent, so a large message never sits in memory whole.

use std::io;

use horde_proto::message::MessageSource;

/// Bytes of the header; no message is smaller.
pub const HEADER_LEN: usize = 16;

/// What a message's header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Submission time on the sender's wall clock, unix-epoch µs.
    pub sent_us: u64,
    /// The deadline, µs after `sent_us`.
    pub deadline_us: Option<u64>,
}

impl Header {
    fn bytes(self) -> [u8; HEADER_LEN] {
        let mut b = [0; HEADER_LEN];
        b[..8].copy_from_slice(&self.sent_us.to_be_bytes());
        b[8..].copy_from_slice(&self.deadline_us.unwrap_or(0).to_be_bytes());
        b
    }

    /// The header a message starts with, if it is long enough.
    pub fn read(payload: &[u8]) -> Option<Self> {
        let sent_us = u64::from_be_bytes(payload.get(0..8)?.try_into().ok()?);
        let deadline = u64::from_be_bytes(payload.get(8..16)?.try_into().ok()?);
        Some(Self {
            sent_us,
            deadline_us: (deadline > 0).then_some(deadline),
        })
    }
}

/// A message of `size` bytes: the header, then zeros.
pub struct Synthetic {
    header: [u8; HEADER_LEN],
    size: u64,
}

impl Synthetic {
    pub fn new(header: Header, size: u64) -> Self {
        Self {
            header: header.bytes(),
            size,
        }
    }
}

impl MessageSource for Synthetic {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|end| end > self.size) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "range at {offset} of {} bytes is past the message's end",
                    buf.len()
                ),
            ));
        }
        buf.fill(0);
        // The part of the header inside this range.
        let header_end = HEADER_LEN as u64;
        if offset < header_end {
            let from = offset as usize;
            let n = (HEADER_LEN - from).min(buf.len());
            buf[..n].copy_from_slice(&self.header[from..from + n]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_survives_pieces_cut_anywhere() {
        let header = Header {
            sent_us: 1_700_000_000_123_456,
            deadline_us: Some(300_000),
        };
        let mut source = Synthetic::new(header, 40);
        let mut whole = Vec::new();
        for (offset, len) in [(0u64, 5usize), (5, 7), (12, 20), (32, 8)] {
            let mut buf = vec![0xAA; len];
            source.read_at(offset, &mut buf).unwrap();
            whole.extend_from_slice(&buf);
        }
        assert_eq!(whole.len(), 40);
        assert_eq!(Header::read(&whole), Some(header));
        assert!(whole[HEADER_LEN..].iter().all(|&b| b == 0));
        assert!(source.read_at(35, &mut [0; 6]).is_err(), "past the end");
        let none = Header {
            sent_us: 9,
            deadline_us: None,
        };
        let mut buf = [0; 16];
        Synthetic::new(none, 16).read_at(0, &mut buf).unwrap();
        assert_eq!(Header::read(&buf), Some(none));
        assert_eq!(Header::read(&buf[..15]), None);
    }
}
