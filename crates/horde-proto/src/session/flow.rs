//! Receive-side flow control: the credit a receiver advertises and the sender keeps to.

use std::time::Duration;

/// How long a sender held back by the peer's limit waits before it probes: a ping on
/// every channel, which the receiver answers with its current limit. It covers a lost
/// update; the probe is no data, so a full receiver has nothing to drop.
pub(crate) const ZERO_WINDOW_PROBE: Duration = Duration::from_millis(250);
/// Least time between two forced window updates (after a drop).
pub(crate) const WINDOW_UPDATE_GAP: Duration = Duration::from_millis(20);

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
