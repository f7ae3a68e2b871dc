//! The deadline arithmetic shared by admission control and early expiry.
//!
//! Channel `c` (rate `r_c`, delay `d_c`) sends back to back from `now`, so its `k`-th
//! piece of `L` bytes arrives at `now + d_c + k·L/r_c`. The number of pieces it can land
//! before a deadline `D` is `floor(r_c·(D − now − d_c)/L)`, and a queue owns `share` of
//! the sum over channels. Walking a queue's messages in service order, a message with a
//! deadline is feasible when the pieces of every message served before it, plus its own,
//! fit in that capacity. A channel whose start-up still counts has its rate doubling each
//! round trip for the rounds it has left instead. `docs/messages.md` states the rule with
//! a worked example.

use std::time::Duration;

use super::{ChannelEstimate, MessageId};

/// Slack for float rounding: `0.45 s × 100 000 B/s / 1000 B` must count as 45 pieces.
const ROUNDING_SLACK: f64 = 1e-9;

/// The pieces the channels can land before a deadline, for one queue's share.
pub(crate) struct Capacity<'a> {
    pub channels: &'a [ChannelEstimate],
    pub now: Duration,
    pub piece_size: u32,
    pub share: f64,
}

impl Capacity<'_> {
    /// Pieces of this queue that can arrive by `deadline`.
    pub fn pieces_by(&self, deadline: Duration) -> u64 {
        let total: f64 = self
            .channels
            .iter()
            .map(|c| {
                let window = deadline
                    .saturating_sub(self.now)
                    .saturating_sub(c.delay)
                    .as_secs_f64();
                (bytes_within(c, window) / f64::from(self.piece_size) + ROUNDING_SLACK).floor()
            })
            .filter(|pieces| *pieces > 0.0)
            .sum();
        (total * self.share + ROUNDING_SLACK).floor() as u64
    }
}

/// Bytes channel `c` sends back to back in `window` seconds: at its rate, or, while its
/// start-up counts, at a rate that doubles each round trip `R` from `r` now for the `k`
/// rounds left and then holds: with `n = min(window / R, k)`,
/// `r·R·(2^n − 1) / ln 2 + r·2^n·(window − n·R)`.
fn bytes_within(c: &ChannelEstimate, window: f64) -> f64 {
    match c.startup {
        Some(s) if s.round_trip > Duration::ZERO => {
            let rtt = s.round_trip.as_secs_f64();
            let doublings = (window / rtt).min(f64::from(s.rounds_left));
            let grown = doublings.exp2();
            c.rate * rtt * (grown - 1.0) / std::f64::consts::LN_2
                + c.rate * grown * (window - doublings * rtt)
        }
        _ => c.rate * window,
    }
}

/// One message as the walk sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WalkItem {
    pub id: MessageId,
    /// Pieces it still has to send.
    pub pieces: u64,
    pub deadline: Option<Duration>,
    /// The application chose to continue it after its early callback: it keeps its place
    /// and its pieces count, but it is never suspended again for the same deadline.
    pub continued: bool,
}

/// The walk's verdict on one message with a deadline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Verdict {
    pub id: MessageId,
    pub deadline: Duration,
    pub feasible: bool,
}

/// Walks `items` (in service order) against `capacity`. An infeasible message's pieces
/// are not counted for those after it, as it will be suspended.
pub(crate) fn walk(
    items: impl IntoIterator<Item = WalkItem>,
    capacity: &Capacity<'_>,
) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    let mut served: u64 = 0;
    for item in items {
        let needed = served.saturating_add(item.pieces);
        let Some(deadline) = item.deadline else {
            served = needed;
            continue;
        };
        let cap = capacity.pieces_by(deadline);
        let feasible = needed <= cap;
        if feasible || item.continued {
            served = needed;
        }
        if !item.continued {
            verdicts.push(Verdict {
                id: item.id,
                deadline,
                feasible,
            });
        }
    }
    verdicts
}

/// Whether one piece of `len` bytes sent now on `channel` arrives by `deadline`.
pub(crate) fn arrives_in_time(
    channel: &ChannelEstimate,
    now: Duration,
    len: u32,
    deadline: Duration,
) -> bool {
    if channel.rate <= 0.0 {
        return false;
    }
    let arrival = now.as_secs_f64() + channel.delay.as_secs_f64() + f64::from(len) / channel.rate;
    arrival <= deadline.as_secs_f64() + ROUNDING_SLACK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Startup;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn capacity_counts_whole_pieces_per_channel_after_its_delay() {
        let channels = [
            ChannelEstimate::steady(100_000.0, ms(50)),
            ChannelEstimate::steady(50_000.0, ms(200)),
        ];
        let cap = Capacity {
            channels: &channels,
            now: ms(0),
            piece_size: 1000,
            share: 1.0,
        };
        // 100 pieces/s after 50 ms, 50 pieces/s after 200 ms.
        assert_eq!(cap.pieces_by(ms(100)), 5);
        assert_eq!(cap.pieces_by(ms(500)), 45 + 15);
        assert_eq!(cap.pieces_by(ms(40)), 0);
        let half = Capacity { share: 0.5, ..cap };
        assert_eq!(half.pieces_by(ms(500)), 30);
    }

    #[test]
    fn a_channel_in_start_up_counts_its_rate_doubling_each_round_trip() {
        // 10 pieces per 100 ms round trip now, after 50 ms: the rounds land 10, 20, 40,
        // 80 pieces (the integral counts 1/ln 2 of that sum, as the window grows within
        // a round too).
        let channels = [ChannelEstimate {
            rate: 100_000.0,
            delay: ms(50),
            startup: Some(Startup::new(ms(100), 10)),
        }];
        let cap = Capacity {
            channels: &channels,
            now: ms(0),
            piece_size: 1000,
            share: 1.0,
        };
        assert_eq!(cap.pieces_by(ms(40)), 0);
        assert_eq!(cap.pieces_by(ms(150)), 14); // 10 / ln 2
        assert_eq!(cap.pieces_by(ms(450)), 216); // 150 / ln 2

        // A steady channel at the same rate lands 40 by then.
        let steady = [ChannelEstimate::steady(100_000.0, ms(50))];
        assert_eq!(
            Capacity {
                channels: &steady,
                ..cap
            }
            .pieces_by(ms(450)),
            40
        );
        // With two rounds left the rate doubles twice and then holds at 400 pieces/s:
        // 30 / ln 2 pieces in the first 200 ms, then 80.
        let two_left = [ChannelEstimate {
            startup: Some(Startup::new(ms(100), 2)),
            ..channels[0]
        }];
        let cap_two = Capacity {
            channels: &two_left,
            ..cap
        };
        assert_eq!(cap_two.pieces_by(ms(250)), 43);
        assert_eq!(cap_two.pieces_by(ms(450)), 123);
    }
}
