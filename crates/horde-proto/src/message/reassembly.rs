//! The receiver: pieces, in any order and over any channel, become whole messages; a
//! cancel frees a partial message at once. Only whole messages reach the application.
//!
//! A message of one piece is handed on as that piece, without a copy. A longer one is
//! written piece by piece into a buffer of its whole length, so the datagrams its pieces
//! came in are freed at once and the message is never held twice; the buffer is reserved
//! against the receive limit from the first piece on.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use bytes::Bytes;

use super::codec::PieceHeader;
use super::{ControlItem, MessageId};

/// A whole message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    /// The sender's id.
    pub id: MessageId,
    /// Its priority (of its last piece).
    pub priority: u8,
    /// Its bytes.
    pub payload: Bytes,
}

/// Why a piece was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReassemblyError {
    /// The piece runs past the message's length.
    #[error("piece of message {id} at {offset}+{len} runs past its length {total}")]
    PastEnd {
        /// The message.
        id: MessageId,
        /// The piece's offset.
        offset: u64,
        /// The piece's length.
        len: usize,
        /// The message's length.
        total: u64,
    },
    /// A piece whose message length differs from earlier pieces'.
    #[error("piece of message {id} says its length is {total}, earlier pieces said {earlier}")]
    LengthChanged {
        /// The message.
        id: MessageId,
        /// What this piece says.
        total: u64,
        /// What the first piece said.
        earlier: u64,
    },
    /// A piece overlapping another at a different offset.
    #[error("piece of message {id} at {offset} overlaps one already held")]
    Overlap {
        /// The message.
        id: MessageId,
        /// The piece's offset.
        offset: u64,
    },
    /// Holding the message, beside the partial messages already held, would exceed the
    /// receiver's limit.
    #[error("message {id} of {total} bytes exceeds the receive limit of {limit} bytes")]
    TooLarge {
        /// The message.
        id: MessageId,
        /// Its length.
        total: u64,
        /// The limit on bytes held for partial messages.
        limit: u64,
    },
    /// The message's buffer cannot be had (a receive limit beyond the machine's memory).
    #[error("message {id} of {total} bytes: no memory for its buffer")]
    NoMemory {
        /// The message.
        id: MessageId,
        /// Its length.
        total: u64,
    },
}

/// A zeroed buffer of `len` bytes, or `None` if the allocator cannot give one: asked
/// first, so that a length past what the machine has is refused rather than an abort.
fn zeroed(len: u64) -> Option<Vec<u8>> {
    let len = usize::try_from(len).ok()?;
    Vec::<u8>::new().try_reserve_exact(len).ok()?;
    // Zeroed pages are taken only as pieces land on them.
    Some(vec![0; len])
}

#[derive(Debug)]
struct Partial {
    total: u64,
    received: u64,
    /// The message's bytes, each piece written at its offset. Zeroed pages cost no
    /// memory until a piece lands on them.
    whole: Vec<u8>,
    /// The byte ranges received, start to end, with neighbours merged.
    ranges: BTreeMap<u64, u64>,
}

/// How a piece's bytes meet the ranges already received.
enum Fit {
    New,
    Duplicate,
    Overlap,
}

impl Partial {
    fn fit(&self, start: u64, end: u64) -> Fit {
        if let Some((_, &before_end)) = self.ranges.range(..=start).next_back() {
            if before_end >= end {
                return Fit::Duplicate;
            }
            if before_end > start {
                return Fit::Overlap;
            }
        }
        match self.ranges.range(start + 1..).next() {
            Some((&next, _)) if next < end => Fit::Overlap,
            _ => Fit::New,
        }
    }

    /// Writes a piece that fits, and merges its range with the touching ones.
    fn write(&mut self, start: u64, slice: &[u8]) {
        let end = start + slice.len() as u64;
        self.whole[start as usize..end as usize].copy_from_slice(slice);
        self.received += slice.len() as u64;
        let mut range = (start, end);
        if let Some((&before, &before_end)) = self.ranges.range(..start).next_back() {
            if before_end == start {
                self.ranges.remove(&before);
                range.0 = before;
            }
        }
        if let Some(after_end) = self.ranges.remove(&end) {
            range.1 = after_end;
        }
        self.ranges.insert(range.0, range.1);
    }
}

