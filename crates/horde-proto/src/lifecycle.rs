//! The session's lifecycle state beside its data path: liveness timers (idle timeout,
//! keepalive), the reliable close, what a dead session hands to its successor, and
//! receive-side flow control. The decisions are made in `session.rs`; this module keeps
//! the state and the arithmetic of its deadlines.

use std::collections::HashMap;
use std::time::Duration;

use crate::session::config::{ms, SessionConfig};
use crate::stream::QueuedAdu;

/// How long a sender held back by the peer's limit waits before it probes: a ping on
/// every channel, which the receiver answers with its current limit. It covers a lost
/// update; the probe is no data, so a full receiver has nothing to drop.
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
/// Least time between two forced window updates (after a drop).
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

/// Receive-side flow control, by credit (as QUIC's `MAX_DATA`). The receiver counts the
/// payload bytes of data packets it has taken in since the session began (`admitted`)
/// and advertises a cumulative limit: `admitted` plus the room left in its buffer
/// (payload handed to the application and not yet read, and ADUs held for in-order
/// delivery, take room). The sender keeps the payload of what it has sent and not seen
/// declared lost within that limit, so its data never overruns the buffer: whatever
/// arrives was counted by the sender before it was sent. The limit only grows, by
/// reading; a new one is advertised once it has grown by an eighth of the buffer.
#[derive(Debug, Default)]
pub(crate) struct Flow {
    /// Receive buffer in payload bytes; `None`: the driver delivers straight to the
    /// application (the simulator), no limit, nothing advertised.
    pub limit: Option<usize>,
    pub unread: usize,
    /// Payload bytes of the data packets taken in so far (acked ones).
    pub admitted: u64,
    /// The cumulative limit last advertised to the peer.
    pub advertised: Option<u64>,
    pub last_update: Option<Duration>,
    /// Sender side: the peer's latest cumulative limit; `None` until it advertises one
    /// (a peer with an unbounded buffer never does).
    pub peer_limit: Option<u64>,
    /// Sender side: payload bytes sent in data packets so far.
    pub sent: u64,
    /// Sender side: of those, declared lost (and not acked late): they never took room.
    pub lost: u64,
    /// Sender side: since when the peer's limit has held data back, and how many
    /// payload bytes the packet that did not fit needed.
    pub blocked: Option<Blocked>,
}

/// The sender ran out of the peer's credit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Blocked {
    /// When it ran out, or when it last probed for a lost update.
    pub since: Duration,
    /// Payload bytes of the packet that did not fit.
    pub need: u64,
}

impl Flow {
    /// Receiver side: whether an arriving payload of `len` bytes fits the buffer, given
    /// `held` bytes held for ordering. A sender that keeps to the credit never
    /// overruns it; one that does not has its data dropped.
    pub fn fits(&self, held: usize, len: usize) -> bool {
        self.limit.is_none_or(|l| self.unread + held + len <= l)
    }

    /// How far the advertised limit must grow before a new one is sent.
    fn step(limit: usize) -> u64 {
        (limit as u64 / UPDATE_FRACTION).max(1)
    }

    /// The cumulative limit the receiver could advertise now.
    fn limit_now(&self, held: usize) -> Option<u64> {
        let limit = self.limit?;
        let room = limit.saturating_sub(self.unread + held);
        Some(self.admitted + room as u64)
    }

    /// Payload bytes the application must still read before the next update is due;
    /// `None` while nothing has been advertised (or without a limit).
    pub fn reopens_after_reading(&self, held: usize) -> Option<usize> {
        let step = Self::step(self.limit?);
        let due = self.advertised? + step;
        Some(due.saturating_sub(self.limit_now(held)?) as usize)
    }

    /// The limit to advertise now, if any: the first one, one grown by a step since
    /// the last, or (when `force`, rate-limited) the current one again.
    pub fn update(&mut self, now: Duration, held: usize, force: bool) -> Option<u64> {
        let current = self.limit_now(held)?;
        let step = Self::step(self.limit?);
        let recent = self
            .last_update
            .is_some_and(|t| now.saturating_sub(t) < WINDOW_UPDATE_GAP);
        let due = match self.advertised {
            None => true,
            Some(a) => current >= a + step || (force && !recent),
        };
        if !due {
            return None;
        }
        // A limit never shrinks: a smaller one would take back credit the sender
        // may already have used.
        let limit = self.advertised.map_or(current, |a| a.max(current));
        self.advertised = Some(limit);
        self.last_update = Some(now);
        Some(limit)
    }

