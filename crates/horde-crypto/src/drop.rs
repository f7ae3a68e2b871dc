//! Why a datagram was dropped, and per-reason counters.

use std::fmt;

/// Why an incoming datagram was dropped. Every rejection path returns exactly one of these;
/// none of them changes session state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, thiserror::Error)]
pub enum DropReason {
    /// Shorter than its type requires (including the empty datagram).
    #[error("datagram truncated")]
    Truncated,
    /// Longer than its type allows: a handshake message of the wrong size, or a transport
    /// datagram whose ciphertext exceeds the Noise message limit (65535 bytes).
    #[error("datagram oversized")]
    Oversized,
    /// The type byte is not one Horde defines.
    #[error("unknown datagram type")]
    UnknownType,
    /// A valid type that this receiver does not handle (for example an initiation given to
    /// [`Session::open`](crate::Session::open)).
    #[error("unexpected datagram type for this receiver")]
    UnexpectedType,
    /// The receiver index is not this session's (or this handshake's) local index.
    #[error("receiver index does not match")]
    WrongIndex,
    /// Authentication failed: the AEAD tag did not verify, or the handshake message could not
    /// be decrypted (forged, corrupted, truncated ciphertext, or another key).
    #[error("authentication failed")]
    BadTag,
    /// A counter already accepted on this channel (or a second response to a handshake that
    /// already completed).
    #[error("replayed datagram")]
    Replayed,
    /// A counter behind the channel's replay window.
    #[error("counter too old for the replay window")]
    TooOld,
    /// A well-formed initiation from a static key that is not on the allow-list.
    #[error("initiator not on the allow-list")]
    NotAllowed,
    /// An authentic initiation whose timestamp is not newer than the last one accepted from the
    /// same peer: a replay of an old initiation, or an initiator whose clock went backwards.
    #[error("initiation timestamp not newer than the last accepted")]
    StaleInitiation,
    /// An initiation of handshake version 1 (109 bytes, no MACs) or 2 (ChaCha20-Poly1305
    /// transport), told apart by its type byte: the peer runs an older Horde and must be
    /// upgraded.
    #[error("initiation in an old handshake format (version 1 or 2): the peer must upgrade")]
    LegacyHandshake,
    /// An initiation whose `mac1` does not verify: its sender does not know this host's
    /// public key (random garbage, or meant for another host). No Diffie-Hellman was done.
    #[error("initiation mac1 does not verify")]
    BadMac,
    /// The responder is under load and the initiation carried no valid `mac2`: it was
    /// answered with a cookie reply instead of being processed.
    #[error("under load: initiation needs a cookie (cookie reply sent)")]
    NeedCookie,
    /// Too many initiations from this source address.
    #[error("handshake rate limit for the source address exceeded")]
    RateLimited,
    /// The handshake worker's queue was full.
    #[error("handshake queue full")]
    QueueFull,
    /// A transport datagram under a key that has been used for too long or for too many
    /// messages (the peer did not rekey).
    #[error("session key expired")]
    KeyExpired,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 16] = [
        DropReason::Truncated,
        DropReason::Oversized,
        DropReason::UnknownType,
        DropReason::UnexpectedType,
        DropReason::WrongIndex,
        DropReason::BadTag,
        DropReason::Replayed,
        DropReason::TooOld,
        DropReason::NotAllowed,
        DropReason::StaleInitiation,
        DropReason::LegacyHandshake,
        DropReason::BadMac,
        DropReason::NeedCookie,
        DropReason::RateLimited,
        DropReason::QueueFull,
        DropReason::KeyExpired,
    ];

    /// A short stable identifier, for metrics and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::Oversized => "oversized",
            DropReason::UnknownType => "unknown_type",
            DropReason::UnexpectedType => "unexpected_type",
            DropReason::WrongIndex => "wrong_index",
            DropReason::BadTag => "bad_tag",
            DropReason::Replayed => "replayed",
            DropReason::TooOld => "too_old",
            DropReason::NotAllowed => "not_allowed",
            DropReason::StaleInitiation => "stale_initiation",
            DropReason::LegacyHandshake => "legacy_handshake",
            DropReason::BadMac => "bad_mac",
            DropReason::NeedCookie => "need_cookie",
            DropReason::RateLimited => "rate_limited",
            DropReason::QueueFull => "queue_full",
            DropReason::KeyExpired => "key_expired",
        }
    }

    const fn slot(self) -> usize {
        self as usize
    }
}

/// Number of dropped datagrams per [`DropReason`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct DropCounters {
    counts: [u64; DropReason::ALL.len()],
}

impl DropCounters {
    /// All zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one drop.
    pub fn record(&mut self, reason: DropReason) {
        let c = &mut self.counts[reason.slot()];
        *c = c.saturating_add(1);
    }

    /// Drops counted for `reason`.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.counts[reason.slot()]
    }

    /// Drops counted for all reasons.
    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, &c| a.saturating_add(c))
    }

    /// `(reason, count)` for every reason, including zeros.
    pub fn iter(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|&r| (r, self.get(r)))
    }

    /// Adds another set of counters into this one (to aggregate over sessions).
    pub fn merge(&mut self, other: &DropCounters) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a = a.saturating_add(*b);
        }
    }
}

impl fmt::Debug for DropCounters {
    /// Lists only the non-zero counters.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(
                self.iter()
                    .filter(|(_, c)| *c != 0)
                    .map(|(r, c)| (r.as_str(), c)),
            )
            .finish()
    }
}

/// Records `reason` in `counters` when `result` is an error, and passes the result through.
pub(crate) fn counted<T>(
    counters: &mut DropCounters,
    result: Result<T, DropReason>,
) -> Result<T, DropReason> {
    if let Err(reason) = result {
        counters.record(reason);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_distinct_and_ordered() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.slot(), i);
        }
        let names: std::collections::HashSet<_> =
            DropReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), DropReason::ALL.len());
    }

    #[test]
    fn counters_count_per_reason() {
        let mut c = DropCounters::new();
        c.record(DropReason::BadTag);
        c.record(DropReason::BadTag);
        c.record(DropReason::TooOld);
        assert_eq!(c.get(DropReason::BadTag), 2);
        assert_eq!(c.get(DropReason::TooOld), 1);
        assert_eq!(c.get(DropReason::Replayed), 0);
        assert_eq!(c.total(), 3);
        let mut d = DropCounters::new();
        d.record(DropReason::TooOld);
        d.merge(&c);
        assert_eq!(d.get(DropReason::TooOld), 2);
        assert_eq!(d.total(), 4);
        assert_eq!(format!("{d:?}"), r#"{"bad_tag": 2, "too_old": 2}"#);
    }
}
