//! Window AIMD with slow start (the thesis's E1 controller).

use std::time::Duration;

use super::{AckSample, CongestionControl, LossSample, Pacer};

/// Window AIMD with slow start: +1 MSS per RTT, halve once per RTT on loss. Sending is
/// paced at a multiple of cwnd/srtt (2x in slow start, 1.25x after, as Linux does), and the
/// window only grows while it is actually used (RFC 7661), so an application-limited
/// channel does not build a window it has never tested. A reduction whose every loss later
/// proves spurious is undone.
#[derive(Debug, Clone)]
pub struct Aimd {
    mss: u64,
    initial: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Losses of packets sent before this time belong to an already-handled episode.
    recovery_start: Duration,
    /// The window before the last reduction, and how many of the losses that episode
    /// counted have not yet proved spurious.
    undo: Option<Undo>,
    srtt: Option<Duration>,
    pacer: Pacer,
    /// Highest bytes in flight seen since the last ack, to tell a used window.
    peak_in_flight: u64,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Undo {
    pub cwnd: u64,
    pub ssthresh: u64,
    pub losses: u32,
}

impl Aimd {
    pub fn new(mss: u32, initial_window_packets: u32) -> Self {
        let mss = u64::from(mss);
        let initial = mss * u64::from(initial_window_packets);
        Self {
            mss,
            initial,
            cwnd: initial,
            ssthresh: u64::MAX,
            recovery_start: Duration::ZERO,
            undo: None,
            srtt: None,
            pacer: Pacer::new(mss),
            peak_in_flight: 0,
        }
    }

    /// For the controller's own tests.
    #[cfg(test)]
    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    fn update_pacing(&mut self, now: Duration) {
        let gain = if self.cwnd < self.ssthresh { 2.0 } else { 1.25 };
        let rate = self
            .srtt
            .map(|s| gain * self.cwnd as f64 / s.as_secs_f64().max(1e-6));
        self.pacer.set_rate(now, rate);
    }
}

impl CongestionControl for Aimd {
    fn name(&self) -> &'static str {
        "aimd"
    }

