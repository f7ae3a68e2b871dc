//! How often a channel acknowledges the peer's packets, and what each ack repeats.
//!
//! Acks travel on the reverse direction of the same link, which on cellular links can be
//! a tenth of the forward rate: acking every packet of a 1.5 Mbit/s download fills a
//! 200 kbit/s up link. [`AckFrequency::ReversePath`] sizes the ack delay from the
//! receiver's own pacing on that reverse path, as TCP's delayed acks and QUIC's ack
//! decimation do from the round trip (docs/recovery.md, "Ack frequency").

use std::time::Duration;

/// How a channel schedules its acks (a [`ChannelConfig`](super::ChannelConfig) field).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AckFrequency {
    /// An ack after every 4 packets or within 1 ms, each repeating up to 12 older ranges,
    /// and a round-trip sample from every acked packet. The thesis reproductions were
    /// measured with it, so it stays the default.
    #[default]
    Fixed,
    /// Acks fitted to the reverse path: held up to the time the ack takes out of a
    /// quarter of this end's pacing rate on the channel, at most a quarter round trip
    /// and 25 ms; at once after 10 packets, for the first packets, and whenever a packet
    /// opens or fills a hole. Each ack repeats a range only for a few acks after it
    /// changed. The sender takes one round-trip sample per ack, from the largest packet
    /// less the reported delay.
    ReversePath,
}

/// The largest delay [`AckFrequency::ReversePath`] ever holds an ack: QUIC's default
/// max_ack_delay. The peer's probe timeout allows for it.
pub(crate) const REVERSE_PATH_MAX_DELAY: Duration = Duration::from_millis(25);
/// The least delay any policy waits for a second packet: runtimes wake on timers of
/// about a millisecond.
const MIN_DELAY: Duration = Duration::from_millis(1);
const FIXED_EVERY: u32 = 4;
/// Packets that trigger an immediate ack under [`AckFrequency::ReversePath`] (the
/// common ack-decimation figure): fewer acks at high rates, a window-based sender still
/// clocked several times a window.
const REVERSE_PATH_EVERY: u32 = 10;
/// Share of the reverse path's pacing rate acks may take: the rest is the reverse
/// direction's own data.
const ACK_SHARE: f64 = 0.25;
/// Packets acked at once when a channel starts receiving, so the sender's first round
/// trip samples and its window's first growth are not held back.
pub(crate) const QUICK_ACKS: u64 = 4;
/// Under [`AckFrequency::ReversePath`], a range is repeated in this many acks after a
/// packet in it arrived; an ack lost this many times in a row makes a spurious loss,
/// which the sender's late-ack memory undoes.
pub(crate) const RANGE_REPEATS: usize = 3;

/// When the receiver acks, as decided for one received packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AckSchedule {
    /// The longest an ack is held after the first packet it covers arrived.
    pub max_delay: Duration,
    /// Received packets after which the ack goes at once.
    pub every: u32,
    /// Ack at once on a hole opened or filled, and for the first packets; repeat ranges
    /// only while recent (the [`AckFrequency::ReversePath`] rules).
    pub reverse_path: bool,
}

impl AckFrequency {
    /// The schedule for a channel whose own pacing rate is `reverse_rate` bytes/s, whose
    /// smoothed round trip is `srtt`, and whose acks take `ack_wire_bytes` on the link.
    pub(crate) fn schedule(
        self,
        srtt: Duration,
        reverse_rate: f64,
        ack_wire_bytes: u32,
    ) -> AckSchedule {
        match self {
            AckFrequency::Fixed => AckSchedule {
                max_delay: MIN_DELAY,
                every: FIXED_EVERY,
                reverse_path: false,
            },
            AckFrequency::ReversePath => {
                let budget = if reverse_rate > 0.0 {
                    Duration::from_secs_f64(
                        (f64::from(ack_wire_bytes) / (ACK_SHARE * reverse_rate)).min(1.0),
                    )
                } else {
                    REVERSE_PATH_MAX_DELAY
                };
                let cap = (srtt / 4).clamp(MIN_DELAY, REVERSE_PATH_MAX_DELAY);
                AckSchedule {
                    max_delay: budget.clamp(MIN_DELAY, cap),
                    every: REVERSE_PATH_EVERY,
                    reverse_path: true,
                }
            }
        }
    }

    /// The longest the peer, acking with the same policy, holds an ack: what the probe
    /// timeout adds to the round trip (RFC 9002 §6.2.1).
    pub(crate) fn peer_max_delay(self) -> Duration {
        match self {
            AckFrequency::Fixed => MIN_DELAY,
            AckFrequency::ReversePath => REVERSE_PATH_MAX_DELAY,
        }
    }

    /// Whether the sender takes round-trip samples only from each ack's largest packet.
    pub(crate) fn sample_largest_only(self) -> bool {
        self == AckFrequency::ReversePath
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    #[test]
    fn fixed_is_the_old_schedule() {
        let s = AckFrequency::Fixed.schedule(ms(40), 22_500.0, 120);
        assert_eq!((s.max_delay, s.every, s.reverse_path), (ms(1), 4, false));
    }

    #[test]
    fn a_slow_reverse_path_holds_acks_up_to_a_quarter_round_trip() {
        // 200 kbit/s up link paced at 0.9: 22.5 kB/s; a 120-byte ack in a quarter of it
        // takes 21 ms, more than a quarter of a 40 ms round trip.
        let s = AckFrequency::ReversePath.schedule(ms(40), 22_500.0, 120);
        assert_eq!(s.max_delay, ms(10));
        // On a 150 ms path the budget (of a 270 kbit/s reverse path) decides.
        let s = AckFrequency::ReversePath.schedule(ms(150), 33_750.0, 120);
        assert!((s.max_delay.as_secs_f64() - 120.0 / (0.25 * 33_750.0)).abs() < 1e-6);
        // Never more than 25 ms, however slow the path.
        let s = AckFrequency::ReversePath.schedule(ms(2000), 1_000.0, 120);
        assert_eq!(s.max_delay, REVERSE_PATH_MAX_DELAY);
        assert_eq!(
            AckFrequency::ReversePath.peer_max_delay(),
            REVERSE_PATH_MAX_DELAY
        );
    }

    #[test]
    fn a_fast_reverse_path_acks_within_a_millisecond() {
        let s = AckFrequency::ReversePath.schedule(ms(40), 100e6, 120);
        assert_eq!(s.max_delay, ms(1));
        // A tiny round trip cannot push the delay under the timer granularity either.
        let s = AckFrequency::ReversePath.schedule(Duration::from_micros(100), 1e3, 120);
        assert_eq!(s.max_delay, ms(1));
    }

    #[test]
    fn the_delay_grows_as_the_reverse_rate_falls() {
        let mut last = Duration::ZERO;
        for rate in [1e6, 1e5, 5e4, 2e4, 1e4, 5e3] {
            let d = AckFrequency::ReversePath
                .schedule(ms(200), rate, 120)
                .max_delay;
            assert!(d >= last, "{rate}: {d:?} < {last:?}");
            last = d;
        }
        assert_eq!(last, REVERSE_PATH_MAX_DELAY);
    }
}
