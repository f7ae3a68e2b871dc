//! The receive side of a channel: which of the peer's sequence numbers arrived, and the
//! acks that tell the peer so.

use std::time::Duration;

use crate::wire::Ack;
use horde_policy::ChannelId;

use super::ack_frequency::{AckSchedule, QUICK_ACKS, RANGE_REPEATS};

/// Received-sequence ranges kept for building acks. Older ranges are forgotten, and
/// anything at or below what was forgotten counts as a duplicate.
const MAX_RECV_RANGES: usize = 64;
/// Ranges reported per ack besides the first. Acks go every few packets, so an older hole
/// was already reported many times; a lossy channel would otherwise send every ack at
/// the wire format's limit (about 500 bytes) for the rest of its life.
const RANGES_PER_ACK: usize = 12;

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
    /// Fresh packets received in all.
    received: u64,
    /// The lowest sequence number received since the last ack (`u64::MAX`: none), and
    /// the same for the last [`RANGE_REPEATS`] acks: ranges below all of them were
    /// reported that many times already ([`AckSchedule::reverse_path`] only).
    window_low: u64,
    recent_lows: [u64; RANGE_REPEATS],
    acks_sent: usize,
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
            received: 0,
            window_low: u64::MAX,
            recent_lows: [u64::MAX; RANGE_REPEATS],
            acks_sent: 0,
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

    /// Record a received sequence number and schedule its ack by `schedule`. Returns
    /// `false` for a duplicate.
    pub fn on_receive(
        &mut self,
        now: Duration,
        seq: u64,
        send_ts: u32,
        schedule: AckSchedule,
    ) -> bool {
        let prev_largest = self.ranges.first().map(|r| r.1);
        // Only numbers the receiver has forgotten are judged wholesale; everything else
        // by the exact ranges, so a stray far-ahead number (forged or corrupt) cannot
        // make later real packets look old.
        if seq < self.forgotten_below || !insert_range(&mut self.ranges, seq) {
            return false;
        }
        self.received += 1;
        self.window_low = self.window_low.min(seq);
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
        // Ack every `every` packets at once, and anything else within the delay. Under
        // the reverse-path rules also at once when the sender needs to hear soon: a hole
        // opened (its loss detection) or filled (a loss it may declare spuriously), and
        // the channel's first packets.
        let out_of_order = prev_largest.is_some_and(|l| seq != l + 1);
        let urgent = schedule.reverse_path && (out_of_order || self.received <= QUICK_ACKS);
        if self.unacked >= schedule.every || urgent {
            self.ack_due = Some(now);
        } else if self.ack_due.is_none() {
            self.ack_due = Some(now + schedule.max_delay);
        }
        true
    }

    /// The lowest sequence number an ack must still report under the reverse-path rules:
    /// any range above it holds a packet that arrived within the last [`RANGE_REPEATS`]
    /// acks.
    fn report_floor(&self) -> u64 {
        self.recent_lows
            .iter()
            .fold(self.window_low, |low, &l| low.min(l))
    }

    /// Build the ack to send now, if one is due. With `recent_only` (the reverse-path
    /// rules) it leaves out ranges already reported in the last [`RANGE_REPEATS`] acks.
    pub fn take_ack(
        &mut self,
        now: Duration,
        conn: u64,
        channel: ChannelId,
        recent_only: bool,
    ) -> Option<Ack> {
        if self.ack_due.is_none_or(|t| t > now) {
            return None;
        }
        self.ack_due = None;
        self.unacked = 0;
        let floor = if recent_only { self.report_floor() } else { 0 };
        self.recent_lows[self.acks_sent % RANGE_REPEATS] = self.window_low;
        self.acks_sent += 1;
        self.window_low = u64::MAX;
        let (&(lo0, hi0), rest) = self.ranges.split_first()?;
        let mut ranges = std::mem::take(&mut self.spare);
        ranges.clear();
        let mut prev_lo = lo0;
        let recent = rest.iter().take_while(|&&(_, hi)| hi >= floor);
        for &(lo, hi) in recent.take(RANGES_PER_ACK) {
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
    use super::super::ack_frequency::AckFrequency;
    use super::*;
    use proptest::prelude::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    fn fixed() -> AckSchedule {
        AckFrequency::Fixed.schedule(ms(40), 22_500.0, 120)
    }

    /// The schedule of a 200 kbit/s reverse path on a 40 ms round trip: 10 ms.
    fn reverse() -> AckSchedule {
        AckFrequency::ReversePath.schedule(ms(40), 22_500.0, 120)
    }

    /// Receive `seqs` 8 ms apart (a 1.5 Mbit/s link's full packets), taking every ack
    /// when it is due; returns the acks.
    fn run(schedule: AckSchedule, seqs: &[u64]) -> Vec<Ack> {
        let mut r = ReceiveState::new(ms(0));
        let mut acks = Vec::new();
        let recent_only = schedule.reverse_path;
        for (i, &seq) in seqs.iter().enumerate() {
            let at = ms(8 * i as u64);
            // Acks whose timer expired before this packet.
            if let Some(due) = r.ack_due().filter(|&d| d < at) {
                acks.extend(r.take_ack(due, 1, ChannelId::new(0), recent_only));
            }
            assert!(r.on_receive(at, seq, 0, schedule));
            if r.ack_due() == Some(at) {
                acks.extend(r.take_ack(at, 1, ChannelId::new(0), recent_only));
            }
        }
        if let Some(due) = r.ack_due() {
            acks.extend(r.take_ack(due, 1, ChannelId::new(0), recent_only));
        }
        acks
    }

    #[test]
    fn fixed_acks_every_packet_of_a_slow_download() {
        let seqs: Vec<u64> = (0..100).collect();
        assert_eq!(run(fixed(), &seqs).len(), 100);
    }

    #[test]
    fn reverse_path_acks_a_slow_download_every_two_packets() {
        let seqs: Vec<u64> = (0..100).collect();
        let acks = run(reverse(), &seqs);
        // 4 quick acks, then one per two packets (the 10 ms delay spans a second one).
        assert_eq!(acks.len(), 4 + 48);
        // Each reports a delay no longer than the schedule's.
        assert!(acks.iter().all(|a| a.ack_delay_us <= 10_000));
        assert_eq!(acks.last().unwrap().largest, 99);
    }

    #[test]
    fn reverse_path_acks_at_once_when_a_hole_opens_or_fills() {
        let s = reverse();
        let mut r = ReceiveState::new(ms(0));
        for seq in 0..6 {
            r.on_receive(ms(seq), seq, 0, s);
            r.take_ack(ms(seq) + s.max_delay, 1, ChannelId::new(0), true);
        }
        // In order: held.
        r.on_receive(ms(100), 6, 0, s);
        assert_eq!(r.ack_due(), Some(ms(100) + s.max_delay));
        r.take_ack(ms(110), 1, ChannelId::new(0), true).unwrap();
        // 7 and 8 lost: 9 opens a hole.
        r.on_receive(ms(120), 9, 0, s);
        assert_eq!(r.ack_due(), Some(ms(120)));
        r.take_ack(ms(120), 1, ChannelId::new(0), true).unwrap();
        // 7 arrives late: it fills part of the hole.
        r.on_receive(ms(125), 7, 0, s);
        assert_eq!(r.ack_due(), Some(ms(125)));
        let a = r.take_ack(ms(125), 1, ChannelId::new(0), true).unwrap();
        let got: Vec<_> = a.iter_ranges().collect();
        assert_eq!(got, vec![(9, 9), (0, 7)]);
    }

    #[test]
    fn reverse_path_acks_at_once_after_ten_packets() {
        let s = AckFrequency::ReversePath.schedule(ms(100), 1_000.0, 120);
        let mut r = ReceiveState::new(ms(0));
        for seq in 0..4 {
            r.on_receive(ms(0), seq, 0, s);
            r.take_ack(ms(0), 1, ChannelId::new(0), true);
        }
        for seq in 4..13 {
            r.on_receive(ms(1), seq, 0, s);
            assert_eq!(r.ack_due(), Some(ms(1) + s.max_delay), "seq {seq}");
        }
        r.on_receive(ms(2), 13, 0, s);
        assert_eq!(r.ack_due(), Some(ms(2)));
    }

    #[test]
    fn fixed_keeps_repeating_old_holes() {
        // Every fifth packet lost: holes everywhere below.
        let seqs: Vec<u64> = (0..200).filter(|s| s % 5 != 0).collect();
        let acks = run(fixed(), &seqs);
        assert_eq!(acks.last().unwrap().ranges.len(), RANGES_PER_ACK);
    }

    #[test]
    fn reverse_path_reports_only_recent_ranges() {
        let seqs: Vec<u64> = (0..200).filter(|s| s % 5 != 0).collect();
        let acks = run(reverse(), &seqs);
        // Acks every 10 ms over packets 8 ms apart cover about one packet and a hole
        // each; the last three acks' packets span at most a few holes.
        let widest = acks.iter().skip(10).map(|a| a.ranges.len()).max().unwrap();
        assert!(widest <= 3, "widest ack repeats {widest} ranges");
    }

    proptest! {
        /// Whatever arrives, in whatever order, every fresh packet is reported by the
        /// next ack and by the [`RANGE_REPEATS`] acks after it arrived (unless an ack
        /// full of more recent ranges has no room for it, as with the fixed policy).
        #[test]
        fn every_packet_is_reported_in_enough_acks(
            arrivals in proptest::collection::vec((0u64..120, 0u64..3), 1..200),
        ) {
            let s = reverse();
            let mut r = ReceiveState::new(ms(0));
            let mut now = ms(0);
            // For each fresh packet, the acks that must still name it.
            let mut owed: Vec<(u64, usize)> = Vec::new();
            for (seq, wait) in arrivals {
                now += ms(wait * 4);
                if let Some(due) = r.ack_due().filter(|&d| d <= now) {
                    let a = r.take_ack(due, 1, ChannelId::new(0), true).unwrap();
                    check(&a, &mut owed)?;
                }
                if r.on_receive(now, seq, 0, s) {
                    owed.push((seq, RANGE_REPEATS));
                }
            }
            while let Some(due) = r.ack_due() {
                let a = r.take_ack(due, 1, ChannelId::new(0), true).unwrap();
                check(&a, &mut owed)?;
            }
            prop_assert!(owed.iter().all(|&(_, n)| n < RANGE_REPEATS), "unacked: {:?}", owed);
        }
    }

    fn check(a: &Ack, owed: &mut Vec<(u64, usize)>) -> Result<(), TestCaseError> {
        let ranges: Vec<_> = a.iter_ranges().collect();
        // An ack at its range limit leaves out what lies below its last range.
        let cut_below = match a.ranges.len() {
            RANGES_PER_ACK => ranges.last().map_or(0, |r| r.0),
            _ => 0,
        };
        for (seq, n) in owed.iter_mut() {
            let named = ranges.iter().any(|&(lo, hi)| lo <= *seq && *seq <= hi);
            prop_assert!(
                named || *seq < cut_below,
                "seq {} missing from {:?}",
                seq,
                ranges
            );
            *n -= 1;
        }
        owed.retain(|&(_, n)| n > 0);
        Ok(())
    }

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
