//! How many bytes of spare capacity OEC and the block code may fill in one go.
//!
//! Coded ADUs are queued on their stream and the scheduler places them like data, on
//! the free slot where they would arrive first (`earliest_arrival`), not on the channel
//! whose empty queue made room for them. Summing every channel's spare bytes therefore
//! let a slow idle channel (EVDO-like) pay for coded ADUs that then went to a faster
//! channel whose queue was not empty, in front of the data behind them: the paper's
//! "coded packets only into an empty queue" broken in practice (`docs/recovery.md`,
//! "Which spare capacity counts").

use std::time::Duration;

/// The spare bytes coding may use: channels are taken in order of round-trip time,
/// fastest first, and their spare bytes summed up to the first one that has none. A
/// channel with a queue (no spare bytes) that is faster than an idle one would attract
/// the coded ADUs the idle one paid for, so nothing behind it counts.
///
/// `channels` holds, per live channel, its smoothed round trip and its spare bytes.
pub fn usable_spare(channels: impl IntoIterator<Item = (Duration, usize)>) -> usize {
    let mut by_rtt: Vec<(Duration, usize)> = channels.into_iter().collect();
    by_rtt.sort_by_key(|&(rtt, _)| rtt);
    by_rtt
        .iter()
        .map(|&(_, spare)| spare)
        .take_while(|&spare| spare > 0)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn a_busy_fast_channel_keeps_a_slow_idle_one_from_paying_for_coding() {
        // WiMax-like (40 ms) has a queue, EVDO-like (150 ms) is idle.
        assert_eq!(usable_spare([(ms(40), 0), (ms(150), 3000)]), 0);
        assert_eq!(usable_spare([(ms(150), 3000), (ms(40), 0)]), 0);
    }

    #[test]
    fn idle_channels_count_fastest_first() {
        assert_eq!(usable_spare([(ms(150), 3000), (ms(40), 500)]), 3500);
        assert_eq!(usable_spare([(ms(40), 500), (ms(150), 0)]), 500);
        assert_eq!(usable_spare([]), 0);
    }

    proptest! {
        #[test]
        fn never_more_than_the_sum_and_all_of_it_when_every_channel_is_idle(
            chans in proptest::collection::vec((1u64..500, 0usize..5000), 0..6)
        ) {
            let input: Vec<(Duration, usize)> =
                chans.iter().map(|&(r, s)| (ms(r), s)).collect();
            let total: usize = input.iter().map(|c| c.1).sum();
            let got = usable_spare(input.clone());
            prop_assert!(got <= total);
            if input.iter().all(|c| c.1 > 0) {
                prop_assert_eq!(got, total);
            }
            // When the fastest channels are all busy, nothing counts.
            if let Some(fastest) = input.iter().map(|c| c.0).min() {
                if input.iter().filter(|c| c.0 == fastest).all(|c| c.1 == 0) {
                    prop_assert_eq!(got, 0);
                }
            }
        }
    }
}
