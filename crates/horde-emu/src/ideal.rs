//! The ideal link: no delay, no rate limit, no loss, unbounded buffer. It is the default
//! for a channel direction that the configuration leaves out.

use std::collections::VecDeque;
use std::time::Duration;

use horde_links::{Delivery, Link, LinkStats, Verdict};

/// Delivers every packet at the instant it was offered.
#[derive(Debug, Default)]
pub struct IdealLink {
    queue: VecDeque<(u64, Duration, u32)>,
    stats: LinkStats,
}

impl IdealLink {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Link for IdealLink {
    fn enqueue(&mut self, now: Duration, id: u64, size: u32) -> Verdict {
        self.stats.offered += 1;
        self.queue.push_back((id, now, size));
        Verdict::Queued
    }

    fn next_delivery(&self) -> Option<Duration> {
        self.queue.front().map(|&(_, at, _)| at)
    }

    fn deliver(&mut self, now: Duration, out: &mut Vec<Delivery>) {
        while let Some(&(id, at, size)) = self.queue.front() {
            if at > now {
                break;
            }
            self.queue.pop_front();
            self.stats.delivered += 1;
            self.stats.bytes_delivered += u64::from(size);
            out.push(Delivery { id, at });
        }
    }

    fn stats(&self) -> LinkStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivers_at_offer_time_in_order() {
        let mut l = IdealLink::new();
        let t = Duration::from_millis(5);
        assert_eq!(l.enqueue(t, 7, 100), Verdict::Queued);
        assert_eq!(l.enqueue(t, 8, 50), Verdict::Queued);
        assert_eq!(l.next_delivery(), Some(t));
        let mut out = Vec::new();
        l.deliver(Duration::from_millis(4), &mut out);
        assert!(out.is_empty());
        l.deliver(t, &mut out);
        assert_eq!(out.iter().map(|d| d.id).collect::<Vec<_>>(), vec![7, 8]);
        assert_eq!(l.next_delivery(), None);
        assert_eq!(l.stats().bytes_delivered, 150);
    }
}
