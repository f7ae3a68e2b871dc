//! Which channel's slot a piece is cut for. The session, not this layer, puts ADUs on
//! channels; the message scheduler still needs a channel per piece to judge whether the
//! piece lands in time there. Each channel gets a virtual clock that advances by a piece's
//! serialisation time at the channel's rate; the next piece is cut for the channel whose
//! clock is earliest, which splits pieces across channels in proportion to their rates, as
//! the session's own scheduler does over time.

use std::time::Duration;

use horde_proto::message::ChannelEstimate;

#[derive(Debug, Default)]
pub(crate) struct Slots {
    free_at: Vec<Duration>,
}

impl Slots {
    /// The channels changed: indices follow the new estimates; clocks of channels that
    /// stay keep their place.
    pub(crate) fn resize(&mut self, channels: usize) {
        self.free_at.resize(channels, Duration::ZERO);
    }

    /// Channels that carry anything, earliest free slot first.
    pub(crate) fn order(&self, now: Duration, estimates: &[ChannelEstimate]) -> Vec<usize> {
        let mut usable: Vec<usize> = (0..estimates.len().min(self.free_at.len()))
            .filter(|&c| estimates[c].rate > 0.0)
            .collect();
        usable.sort_by_key(|&c| self.free_at[c].max(now));
        usable
    }

    /// A piece of `len` bytes was cut for channel `c`.
    pub(crate) fn take(&mut self, now: Duration, c: usize, len: u32, rate: f64) {
        let start = self.free_at[c].max(now);
        self.free_at[c] = start + super::arrival::seconds(f64::from(len.max(1)) / rate);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_split_in_proportion_to_rates() {
        let estimates = [
            ChannelEstimate {
                rate: 3000.0,
                delay: Duration::ZERO,
                startup: None,
            },
            ChannelEstimate {
                rate: 1000.0,
                delay: Duration::ZERO,
                startup: None,
            },
            ChannelEstimate {
                rate: 0.0,
                delay: Duration::ZERO,
                startup: None,
            },
        ];
        let mut slots = Slots::default();
        slots.resize(3);
        let mut count = [0; 3];
        for _ in 0..400 {
            let c = slots.order(Duration::ZERO, &estimates)[0];
            slots.take(Duration::ZERO, c, 100, estimates[c].rate);
            count[c] += 1;
        }
        assert_eq!(count, [300, 100, 0]);
    }
}
