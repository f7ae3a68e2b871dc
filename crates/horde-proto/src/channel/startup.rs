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
#[derive(Debug, Clone, Default)]
pub(crate) struct StartupWatch {
    /// Rounds begun since the controller started.
    rounds: u32,
    /// Bytes delivered when the current round began; a packet sent after that ends it.
    round_start: u64,
    /// A sample showed the window full (not application-limited).
    filled: bool,
    /// The start-up no longer counts, whatever the controller says.
    over: bool,
}

impl StartupWatch {
    pub(crate) fn on_rate_sample(&mut self, r: &RateSample) {
        if self.over {
            return;
        }
        if self.rounds == 0 || r.prior_delivered >= self.round_start {
            self.rounds += 1;
            self.round_start = r.total_delivered;
        }
        // Before the first full window (the first packets sent after an idle spell are
        // marked application-limited) nothing is learnt; after it, an unfilled window has
        // stopped doubling.
        if !r.app_limited {
            self.filled = true;
        } else if self.filled {
            self.over = true;
        }
        if self.rounds >= STARTUP_ROUNDS {
            self.over = true;
        }
    }

    /// Round trips of doubling left, `None` once the start-up no longer counts.
    pub(crate) fn rounds_left(&self) -> Option<u32> {
        (!self.over).then(|| STARTUP_ROUNDS.saturating_sub(self.rounds).max(1))
    }

    /// The start-up no longer counts, whatever the samples say (a dead channel came back:
    /// its controller starts over, but its path was judged before).
    pub(crate) fn end(&mut self) {
        self.over = true;
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
