//! What the channels say about a piece handed to the session now: when it lands, and how
//! many bytes may wait unacknowledged without building queues.
//!
//! The session, not this layer, puts each ADU on a channel, so a piece handed over now
//! may take any live channel. Its expected arrival is therefore the latest of the
//! channels' landing times: per channel, the smoothed time from hand-over to arrival of
//! our recent pieces (an ack's latency less the return path's base delay, half the
//! channel's smallest round trip), plus a margin of its deviation. The scheduler sees one
//! channel with the channels' summed rate and that delay, and, while a channel is still in
//! its controller's start-up, that channel apart, its rate doubling each of its round
//! trips. The channel with the earliest landing time is also a lane of its own, for the
//! pieces only it lands in time, which the session then puts on the quickest slot of its
//! cycle (see `docs/messages.md`).

use std::collections::HashMap;
use std::time::Duration;

use horde_proto::cc::Windowed;
use horde_proto::message::{ChannelEstimate, Startup};
use horde_proto::ChannelId;

use crate::ChannelStatus;

/// Weight of a new landing-time sample.
const LANDING_GAIN: f64 = 0.125;
/// Weight of a new landing-time deviation sample.
const DEVIATION_GAIN: f64 = 0.25;
/// Deviations of landing time added to its mean in the arrival estimate.
const DEVIATION_MARGIN: f64 = 2.0;
/// Weight of a new delivery-rate sample.
const DELIVERY_GAIN: f64 = 0.25;
/// How much the window may exceed the measured delivery over a round trip: it grows by
/// half each refresh while the channels carry it.
const WINDOW_GAIN: f64 = 1.5;
/// The window never shrinks below this many pieces, so that the rate can be measured.
const MIN_WINDOW_PIECES: usize = 8;
/// How long a channel's highest smoothed delivery rate holds: about ten of a cellular
/// channel's round trips, as BBR keeps its highest delivery rate over ten.
const RATE_WINDOW: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct Track {
    /// The smallest round trip an ack reported: the path without its queue.
    min_rtt: Option<Duration>,
    /// Smoothed hand-over to arrival time, seconds, and its mean deviation.
    landing: Option<f64>,
    landing_dev: f64,
    /// The same with the return path taken as half the transmission's round trip, which
    /// counts only half of a queue on the forward path: the hand-over check's measure.
    handover_landing: Option<f64>,
    /// Bytes of our ADUs acked since the last refresh; the bytes of every stream the
    /// channel had acked at the last refresh; and the smoothed rate of the more of the
    /// two since then.
    acked_bytes: usize,
    channel_acked: Option<f64>,
    delivery_rate: f64,
    /// What the channel is judged to carry: the highest smoothed delivery rate within the
    /// last `RATE_WINDOW`, so that a pause in acks shorter than that (a trace's gap, acks
    /// held back and then sent at once) does not read as a channel that carries nothing,
    /// and a drop that lasts still lowers it.
    peak: Windowed<f64>,
    /// `peak` at the last refresh (reading the filter drops what left its window).
    carried: f64,
    /// A queue built on the channel once: its start-up has met the path, for good.
    queue_built: bool,
}

impl Default for Track {
    fn default() -> Self {
        Self {
            min_rtt: None,
            landing: None,
            landing_dev: 0.0,
            handover_landing: None,
            acked_bytes: 0,
            channel_acked: None,
            delivery_rate: 0.0,
            peak: Windowed::max(),
            carried: 0.0,
            queue_built: false,
        }
    }
}

/// The channel with the earliest landing time, when it lands earlier than the latest,
/// and its estimate's index.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QuickLane {
    pub(crate) estimate: usize,
    pub(crate) channel: ChannelId,
}

/// Per channel, what our acked pieces measured.
#[derive(Debug, Default)]
pub(crate) struct Tracks {
    channels: HashMap<ChannelId, Track>,
    last_refresh: Duration,
    /// Whether pieces waited for the window since the last refresh but one. If not, the
    /// pump sent all it had: what was acked is what was offered, not what the channels
    /// carry.
    window_limited: bool,
    /// The queue a channel may build beyond its round trip; past it, a channel's start-up
    /// has met the path.
    queue_ahead: Duration,
}

