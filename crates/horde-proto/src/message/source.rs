//! Where a message's bytes come from: the sender asks for one piece's range at a time, so a
//! 100 MB message never has to sit in memory whole.

use std::io;

use bytes::Bytes;

use super::Piece;

/// A message's bytes, read by range.
pub trait MessageSource {
    /// Fills `buf` with the bytes at `offset..offset + buf.len()`.
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// The bytes of `piece`.
    fn read_piece(&mut self, piece: &Piece) -> io::Result<Bytes> {
        let mut buf = vec![0; piece.len as usize];
        self.read_at(piece.offset, &mut buf)?;
        Ok(Bytes::from(buf))
    }
}

/// A message already in memory.
impl MessageSource for Bytes {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| out_of_range(offset, buf.len()))?;
        let end = start
            .checked_add(buf.len())
            .filter(|&end| end <= self.len())
            .ok_or_else(|| out_of_range(offset, buf.len()))?;
        buf.copy_from_slice(&self[start..end]);
        Ok(())
    }

    fn read_piece(&mut self, piece: &Piece) -> io::Result<Bytes> {
        let start = usize::try_from(piece.offset).map_err(|_| out_of_range(piece.offset, 0))?;
        let end = start + piece.len as usize;
        if end > self.len() {
            return Err(out_of_range(piece.offset, piece.len as usize));
        }
        // No copy: a slice of the same buffer.
        Ok(self.slice(start..end))
    }
}

/// Any seekable reader (a file): reads exactly the range asked for.
impl<R: io::Read + io::Seek> MessageSource for io::BufReader<R> {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        io::Seek::seek(self, io::SeekFrom::Start(offset))?;
        io::Read::read_exact(self, buf)
    }
}

fn out_of_range(offset: u64, len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("range at {offset} of {len} bytes is past the message's end"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{MessageId, QueueId};

    fn piece(offset: u64, len: u32) -> Piece {
        Piece {
            message: MessageId(1),
            queue: QueueId(0),
            priority: 0,
            offset,
            len,
            total: 10,
        }
    }

    #[test]
    fn bytes_and_readers_give_the_same_range_and_refuse_one_past_the_end() {
        let data: Vec<u8> = (0..10).collect();
        let mut memory = Bytes::from(data.clone());
        let mut reader = io::BufReader::new(io::Cursor::new(data));
        for source in [&mut memory as &mut dyn MessageSource, &mut reader] {
            assert_eq!(source.read_piece(&piece(4, 3)).unwrap(), &[4u8, 5, 6][..]);
            assert!(source.read_piece(&piece(8, 3)).is_err());
        }
    }
}
