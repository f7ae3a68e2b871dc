//! Sliding anti-replay window (RFC 6479).
//!
//! The window remembers the highest accepted counter `top` and one bit for each of the
//! [`REPLAY_WINDOW`] counters ending at `top`. The bits live in a ring of
//! `BLOCKS` 64-bit words; the ring has one word more than the window needs, so sliding
//! forward only ever zeroes whole words, never shifts bits. A counter is acceptable when it
//! is above `top`, or within the window and its bit is clear.
//!
//! The ring is as long as the counters seen so far need, a power of two up to `BLOCKS`
//! words: a channel that carried a handshake's hello and a few keepalives holds one word,
//! not 1 KiB (a server keeps a window per channel of thousands of idle sessions). Until
//! the ring is full no counter has wrapped around it, so each word sits where it would
//! sit in the full ring, and growing only appends zeroed words: the window accepts and
//! refuses exactly what a full-sized one would.
//!
//! [`ReplayWindow::check`] does not change state and is called before decryption (cheap
//! rejection of too-old and duplicate counters); [`ReplayWindow::accept`] marks a counter
//! seen and is called only after the packet authenticated.

use crate::DropReason;

const BLOCK_BITS: u64 = 64;
/// Ring size in words; a power of two so that indexing is a mask.
const BLOCKS: usize = 128;

/// How many counters, ending at the highest one accepted, the window tracks. A counter this
/// far or further behind the highest accepted one is rejected as too old.
pub const REPLAY_WINDOW: u64 = (BLOCKS as u64 - 1) * BLOCK_BITS;

/// Anti-replay state for one channel of one session (at most 1 KiB).
#[derive(Clone)]
pub struct ReplayWindow {
    top: u64,
    /// The ring, `BLOCKS` words or fewer (a power of two; empty before the first counter).
    bitmap: Vec<u64>,
}

impl Default for ReplayWindow {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplayWindow {
    /// Nothing seen yet; counter 0 is acceptable.
    pub fn new() -> Self {
        Self {
            top: 0,
            bitmap: Vec::new(),
        }
    }

    /// Whether `counter` may be accepted, without changing anything.
    ///
    /// Errors: [`DropReason::TooOld`] when `counter` is [`REPLAY_WINDOW`] or more behind the
    /// highest accepted counter, [`DropReason::Replayed`] when it was already accepted.
    pub fn check(&self, counter: u64) -> Result<(), DropReason> {
        if counter > self.top {
            return Ok(());
        }
        if self.top - counter >= REPLAY_WINDOW {
            return Err(DropReason::TooOld);
        }
        if self.word(counter) & bit(counter) != 0 {
            return Err(DropReason::Replayed);
        }
        Ok(())
    }

    /// The ring's word for `counter` (zero where the ring has not grown yet).
    fn word(&self, counter: u64) -> u64 {
        self.bitmap
            .get(block(counter, self.bitmap.len()))
            .copied()
            .unwrap_or(0)
    }

    /// Grow the ring so that it holds the word of counter block `target`.
    fn make_room(&mut self, target: u64) {
        let len = self.bitmap.len();
        if len == BLOCKS || target < len as u64 {
            return;
        }
        let want = if target >= BLOCKS as u64 {
            BLOCKS
        } else {
            (target as usize + 1).next_power_of_two()
        };
        self.bitmap.reserve_exact(want - len);
        self.bitmap.resize(want, 0);
    }

    /// Checks `counter` and, if acceptable, marks it seen (sliding the window forward if it is
    /// the new highest).
    pub fn accept(&mut self, counter: u64) -> Result<(), DropReason> {
        self.check(counter)?;
        self.make_room(counter.max(self.top) / BLOCK_BITS);
        let len = self.bitmap.len();
        if counter > self.top {
            let current = self.top / BLOCK_BITS;
            let target = counter / BLOCK_BITS;
            let fresh = (target - current).min(len as u64);
            for i in 1..=fresh {
                self.bitmap[((current + i) as usize) & (len - 1)] = 0;
            }
            self.top = counter;
        }
        self.bitmap[block(counter, len)] |= bit(counter);
        Ok(())
    }

    /// The highest accepted counter (0 before anything was accepted).
    pub fn top(&self) -> u64 {
        self.top
    }
}

/// The ring index of `counter`'s word in a ring of `len` words (a power of two).
fn block(counter: u64, len: usize) -> usize {
    ((counter / BLOCK_BITS) as usize) & len.saturating_sub(1)
}

fn bit(counter: u64) -> u64 {
    1 << (counter % BLOCK_BITS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[test]
    fn window_is_large_enough() {
        const { assert!(REPLAY_WINDOW >= 4096) };
        assert_eq!(REPLAY_WINDOW, 8128);
    }

    #[test]
    fn first_packet_and_duplicates() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.accept(0), Ok(()));
        assert_eq!(w.accept(0), Err(DropReason::Replayed));
        assert_eq!(w.accept(2), Ok(()));
        assert_eq!(w.accept(1), Ok(()));
        assert_eq!(w.accept(1), Err(DropReason::Replayed));
        assert_eq!(w.accept(2), Err(DropReason::Replayed));
    }

