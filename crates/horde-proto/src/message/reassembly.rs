//! The receiver: pieces, in any order and over any channel, become whole messages; a
//! cancel frees a partial message at once. Only whole messages reach the application.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use bytes::{Bytes, BytesMut};

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
    /// Holding the message would exceed the receiver's limit.
    #[error("message {id} of {total} bytes exceeds the receive limit of {limit} bytes")]
    TooLarge {
        /// The message.
        id: MessageId,
        /// Its length.
        total: u64,
        /// The limit on bytes held for partial messages.
        limit: u64,
    },
}

#[derive(Debug)]
struct Partial {
    total: u64,
    received: u64,
    chunks: BTreeMap<u64, Bytes>,
}

/// The receiver's partial messages.
#[derive(Debug)]
pub struct Reassembly {
    limit: u64,
    partial: HashMap<MessageId, Partial>,
    held: u64,
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
        let partial = match self.partial.get_mut(&id) {
            Some(p) if p.total != header.total => {
                return Err(ReassemblyError::LengthChanged {
                    id,
                    total: header.total,
                    earlier: p.total,
                })
            }
            Some(p) => p,
            None => {
                if header.total > self.limit.saturating_sub(self.held) {
                    return Err(ReassemblyError::TooLarge {
                        id,
                        total: header.total,
                        limit: self.limit,
                    });
                }
                self.partial.entry(id).or_insert(Partial {
                    total: header.total,
                    received: 0,
                    chunks: BTreeMap::new(),
                })
            }
        };
        if partial.chunks.contains_key(&header.offset) {
            return Ok(None); // a duplicate
        }
        let overlaps_before = partial
            .chunks
            .range(..header.offset)
            .next_back()
            .is_some_and(|(at, chunk)| at + chunk.len() as u64 > header.offset);
        let overlaps_after = partial
            .chunks
            .range(header.offset..)
            .next()
            .is_some_and(|(at, _)| *at < header.offset + len);
        if overlaps_before || overlaps_after {
            return Err(ReassemblyError::Overlap {
                id,
                offset: header.offset,
            });
        }
        partial.received += len;
        partial.chunks.insert(header.offset, slice);
        self.held += len;
        if partial.received < partial.total || (partial.total == 0 && partial.chunks.is_empty()) {
            return Ok(None);
        }
        let partial = self.partial.remove(&id).expect("just held");
        self.held -= partial.received;
        self.remember(id);
        let payload = if partial.chunks.len() == 1 {
            partial.chunks.into_values().next().expect("one chunk")
        } else {
            let mut whole = BytesMut::with_capacity(partial.total as usize);
            for chunk in partial.chunks.into_values() {
                whole.extend_from_slice(&chunk);
            }
            whole.freeze()
        };
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
