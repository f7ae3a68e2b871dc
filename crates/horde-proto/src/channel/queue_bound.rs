//! A bound on the queue a channel keeps in front of its link, set while a stream with a
//! latency objective needs the channel (`crate::latency`). It caps the bytes in flight
//! at the recent delivery rate times the round trip without a queue plus a queueing
//! budget, on top of whatever the channel's congestion controller allows: the queue the
//! link holds is then about `budget` of its own rate, whatever the controller would
//! have filled.

use std::time::Duration;

/// Time constant of the long-run average delivery rate (s), which measures what bounding
/// the channel would cost: long enough that a radio's slow spell of a few seconds does
/// not reorder the channels.
const AVERAGE_TIME: f64 = 10.0;
/// Until the average has run for about `AVERAGE_TIME`, it is the mean of the samples
/// over the time since the first, in which the first counts for this many seconds: the
/// first samples come from a start-up that has not found the link's rate yet, and with
/// plain exponential weights they would hold the average down for seconds, which keeps
/// a channel from qualifying to carry a latency-bound stream.
const WARM_UP_WEIGHT: f64 = 1.0;
/// The cap never falls below this many full packets, so that a channel whose rate
/// estimate is too low (or that was idle) still finds its rate out.
const MIN_CAP_PACKETS: u64 = 4;

#[derive(Debug, Clone, Default)]
pub(crate) struct QueueBound {
    budget: Option<Duration>,
    /// The latest delivery-rate sample that measured the link (one taken while the
    /// sender was application-limited only if it is higher), bytes/s. Each sample
    /// already spans a round trip, which smooths the bursts of a radio's transmission
    /// opportunities; a larger window would follow a link that slows too late.
    latest: Option<f64>,
    /// Average of the samples over about `AVERAGE_TIME`, bytes/s, and when it was last
    /// moved.
    average: Option<(f64, Duration)>,
    /// When the average's first sample came.
    first: Duration,
}

impl QueueBound {
    /// Bound the queue to `budget` of the link's rate, or lift the bound (`None`).
    pub(crate) fn set_budget(&mut self, budget: Option<Duration>) {
        self.budget = budget;
    }

    pub(crate) fn budget(&self) -> Option<Duration> {
        self.budget
    }

    /// A delivery-rate sample, bytes/s; `app_limited` if the sender had nothing to send
    /// for part of it.
    pub(crate) fn on_delivery_rate(&mut self, now: Duration, rate: f64, app_limited: bool) {
        if !rate.is_finite() || rate < 0.0 {
            return;
        }
        if !app_limited || self.latest.is_none_or(|r| rate > r) {
            self.latest = Some(rate);
        }
        if self.average.is_none() {
            self.first = now;
        }
        self.average = Some(match self.average {
            None => (rate, now),
            Some((avg, at)) => {
                let dt = now.saturating_sub(at).as_secs_f64();
                let elapsed = now.saturating_sub(self.first).as_secs_f64();
                let warm_up = dt / (elapsed + WARM_UP_WEIGHT);
                let gain = (1.0 - (-dt / AVERAGE_TIME).exp()).max(warm_up);
                (avg + gain * (rate - avg), now)
            }
        });
    }

    /// The delivery rate averaged over the last seconds, bytes/s.
    pub(crate) fn average_rate(&self) -> Option<f64> {
        self.average.map(|(avg, _)| avg)
    }

    /// Bytes that may be in flight: `rate × (min_rtt + budget)`, at least a few packets
    /// of `packet` bytes; `None` while unbounded or before any delivery was measured.
    pub(crate) fn cap(&self, min_rtt: Duration, packet: u32) -> Option<u64> {
        let budget = self.budget?;
        let rate = self.latest?;
        let cap = rate * (min_rtt + budget).as_secs_f64();
        Some((cap as u64).max(MIN_CAP_PACKETS * u64::from(packet)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    #[test]
    fn unbounded_or_unmeasured_means_no_cap() {
        let mut q = QueueBound::default();
        q.on_delivery_rate(ms(10), 1e6, false);
        assert_eq!(q.cap(ms(60), 1500), None);
        let mut q = QueueBound::default();
        q.set_budget(Some(ms(50)));
        assert_eq!(q.cap(ms(60), 1500), None);
    }

    #[test]
    fn the_cap_is_the_rate_over_the_round_trip_and_the_budget() {
        let mut q = QueueBound::default();
        q.set_budget(Some(ms(40)));
        q.on_delivery_rate(ms(10), 1_000_000.0, false);
        // 1 MB/s over 60 ms + 40 ms.
        assert_eq!(q.cap(ms(60), 1500), Some(100_000));
        // A slow link still gets a few packets.
        let mut q = QueueBound::default();
        q.set_budget(Some(ms(40)));
        q.on_delivery_rate(ms(10), 1000.0, false);
        assert_eq!(q.cap(ms(60), 1500), Some(6000));
    }

    #[test]
    fn the_cap_follows_a_link_that_slows_and_ignores_idle_samples() {
        let mut q = QueueBound::default();
        q.set_budget(Some(ms(50)));
        q.on_delivery_rate(ms(0), 3_000_000.0, false);
        q.on_delivery_rate(ms(10), 1_000_000.0, false);
        assert_eq!(q.cap(ms(50), 1500), Some(100_000));
        // A sample the sender's idleness held down says nothing of the link.
        q.on_delivery_rate(ms(20), 10_000.0, true);
        assert_eq!(q.cap(ms(50), 1500), Some(100_000));
        q.on_delivery_rate(ms(30), 2_000_000.0, true);
        assert_eq!(q.cap(ms(50), 1500), Some(200_000));
    }

    #[test]
    fn the_average_rate_moves_over_seconds() {
        let mut q = QueueBound::default();
        q.on_delivery_rate(ms(0), 1_000_000.0, false);
        q.on_delivery_rate(ms(100), 3_000_000.0, false);
        let avg = q.average_rate().unwrap();
        assert!(avg > 1_000_000.0 && avg < 1_200_000.0, "{avg}");
        for t in 2..=600 {
            q.on_delivery_rate(ms(100 * t), 3_000_000.0, false);
        }
        let avg = q.average_rate().unwrap();
        assert!((avg - 3_000_000.0).abs() < 50_000.0, "{avg}");
    }

    #[test]
    fn a_slow_start_does_not_hold_the_average_down_for_seconds() {
        let mut q = QueueBound::default();
        // Half a second of start-up at a tenth of the link's rate, then the rate.
        for t in 0..=5 {
            q.on_delivery_rate(ms(100 * t), 100_000.0, false);
        }
        for t in 6..=30 {
            q.on_delivery_rate(ms(100 * t), 1_000_000.0, false);
        }
        // The mean over the 3 s and the first sample's second: about 0.66 MB/s (plain
        // exponential weights over 10 s would give about 0.3 MB/s).
        let avg = q.average_rate().unwrap();
        assert!(avg > 600_000.0 && avg < 700_000.0, "{avg}");
    }
}