    #[test]
    fn check_does_not_mark() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.check(5), Ok(()));
        assert_eq!(w.check(5), Ok(()));
        assert_eq!(w.top(), 0);
        assert_eq!(w.accept(5), Ok(()));
        assert_eq!(w.check(5), Err(DropReason::Replayed));
    }

    #[test]
    fn window_edges() {
        let mut w = ReplayWindow::new();
        let top = 100_000;
        w.accept(top).unwrap();
        // Oldest acceptable counter, then the first too-old one.
        assert_eq!(w.check(top - (REPLAY_WINDOW - 1)), Ok(()));
        assert_eq!(w.check(top - REPLAY_WINDOW), Err(DropReason::TooOld));
        assert_eq!(w.accept(top - (REPLAY_WINDOW - 1)), Ok(()));
        assert_eq!(
            w.accept(top - (REPLAY_WINDOW - 1)),
            Err(DropReason::Replayed)
        );
        // Sliding forward by exactly one block keeps the previous block's bits.
        w.accept(top + 64).unwrap();
        assert_eq!(w.check(top), Err(DropReason::Replayed));
        // A huge jump clears everything still in the window.
        w.accept(top + 10 * REPLAY_WINDOW).unwrap();
        assert_eq!(w.check(top + 10 * REPLAY_WINDOW - 1), Ok(()));
        assert_eq!(w.check(top), Err(DropReason::TooOld));
    }

    #[test]
    fn largest_counter() {
        let mut w = ReplayWindow::new();
        w.accept(crate::packet::COUNTER_MASK).unwrap();
        assert_eq!(
            w.check(crate::packet::COUNTER_MASK),
            Err(DropReason::Replayed)
        );
        assert_eq!(w.check(0), Err(DropReason::TooOld));
    }

    #[test]
    fn the_ring_grows_with_the_counters_only() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.bitmap.capacity(), 0);
        for c in 0..40 {
            w.accept(c).unwrap();
        }
        assert_eq!(w.bitmap.len(), 1, "a few keepalives hold one word");
        w.accept(200).unwrap();
        assert_eq!(w.bitmap.len(), 4);
        assert_eq!(w.check(39), Err(DropReason::Replayed));
        assert_eq!(w.check(41), Ok(()));
        w.accept(REPLAY_WINDOW + 5000).unwrap();
        assert_eq!(w.bitmap.len(), BLOCKS);
        assert_eq!(w.bitmap.capacity(), BLOCKS);
        assert_eq!(w.check(200), Err(DropReason::TooOld));
    }

    proptest! {
        /// A ring grown on the way and a full-sized one from the start accept and refuse
        /// the same counters.
        #[test]
        fn growing_matches_a_full_ring(
            steps in proptest::collection::vec((0u64..4, 0u64..3000), 1..300)
        ) {
            let mut grown = ReplayWindow::new();
            let mut full = ReplayWindow { top: 0, bitmap: vec![0; BLOCKS] };
            let mut base = 0u64;
            for (jump, offset) in steps {
                base += jump * jump * 700;
                let c = base + offset;
                prop_assert_eq!(grown.check(c), full.check(c), "check {}", c);
                prop_assert_eq!(grown.accept(c), full.accept(c), "counter {}", c);
            }
        }


        /// Against a reference model: accept iff not seen before and less than
        /// `REPLAY_WINDOW` behind the highest accepted counter.
        #[test]
        fn matches_reference_model(
            steps in proptest::collection::vec((0u64..3, 0u64..20_000), 1..400)
        ) {
            let mut w = ReplayWindow::new();
            let mut seen = HashSet::new();
            let mut top: Option<u64> = None;
            let mut base = 0u64;
            for (jump, offset) in steps {
                // Mostly nearby counters, with occasional jumps forward.
                base += jump * 3000;
                let c = base + offset;
                let expected = match top {
                    Some(t) if c <= t && t - c >= REPLAY_WINDOW => Err(DropReason::TooOld),
                    _ if seen.contains(&c) => Err(DropReason::Replayed),
                    _ => Ok(()),
                };
                prop_assert_eq!(w.accept(c), expected, "counter {}", c);
                if expected.is_ok() {
                    seen.insert(c);
                    top = Some(top.map_or(c, |t| t.max(c)));
                }
            }
        }
    }
}
