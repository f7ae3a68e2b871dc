//! A small open-addressing map from term inputs to term values, kept for one
//! scheduling cycle. Terms whose value depends only on their atoms (and a group
//! id) are computed once per distinct input.

pub(crate) type Key = [i64; 4];

#[derive(Debug, Clone)]
pub(crate) struct Memo {
    keys: Vec<Key>,
    vals: Vec<i64>,
    used: Vec<bool>,
    len: usize,
}

impl Default for Memo {
    fn default() -> Self {
        Memo::with_capacity(64)
    }
}

fn hash(k: &Key) -> u64 {
    let mut h = 0u64;
    for &w in k {
        h = (h.rotate_left(5) ^ w as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    h ^ (h >> 29)
}

impl Memo {
    fn with_capacity(cap: usize) -> Self {
        let cap = cap.next_power_of_two();
        Memo {
            keys: vec![[0; 4]; cap],
            vals: vec![0; cap],
            used: vec![false; cap],
            len: 0,
        }
    }

    fn find(&self, k: &Key) -> (usize, bool) {
        let mask = self.keys.len() - 1;
        let mut i = hash(k) as usize & mask;
        loop {
            if !self.used[i] {
                return (i, false);
            }
            if self.keys[i] == *k {
                return (i, true);
            }
            i = (i + 1) & mask;
        }
    }

    pub fn get(&self, k: &Key) -> Option<i64> {
        match self.find(k) {
            (i, true) => Some(self.vals[i]),
            _ => None,
        }
    }

    pub fn insert(&mut self, k: Key, v: i64) {
        if (self.len + 1) * 2 > self.keys.len() {
            let mut bigger = Memo::with_capacity(self.keys.len() * 2);
            for i in 0..self.keys.len() {
                if self.used[i] {
                    bigger.insert(self.keys[i], self.vals[i]);
                }
            }
            *self = bigger;
        }
        let (i, found) = self.find(&k);
        if !found {
            self.used[i] = true;
            self.keys[i] = k;
            self.len += 1;
        }
        self.vals[i] = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_and_grows() {
        let mut m = Memo::default();
        for i in 0..1000 {
            m.insert([1, i, -i, 7], i * 3);
        }
        for i in 0..1000 {
            assert_eq!(m.get(&[1, i, -i, 7]), Some(i * 3));
        }
        assert_eq!(m.get(&[2, 0, 0, 7]), None);
        m.insert([1, 5, -5, 7], 0);
        assert_eq!(m.get(&[1, 5, -5, 7]), Some(0));
    }
}
