//! How long a channel's start-up may be counted on as doubling its rate each round trip.
//!
//! A controller's start-up (slow start, BBR's Startup) doubles its window each round trip
//! only while the sender fills that window, and it says nothing about the path until it
//! ends. A controller whose application offers less than the path carries never ends it:
//! no loss, no queue. So the start-up counts for the message layer only while the
//! controller is in it **and** the channel has carried fewer than [`STARTUP_ROUNDS`] round
//! trips of packets **and** its window, once filled, has not gone unfilled. Either end is
//! final, and only a channel's first start-up counts: one that comes back from dead is
//! judged on its rate (`docs/messages.md`, "Start-up").

use std::time::Duration;

use crate::cc::RateSample;

/// Round trips of packets a channel's start-up is counted for at most: about what a
/// doubling window needs from 10 packets to a few thousand, past which the path's
/// capacity, not the start-up, decides, and a start-up that has not met it yet is judged
/// on what it delivers.
pub const STARTUP_ROUNDS: u32 = 10;

/// A channel still counted in its start-up: its rate doubles each `round_trip`, for at
/// most `rounds_left` more round trips.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Startup {
    /// The round trip the rate doubles over: the smoothed one, or the configured initial
    /// one before a sample.
    pub round_trip: Duration,
    /// Round trips of doubling left before the start-up stops counting, at least 1.
    pub rounds_left: u32,
}

impl Startup {
    /// A start-up doubling every `round_trip` for `rounds_left` more round trips (at
    /// least one).
    pub fn new(round_trip: Duration, rounds_left: u32) -> Self {
        Self {
            round_trip,
            rounds_left: rounds_left.max(1),
        }
    }
}

/// Counts a channel's round trips from its delivery-rate samples, as BBR counts rounds: a
/// round ends when a packet sent after the previous round ended is acknowledged.
///
/// Every idle connection's channels carry one, so it is packed into one `u32`: the rounds
/// begun (4 bits), whether a sample showed the window full, whether the start-up is over,
/// and the bytes delivered when the current round began (26 bits, saturated at 64 MiB:
/// ten rounds of a start-up deliver far less, and a saturated mark only ends rounds
/// sooner).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StartupWatch(u32);

const ROUNDS_MASK: u32 = 0xF;
const FILLED: u32 = 1 << 4;
const OVER: u32 = 1 << 5;
const MARK_SHIFT: u32 = 6;
const MARK_MAX: u64 = (1 << (32 - MARK_SHIFT)) - 1;

impl StartupWatch {
    fn rounds(self) -> u32 {
        self.0 & ROUNDS_MASK
    }

    fn round_start(self) -> u64 {
        u64::from(self.0 >> MARK_SHIFT)
    }

    pub(crate) fn on_rate_sample(&mut self, r: &RateSample) {
        if self.0 & OVER != 0 {
            return;
        }
        let mut rounds = self.rounds();
        let mut mark = self.round_start();
        if rounds == 0 || r.prior_delivered >= mark {
            rounds += 1;
            mark = r.total_delivered.min(MARK_MAX);
        }
        let mut flags = self.0 & (FILLED | OVER);
        // Before the first full window (the first packets after an idle spell are marked
        // application-limited) nothing is learnt; after it, an unfilled window has
        // stopped doubling.
        if !r.app_limited {
            flags |= FILLED;
        } else if flags & FILLED != 0 {
            flags |= OVER;
        }
        if rounds >= STARTUP_ROUNDS {
            flags |= OVER;
        }
        self.0 = ((mark as u32) << MARK_SHIFT) | flags | rounds.min(ROUNDS_MASK);
    }

    /// Round trips of doubling left, `None` once the start-up no longer counts.
    pub(crate) fn rounds_left(self) -> Option<u32> {
        (self.0 & OVER == 0).then(|| STARTUP_ROUNDS.saturating_sub(self.rounds()).max(1))
    }

    /// The start-up no longer counts, whatever the samples say (a dead channel came back:
    /// its controller starts over, but its path was judged before).
    pub(crate) fn end(&mut self) {
        self.0 |= OVER;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample acking a packet sent when `prior` bytes had been delivered, `total` now.
    fn sample(prior: u64, total: u64, app_limited: bool) -> RateSample {
        RateSample {
            delivery_rate: 1.0,
            delivered: total - prior,
            interval: Duration::from_millis(10),
            app_limited,
            total_delivered: total,
            prior_delivered: prior,
        }
    }

    #[test]
    fn the_start_up_counts_for_a_bounded_number_of_round_trips() {
        let mut w = StartupWatch::default();
        assert_eq!(w.rounds_left(), Some(STARTUP_ROUNDS));
        // Each round: two packets, the second sent in the same round as the first.
        let mut total = 0;
        for round in 1..STARTUP_ROUNDS {
            let prior = total;
            total += 1000;
            w.on_rate_sample(&sample(prior, total, false));
            total += 1000;
            w.on_rate_sample(&sample(prior, total, false));
            assert_eq!(
                w.rounds_left(),
                Some(STARTUP_ROUNDS - round),
                "round {round}"
            );
        }
        w.on_rate_sample(&sample(total, total + 1000, false));
        assert_eq!(w.rounds_left(), None);
    }

    #[test]
    fn the_watch_is_small() {
        assert_eq!(std::mem::size_of::<StartupWatch>(), 4);
    }

    #[test]
    fn a_channel_back_from_dead_does_not_count_its_new_start_up() {
        let mut w = StartupWatch::default();
        w.on_rate_sample(&sample(0, 1000, false));
        w.end();
        assert_eq!(w.rounds_left(), None);
        w.on_rate_sample(&sample(1000, 2000, false));
        assert_eq!(w.rounds_left(), None);
    }

    #[test]
    fn a_window_left_unfilled_after_it_was_filled_ends_the_start_up() {
        let mut w = StartupWatch::default();
        // The first packets after an idle spell are application-limited: nothing learnt.
        w.on_rate_sample(&sample(0, 1000, true));
        assert!(w.rounds_left().is_some());
        w.on_rate_sample(&sample(1000, 3000, false));
        assert!(w.rounds_left().is_some());
        w.on_rate_sample(&sample(3000, 4000, true));
        assert_eq!(w.rounds_left(), None);
        // Final.
        w.on_rate_sample(&sample(4000, 8000, false));
        assert_eq!(w.rounds_left(), None);
    }
}
