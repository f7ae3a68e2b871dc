//! The latest report rows of a run, in bounded memory: a run of days keeps its last
//! [`KEPT_ROWS`] interval rows and counts the older ones it let go.

use std::collections::VecDeque;

use serde::{Serialize, Serializer};

/// Interval rows kept: ten minutes of one-second rows.
pub const KEPT_ROWS: usize = 600;

/// The last `cap` rows pushed, oldest first, and how many older ones were let go.
#[derive(Debug, Clone)]
pub struct Recent<T> {
    rows: VecDeque<T>,
    cap: usize,
    omitted: u64,
}

impl<T> Default for Recent<T> {
    fn default() -> Self {
        Self::new(KEPT_ROWS)
    }
}

impl<T> Recent<T> {
    pub fn new(cap: usize) -> Self {
        Self {
            rows: VecDeque::new(),
            cap: cap.max(1),
            omitted: 0,
        }
    }

    pub fn push(&mut self, row: T) {
        if self.rows.len() == self.cap {
            self.rows.pop_front();
            self.omitted += 1;
        }
        self.rows.push_back(row);
    }

    pub fn last(&self) -> Option<&T> {
        self.rows.back()
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.rows.iter()
    }

    /// Rows let go to keep the memory bounded.
    pub fn omitted(&self) -> u64 {
        self.omitted
    }
}

/// A JSON list of the rows kept.
impl<T: Serialize> Serialize for Recent<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.rows.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_rows_and_counts_the_rest() {
        let mut r = Recent::new(3);
        for i in 0..10 {
            r.push(i);
        }
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![7, 8, 9]);
        assert_eq!(r.omitted(), 7);
        assert_eq!(r.last(), Some(&9));
        assert_eq!(serde_json::to_string(&r).unwrap(), "[7,8,9]");
    }
}
