//! The receive side of a channel: which of the peer's sequence numbers arrived, and the
//! acks that tell the peer so.

use std::time::Duration;

use crate::wire::Ack;
use horde_policy::ChannelId;

const MAX_ACK_DELAY: Duration = Duration::from_millis(1);
/// Received packets that trigger an immediate ack. Fewer acks save datagrams (and their
/// encryption) at high rates; at low rates MAX_ACK_DELAY decides.
const ACK_EVERY: u32 = 4;
/// Received-sequence ranges kept for building acks. Older ranges are forgotten, and
/// anything at or below what was forgotten counts as a duplicate.
const MAX_RECV_RANGES: usize = 64;
/// Ranges reported per ack besides the first. Acks go every few packets, so an older hole
/// was already reported many times; a lossy channel would otherwise send every ack at
/// the wire format's limit (about 500 bytes) for the rest of its life.
const RANGES_PER_ACK: usize = 12;

/// How long a receiver may hold an ack back; the sender's probe timeout allows for it.
pub(crate) const fn max_ack_delay() -> Duration {
    MAX_ACK_DELAY
}

#[derive(Debug)]
pub(crate) struct ReceiveState {
    /// Descending disjoint inclusive ranges of received sequence numbers.
    ranges: Vec<(u64, u64)>,
    /// Sequence numbers below this were dropped from `ranges`: the receiver can no longer
    /// tell whether it saw them, so it treats them as duplicates.
    forgotten_below: u64,
    largest_at: Duration,
    largest_ts: u32,
    unacked: u32,
    ack_due: Option<Duration>,
    /// A range list handed back after its ack was encoded, reused by the next ack.
    spare: Vec<(u64, u64)>,
}

impl ReceiveState {
    pub fn new(now: Duration) -> Self {
        Self {
            ranges: Vec::new(),
            forgotten_below: 0,
            largest_at: now,
            largest_ts: 0,
            unacked: 0,
            ack_due: None,
            spare: Vec::new(),
        }
    }

    /// Keep an encoded ack's range list for the next ack.
    pub fn recycle(&mut self, mut ranges: Vec<(u64, u64)>) {
        if ranges.capacity() > self.spare.capacity() {
            ranges.clear();
            self.spare = ranges;
        }
    }

    pub fn has_received(&self) -> bool {
        !self.ranges.is_empty()
    }

    pub fn ack_due(&self) -> Option<Duration> {
        self.ack_due
    }

    /// Record a received sequence number. Returns `false` for a duplicate.
    pub fn on_receive(&mut self, now: Duration, seq: u64, send_ts: u32) -> bool {
        // Only numbers the receiver has forgotten are judged wholesale; everything else
        // by the exact ranges, so a stray far-ahead number (forged or corrupt) cannot
        // make later real packets look old.
        if seq < self.forgotten_below || !insert_range(&mut self.ranges, seq) {
            return false;
        }
        if self.ranges.first().map(|r| r.1) == Some(seq) {
            self.largest_at = now;
            self.largest_ts = send_ts;
        }
        if self.ranges.len() > MAX_RECV_RANGES {
            let highest_dropped = self.ranges[MAX_RECV_RANGES].1;
            self.forgotten_below = self.forgotten_below.max(highest_dropped.saturating_add(1));
            self.ranges.truncate(MAX_RECV_RANGES);
        }
        self.unacked += 1;
        // Ack every ACK_EVERY packets at once, and anything else within MAX_ACK_DELAY.
        if self.unacked >= ACK_EVERY {
            self.ack_due = Some(now);
        } else if self.ack_due.is_none() {
            self.ack_due = Some(now + MAX_ACK_DELAY);
        }
        true
    }

    /// Build the ack to send now, if one is due.
    pub fn take_ack(&mut self, now: Duration, conn: u64, channel: ChannelId) -> Option<Ack> {
        if self.ack_due.is_none_or(|t| t > now) {
            return None;
        }
        self.ack_due = None;
        self.unacked = 0;
        let (&(lo0, hi0), rest) = self.ranges.split_first()?;
        let mut ranges = std::mem::take(&mut self.spare);
        ranges.clear();
        let mut prev_lo = lo0;
        for &(lo, hi) in rest.iter().take(RANGES_PER_ACK) {
            ranges.push((prev_lo - hi - 2, hi - lo));
            prev_lo = lo;
        }
        Some(Ack {
            conn,
            channel,
            largest: hi0,
            ack_delay_us: now
                .saturating_sub(self.largest_at)
                .as_micros()
                .min(u32::MAX as u128) as u32,
            echo_ts: self.largest_ts,
            first_range: hi0 - lo0,
            ranges,
        })
    }
}

/// Insert `seq` into descending disjoint inclusive ranges; `false` if already present.
fn insert_range(ranges: &mut Vec<(u64, u64)>, seq: u64) -> bool {
    // Ranges are sorted by descending hi; find the first range with lo <= seq.
    let pos = ranges.partition_point(|&(lo, _)| lo > seq);
    if pos < ranges.len() && ranges[pos].1 >= seq {
        return false;
    }
    let joins_above = pos > 0 && ranges[pos - 1].0 == seq + 1;
    let joins_below = pos < ranges.len() && ranges[pos].1 + 1 == seq;
    match (joins_above, joins_below) {
        (true, true) => {
            ranges[pos - 1].0 = ranges[pos].0;
            ranges.remove(pos);
        }
        (true, false) => ranges[pos - 1].0 = seq,
        (false, true) => ranges[pos].1 = seq,
        (false, false) => ranges.insert(pos, (seq, seq)),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_reject_duplicates() {
        let mut r = Vec::new();
        for s in [5, 7, 6, 1, 2, 10] {
            assert!(insert_range(&mut r, s));
        }
        assert_eq!(r, vec![(10, 10), (5, 7), (1, 2)]);
        assert!(!insert_range(&mut r, 6));
        assert!(insert_range(&mut r, 3));
        assert!(insert_range(&mut r, 4));
        assert_eq!(r, vec![(10, 10), (1, 7)]);
    }
}
