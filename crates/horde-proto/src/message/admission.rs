//! The deadline arithmetic shared by admission control and early expiry.
//!
//! Channel `c` (rate `r_c`, delay `d_c`) sends back to back from `now`, so its `k`-th
//! piece of `L` bytes arrives at `now + d_c + k·L/r_c`. The number of pieces it can land
//! before a deadline `D` is `floor(r_c·(D − now − d_c)/L)`, and a queue owns `share` of
//! the sum over channels. Walking a queue's messages in service order, a message with a
//! deadline is feasible when the pieces of every message served before it, plus its own,
//! fit in that capacity. `docs/messages.md` states the rule with a worked example.

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
                (c.rate * window / f64::from(self.piece_size) + ROUNDING_SLACK).floor()
            })
            .filter(|pieces| *pieces > 0.0)
            .sum();
        (total * self.share + ROUNDING_SLACK).floor() as u64
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

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn capacity_counts_whole_pieces_per_channel_after_its_delay() {
        let channels = [
            ChannelEstimate {
                rate: 100_000.0,
                delay: ms(50),
            },
            ChannelEstimate {
                rate: 50_000.0,
                delay: ms(200),
            },
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
}
