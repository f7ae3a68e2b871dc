//! The connections the host must look at again: those whose session something happened
//! to since the host last walked them for datagrams, and those whose events it has not
//! drained yet. Every entry point that reaches a session (a datagram, a command, a due
//! timer, an interface change) marks its connection, so that the transmit walk and the
//! event drain visit only these, in connection order, and an idle connection is not
//! visited at all.
//!
//! Marking runs for every datagram, mostly for the connection marked last: the keys are
//! kept in sorted lists, so that a key marked again costs one comparison, and the lists
//! keep their buffers from turn to turn (a set that empties would free its storage and
//! allocate it again at the next datagram).

use std::collections::VecDeque;

#[derive(Debug, Default)]
pub(crate) struct Touched {
    /// To walk for datagrams and settle (and to read its session's deadline again).
    /// Sorted, without repeats.
    transmit: Vec<u64>,
    /// To drain of events. Sorted, without repeats; a drain takes them from the front.
    events: VecDeque<u64>,
}

impl Touched {
    pub fn touch(&mut self, key: u64) {
        insert_sorted(&mut self.transmit, key);
        self.touch_events(key);
    }

    /// To drain of events only (a walked connection may have new ones).
    pub fn touch_events(&mut self, key: u64) {
        match self.events.back() {
            Some(&last) if last == key => {}
            Some(&last) if last > key => {
                if let Err(i) = self.events.binary_search(&key) {
                    self.events.insert(i, key);
                }
            }
            _ => self.events.push_back(key),
        }
    }

    /// A connection that is gone.
    pub fn forget(&mut self, key: u64) {
        if let Ok(i) = self.transmit.binary_search(&key) {
            self.transmit.remove(i);
        }
        if let Ok(i) = self.events.binary_search(&key) {
            self.events.remove(i);
        }
    }

    /// The connections to walk, in key order.
    pub fn transmit(&self) -> &[u64] {
        &self.transmit
    }

    /// The connections to walk, moved into `into` (emptied first), which lends its
    /// buffer in exchange.
    pub fn take_transmit(&mut self, into: &mut Vec<u64>) {
        into.clear();
        std::mem::swap(into, &mut self.transmit);
    }

    /// The first connection at or after `key` with events to drain, taken off the list.
    pub fn take_event_from(&mut self, key: u64) -> Option<u64> {
        let i = self.events.partition_point(|&k| k < key);
        self.events.remove(i)
    }
}

/// Adds `key` to the sorted `keys` unless it is there.
fn insert_sorted(keys: &mut Vec<u64>, key: u64) {
    match keys.last() {
        Some(&last) if last == key => {}
        Some(&last) if last > key => {
            if let Err(i) = keys.binary_search(&key) {
                keys.insert(i, key);
            }
        }
        _ => keys.push(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_out_once_each_in_order_whatever_order_they_were_marked_in() {
        let mut t = Touched::default();
        for key in [5, 5, 2, 9, 2, 7, 5] {
            t.touch(key);
        }
        t.touch_events(3);
        assert_eq!(t.transmit(), &[2, 5, 7, 9]);
        t.forget(7);
        let mut walk = vec![42];
        t.take_transmit(&mut walk);
        assert_eq!((walk.as_slice(), t.transmit()), (&[2, 5, 9][..], &[][..]));
        assert_eq!(t.take_event_from(4), Some(5));
        // Marked during a drain, below where it stands: left for the next drain.
        t.touch(1);
        assert_eq!(t.take_event_from(6), Some(9));
        assert_eq!(t.take_event_from(10), None);
        let drained: Vec<u64> = std::iter::from_fn(|| t.take_event_from(0)).collect();
        assert_eq!(drained, vec![1, 2, 3]);
    }
}