/// The receiver's partial messages.
#[derive(Debug)]
pub struct Reassembly {
    limit: u64,
    partial: HashMap<MessageId, Partial>,
    /// Bytes received of the partial messages.
    held: u64,
    /// Their whole lengths: what their buffers take, checked against `limit`.
    reserved: u64,
    /// Messages finished or cancelled: their late or duplicate pieces are dropped.
    done: HashSet<MessageId>,
    done_order: VecDeque<MessageId>,
    remembered: usize,
}

impl Reassembly {
    /// A receiver that holds at most `limit` bytes of partial messages and remembers the
    /// last `remembered` finished or cancelled ids.
    pub fn new(limit: u64, remembered: usize) -> Self {
        Self {
            limit,
            partial: HashMap::new(),
            held: 0,
            reserved: 0,
            done: HashSet::new(),
            done_order: VecDeque::new(),
            remembered,
        }
    }

    /// Bytes held for partial messages.
    pub fn held_bytes(&self) -> u64 {
        self.held
    }

    /// Partial messages held.
    pub fn partial_messages(&self) -> usize {
        self.partial.len()
    }

    /// Takes one piece; returns the message when this piece completes it.
    pub fn on_piece(
        &mut self,
        header: PieceHeader,
        slice: Bytes,
    ) -> Result<Option<ReceivedMessage>, ReassemblyError> {
        let id = header.message;
        let len = slice.len() as u64;
        if header
            .offset
            .checked_add(len)
            .is_none_or(|end| end > header.total)
        {
            return Err(ReassemblyError::PastEnd {
                id,
                offset: header.offset,
                len: slice.len(),
                total: header.total,
            });
        }
        if self.done.contains(&id) {
            return Ok(None);
        }
        let whole_in_one = header.offset == 0 && len == header.total;
        if !self.partial.contains_key(&id) {
            if header.total > self.limit.saturating_sub(self.reserved) {
                return Err(ReassemblyError::TooLarge {
                    id,
                    total: header.total,
                    limit: self.limit,
                });
            }
            if whole_in_one {
                self.remember(id);
                return Ok(Some(ReceivedMessage {
                    id,
                    priority: header.priority,
                    payload: slice,
                }));
            }
        }
        if len == 0 {
            return Ok(None); // nothing to hold
        }
        let partial = match self.partial.entry(id) {
            Entry::Occupied(p) if p.get().total != header.total => {
                return Err(ReassemblyError::LengthChanged {
                    id,
                    total: header.total,
                    earlier: p.get().total,
                })
            }
            Entry::Occupied(p) => p.into_mut(),
            Entry::Vacant(v) => {
                let whole = zeroed(header.total).ok_or(ReassemblyError::NoMemory {
                    id,
                    total: header.total,
                })?;
                self.reserved += header.total;
                v.insert(Partial {
                    total: header.total,
                    received: 0,
                    whole,
                    ranges: BTreeMap::new(),
                })
            }
        };
        match partial.fit(header.offset, header.offset + len) {
            Fit::Duplicate => return Ok(None),
            Fit::Overlap => {
                return Err(ReassemblyError::Overlap {
                    id,
                    offset: header.offset,
                })
            }
            Fit::New => partial.write(header.offset, &slice),
        }
        self.held += len;
        if partial.received < partial.total {
            return Ok(None);
        }
        let partial = self.partial.remove(&id).expect("just held");
        self.held -= partial.received;
        self.reserved -= partial.total;
        self.remember(id);
        let payload = Bytes::from(partial.whole);
        Ok(Some(ReceivedMessage {
            id,
            priority: header.priority,
            payload,
        }))
    }

    /// Takes a control item; returns the bytes it freed.
    pub fn on_control(&mut self, item: ControlItem) -> u64 {
        match item {
            ControlItem::Cancel(id) => {
                self.remember(id);
                match self.partial.remove(&id) {
                    Some(partial) => {
                        self.held -= partial.received;
                        self.reserved -= partial.total;
                        partial.received
                    }
                    None => 0,
                }
            }
        }
    }

    fn remember(&mut self, id: MessageId) {
        if self.done.insert(id) {
            self.done_order.push_back(id);
        }
        while self.done_order.len() > self.remembered {
            if let Some(old) = self.done_order.pop_front() {
                self.done.remove(&old);
            }
        }
    }
}