    /// Sender side: payload bytes the peer's credit still allows; `None`: no limit.
    pub fn credit(&self) -> Option<u64> {
        let out = self.sent.saturating_sub(self.lost);
        self.peer_limit.map(|l| l.saturating_sub(out))
    }

    /// Sender side: whether `bytes` of payload may go now.
    pub fn allows(&self, bytes: u64) -> bool {
        self.credit().is_none_or(|c| bytes <= c)
    }

    /// Sender side: whether data may be scheduled now.
    pub fn may_send(&self) -> bool {
        self.blocked.is_none()
    }

    /// Sender side: whether a blocked sender should probe for a lost update now.
    pub fn probe_due(&self, now: Duration) -> bool {
        self.blocked
            .is_some_and(|b| now.saturating_sub(b.since) >= ZERO_WINDOW_PROBE)
    }

    /// Sender side: a blocked sender whose packet fits again is unblocked; returns
    /// whether it was.
    pub fn unblock_if_fits(&mut self) -> bool {
        match self.blocked {
            Some(b) if self.allows(b.need) => {
                self.blocked = None;
                true
            }
            _ => false,
        }
    }
}

/// The advertised limit is renewed once it can grow by this fraction of the buffer.
const UPDATE_FRACTION: u64 = 8;

#[cfg(test)]
mod tests {
    use super::*;

    fn receiver(limit: usize) -> Flow {
        Flow {
            limit: Some(limit),
            ..Flow::default()
        }
    }

    #[test]
    fn the_limit_is_what_was_taken_in_plus_the_room_left() {
        let mut f = receiver(8000);
        let t = Duration::from_secs(1);
        // The first limit goes out at once: the whole buffer.
        assert_eq!(f.update(t, 0, false), Some(8000));
        assert_eq!(f.update(t, 0, false), None);
        // 6000 bytes arrive, 1000 of them held for ordering: the limit stays.
        f.admitted = 6000;
        f.unread = 5000;
        assert_eq!(f.update(t, 1000, false), None);
        assert!(f.fits(1000, 2000) && !f.fits(1000, 2001));
        // Reading: a new limit once it can grow by an eighth of the buffer.
        assert_eq!(f.reopens_after_reading(1000), Some(1000));
        f.unread = 4001;
        assert_eq!(f.update(t, 1000, false), None);
        assert_eq!(f.reopens_after_reading(1000), Some(1));
        f.unread = 4000;
        assert_eq!(f.update(t, 1000, false), Some(9000));
        assert_eq!(f.reopens_after_reading(1000), Some(1000));
        // Forced (a drop): the current limit again, rate-limited.
        assert_eq!(f.update(t, 1000, true), None);
        assert_eq!(f.update(t + WINDOW_UPDATE_GAP, 1000, true), Some(9000));
        // Never smaller than advertised, even if the held bytes grew meanwhile.
        assert_eq!(f.update(t + 2 * WINDOW_UPDATE_GAP, 3000, true), Some(9000));
        // No limit, nothing advertised and nothing to wait for.
        let mut none = Flow::default();
        assert_eq!(none.update(t, 0, true), None);
        assert_eq!(none.reopens_after_reading(0), None);
        assert!(none.fits(0, usize::MAX / 2));
    }

    #[test]
    fn the_sender_keeps_what_is_out_within_the_peer_limit() {
        let mut f = Flow::default();
        assert_eq!(f.credit(), None, "no limit until the peer advertises one");
        assert!(f.allows(u64::MAX));
        f.peer_limit = Some(10_000);
        f.sent = 9_000;
        assert_eq!(f.credit(), Some(1_000));
        assert!(f.allows(1_000) && !f.allows(1_001));
        f.blocked = Some(Blocked {
            since: Duration::from_secs(2),
            need: 1_200,
        });
        assert!(!f.may_send());
        // A declared loss gives its bytes back: they never took room at the peer.
        f.lost = 100;
        assert!(!f.unblock_if_fits());
        f.lost = 200;
        assert!(f.unblock_if_fits() && f.may_send());
    }

    #[test]
    fn a_blocked_sender_probes_after_the_probe_interval() {
        let t = Duration::from_secs(3);
        let f = Flow {
            blocked: Some(Blocked { since: t, need: 1 }),
            ..Flow::default()
        };
        assert!(!f.probe_due(t + Duration::from_millis(100)));
        assert!(f.probe_due(t + ZERO_WINDOW_PROBE));
    }
}
