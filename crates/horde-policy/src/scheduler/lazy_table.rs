//! A table of values computed as needed within one cycle and forgotten at the
//! next: only the cells filled are reset, so a large, sparsely used table (the
//! search's kernel tables) costs nothing to clear.

/// A cell not computed yet.
pub(crate) const UNKNOWN: i64 = i64::MIN;

#[derive(Debug, Default)]
pub(crate) struct LazyTable {
    cells: Vec<i64>,
    /// Cells set since the last reset.
    filled: Vec<u32>,
}

impl LazyTable {
    /// Every one of the first `len` cells unknown again.
    pub fn reset(&mut self, len: usize) {
        for &i in &self.filled {
            self.cells[i as usize] = UNKNOWN;
        }
        self.filled.clear();
        if self.cells.len() < len {
            self.cells.resize(len, UNKNOWN);
        }
    }

    /// The cell's value, or [`UNKNOWN`].
    #[inline]
    pub fn get(&self, i: usize) -> i64 {
        self.cells[i]
    }

    #[inline]
    pub fn set(&mut self, i: usize, v: i64) {
        self.cells[i] = v;
        self.filled.push(i as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_forgets_every_cell_set_and_keeps_growing_cells_unknown() {
        let mut t = LazyTable::default();
        t.reset(4);
        assert!((0..4).all(|i| t.get(i) == UNKNOWN));
        t.set(1, 7);
        t.set(3, -2);
        assert_eq!((t.get(1), t.get(3), t.get(0)), (7, -2, UNKNOWN));
        t.reset(6);
        assert!((0..6).all(|i| t.get(i) == UNKNOWN));
        t.set(5, 9);
        t.reset(2);
        t.reset(6);
        assert_eq!(t.get(5), UNKNOWN);
    }
}
