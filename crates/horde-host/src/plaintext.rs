//! Decrypted payloads handed out as `Bytes` cut from shared chunks: one allocation per
//! chunk, not per datagram. A chunk whose payloads have all been dropped is used again
//! instead of being freed and a new one allocated: freeing and allocating 256 KiB blocks
//! every few seconds fragmented the allocator's heap, and a host's resident memory crept
//! up in a long run although what it held stayed the same (`docs/results.md`, "Soak").

use std::ops::Range;

use bytes::{Buf, Bytes};
use horde_proto::chunks::ChunkPool;

/// Where decrypted payloads are cut from.
#[derive(Debug)]
pub struct PlaintextChunks {
    pool: ChunkPool,
}

impl PlaintextChunks {
    pub fn new(chunk_size: usize) -> Self {
        Self {
            pool: ChunkPool::new(chunk_size),
        }
    }

    /// `payload` as `Bytes` sharing the current chunk.
    #[cfg(test)]
    pub fn share(&mut self, payload: &[u8]) -> Bytes {
        self.open_in_place::<()>(payload, |b| Ok(0..b.len()))
            .unwrap()
    }

    /// Copies `datagram` into the current chunk, lets `open` decrypt it there, and hands
    /// out the plaintext range `open` reports as `Bytes` sharing the chunk: one copy of the
    /// datagram (out of the receive buffer, which is reused at once). The header and tag
    /// stay behind in the chunk, never handed out; a failed open takes its bytes back.
    pub fn open_in_place<E>(
        &mut self,
        datagram: &[u8],
        open: impl FnOnce(&mut [u8]) -> Result<Range<usize>, E>,
    ) -> Result<Bytes, E> {
        let chunk = self.pool.with_room(datagram.len());
        let start = chunk.len();
        chunk.extend_from_slice(datagram);
        match open(&mut chunk[start..]) {
            Ok(at) => {
                chunk.truncate(start + at.end);
                let mut out = chunk.split();
                out.advance(start + at.start);
                Ok(out.freeze())
            }
            Err(e) => {
                chunk.truncate(start);
                Err(e)
            }
        }
    }

    pub fn allocated(&self) -> u64 {
        self.pool.allocated()
    }

    pub fn reused(&self) -> u64 {
        self.pool.reused()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    const CHUNK: usize = 4096;

    #[test]
    fn payloads_dropped_at_once_keep_reusing_one_chunk() {
        let mut c = PlaintextChunks::new(CHUNK);
        for i in 0..10_000u32 {
            let p = c.share(&[i as u8; 100]);
            assert_eq!(&p[..], &[i as u8; 100][..]);
        }
        // 1 MB through a 4 KiB chunk: one allocation, reused about 240 times.
        assert_eq!(c.allocated(), 1);
        assert!(c.reused() >= 240, "{}", c.reused());
    }

    #[test]
    fn a_payload_kept_for_long_pins_one_chunk_and_the_rest_are_reused() {
        let mut c = PlaintextChunks::new(CHUNK);
        let kept = c.share(b"kept for the whole run");
        let mut recent = VecDeque::new();
        for i in 0..20_000u32 {
            // A few payloads are still held when their chunk is used up.
            recent.push_back(c.share(&i.to_be_bytes().repeat(25)));
            if recent.len() > 8 {
                recent.pop_front();
            }
        }
        assert_eq!(&kept[..], b"kept for the whole run");
        // The kept payload's chunk and the chunks the recent ones were in, no more.
        assert!(c.allocated() <= 3, "{} chunks for 2 MB", c.allocated());
        assert!(c.reused() > 400, "{}", c.reused());
    }

    #[test]
    fn a_payload_larger_than_a_chunk_gets_its_own() {
        let mut c = PlaintextChunks::new(CHUNK);
        let big = c.share(&[7; CHUNK * 2]);
        assert_eq!(big.len(), CHUNK * 2);
        let small = c.share(&[1; 10]);
        assert_eq!(&small[..], &[1; 10]);
    }
}
