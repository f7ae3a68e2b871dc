//! One message queue's ready messages in service order: strict priority across levels,
//! earliest deadline first within a level, submission order among equal deadlines.

use std::collections::BTreeSet;
use std::time::Duration;

use super::{MessageId, PRIORITY_LEVELS};

/// A ready message's place in its level. Ordering the fields this way makes a level's
/// `BTreeSet` iterate in EDF order; no deadline sorts last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ReadyKey {
    pub deadline: Duration,
    pub seq: u64,
    pub id: MessageId,
}

impl ReadyKey {
    pub fn new(deadline: Option<Duration>, seq: u64, id: MessageId) -> Self {
        Self {
            deadline: deadline.unwrap_or(Duration::MAX),
            seq,
            id,
        }
    }
}

/// A queue: its weight, its fair-queueing clock and its ready messages.
#[derive(Debug)]
pub(crate) struct MessageQueue {
    /// The application's weight for the queue.
    pub weight: u32,
    /// Bytes served divided by the effective weight: the queue with the smallest clock is
    /// served next.
    pub vtime: f64,
    levels: Vec<BTreeSet<ReadyKey>>,
    len: usize,
}

impl MessageQueue {
    pub fn new(weight: u32) -> Self {
        Self {
            weight,
            vtime: 0.0,
            levels: (0..PRIORITY_LEVELS).map(|_| BTreeSet::new()).collect(),
            len: 0,
        }
    }

    pub fn insert(&mut self, level: u8, key: ReadyKey) {
        if self.levels[usize::from(level)].insert(key) {
            self.len += 1;
        }
    }

    pub fn remove(&mut self, level: u8, key: &ReadyKey) -> bool {
        let removed = self.levels[usize::from(level)].remove(key);
        if removed {
            self.len -= 1;
        }
        removed
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most important level with a ready message.
    pub fn highest_level(&self) -> Option<u8> {
        (0..PRIORITY_LEVELS).find(|&l| !self.levels[usize::from(l)].is_empty())
    }

    /// The queue's share weight: its weight times the number of levels at or below its
    /// most important ready level, so a queue using level 0 weighs 8 and one using only
    /// level 7 weighs 1. `with_level` counts a message about to be added.
    pub fn effective_weight(&self, with_level: Option<u8>) -> f64 {
        let top = match (self.highest_level(), with_level) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match top {
            Some(level) => f64::from(self.weight) * f64::from(PRIORITY_LEVELS - level),
            None => 0.0,
        }
    }

    /// The ready messages in service order.
    pub fn iter(&self) -> impl Iterator<Item = (u8, &ReadyKey)> + '_ {
        self.levels
            .iter()
            .enumerate()
            .flat_map(|(level, set)| set.iter().map(move |key| (level as u8, key)))
    }
}
