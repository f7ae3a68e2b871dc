//! Payload storage for packets inside a link, keyed by the packet id handed to the link.
//!
//! Ids are issued in increasing order, so the slab is a ring indexed by `id - base`.
//! A link's loss process drops packets without telling the caller which ones, so
//! entries can be orphaned; [`PayloadSlab::evict_older_than`] and [`PayloadSlab::clear`]
//! reclaim them (the caller clears when the link reports nothing pending).

use std::collections::VecDeque;
use std::time::Duration;

struct Entry {
    stored_at: Duration,
    payload: Vec<u8>,
}

/// Ring of payloads keyed by consecutive ids.
#[derive(Default)]
pub struct PayloadSlab {
    base: u64,
    entries: VecDeque<Option<Entry>>,
    live: usize,
}

impl PayloadSlab {
    pub fn new() -> Self {
        Self::default()
    }

    /// Store a payload and return its id.
    pub fn insert(&mut self, stored_at: Duration, payload: Vec<u8>) -> u64 {
        let id = self.base + self.entries.len() as u64;
        self.entries.push_back(Some(Entry { stored_at, payload }));
        self.live += 1;
        id
    }

    /// Remove and return the payload for `id`, if still stored.
    pub fn take(&mut self, id: u64) -> Option<Vec<u8>> {
        self.take_stored(id).map(|(_, payload)| payload)
    }

    /// Remove and return when the payload for `id` was stored, and the payload.
    pub fn take_stored(&mut self, id: u64) -> Option<(Duration, Vec<u8>)> {
        let idx = usize::try_from(id.checked_sub(self.base)?).ok()?;
        let entry = self.entries.get_mut(idx)?.take()?;
        self.live -= 1;
        self.trim_front();
        Some((entry.stored_at, entry.payload))
    }

    /// Drop entries stored before `cutoff`; returns how many were dropped. Entries are
    /// stored in time order, so this stops at the first one that is new enough.
    #[cfg(test)]
    pub fn evict_older_than(&mut self, cutoff: Duration) -> usize {
        self.evict_older_than_with(cutoff, |_, _| {})
    }

    /// [`evict_older_than`](Self::evict_older_than), showing each evicted entry's store
    /// time and payload to `on_evict`.
    pub fn evict_older_than_with(
        &mut self,
        cutoff: Duration,
        mut on_evict: impl FnMut(Duration, &[u8]),
    ) -> usize {
        let mut evicted = 0;
        while let Some(front) = self.entries.front() {
            match front {
                Some(e) if e.stored_at >= cutoff => break,
                Some(e) => {
                    on_evict(e.stored_at, &e.payload);
                    evicted += 1;
                }
                None => {}
            }
            self.entries.pop_front();
            self.base += 1;
        }
        self.live -= evicted;
        evicted
    }

    /// Drop everything; returns how many entries were dropped.
    #[cfg(test)]
    pub fn clear(&mut self) -> usize {
        self.clear_with(|_, _| {})
    }

    /// [`clear`](Self::clear), showing each dropped entry's store time and payload to
    /// `on_drop`.
    pub fn clear_with(&mut self, mut on_drop: impl FnMut(Duration, &[u8])) -> usize {
        for e in self.entries.iter().flatten() {
            on_drop(e.stored_at, &e.payload);
        }
        let dropped = self.live;
        self.base += self.entries.len() as u64;
        self.entries.clear();
        self.live = 0;
        dropped
    }

    /// Number of stored payloads.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.live
    }

    fn trim_front(&mut self) {
        while matches!(self.entries.front(), Some(None)) {
            self.entries.pop_front();
            self.base += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::ZERO;

    #[test]
    fn ids_are_consecutive_and_take_returns_payload_once() {
        let mut s = PayloadSlab::new();
        let a = s.insert(T, vec![1]);
        let b = s.insert(T, vec![2]);
        assert_eq!(b, a + 1);
        assert_eq!(s.take(b), Some(vec![2]));
        assert_eq!(s.take(b), None);
        assert_eq!(s.len(), 1);
        assert_eq!(s.take(a), Some(vec![1]));
        assert_eq!(s.len(), 0);
        assert_eq!(s.entries.len(), 0, "ring trimmed");
        assert_eq!(s.insert(T, vec![3]), b + 1);
        assert_eq!(s.take(999), None);
        assert_eq!(s.take(0), None);
    }

    #[test]
    fn eviction_reclaims_orphans_without_touching_newer_entries() {
        let mut s = PayloadSlab::new();
        let old = s.insert(Duration::from_secs(1), vec![1]);
        let new = s.insert(Duration::from_secs(5), vec![2]);
        assert_eq!(s.evict_older_than(Duration::from_secs(2)), 1);
        assert_eq!(s.take(old), None);
        assert_eq!(s.take(new), Some(vec![2]));
        let x = s.insert(T, vec![4]);
        assert_eq!(s.clear(), 1);
        assert_eq!(s.take(x), None);
        assert!(s.insert(T, vec![5]) > x, "ids never reused after clear");
    }
}
