//! A small open-addressing map from term inputs to term values, kept for one
//! scheduling cycle. Terms whose value depends only on their atoms (and a group
//! id) are computed once per distinct input.

pub(crate) type Key = [i64; 4];

/// Marks an empty entry (group ids are never negative).
const EMPTY: i64 = i64::MIN;

/// Keys `[0, x, 0, 0]` with `x` below this (one percentage atom, shared by all
/// terms) go in a direct-mapped table instead of the hash table.
const DIRECT: usize = 128;

#[derive(Debug, Clone, Default)]
pub(crate) struct Memo {
    direct: Vec<Option<i64>>,
    /// Key, value, and the generation the entry was stored in: entries of an
    /// older generation count as empty, so clearing is O(1).
    entries: Vec<(Key, i64, u32)>,
    len: usize,
    generation: u32,
}

fn hash(k: &Key) -> u64 {
    // Fold the words, then the splitmix64 finalizer to spread them over the bits.
    let mut h = 0x243F_6A88_85A3_08D3u64;
    for &w in k {
        h = (h ^ w as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^ (h >> 31)
}

impl Memo {
    /// Forget every entry, keeping the tables' memory.
    pub fn clear(&mut self) {
        self.direct.fill(None);
        self.len = 0;
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Wrapped: entries from 2^32 clears ago would look current.
            for e in &mut self.entries {
                e.0[0] = EMPTY;
            }
        }
    }

    fn live(&self, i: usize) -> bool {
        let (k, _, g) = &self.entries[i];
        k[0] != EMPTY && *g == self.generation
    }

    fn direct_index(k: &Key) -> Option<usize> {
        match *k {
            [0, x, 0, 0] if (0..DIRECT as i64).contains(&x) => Some(x as usize),
            _ => None,
        }
    }

    /// Slot of `k`, or of the empty entry where it would go.
    fn find(&self, k: &Key) -> usize {
        let mask = self.entries.len() - 1;
        let mut i = hash(k) as usize & mask;
        loop {
            if !self.live(i) || &self.entries[i].0 == k {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    pub fn get(&self, k: &Key) -> Option<i64> {
        if let Some(i) = Self::direct_index(k) {
            return self.direct.get(i).copied().flatten();
        }
        if self.entries.is_empty() {
            return None;
        }
        let i = self.find(k);
        self.live(i).then_some(self.entries[i].1)
    }

    pub fn insert(&mut self, k: Key, v: i64) {
        if let Some(i) = Self::direct_index(&k) {
            if self.direct.is_empty() {
                self.direct = vec![None; DIRECT];
            }
            self.direct[i] = Some(v);
            return;
        }
        if (self.len + 1) * 2 > self.entries.len() {
            self.grow();
        }
        let i = self.find(&k);
        if !self.live(i) {
            self.len += 1;
        }
        self.entries[i] = (k, v, self.generation);
    }

    fn grow(&mut self) {
        let cap = (self.entries.len() * 2).max(256);
        let old = std::mem::replace(&mut self.entries, vec![([EMPTY, 0, 0, 0], 0, 0); cap]);
        for (k, v, g) in old {
            if k[0] != EMPTY && g == self.generation {
                let i = self.find(&k);
                self.entries[i] = (k, v, g);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_and_grows() {
        let mut m = Memo::default();
        assert_eq!(m.get(&[1, 2, 3, 4]), None);
        for i in 0..1000 {
            m.insert([1, i, -i, 7], i * 3);
        }
        for i in 0..1000 {
            assert_eq!(m.get(&[1, i, -i, 7]), Some(i * 3));
        }
        assert_eq!(m.get(&[2, 0, 0, 7]), None);
        m.insert([1, 5, -5, 7], 0);
        assert_eq!(m.get(&[1, 5, -5, 7]), Some(0));
        // Small shared single-atom keys take the direct table.
        assert_eq!(m.get(&[0, 25, 0, 0]), None);
        m.insert([0, 25, 0, 0], -9);
        m.insert([0, 500, 0, 0], 4);
        m.insert([0, -1, 0, 0], 6);
        assert_eq!(m.get(&[0, 25, 0, 0]), Some(-9));
        assert_eq!(m.get(&[0, 500, 0, 0]), Some(4));
        assert_eq!(m.get(&[0, -1, 0, 0]), Some(6));
        assert_eq!(m.get(&[0, 26, 0, 0]), None);
        // Clearing forgets both tables and keeps working after.
        m.clear();
        assert_eq!(m.get(&[1, 5, -5, 7]), None);
        assert_eq!(m.get(&[0, 25, 0, 0]), None);
        m.insert([1, 5, -5, 7], 3);
        assert_eq!(m.get(&[1, 5, -5, 7]), Some(3));
        assert_eq!(m.get(&[1, 6, -6, 7]), None);
    }
}
