//! A few values kept in order of their ids, in one exactly sized vector.
//!
//! A receiving server keeps a report per sender, with a handful of streams and channels
//! each. A `BTreeMap` node has room for eleven entries whatever it holds, and a stream's
//! counters and histograms are some 400 bytes: two maps per sender cost 8 kB of mostly
//! empty nodes. Here each entry costs its own size.

/// Values by id, in id order.
#[derive(Debug, Clone)]
pub struct ById<K, V> {
    entries: Vec<(K, V)>,
}

impl<K, V> Default for ById<K, V> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

impl<K: Ord + Copy, V> ById<K, V> {
    /// The value of `id`, made with `make` if it has none yet.
    pub fn get_or_insert_with(&mut self, id: K, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.entries.binary_search_by(|(k, _)| k.cmp(&id)) {
            Ok(i) => i,
            Err(i) => {
                self.entries.reserve_exact(1);
                self.entries.insert(i, (id, make()));
                i
            }
        };
        &mut self.entries[i].1
    }

    /// Ids and values, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Values, in id order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_stay_in_id_order_and_take_no_spare_room() {
        let mut m: ById<u32, u64> = ById::default();
        for id in [7, 2, 9, 2, 7, 1] {
            *m.get_or_insert_with(id, || 0) += 1;
        }
        let got: Vec<(u32, u64)> = m.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(got, vec![(1, 1), (2, 2), (7, 2), (9, 1)]);
        assert_eq!(m.entries.capacity(), 4);
        for v in m.values_mut() {
            *v *= 10;
        }
        assert_eq!(*m.get_or_insert_with(9, || 0), 10);
    }
}
