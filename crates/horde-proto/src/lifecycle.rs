//! The session's lifecycle state beside its data path: liveness timers (idle timeout,
//! keepalive), the reliable close, what a dead session hands to its successor, and
//! receive-side flow control. The decisions are made in `session.rs`; this module keeps
//! the state and the arithmetic of its deadlines.

use std::collections::HashMap;
use std::time::Duration;

use crate::session::SessionConfig;
use crate::stream::QueuedAdu;

fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x.max(0.0) / 1e3)
}

/// How long a sender stopped by a zero window waits before it sends again anyway: the
/// data it sends is the zero-window probe (a full receiver answers it with another zero
/// window), which also covers a lost window update.
pub(crate) const ZERO_WINDOW_PROBE: Duration = Duration::from_millis(250);
/// The peer is given up as unreachable only once every channel is dead (no ack for its
/// dead-man time), nothing at all has arrived from the peer for `UNREACHABLE_SILENCE`,
/// and at least `UNREACHABLE_UNANSWERED` packets that elicit an answer (data, pings,
/// probes) went out since it was last heard. A channel dies after a second or three
/// probe timeouts without an ack, which bursty loss of a quarter of the packets each way
/// reaches often when little is in flight (a keepalive and its two backed-off probes all
/// unanswered); a peer that still answers a fraction of the dead channels' probes (sent
/// every 50 ms for a second after a death) is not gone. With 44% of round trips failing,
/// sixteen unanswered in a row happen with odds of 2e-6; in a real outage with data in
/// flight the count is passed before the channels die, so detection waits for nothing
/// more than before, and on an idle session about 0.6 s more (`docs/architecture.md`,
/// "Unreachability").
pub(crate) const UNREACHABLE_SILENCE: Duration = Duration::from_millis(1000);
pub(crate) const UNREACHABLE_UNANSWERED: u64 = 16;
/// How many times a reopened window is announced again on later arrivals.
const REOPEN_REPEATS: u8 = 3;
/// Least time between two window updates a receiver sends unasked.
pub(crate) const WINDOW_UPDATE_GAP: Duration = Duration::from_millis(20);

/// Local close in progress: `Close` is repeated until acknowledged or `deadline`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Closing {
    pub deadline: Duration,
    pub next_retry: Duration,
}

#[derive(Debug, Default)]
pub(crate) struct Lifecycle {
    /// Last authenticated packet from the peer (the idle timer's start).
    pub last_rx: Duration,
    /// Packets the channels had sent when the peer was last heard (`last_rx`).
    pub sent_at_rx: u64,
    /// Last packet sent (the keepalive timer's start).
    pub last_tx: Duration,
    pub closing: Option<Closing>,
    /// After the peer's `Close`: until when retransmitted `Close`s are still answered.
    pub drain_until: Option<Duration>,
    /// The runtime will hand this session's unfinished ADUs to a new session when it
    /// ends, so ending it must not nack them.
    pub successor_expected: bool,
    /// Payloads of in-flight ADUs of streams with [`InFlightPolicy::Resend`], by ADU id,
    /// kept until the ADU is acked or declared lost.
    ///
    /// [`InFlightPolicy::Resend`]: crate::InFlightPolicy::Resend
    pub resend: HashMap<u64, (u32, QueuedAdu)>,
    /// In-flight ADUs kept for the successor when the session ended, by stream.
    pub carried: Vec<(u32, QueuedAdu)>,
    pub flow: Flow,
}

impl Lifecycle {
    pub fn new(now: Duration) -> Self {
        Self {
            last_rx: now,
            last_tx: now,
            ..Self::default()
        }
    }

    pub fn idle_deadline(&self, config: &SessionConfig) -> Option<Duration> {
        (config.idle_timeout_ms > 0.0).then(|| self.last_rx + ms(config.idle_timeout_ms))
    }

    pub fn start_close(&mut self, now: Duration, config: &SessionConfig) {
        self.closing = Some(Closing {
            deadline: now + ms(config.close_timeout_ms),
            next_retry: now + ms(config.close_retry_ms),
        });
    }
}

/// Receive-side flow control. The receiver counts payload bytes handed to its
/// application and not yet read (`unread`); past half its buffer it tells the sender to
/// stop (a zero window), past the whole buffer it drops data unacknowledged, and once
/// the application has read it down to a quarter it opens the window again. The sender
/// stops scheduling data while the window is shut.
#[derive(Debug, Default)]
pub(crate) struct Flow {
    /// Receive buffer in payload bytes; `None`: the driver delivers straight to the
    /// application (the simulator), no limit.
    pub limit: Option<usize>,
    pub unread: usize,
    /// The receiver told the peer its window is shut and has not reopened it.
    pub shut_sent: bool,
    pub last_update: Option<Duration>,
    /// Times the reopened window is repeated on later arrivals, in case the first
    /// update was lost (the sender's one-ADU probes would otherwise be all it sends).
    pub reopen_repeats: u8,
    /// Sender side: when the peer's zero window arrived, while it holds.
    pub blocked_since: Option<Duration>,
}