impl Tracks {
    /// No channel measured yet; `queue_ahead` as the endpoint's.
    pub(crate) fn new(queue_ahead: Duration) -> Self {
        Self {
            queue_ahead,
            ..Self::default()
        }
    }

    /// `c`'s start-up, while it still counts (the channel's rule: its controller is in
    /// it, for a bounded number of round trips, with its window filled) and no queue has
    /// built on it. A smoothed round trip more than `queue_ahead` above the smallest of
    /// our acks means the window has met the path, as HyStart reads a delay rise,
    /// whatever the controller says yet: the channel is then judged on what it delivers,
    /// and its queue holds pieces back.
    fn startup(&self, c: &ChannelStatus) -> Option<Startup> {
        let startup = c.startup?;
        let track = self.channels.get(&c.id);
        if track.is_some_and(|t| t.queue_built) || self.queue_built(c) {
            return None;
        }
        Some(startup)
    }

    /// Whether `c`'s smoothed round trip is more than `queue_ahead` above the smallest of
    /// our acks.
    fn queue_built(&self, c: &ChannelStatus) -> bool {
        let min_rtt = self.channels.get(&c.id).and_then(|t| t.min_rtt);
        match (c.srtt_ms, min_rtt) {
            (Some(srtt), Some(min)) => srtt / 1e3 > (min + self.queue_ahead).as_secs_f64(),
            _ => false,
        }
    }

    /// Remembers the channels on which a queue has built: their start-up is over for the
    /// endpoint even when the queue drains again, as the channel's own ends are final, so
    /// that a slow channel behind a deep buffer does not move back and forth between the
    /// two treatments.
    pub(crate) fn note_queues(&mut self, channels: &[ChannelStatus]) {
        for c in channels {
            if self.queue_built(c) {
                if let Some(t) = self.channels.get_mut(&c.id) {
                    t.queue_built = true;
                }
            }
        }
    }

    /// A channel with nothing in flight has an empty queue, so once per refresh its
    /// landing estimate moves toward the empty path's half round trip and its deviation
    /// toward zero, each by its gain. The estimate otherwise moves only with acks, and
    /// would stay at what the last pieces met while none are sent: a piece refused for
    /// that estimate would never be sent to correct it. (Folding the empty path in as a
    /// sample would first widen the deviation, and with it the margin.)
    pub(crate) fn settle_idle(&mut self, channels: &[ChannelStatus]) {
        for c in channels.iter().filter(|c| in_flight_bytes(c) == Some(0.0)) {
            let Some(t) = self.channels.get_mut(&c.id) else {
                continue;
            };
            if let (Some(min_rtt), Some(landing)) = (t.min_rtt, t.landing.as_mut()) {
                let empty = min_rtt.as_secs_f64() / 2.0;
                if *landing > empty {
                    *landing += LANDING_GAIN * (empty - *landing);
                }
                t.landing_dev *= 1.0 - DEVIATION_GAIN;
            }
        }
    }

    /// One of our ADUs of `bytes` was acked on `channel`, `latency` after it was handed to
    /// the session, over a transmission of round trip `rtt`.
    pub(crate) fn on_ack(
        &mut self,
        channel: ChannelId,
        rtt: Duration,
        latency: Duration,
        bytes: usize,
    ) {
        let t = self.channels.entry(channel).or_default();
        t.acked_bytes += bytes;
        let min_rtt = *t.min_rtt.insert(t.min_rtt.map_or(rtt, |m| m.min(rtt)));
        let sample = latency.saturating_sub(min_rtt / 2).as_secs_f64();
        match &mut t.landing {
            Some(landing) => {
                t.landing_dev += DEVIATION_GAIN * ((sample - *landing).abs() - t.landing_dev);
                *landing += LANDING_GAIN * (sample - *landing);
            }
            None => t.landing = Some(sample),
        }
        let old = latency.saturating_sub(rtt / 2).as_secs_f64();
        let handover = t.handover_landing.get_or_insert(old);
        *handover += LANDING_GAIN * (old - *handover);
    }

