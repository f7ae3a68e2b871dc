//! Recent lost transmissions, to tell whether a lost ADU shared a loss burst with
//! another ADU of its stream (see `StreamReport::lost_correlated`).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use horde_policy::CORRELATION_SPAN;

/// (channel, stream, channel sequence number) of a transmission.
pub(crate) type TxKey = (usize, u32, u64);

/// Lost transmissions declared within the last expiry horizon, by channel and stream.
#[derive(Debug, Clone, Default)]
pub(crate) struct LostIndex {
    /// Transmission -> (its ADU, when it was declared lost).
    lost: BTreeMap<TxKey, (u64, Duration)>,
    /// The same entries in the order they were declared, for expiry.
    order: VecDeque<(Duration, TxKey)>,
}

impl LostIndex {
    pub(crate) fn insert(&mut self, key: TxKey, adu: u64, at: Duration) {
        self.lost.insert(key, (adu, at));
        self.order.push_back((at, key));
    }

    /// A late ack: the transmission was not lost after all.
    pub(crate) fn remove(&mut self, key: TxKey) {
        self.lost.remove(&key);
    }

    /// Forget losses declared before `before`.
    pub(crate) fn expire(&mut self, before: Duration) {
        while let Some(&(at, key)) = self.order.front() {
            if at >= before {
                break;
            }
            self.order.pop_front();
            if self.lost.get(&key).is_some_and(|&(_, t)| t == at) {
                self.lost.remove(&key);
            }
        }
    }

    /// Whether another ADU than `adu` lost a transmission of the same stream on the same
    /// channel within `CORRELATION_SPAN` sequence numbers of `key`.
    pub(crate) fn has_neighbour(&self, key: TxKey, adu: u64) -> bool {
        let (channel, stream, seq) = key;
        let span = CORRELATION_SPAN as u64;
        let lo = (channel, stream, seq.saturating_sub(span));
        let hi = (channel, stream, seq.saturating_add(span));
        self.lost
            .range(lo..=hi)
            .any(|(_, &(other, _))| other != adu)
    }

    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }
}
