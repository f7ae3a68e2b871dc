//! When each ADU could reach an application that consumes its stream in order.
//!
//! ADU `n` of a stream (its `n`-th insertion) is *resolved* the first time it is either
//! delivered to the receiving application or given up on (declared lost, or dropped
//! unsent). An in-order application can take a delivered ADU once it and every earlier
//! ADU of the stream are resolved, so its in-order delivery time is
//! `max(delivered(n), resolved(k) for every k < n)`: head-of-line waiting included.
//! An ADU given up on before it was delivered is skipped, and a later delivery of it is
//! too late for the in-order application.
//!
//! Memory: only ADUs resolved behind a still-unresolved one are held.

use std::collections::BTreeMap;
use std::time::Duration;

/// How an ADU was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resolution {
    /// Delivered at `at`; it had been inserted at `inserted`.
    Delivered { at: Duration, inserted: Duration },
    /// Given up on at `at`.
    Skipped { at: Duration },
}

impl Resolution {
    fn at(self) -> Duration {
        match self {
            Resolution::Delivered { at, .. } | Resolution::Skipped { at } => at,
        }
    }
}

/// One stream's in-order release state.
#[derive(Debug, Clone, Default)]
pub(crate) struct InOrder {
    /// Ordinal of the first ADU not yet resolved.
    next: u64,
    /// Latest resolution time among ADUs before `next`.
    frontier: Duration,
    /// Resolved ADUs at or after `next`, waiting for the hole at `next` to be resolved.
    waiting: BTreeMap<u64, Resolution>,
}

impl InOrder {
    /// ADU `ordinal` is resolved. Calls `released(delay)` with the insertion-to-in-order
    /// delivery delay of every delivered ADU this releases, in stream order. A second
    /// resolution of the same ADU is ignored.
    pub(crate) fn resolve(
        &mut self,
        ordinal: u64,
        how: Resolution,
        mut released: impl FnMut(Duration),
    ) {
        if ordinal < self.next {
            return;
        }
        self.waiting.entry(ordinal).or_insert(how);
        while let Some(how) = self.waiting.remove(&self.next) {
            self.frontier = self.frontier.max(how.at());
            if let Resolution::Delivered { inserted, .. } = how {
                released(self.frontier.saturating_sub(inserted));
            }
            self.next += 1;
        }
    }

    /// Resolved ADUs held back by an unresolved earlier one.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn delivered(at: u64, inserted: u64) -> Resolution {
        Resolution::Delivered {
            at: ms(at),
            inserted: ms(inserted),
        }
    }

    /// Feed resolutions; collect the released delays in ms.
    fn run(events: &[(u64, Resolution)]) -> (Vec<u64>, InOrder) {
        let mut q = InOrder::default();
        let mut out = Vec::new();
        for &(n, how) in events {
            q.resolve(n, how, |d| out.push(d.as_millis() as u64));
        }
        (out, q)
    }

    #[test]
    fn in_order_arrivals_are_released_at_once() {
        let (out, q) = run(&[(0, delivered(50, 0)), (1, delivered(70, 10))]);
        assert_eq!(out, vec![50, 60]);
        assert_eq!(q.waiting(), 0);
    }

    #[test]
    fn a_hole_filled_later_holds_everything_behind_it() {
        // ADU 0 arrives at 300; 1 and 2 arrived at 100 and 120 and wait for it.
        let (out, q) = run(&[
            (1, delivered(100, 10)),
            (2, delivered(120, 20)),
            (0, delivered(300, 0)),
            (3, delivered(310, 30)),
        ]);
        assert_eq!(out, vec![300, 290, 280, 280]);
        assert_eq!(q.waiting(), 0);
    }

    #[test]
    fn a_hole_declared_lost_releases_the_waiting_adus() {
        let (out, q) = run(&[
            (1, delivered(100, 10)),
            (2, delivered(120, 20)),
            (0, Resolution::Skipped { at: ms(900) }),
        ]);
        // Nothing for ADU 0 itself; 1 and 2 wait until its loss is declared at 900.
        assert_eq!(out, vec![890, 880]);
        assert_eq!(q.waiting(), 0);
        // A late delivery of the skipped ADU is ignored.
        let mut q = q;
        q.resolve(0, delivered(950, 0), |_| panic!("released twice"));
    }

    #[test]
    fn an_unresolved_hole_keeps_later_adus_waiting() {
        let (out, q) = run(&[(0, delivered(10, 0)), (2, delivered(30, 20))]);
        assert_eq!(out, vec![10]);
        assert_eq!(q.waiting(), 1);
    }

    #[test]
    fn resolutions_reported_out_of_time_order_give_the_same_delays() {
        // The frontier is a maximum of times, not "the latest call".
        let (out, _) = run(&[
            (2, delivered(180, 20)),
            (1, delivered(130, 10)),
            (0, delivered(60, 0)),
        ]);
        assert_eq!(out, vec![60, 120, 160]);
    }
}