    fn in_startup(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    fn on_sent(&mut self, now: Duration, bytes: u32, in_flight: u64) {
        self.pacer.on_sent(now, bytes);
        self.peak_in_flight = self.peak_in_flight.max(in_flight);
    }

    fn on_ack(&mut self, ack: &AckSample) {
        self.srtt = Some(match self.srtt {
            None => ack.rtt,
            Some(s) => (s * 7 + ack.rtt) / 8,
        });
        // Grow only a window that was at least half used since the last ack.
        if self.peak_in_flight * 2 >= self.cwnd {
            let b = ack.acked_bytes;
            if self.cwnd < self.ssthresh {
                self.cwnd += b;
            } else {
                self.cwnd += (self.mss * b / self.cwnd).max(1);
            }
        }
        self.peak_in_flight = ack.in_flight;
        self.update_pacing(ack.now);
    }

    fn on_loss(&mut self, loss: &LossSample) {
        if loss.sent_at < self.recovery_start {
            if let Some(u) = &mut self.undo {
                u.losses += 1;
            }
            return;
        }
        self.undo = Some(Undo {
            cwnd: self.cwnd,
            ssthresh: self.ssthresh,
            losses: 1,
        });
        self.recovery_start = loss.now;
        self.cwnd = (self.cwnd / 2).max(2 * self.mss);
        self.ssthresh = self.cwnd;
        self.update_pacing(loss.now);
    }

    fn on_spurious_loss(&mut self, now: Duration, sent_at: Duration) {
        if let Some((cwnd, ssthresh)) = take_undo(&mut self.undo, sent_at, self.recovery_start) {
            self.cwnd = self.cwnd.max(cwnd);
            self.ssthresh = ssthresh;
            self.update_pacing(now);
        }
    }

    fn allowance(&self, now: Duration, in_flight: u64) -> u64 {
        self.pacer.allowance(now, self.cwnd, in_flight)
    }

    fn next_allowance_at(&self, now: Duration) -> Option<Duration> {
        self.pacer.next_at(now)
    }

    fn rate(&self, srtt: Duration) -> f64 {
        self.cwnd as f64 / srtt.as_secs_f64().max(1e-3)
    }

    fn window(&self) -> Option<u64> {
        Some(self.cwnd)
    }

    fn reset(&mut self, now: Duration) {
        self.cwnd = self.initial;
        self.ssthresh = u64::MAX;
        self.recovery_start = now;
        self.undo = None;
        self.srtt = None;
        self.pacer.reset(now);
    }
}

/// Count one spurious loss against the current reduction episode (whose losses were all
/// sent before it began); once every loss it counted has proved spurious, return the
/// window and threshold to restore.
pub(crate) fn take_undo(
    undo: &mut Option<Undo>,
    sent_at: Duration,
    recovery_start: Duration,
) -> Option<(u64, u64)> {
    let u = undo.as_mut()?;
    if sent_at >= recovery_start {
        return None; // a loss of a later episode, never counted here
    }
    u.losses = u.losses.saturating_sub(1);
    if u.losses > 0 {
        return None;
    }
    let restored = (u.cwnd, u.ssthresh);
    *undo = None;
    Some(restored)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{ack, loss};
    use super::*;

    fn t(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn ack_full_window(c: &mut Aimd, now: Duration) {
        c.on_sent(now, 0, c.cwnd());
        c.on_ack(&ack(now, 1000, t(100)));
    }

    #[test]
    fn halves_once_per_episode_and_grows_linearly() {
        let mut c = Aimd::new(1000, 4);
        // Slow start doubles per window.
        for _ in 0..4 {
            ack_full_window(&mut c, t(1));
        }
        assert_eq!(c.cwnd(), 8000);
        c.on_loss(&loss(t(10), 1000, t(5)));
        assert_eq!(c.cwnd(), 4000);
        // A second loss from the same flight does not halve again.
        c.on_loss(&loss(t(11), 1000, t(6)));
        assert_eq!(c.cwnd(), 4000);
        // Congestion avoidance: one window of acks adds about one MSS.
        for _ in 0..4 {
            ack_full_window(&mut c, t(20));
        }
        assert!((4900..=5100).contains(&c.cwnd()), "{}", c.cwnd());
        // An application-limited window does not grow.
        let before = c.cwnd();
        c.on_sent(t(30), 0, 1000);
        let mut a = ack(t(30), 1000, t(100));
        a.in_flight = 0;
        c.peak_in_flight = 1000;
        c.on_ack(&a);
        assert_eq!(c.cwnd(), before);
    }

    #[test]
    fn spurious_losses_undo_the_reduction() {
        let mut c = Aimd::new(1000, 4);
        for _ in 0..4 {
            ack_full_window(&mut c, t(1));
        }
        assert_eq!(c.cwnd(), 8000);
        c.on_loss(&loss(t(10), 1000, t(5)));
        c.on_loss(&loss(t(11), 1000, t(6)));
        assert_eq!(c.cwnd(), 4000);
        // One of the two losses was real so far: no undo yet.
        c.on_spurious_loss(t(12), t(5));
        assert_eq!(c.cwnd(), 4000);
        // Both were spurious: the window before the episode is back.
        c.on_spurious_loss(t(13), t(6));
        assert_eq!(c.cwnd(), 8000);
        // A later spurious report changes nothing.
        c.on_spurious_loss(t(14), t(7));
        assert_eq!(c.cwnd(), 8000);
    }

    #[test]
    fn paces_at_window_over_rtt() {
        let mss = 1000u32;
        let mut c = Aimd::new(mss, 10);
        let t0 = Duration::from_millis(0);
        let mut a = ack(t0, u64::from(mss), t(100));
        a.in_flight = 0;
        c.on_ack(&a);
        // 11 packets per 100 ms RTT in slow start at gain 2: about 220 packets/s (the ack
        // was of an unused window, so the window stays at 10: 200/s).
        let mut now = t0;
        let mut sent = 0u32;
        while now < Duration::from_secs(1) {
            if c.allowance(now, 0) >= u64::from(mss) {
                c.on_sent(now, mss, 0);
                sent += 1;
            }
            now = c
                .next_allowance_at(now)
                .unwrap()
                .max(now + Duration::from_micros(10));
        }
        assert!((190..=212).contains(&sent), "{sent}");
    }
}
