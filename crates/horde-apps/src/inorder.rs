//! In-order release as an application that needs its stream in order would do it: each
//! ADU is held until every earlier one has arrived, and a gap is given up `hold` after
//! the ADU behind it arrived. The in-order delay of an ADU is its release time minus its
//! send time; everything is in microseconds of one wall clock.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy)]
struct Held {
    sent_us: u64,
    arrived_us: u64,
}

#[derive(Debug)]
pub struct InOrder {
    hold_us: u64,
    /// The next sequence number owed to the application.
    next: u64,
    held: BTreeMap<u64, Held>,
    /// ADUs that arrived after their gap had been given up (not counted as in order).
    pub late: u64,
    /// Sequence numbers given up on.
    pub skipped: u64,
}

impl InOrder {
    pub fn new(hold_us: u64) -> Self {
        Self {
            hold_us,
            next: 0,
            held: BTreeMap::new(),
            late: 0,
            skipped: 0,
        }
    }

    /// An ADU arrived at `now_us`; the in-order delays (µs) of the ADUs this releases,
    /// including gaps given up by now, are appended to `out`.
    pub fn arrive(&mut self, seq: u64, sent_us: u64, now_us: u64, out: &mut Vec<u64>) {
        self.expire(now_us, out);
        if seq < self.next || self.held.contains_key(&seq) {
            self.late += 1;
            return;
        }
        self.held.insert(
            seq,
            Held {
                sent_us,
                arrived_us: now_us,
            },
        );
        self.release_run(now_us, out);
    }

    /// Give up every gap whose hold ran out by `now_us`, in the order the holds ran out,
    /// releasing what waited behind each at the moment its hold ended.
    pub fn expire(&mut self, now_us: u64, out: &mut Vec<u64>) {
        loop {
            let Some((&seq, h)) = self.held.iter().min_by_key(|(_, h)| h.arrived_us) else {
                return;
            };
            let at = h.arrived_us + self.hold_us;
            if at > now_us {
                return;
            }
            while let Some(entry) = self.held.first_entry() {
                if *entry.key() > seq {
                    break;
                }
                let (s, h) = entry.remove_entry();
                self.skipped += s - self.next;
                self.next = s + 1;
                out.push(at.saturating_sub(h.sent_us));
            }
            self.release_run(at, out);
        }
    }

    /// Release the consecutive run starting at `next`.
    fn release_run(&mut self, at_us: u64, out: &mut Vec<u64>) {
        while let Some(entry) = self.held.first_entry() {
            if *entry.key() != self.next {
                break;
            }
            let h = entry.remove();
            self.next += 1;
            out.push(at_us.saturating_sub(h.sent_us));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_behind_gaps_and_gives_them_up_after_the_hold() {
        let mut o = InOrder::new(100);
        let mut out = Vec::new();
        // 0 sent at 0 arrives at 10: released at once.
        o.arrive(0, 0, 10, &mut out);
        assert_eq!(out, [10]);
        out.clear();
        // 2 (sent 20) arrives at 30 and waits for 1 (sent 10), which arrives at 50.
        o.arrive(2, 20, 30, &mut out);
        assert!(out.is_empty());
        o.arrive(1, 10, 50, &mut out);
        assert_eq!(out, [40, 30]);
        out.clear();
        // 3 is lost; 4 (sent 40) arrives at 60 and is released when its hold ends at 160,
        // whenever that is noticed.
        o.arrive(4, 40, 60, &mut out);
        o.expire(159, &mut out);
        assert!(out.is_empty());
        o.expire(400, &mut out);
        assert_eq!(out, [120]);
        assert_eq!(o.skipped, 1);
        // 3 turns up after all: late, not in order.
        out.clear();
        o.arrive(3, 30, 500, &mut out);
        assert!(out.is_empty());
        assert_eq!(o.late, 1);
    }
}
