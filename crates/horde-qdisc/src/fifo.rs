//! FIFO with drop-tail: the arriving packet is dropped when it does not fit.

use std::collections::VecDeque;
use std::time::Duration;

use crate::{Limit, Packet, Qdisc, QdiscError};

/// One queue, served in arrival order; an arrival that would exceed the limit is dropped.
#[derive(Debug)]
pub struct Fifo<T> {
    limit: Limit,
    queue: VecDeque<Packet<T>>,
    bytes: u64,
}

impl<T> Fifo<T> {
    /// A FIFO holding at most `limit`.
    pub fn new(limit: Limit) -> Result<Fifo<T>, QdiscError> {
        limit.validate("fifo limit", 1)?;
        Ok(Fifo {
            limit,
            queue: VecDeque::with_capacity(limit.packets.unwrap_or(0).min(1 << 16)),
            bytes: 0,
        })
    }
}

impl<T> Qdisc<T> for Fifo<T> {
    fn enqueue(&mut self, packet: Packet<T>, drops: &mut Vec<Packet<T>>) {
        if !self
            .limit
            .holds(self.queue.len() + 1, self.bytes + u64::from(packet.len))
        {
            drops.push(packet);
            return;
        }
        self.bytes += u64::from(packet.len);
        self.queue.push_back(packet);
    }

    fn dequeue(&mut self, _now: Duration, _drops: &mut Vec<Packet<T>>) -> Option<Packet<T>> {
        let packet = self.queue.pop_front()?;
        self.bytes -= u64::from(packet.len);
        Some(packet)
    }

    fn len(&self) -> usize {
        self.queue.len()
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }
}
