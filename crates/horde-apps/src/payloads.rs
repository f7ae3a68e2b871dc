//! The sender's stamped payloads, cut from shared chunks that are used again once every
//! payload of theirs is acked or dropped.
//!
//! A payload of its own per ADU is a small block on the C heap for as long as the ADU is
//! queued or in flight. An outage fills the stream's queue with thousands of them, and
//! the blocks made meanwhile for other, longer-lived data sit between them: once the
//! outage's ADUs are gone the heap keeps their pages, and the process's memory stepped
//! up at each outage deeper than any before (`docs/results.md`, "Soak"). Chunks are the
//! size at which the allocator gives each block a mapping of its own, so a chunk that is
//! let go goes back to the system.

use bytes::{BufMut, Bytes};
use horde_proto::chunks::ChunkPool;

use crate::stamp::STAMP_LEN;

/// Bytes of a chunk: the C allocator's mmap threshold as `horde` sets it.
pub const CHUNK_BYTES: usize = 128 * 1024;

/// Where the sender's payloads are cut from.
#[derive(Debug)]
pub struct PayloadChunks {
    pool: ChunkPool,
}

impl Default for PayloadChunks {
    fn default() -> Self {
        Self::new(CHUNK_BYTES)
    }
}

impl PayloadChunks {
    pub fn new(chunk_bytes: usize) -> Self {
        Self {
            pool: ChunkPool::new(chunk_bytes),
        }
    }

    /// A payload of `size` bytes (at least [`STAMP_LEN`]) that starts with the stamp
    /// (see [`crate::stamp`]); the rest is zeros.
    pub fn stamped(&mut self, size: usize, seq: u64, sent_us: u64) -> Bytes {
        let size = size.max(STAMP_LEN);
        let chunk = self.pool.with_room(size);
        let start = chunk.len();
        chunk.put_u64(sent_us);
        chunk.put_u64(seq);
        // A reused chunk holds old payloads' bytes: zero the rest explicitly.
        chunk.resize(start + size, 0);
        chunk.split().freeze()
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
    use crate::stamp;

    const CHUNK: usize = 4096;

    #[test]
    fn payloads_carry_their_stamp_and_zeros_even_in_a_reused_chunk() {
        let mut c = PayloadChunks::new(CHUNK);
        for seq in 0..2_000u64 {
            let p = c.stamped(100, seq, 1_700_000_000_000_000 + seq);
            assert_eq!(p.len(), 100);
            assert_eq!(stamp::read(&p), Some((seq, 1_700_000_000_000_000 + seq)));
            assert!(p[STAMP_LEN..].iter().all(|&b| b == 0));
        }
        assert_eq!(c.stamped(2, 1, 5).len(), STAMP_LEN);
        // 200 kB through a 4 KiB chunk dropped at once: one allocation, reused.
        assert_eq!(c.allocated(), 1);
        assert!(c.reused() >= 45, "{}", c.reused());
    }

    #[test]
    fn an_outage_s_payloads_take_chunks_that_are_reused_after_it() {
        let mut c = PayloadChunks::new(CHUNK);
        let mut held = VecDeque::new();
        // An outage: 400 payloads of 100 bytes held at once (10 chunks).
        for seq in 0..400 {
            held.push_back(c.stamped(100, seq, 0));
        }
        let during = c.allocated();
        assert!((10..=11).contains(&during), "{during}");
        held.clear();
        // After it, a few in flight at a time: the parked chunks serve, none is new.
        for seq in 400..40_000 {
            held.push_back(c.stamped(100, seq, 0));
            if held.len() > 30 {
                held.pop_front();
            }
        }
        assert_eq!(c.allocated(), during);
    }

    #[test]
    fn a_payload_larger_than_a_chunk_gets_its_own() {
        let mut c = PayloadChunks::new(CHUNK);
        let big = c.stamped(CHUNK * 2, 9, 1);
        assert_eq!(big.len(), CHUNK * 2);
        assert_eq!(stamp::read(&big), Some((9, 1)));
        assert_eq!(stamp::read(&c.stamped(50, 10, 2)), Some((10, 2)));
    }
}