    /// How long before an ack on `channel`, of a transmission of round trip `rtt`, the ADU
    /// landed: the return path's base delay, half the smallest round trip of our acks,
    /// as the landing time is measured.
    pub(crate) fn return_delay(&self, channel: ChannelId, rtt: Duration) -> Duration {
        let min_rtt = self.channels.get(&channel).and_then(|t| t.min_rtt);
        min_rtt.map_or(rtt, |m| m.min(rtt)) / 2
    }

    /// An ADU of `bytes` was acked after being declared lost: it counts as delivered.
    pub(crate) fn on_late_ack(&mut self, channel: ChannelId, bytes: usize) {
        self.channels.entry(channel).or_default().acked_bytes += bytes;
    }

    /// Folds the bytes acked since the last refresh into each channel's delivery rate:
    /// those of every stream on it, as `channels` count them, or of our pieces if more
    /// (the session's counts start again with a new session). Plain streams beside the
    /// messages then count in what the channel carries, rather than leaving its queue
    /// to look like one that drains at the pieces' trickle. `window_limited`: pieces
    /// waited for the window since then. A sample taken while none did measures the
    /// application's offer, so it may raise a channel's rate, never lower it (as BBR
    /// treats application-limited samples).
    pub(crate) fn refresh(
        &mut self,
        now: Duration,
        window_limited: bool,
        channels: &[ChannelStatus],
    ) {
        self.window_limited = window_limited;
        let elapsed = now.saturating_sub(self.last_refresh).as_secs_f64();
        self.last_refresh = now;
        if elapsed <= 0.0 {
            return;
        }
        for (id, t) in self.channels.iter_mut() {
            let total = channels.iter().find(|c| c.id == *id).map(acked_bytes);
            let by_channel = match (t.channel_acked, total) {
                (Some(before), Some(now)) => (now - before).max(0.0),
                _ => 0.0,
            };
            t.channel_acked = total;
            let sample = (t.acked_bytes as f64).max(by_channel) / elapsed;
            if window_limited || sample > t.delivery_rate {
                t.delivery_rate += DELIVERY_GAIN * (sample - t.delivery_rate);
            }
            t.peak.update(now, t.delivery_rate);
            t.carried = t.peak.get(now, RATE_WINDOW).unwrap_or(0.0);
            t.acked_bytes = 0;
        }
    }

    /// When a piece handed over now lands on `c`, seconds from now: the later of its
    /// measured landing time plus a margin, and what the bytes in flight on it predict;
    /// half its round trip before any piece was acked on it.
    ///
    /// The measure lags by a round trip and its smoothing; the prediction sees a queue
    /// grow at the next refresh. The bytes in flight on a channel are in its queue, on
    /// the forward path, or delivered with their ack on the way back; at the delivery
    /// rate `r` the last of `F` bytes arrives `F / r` after it is sent, less the return
    /// path's half round trip.
    fn landing(&self, c: &ChannelStatus) -> f64 {
        let half_rtt = c.srtt_ms.unwrap_or(0.0).max(0.0) / 2e3;
        let Some(t) = self.channels.get(&c.id) else {
            return half_rtt;
        };
        let Some(landing) = t.landing else {
            return half_rtt;
        };
        let measured = landing + DEVIATION_MARGIN * t.landing_dev;
        let drain = self.drain_rate(c, t);
        let predicted = match (in_flight_bytes(c), t.min_rtt) {
            (Some(bytes), Some(min_rtt)) if drain > 0.0 => {
                bytes / drain - min_rtt.as_secs_f64() / 2.0
            }
            _ => 0.0,
        };
        measured.max(predicted).max(0.0)
    }

    /// How fast `c`'s bytes in flight drain, bytes/s: what our pieces were measured to get
    /// through; in start-up at least the controller's rate, since the measure lags a
    /// window that doubles each round trip.
    fn drain_rate(&self, c: &ChannelStatus, t: &Track) -> f64 {
        if self.startup(c).is_some() {
            t.carried.max(c.rate_bytes_per_s)
        } else {
            t.carried
        }
    }

