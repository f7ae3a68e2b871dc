//! Byte chunks that `Bytes` are cut from, used again once nothing holds a piece of them.
//!
//! One allocation per chunk, not per payload; and a chunk whose pieces have all been
//! dropped is reused rather than freed and allocated anew. Small blocks per payload, or
//! large ones freed and allocated every few seconds, fragment the C heap: a process's
//! resident memory then creeps up in a long run although what it holds stays the same
//! (`docs/results.md`, "Soak"). The host cuts decrypted payloads from a pool, the sender
//! its stamped payloads.

use std::collections::VecDeque;

use bytes::BytesMut;

/// Used-up chunks kept for reuse while pieces cut from them are still held. A chunk
/// pushed out of this list is not freed by it: the last piece that holds it frees it.
const PARKED: usize = 3;

/// The chunks, the one pieces are being cut from and the used-up ones kept for reuse.
#[derive(Debug)]
pub struct ChunkPool {
    chunk_size: usize,
    current: BytesMut,
    parked: VecDeque<BytesMut>,
    allocated: u64,
    reused: u64,
}

impl ChunkPool {
    /// A pool of chunks of `chunk_size` bytes (a larger piece gets a chunk its size).
    pub fn new(chunk_size: usize) -> Self {
        Self {
            chunk_size,
            current: BytesMut::new(),
            parked: VecDeque::new(),
            allocated: 0,
            reused: 0,
        }
    }

    /// The current chunk, with room for `need` more bytes after its length. Write a
    /// piece after the length, then `split()` it off (or `truncate` back to give the room
    /// back).
    pub fn with_room(&mut self, need: usize) -> &mut BytesMut {
        if self.current.capacity() - self.current.len() < need {
            self.refill(need);
        }
        &mut self.current
    }

    /// A chunk with room for `need` bytes: the used-up current one if nothing holds a
    /// piece of it any more, else a parked one that is free now, else a new one.
    fn refill(&mut self, need: usize) {
        let size = self.chunk_size.max(need);
        if self.current.try_reclaim(size) {
            self.reused += 1;
            return;
        }
        // Before the first allocation `current` is empty, not a chunk.
        let used = (self.allocated > 0).then(|| std::mem::take(&mut self.current));
        let free = self.parked.iter_mut().position(|c| c.try_reclaim(size));
        self.current = match free.and_then(|i| self.parked.remove(i)) {
            Some(c) => {
                self.reused += 1;
                c
            }
            None => {
                self.allocated += 1;
                BytesMut::with_capacity(size)
            }
        };
        if let Some(used) = used {
            self.parked.push_back(used);
            if self.parked.len() > PARKED {
                self.parked.pop_front();
            }
        }
    }

    /// Chunks allocated since the start.
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Times a used-up chunk was taken up again since the start.
    pub fn reused(&self) -> u64 {
        self.reused
    }
}