impl Flow {
    /// Whether an arriving payload of `len` bytes fits the buffer.
    pub fn fits(&self, len: usize) -> bool {
        self.limit.is_none_or(|l| self.unread + len <= l)
    }

    /// Payload bytes the application must still read for a shut window to reopen;
    /// `None` while the window is open (or unbounded).
    pub fn reopens_after_reading(&self) -> Option<usize> {
        let limit = self.limit?;
        self.shut_sent
            .then(|| self.unread.saturating_sub(reopen_at(limit)))
    }

    /// Whether the window should be shut now (`Some(0)`), reopened (`Some(open)`), or
    /// left alone. Rate-limited unless `force`.
    pub fn update(&mut self, now: Duration, force: bool) -> Option<u64> {
        let limit = self.limit?;
        let recent = self
            .last_update
            .is_some_and(|t| now.saturating_sub(t) < WINDOW_UPDATE_GAP);
        if self.unread > limit / 2 {
            if (!self.shut_sent || force) && !recent {
                self.shut_sent = true;
                self.last_update = Some(now);
                return Some(0);
            }
        } else if self.shut_sent && self.unread <= reopen_at(limit) {
            self.shut_sent = false;
            self.reopen_repeats = REOPEN_REPEATS;
            self.last_update = Some(now);
            return Some((limit - self.unread) as u64);
        } else if !self.shut_sent && self.reopen_repeats > 0 && !recent {
            self.reopen_repeats -= 1;
            self.last_update = Some(now);
            return Some((limit - self.unread) as u64);
        }
        None
    }

    /// Sender side: whether data may be scheduled now.
    pub fn may_send(&self, now: Duration) -> bool {
        self.blocked_since
            .is_none_or(|t| now.saturating_sub(t) >= ZERO_WINDOW_PROBE)
    }
}

/// Unread bytes at or below which a shut window reopens: a quarter of the buffer.
fn reopen_at(limit: usize) -> usize {
    limit / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shut_window_says_how_much_reading_reopens_it() {
        let mut f = Flow {
            limit: Some(1000),
            ..Flow::default()
        };
        let t = Duration::from_secs(1);
        f.unread = 600;
        assert_eq!(f.reopens_after_reading(), None, "still open");
        assert_eq!(f.update(t, false), Some(0));
        assert_eq!(f.reopens_after_reading(), Some(350));
        // Reading exactly that much reopens it.
        f.unread -= 350;
        assert_eq!(f.update(t, false), Some(750));
        assert_eq!(f.reopens_after_reading(), None);
        // No limit, nothing to wait for.
        assert_eq!(Flow::default().reopens_after_reading(), None);
    }

    #[test]
    fn window_shuts_past_half_and_reopens_at_a_quarter() {
        let mut f = Flow {
            limit: Some(1000),
            ..Flow::default()
        };
        let t = Duration::from_secs(1);
        f.unread = 400;
        assert_eq!(f.update(t, false), None);
        f.unread = 600;
        assert_eq!(f.update(t, false), Some(0));
        // Already told, and rate-limited even when forced.
        assert_eq!(f.update(t, false), None);
        assert_eq!(f.update(t + Duration::from_millis(1), true), None);
        assert_eq!(f.update(t + WINDOW_UPDATE_GAP, true), Some(0));
        f.unread = 300;
        assert_eq!(f.update(t + Duration::from_secs(1), false), None);
        f.unread = 250;
        assert_eq!(f.update(t + Duration::from_secs(1), false), Some(750));
        assert!(f.fits(750) && !f.fits(751));
        // Repeated a few times, spaced, in case the update was lost.
        let later = t + Duration::from_secs(2);
        assert_eq!(f.update(later, false), Some(750));
        assert_eq!(f.update(later, false), None);
        assert_eq!(f.update(later + WINDOW_UPDATE_GAP, false), Some(750));
        assert_eq!(f.update(later + 2 * WINDOW_UPDATE_GAP, false), Some(750));
        assert_eq!(f.update(later + 3 * WINDOW_UPDATE_GAP, false), None);
    }

    #[test]
    fn a_blocked_sender_probes_after_the_probe_interval() {
        let t = Duration::from_secs(3);
        let f = Flow {
            blocked_since: Some(t),
            ..Flow::default()
        };
        assert!(!f.may_send(t + Duration::from_millis(100)));
        assert!(f.may_send(t + ZERO_WINDOW_PROBE));
    }
}