    /// What `c` is expected to carry, bytes/s: its controller's rate, which can be several
    /// times what the path carries (a window over a round trip inflated by the queue it
    /// built), capped at `WINDOW_GAIN` times what our pieces were measured to get through,
    /// so that it can still grow. Before any ack, while the pump sends all it has (the
    /// measure then shows only the offer), and in the controller's start-up (the measure
    /// lags a window that doubles each round trip), the controller's rate.
    fn rate(&self, c: &ChannelStatus) -> f64 {
        if !self.window_limited || self.startup(c).is_some() {
            return c.rate_bytes_per_s;
        }
        match self.channels.get(&c.id).filter(|t| t.carried > 0.0) {
            Some(t) => c.rate_bytes_per_s.min(WINDOW_GAIN * t.carried),
            None => c.rate_bytes_per_s,
        }
    }

    /// The estimates for the channels the session may put a piece on, all with the latest
    /// of their landing times as the delay: one with the summed rate of those whose rate
    /// is measured, and one for each channel in its controller's start-up, whose rate
    /// doubles each of its round trips. The measured channel with the earliest landing
    /// time, when it lands earlier than the latest, has an estimate of its own instead,
    /// last, with its own landing time: the quick lane, which is returned. A piece
    /// that only it lands in time goes on the quickest slot of the session's cycle.
    /// Empty when no channel carries anything.
    pub(crate) fn arrival_estimate(
        &self,
        channels: &[ChannelStatus],
    ) -> (Vec<ChannelEstimate>, Option<QuickLane>) {
        let usable = || channels.iter().filter(|c| usable(c));
        let Some(latest) = usable().map(|c| self.landing(c)).reduce(f64::max) else {
            return (Vec::new(), None);
        };
        let delay = seconds(latest);
        let steady: Vec<_> = usable().filter(|c| self.startup(c).is_none()).collect();
        let quickest = steady
            .iter()
            .map(|c| (c.id, self.landing(c), self.rate(c)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .filter(|&(_, landing, _)| landing < latest);
        let others: Vec<_> = steady
            .iter()
            .filter(|c| quickest.is_none_or(|(id, ..)| c.id != id))
            .collect();
        let mut estimates = Vec::new();
        if !others.is_empty() {
            estimates.push(ChannelEstimate {
                rate: others.iter().map(|c| self.rate(c)).sum(),
                delay,
                startup: None,
            });
        }
        estimates.extend(usable().filter_map(|c| {
            Some(ChannelEstimate {
                rate: self.rate(c),
                delay,
                startup: Some(self.startup(c)?),
            })
        }));
        let quick = quickest.map(|(channel, landing, rate)| {
            estimates.push(ChannelEstimate::steady(rate, seconds(landing)));
            QuickLane {
                estimate: estimates.len() - 1,
                channel,
            }
        });
        (estimates, quick)
    }

    /// One estimate per channel, as the hand-over check sees them: the controller's rate
    /// and the larger of half the smoothed round trip and the hand-over landing time.
    pub(crate) fn per_channel_estimates(&self, channels: &[ChannelStatus]) -> Vec<ChannelEstimate> {
        channels
            .iter()
            .map(|c| ChannelEstimate {
                rate: if c.alive { c.rate_bytes_per_s } else { 0.0 },
                startup: self.startup(c),
                delay: seconds(
                    (c.srtt_ms.unwrap_or(0.0) / 2e3)
                        .max(
                            self.channels
                                .get(&c.id)
                                .and_then(|t| t.handover_landing)
                                .unwrap_or(0.0),
                        )
                        .max(0.0),
                ),
            })
            .collect()
    }

    /// Bytes that may be unacknowledged at once when deadlines are checked at arrival:
    /// per channel, what it delivers (at most what its controller expects, and up to
    /// `WINDOW_GAIN` times what it was measured to deliver) over its empty round trip
    /// plus `queue_ahead`. A channel then holds about `queue_ahead` of its rate in its
    /// queues, which the landing estimate sees. A channel whose start-up counts is taken
    /// at its controller's rate, not capped by its measured delivery, which lags a window
    /// that doubles each round trip: its pieces fill the window it doubles.
    pub(crate) fn arrival_window(
        &self,
        channels: &[ChannelStatus],
        queue_ahead: Duration,
        piece: usize,
    ) -> usize {
        let bytes: f64 = channels
            .iter()
            .filter(|c| usable(c))
            .filter_map(|c| self.channel_window(c, queue_ahead))
            .sum();
        (bytes as usize).max(MIN_WINDOW_PIECES * piece)
    }

    /// One channel's part of the arrival window: its rate over its smallest round trip
    /// plus `queue_ahead`; `None` before any of our pieces was acked on it.
    pub(crate) fn channel_window(&self, c: &ChannelStatus, queue_ahead: Duration) -> Option<f64> {
        let t = self.channels.get(&c.id)?;
        let rtt = t.min_rtt.unwrap_or_default() + queue_ahead;
        Some(self.rate(c) * rtt.as_secs_f64())
    }

    /// What the usable channels are expected to carry together, bytes/s.
    pub(crate) fn capacity(&self, channels: &[ChannelStatus]) -> f64 {
        channels
            .iter()
            .filter(|c| usable(c))
            .map(|c| self.rate(c))
            .sum()
    }

    /// The channels that hold more than their round trip plus `queue_ahead` of their rate
    /// in flight: the session would put further pieces on whichever channels have room in
    /// their controllers' windows, and a full one would queue them, so none are handed
    /// over until it has drained, but for the quick stream's (the session puts them on
    /// the quickest channel). A channel whose start-up counts drains at least at its
    /// controller's rate (its measured delivery lags the window it doubles), so it is
    /// full only once a queue has built on it.
    pub(crate) fn full_queues(
        &self,
        channels: &[ChannelStatus],
        queue_ahead: Duration,
    ) -> Vec<ChannelId> {
        let full = |c: &ChannelStatus| {
            let (Some(t), Some(bytes)) = (self.channels.get(&c.id), in_flight_bytes(c)) else {
                return false;
            };
            let Some(min_rtt) = t.min_rtt else {
                return false;
            };
            t.carried > 0.0 && bytes > self.drain_rate(c, t) * (min_rtt + queue_ahead).as_secs_f64()
        };
        channels
            .iter()
            .filter(|c| usable(c) && full(c))
            .map(|c| c.id)
            .collect()
    }

    /// The window of the hand-over check: the smaller of the controllers' rates and
    /// `WINDOW_GAIN` times the measured delivery (the controllers' rates alone while one
    /// is in its start-up, which the measure lags), over the longest channel's empty
    /// round trip plus `queue_ahead`.
    pub(crate) fn handover_window(
        &self,
        estimates: &[ChannelEstimate],
        queue_ahead: Duration,
        piece: usize,
    ) -> usize {
        let rtt = self
            .channels
            .values()
            .filter_map(|t| t.min_rtt)
            .max()
            .unwrap_or_default()
            + queue_ahead;
        let expected: f64 = estimates.iter().map(|e| e.rate).sum::<f64>() * rtt.as_secs_f64();
        let delivered: f64 = self.channels.values().map(|t| t.delivery_rate).sum();
        let measured = WINDOW_GAIN * delivered * rtt.as_secs_f64();
        let window = if estimates.iter().any(|e| e.startup.is_some()) {
            expected
        } else {
            expected.min(measured)
        };
        (window as usize).max(MIN_WINDOW_PIECES * piece)
    }
}

/// Bytes sent on the channels and neither acked nor declared lost.
pub(crate) fn channels_in_flight(channels: &[ChannelStatus]) -> f64 {
    channels.iter().filter_map(in_flight_bytes).sum()
}

/// Bytes sent on the channel and neither acked nor declared lost, counting each packet
/// at the channel's mean packet size.
fn in_flight_bytes(c: &ChannelStatus) -> Option<f64> {
    let s = &c.stats;
    let packets = s.packets_sent.checked_sub(s.acked + s.lost)?;
    let mean = s.bytes_sent as f64 / s.packets_sent.max(1) as f64;
    Some(packets as f64 * mean)
}

/// The longest time an estimate states: a channel whose queue takes longer to drain is as
/// good as stalled, and a figure past a `Duration`'s range (bytes in flight over a
/// delivery rate close to 0) must not panic the endpoint's task.
pub(crate) const LONGEST: Duration = Duration::from_secs(3600);

/// `secs` as a duration, at most [`LONGEST`] (also for infinity and NaN).
pub(crate) fn seconds(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).map_or(LONGEST, |d| d.min(LONGEST))
}

/// The bytes of every stream `c` has had acked, from its packet counts.
fn acked_bytes(c: &ChannelStatus) -> f64 {
    let s = &c.stats;
    s.acked as f64 * s.bytes_sent as f64 / s.packets_sent.max(1) as f64
}

/// Whether the session may put a piece on the channel.
fn usable(c: &ChannelStatus) -> bool {
    c.alive && c.rate_bytes_per_s > 0.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_proto::ChannelStats;

    const CHANNEL: ChannelId = ChannelId::new(0);

    fn status(rate_bytes_per_s: f64) -> ChannelStatus {
        ChannelStatus {
            id: CHANNEL,
            interface: 0,
            remote: "127.0.0.1:1".parse().unwrap(),
            alive: true,
            srtt_ms: Some(20.0),
            rate_bytes_per_s,
            startup: None,
            loss: 0.0,
            congestion: "cubic",
            stats: ChannelStats::default(),
            queue_budget_ms: None,
        }
    }

    /// Ten refreshes of 100 ms in which `bytes` were acked on channel 0 in each.
    fn deliver(tracks: &mut Tracks, from: Duration, bytes: usize, window_limited: bool) {
        for i in 1..=10 {
            tracks.on_ack(
                CHANNEL,
                Duration::from_millis(20),
                Duration::from_millis(15),
                bytes,
            );
            tracks.refresh(from + Duration::from_millis(100 * i), window_limited, &[]);
        }
    }

    /// An application that offers little measures its offer, not the channel: its
    /// estimate stays the controller's, and its samples never lower what a backlogged
    /// period measured.
    #[test]
    fn an_application_limited_offer_does_not_shrink_the_estimate() {
        let channels = [status(1_000_000.0)];
        let mut tracks = Tracks::default();
        deliver(&mut tracks, Duration::ZERO, 100, false);
        assert_eq!(tracks.capacity(&channels), 1_000_000.0);

        // Backlogged at 200 kB/s: capped at WINDOW_GAIN times what got through.
        deliver(&mut tracks, Duration::from_secs(1), 20_000, true);
        let backlogged = tracks.capacity(&channels);
        assert!(
            (200_000.0..=WINDOW_GAIN * 200_000.0).contains(&backlogged),
            "{backlogged}"
        );
        let rate = tracks.channels[&CHANNEL].delivery_rate;

        // Then a trickle: the measured rate holds, and the estimate is the controller's.
        deliver(&mut tracks, Duration::from_secs(2), 100, false);
        assert_eq!(tracks.channels[&CHANNEL].delivery_rate, rate);
        assert_eq!(tracks.capacity(&channels), 1_000_000.0);

        // A backlogged trickle (the channel carries little) lowers it once it has lasted
        // longer than the rate's window.
        deliver(&mut tracks, Duration::from_secs(3), 100, true);
        deliver(&mut tracks, Duration::from_secs(4), 100, true);
        assert!(tracks.capacity(&channels) < 0.5 * backlogged);
    }

    /// A pause in acks shorter than `RATE_WINDOW` (a trace's gap, a burst of acks held
    /// back) leaves the rate a channel is judged on; a drop that lasts lowers it.
    #[test]
    fn a_brief_gap_in_acks_keeps_the_rate_and_a_lasting_drop_lowers_it() {
        let channels = [status(1_000_000.0)];
        let mut tracks = Tracks::default();
        deliver(&mut tracks, Duration::ZERO, 20_000, true);
        let before = tracks.capacity(&channels);
        assert!(before > 200_000.0, "{before}");

        // 300 ms without an ack while pieces wait for the window.
        for i in 1..=6 {
            tracks.refresh(Duration::from_millis(1_000 + 50 * i), true, &[]);
        }
        let gap = tracks.capacity(&channels);
        assert_eq!(gap, before, "a gap of 300 ms lowered the rate");

        // Then a tenth of the rate for two seconds.
        deliver(&mut tracks, Duration::from_millis(1_300), 2_000, true);
        deliver(&mut tracks, Duration::from_millis(2_300), 2_000, true);
        let dropped = tracks.capacity(&channels);
        assert!(dropped < 0.5 * before, "{dropped} against {before}");
    }

    /// A landing time inflated by a queue comes down once the channel has nothing in
    /// flight, and holds while something is.
    #[test]
    fn an_idle_channel_s_landing_time_settles_to_the_empty_path() {
        let mut tracks = Tracks::default();
        // Round trips of 20 ms empty, then pieces that waited 800 ms in a queue.
        tracks.on_ack(
            CHANNEL,
            Duration::from_millis(20),
            Duration::from_millis(20),
            1,
        );
        for _ in 0..40 {
            tracks.on_ack(
                CHANNEL,
                Duration::from_millis(820),
                Duration::from_millis(810),
                1,
            );
        }
        let mut busy = status(100_000.0);
        busy.stats.packets_sent = 10;
        busy.stats.bytes_sent = 10_000;
        let mut idle = busy.clone();
        idle.stats.acked = 10;
        let inflated = tracks.landing(&idle);
        assert!(inflated > 0.7, "{inflated}");

        for _ in 0..20 {
            tracks.settle_idle(&[busy.clone()]);
        }
        assert_eq!(
            tracks.landing(&idle),
            inflated,
            "bytes in flight: no queue drained"
        );

        for _ in 0..40 {
            tracks.settle_idle(&[idle.clone()]);
        }
        let settled = tracks.landing(&idle);
        assert!((0.010..0.020).contains(&settled), "{settled}");
    }

    /// A channel whose stats count packets of every stream: `sent` sent and `acked`
    /// acked, of 1000 bytes each.
    fn counted(sent: u64, acked: u64) -> ChannelStatus {
        let mut c = status(1_000_000.0);
        c.stats.packets_sent = sent;
        c.stats.bytes_sent = sent * 1000;
        c.stats.acked = acked;
        c
    }

    /// Plain streams beside the pieces: the channel's delivery is what every stream got
    /// through, not the pieces' trickle, so the queue the streams keep reads as draining
    /// at the channel's rate.
    #[test]
    fn every_stream_acked_on_a_channel_counts_in_its_delivery_rate() {
        let mut tracks = Tracks::default();
        for i in 0..=20u64 {
            // 100 packets (100 kB) of every stream per 100 ms, one 1000-byte piece.
            tracks.on_ack(
                CHANNEL,
                Duration::from_millis(20),
                Duration::from_millis(15),
                1000,
            );
            let c = counted(1_000 + 100 * i, 100 * i);
            tracks.refresh(Duration::from_millis(100 * (i + 1)), true, &[c]);
        }
        let rate = tracks.channels[&CHANNEL].delivery_rate;
        assert!((900_000.0..=1_000_000.0).contains(&rate), "{rate}");
        // 1000 packets in flight drain in about a second at that rate, not 100 s.
        let landing = tracks.landing(&counted(3_000, 2_000));
        assert!((0.9..1.2).contains(&landing), "{landing}");
    }

    /// A channel stalled for long, whose delivery rate has decayed to almost nothing while
    /// bytes wait on it, gets a long landing time, not a panic of the endpoint's task.
    #[test]
    fn a_queue_that_would_never_drain_lands_late_without_a_panic() {
        let mut tracks = Tracks::default();
        deliver(&mut tracks, Duration::ZERO, 1000, true);
        tracks.channels.get_mut(&CHANNEL).unwrap().carried = 1e-300;
        let stalled = counted(1_000_000, 0);
        let (estimates, _) = tracks.arrival_estimate(&[stalled]);
        assert_eq!(estimates[0].delay, LONGEST);
        assert_eq!(seconds(f64::NAN), LONGEST);
        assert_eq!(seconds(0.25), Duration::from_millis(250));
    }
}
