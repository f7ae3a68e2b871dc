//! A binary heap over slot numbers whose keys can be changed or removed in O(log n),
//! without allocating once its vectors have grown.

/// Which end of the order is on top. Ties on `key` go to the lower `seq` for [`Order::Max`]
/// and to the higher `seq` for [`Order::Min`], so a max heap and a min heap over the same
/// entries agree on a single total order, read from opposite ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    Max,
    Min,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub(crate) key: i128,
    pub(crate) seq: u64,
    pub(crate) slot: u32,
}

const ABSENT: u32 = u32::MAX;

#[derive(Debug)]
pub(crate) struct IndexedHeap {
    order: Order,
    entries: Vec<Entry>,
    /// Position in `entries` of each slot, or `ABSENT`.
    pos: Vec<u32>,
}

impl IndexedHeap {
    pub(crate) fn new(order: Order) -> IndexedHeap {
        IndexedHeap {
            order,
            entries: Vec::new(),
            pos: Vec::new(),
        }
    }

    pub(crate) fn peek(&self) -> Option<&Entry> {
        self.entries.first()
    }

    pub(crate) fn contains(&self, slot: u32) -> bool {
        self.pos.get(slot as usize).is_some_and(|&p| p != ABSENT)
    }

    /// Whether `a` belongs above `b`.
    fn above(&self, a: &Entry, b: &Entry) -> bool {
        match self.order {
            Order::Max => a.key > b.key || (a.key == b.key && a.seq < b.seq),
            Order::Min => a.key < b.key || (a.key == b.key && a.seq > b.seq),
        }
    }

    /// Adds `slot`, which must not be in the heap.
    pub(crate) fn push(&mut self, key: i128, seq: u64, slot: u32) {
        let s = slot as usize;
        if self.pos.len() <= s {
            self.pos.resize(s + 1, ABSENT);
        }
        debug_assert_eq!(self.pos[s], ABSENT, "slot {slot} pushed twice");
        let i = self.entries.len();
        self.entries.push(Entry { key, seq, slot });
        self.pos[s] = i as u32;
        self.sift_up(i);
    }

    /// Removes `slot` if present.
    pub(crate) fn remove(&mut self, slot: u32) {
        if !self.contains(slot) {
            return;
        }
        let i = self.pos[slot as usize] as usize;
        let last = self.entries.len() - 1;
        self.swap(i, last);
        self.entries.pop();
        self.pos[slot as usize] = ABSENT;
        if i < self.entries.len() {
            self.sift_down(i);
            self.sift_up(i);
        }
    }

    /// Changes the key of `slot` if present.
    pub(crate) fn update(&mut self, slot: u32, key: i128) {
        if !self.contains(slot) {
            return;
        }
        let i = self.pos[slot as usize] as usize;
        self.entries[i].key = key;
        self.sift_down(i);
        self.sift_up(i);
    }

    /// Replaces every key with `key_of(slot)` and restores the order.
    pub(crate) fn rekey(&mut self, mut key_of: impl FnMut(u32) -> i128) {
        for e in &mut self.entries {
            e.key = key_of(e.slot);
        }
        for i in (0..self.entries.len() / 2).rev() {
            self.sift_down(i);
        }
    }

    fn swap(&mut self, i: usize, j: usize) {
        self.entries.swap(i, j);
        self.pos[self.entries[i].slot as usize] = i as u32;
        self.pos[self.entries[j].slot as usize] = j as u32;
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if !self.above(&self.entries[i], &self.entries[parent]) {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.entries.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut top = i;
            if l < n && self.above(&self.entries[l], &self.entries[top]) {
                top = l;
            }
            if r < n && self.above(&self.entries[r], &self.entries[top]) {
                top = r;
            }
            if top == i {
                break;
            }
            self.swap(i, top);
            i = top;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_order_with_updates_and_removals() {
        let mut max = IndexedHeap::new(Order::Max);
        let mut min = IndexedHeap::new(Order::Min);
        let keys = [5i128, 3, 9, 3, 7, 1];
        for (slot, &k) in keys.iter().enumerate() {
            max.push(k, slot as u64, slot as u32);
            min.push(k, slot as u64, slot as u32);
        }
        max.update(2, 0); // 9 -> 0
        min.update(2, 0);
        max.remove(4); // the 7
        min.remove(4);
        let mut from_max = Vec::new();
        while let Some(e) = max.peek().copied() {
            from_max.push(e.slot);
            max.remove(e.slot);
        }
        let mut from_min = Vec::new();
        while let Some(e) = min.peek().copied() {
            from_min.push(e.slot);
            min.remove(e.slot);
        }
        // keys now: 0:5 1:3 2:0 3:3 5:1; ties (slots 1 and 3) go to the lower seq on top.
        assert_eq!(from_max, vec![0, 1, 3, 5, 2]);
        from_min.reverse();
        assert_eq!(from_min, from_max);
    }
}
