//! The receive reorder cache (PluriBus §5.4): an in-order ADU goes out at once; an
//! out-of-order one goes when the one before it has gone, or when it has waited `hold`.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;

/// What became of an ADU handed to the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The next one owed: released with whatever it unblocked.
    InOrder,
    /// Ahead of a gap: held.
    Held,
    /// Behind a gap the cache already gave up on: released at once, late.
    Late,
}

/// What a [`ReorderCache`] has released, by how.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReorderCounts {
    /// ADUs released in order (straight away or after a wait).
    pub in_order: u64,
    /// ADUs released after the cache had skipped past them.
    pub late: u64,
    /// Sequence numbers skipped on timeout and not arrived since.
    pub lost: u64,
}

/// The receiver's reorder cache (PluriBus §5.4): data ADUs are released in sequence
/// order; one ahead of a gap waits at most `hold` for the gap to fill, then the gap is
/// skipped (counted lost) so a lost ADU stalls the stream no longer than that.
#[derive(Debug, Clone)]
pub struct ReorderCache {
    hold: Duration,
    /// The next sequence number owed.
    next: u64,
    held: BTreeMap<u64, (Bytes, Duration)>,
    /// Releases so far.
    pub counts: ReorderCounts,
}

impl ReorderCache {
    /// An empty cache that holds an ADU ahead of a gap for at most `hold`.
    pub fn new(hold: Duration) -> Self {
        Self {
            hold,
            next: 0,
            held: BTreeMap::new(),
            counts: ReorderCounts::default(),
        }
    }

    /// Hand over a newly available ADU (first arrival or recovery of `seq`; the caller
    /// filters duplicates). Released ADUs are appended to `out` in release order.
    pub fn push(
        &mut self,
        now: Duration,
        seq: u64,
        payload: Bytes,
        out: &mut Vec<(u64, Bytes)>,
    ) -> Placement {
        if seq < self.next {
            self.counts.late += 1;
            self.counts.lost = self.counts.lost.saturating_sub(1);
            out.push((seq, payload));
            return Placement::Late;
        }
        if seq == self.next {
            self.next += 1;
            self.counts.in_order += 1;
            out.push((seq, payload));
            self.release_run(out);
            return Placement::InOrder;
        }
        self.held.insert(seq, (payload, now));
        Placement::Held
    }

    fn release_run(&mut self, out: &mut Vec<(u64, Bytes)>) {
        while let Some(entry) = self.held.first_entry() {
            if *entry.key() != self.next {
                break;
            }
            let (seq, (payload, _)) = entry.remove_entry();
            self.next = seq + 1;
            self.counts.in_order += 1;
            out.push((seq, payload));
        }
    }

    /// Release every held ADU that has waited `hold`, with everything before it, giving
    /// up on the gaps in front of them.
    pub fn on_timeout(&mut self, now: Duration, out: &mut Vec<(u64, Bytes)>) {
        let expired = self
            .held
            .iter()
            .filter(|(_, (_, at))| now.saturating_sub(*at) >= self.hold)
            .map(|(&s, _)| s)
            .max();
        let Some(last) = expired else { return };
        while let Some(entry) = self.held.first_entry() {
            if *entry.key() > last {
                break;
            }
            let (seq, (payload, _)) = entry.remove_entry();
            self.counts.lost += seq - self.next;
            self.next = seq + 1;
            self.counts.in_order += 1;
            out.push((seq, payload));
        }
        self.release_run(out);
    }

    /// When the oldest held ADU's wait ends (call [`ReorderCache::on_timeout`] then).
    pub fn next_timeout(&self) -> Option<Duration> {
        self.held.values().map(|(_, at)| *at + self.hold).min()
    }

    /// ADUs waiting for a gap to fill.
    pub fn held(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HOLD: Duration = Duration::from_millis(50);

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    fn b(seq: u64) -> Bytes {
        Bytes::from(seq.to_be_bytes().to_vec())
    }

    fn seqs(out: &[(u64, Bytes)]) -> Vec<u64> {
        out.iter().map(|(s, _)| *s).collect()
    }

    #[test]
    fn in_order_goes_straight_out_and_a_gap_holds_until_filled() {
        let mut c = ReorderCache::new(HOLD);
        let mut out = Vec::new();
        assert_eq!(c.push(ms(0), 0, b(0), &mut out), Placement::InOrder);
        assert_eq!(c.push(ms(1), 2, b(2), &mut out), Placement::Held);
        assert_eq!(c.push(ms(2), 3, b(3), &mut out), Placement::Held);
        assert_eq!(seqs(&out), [0]);
        assert_eq!(c.next_timeout(), Some(ms(51)));
        assert_eq!(c.push(ms(10), 1, b(1), &mut out), Placement::InOrder);
        assert_eq!(seqs(&out), [0, 1, 2, 3]);
        assert_eq!(c.held(), 0);
        assert_eq!(c.counts.lost, 0);
    }

    #[test]
    fn a_held_adu_goes_on_timeout_and_a_straggler_is_late() {
        let mut c = ReorderCache::new(HOLD);
        let mut out = Vec::new();
        c.push(ms(0), 2, b(2), &mut out);
        c.push(ms(30), 5, b(5), &mut out);
        c.on_timeout(ms(49), &mut out);
        assert!(out.is_empty());
        c.on_timeout(ms(50), &mut out);
        assert_eq!(seqs(&out), [2]);
        assert_eq!(c.counts.lost, 2);
        assert_eq!(c.push(ms(60), 3, b(3), &mut out), Placement::InOrder);
        assert_eq!(c.push(ms(61), 0, b(0), &mut out), Placement::Late);
        assert_eq!(seqs(&out), [2, 3, 0]);
        assert_eq!(c.counts.lost, 1);
        assert_eq!(c.counts.late, 1);
        c.on_timeout(ms(80), &mut out);
        assert_eq!(seqs(&out), [2, 3, 0, 5]);
        assert_eq!(c.counts.lost, 2); // 1 and 4
    }

    proptest! {
        /// Whatever the arrival order and timing: every ADU comes out exactly once, the
        /// ones released in order come out ascending, and none waits past its hold.
        #[test]
        fn every_adu_leaves_once_and_in_order_ones_ascend(
            arrivals in proptest::collection::vec((0u64..64, 0u64..30), 1..80)
        ) {
            let mut c = ReorderCache::new(HOLD);
            let mut out = Vec::new();
            let mut now = 0;
            let mut seen = std::collections::BTreeSet::new();
            let mut last_in_order: Option<u64> = None;
            for (seq, dt) in arrivals {
                now += dt;
                let before = out.len();
                c.on_timeout(ms(now), &mut out);
                if let Some(t) = c.next_timeout() {
                    prop_assert!(t > ms(now));
                }
                if seen.insert(seq) {
                    let place = c.push(ms(now), seq, b(seq), &mut out);
                    for (s, _) in &out[before..] {
                        if place != Placement::Late || *s != seq {
                            prop_assert!(last_in_order.is_none_or(|l| *s > l));
                            last_in_order = Some(*s);
                        }
                    }
                }
            }
            c.on_timeout(ms(now + 1000), &mut out);
            let mut got = seqs(&out);
            got.sort_unstable();
            prop_assert_eq!(got, seen.into_iter().collect::<Vec<_>>());
        }
    }
}
