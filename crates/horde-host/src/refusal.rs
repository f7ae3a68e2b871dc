//! Hellos for a service this host does not serve: each is answered with a sealed
//! `Refused`, so that the sender stops at once and can name the service, and the
//! refusals are logged at most once a second, with the count since the last line.

use std::net::SocketAddr;
use std::time::Duration;

use std::collections::HashMap;

use bytes::Bytes;
use horde_crypto::{DropReason, PublicKey};
use horde_proto::wire::{self, Packet};

use crate::conn::ConnState;
use crate::{HandshakeTransmit, Host};

/// The shortest time between two log lines about refused services.
const LOG_EVERY: Duration = Duration::from_secs(1);

/// When the last refusal was logged, and how many came since.
#[derive(Debug, Default)]
pub(crate) struct RefusalLog {
    last: Option<Duration>,
    unlogged: u64,
}

impl RefusalLog {
    /// One more refusal at `now`: `Some(n)` when a line is due, `n` the refusals it
    /// stands for.
    fn count(&mut self, now: Duration) -> Option<u64> {
        self.unlogged += 1;
        if self.last.is_some_and(|t| now < t + LOG_EVERY) {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unlogged))
    }
}

impl Host {
    /// Connection `key`'s first datagram, `hello`, asks for `service`, which nobody
    /// here listens on: answer it with a `Refused` over its secure session.
    pub(crate) fn refuse_service(
        &mut self,
        key: u64,
        iface: usize,
        src: SocketAddr,
        hello: &Bytes,
        service: u32,
        now: Duration,
    ) {
        self.counters.services_refused += 1;
        if let Some(n) = self.refusals.count(now) {
            let peer = self.conns.get(&key).and_then(|c| c.peer());
            let served: Vec<String> = self.endpoint.services().map(|s| s.to_string()).collect();
            let more = if n > 1 {
                format!(" ({n} refusals since the last line)")
            } else {
                String::new()
            };
            tracing::warn!(
                "refused a sender (key {}) from {src}: it asked for service {service}, but this host serves {}{more}",
                peer.map_or_else(|| "?".into(), |k| k.to_string()),
                if served.is_empty() { "none".into() } else { served.join(", ") },
            );
        }
        let Ok(Packet::Hello { conn, channel, .. }) = wire::decode(hello) else {
            return;
        };
        let Some(ConnState::AwaitingHello { crypto }) =
            self.conns.get_mut(&key).map(|c| &mut c.state)
        else {
            return;
        };
        let mut plain = Vec::new();
        wire::encode(&Packet::Refused { conn, service }, &mut plain);
        let mut datagram = Vec::new();
        if crypto
            .seal(u8::from(channel), &plain, &mut datagram)
            .is_ok()
        {
            self.handshake_tx.push_back(HandshakeTransmit {
                iface,
                dst: src,
                datagram,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_initiations_are_one_line_per_kind_per_second_with_counts() {
        let mut log = InitiationLog::default();
        let src: SocketAddr = "100.64.0.1:4000".parse().unwrap();
        let t = Duration::from_secs(5);
        assert_eq!(
            log.note(DropReason::BadMac, src, t),
            Some(1),
            "the first is logged"
        );
        for i in 1..=500u64 {
            let at = t + Duration::from_micros(i * 1000);
            assert_eq!(log.note(DropReason::BadMac, src, at), None, "held back");
        }
        // Another kind has its own line.
        assert_eq!(log.note(DropReason::StaleInitiation, src, t), Some(1));
        // A second later, one line counts what was held back and this one.
        let later = t + LOG_EVERY;
        assert_eq!(log.note(DropReason::BadMac, src, later), Some(501));
        assert_eq!(log.note(DropReason::BadMac, src, later), None);
    }

    #[test]
    fn a_burst_of_refusals_is_one_line_a_second_with_its_count() {
        let mut log = RefusalLog::default();
        let at = Duration::from_millis;
        assert_eq!(log.count(at(0)), Some(1));
        for t in 1..100 {
            assert_eq!(log.count(at(t * 10)), None);
        }
        assert_eq!(log.count(at(1000)), Some(100));
        assert_eq!(log.count(at(1001)), None);
    }
}

/// Refused initiations: one warning per kind of refusal at most every
/// [`LOG_EVERY`], with how many there were since the last line, so that an operator sees
/// a flood (and what stopped it) without a line per datagram.
#[derive(Debug, Default)]
pub struct InitiationLog {
    /// Per reason, in [`DropReason::ALL`]'s order: when last logged, and refusals since.
    kinds: [(Option<Duration>, u64); DropReason::ALL.len()],
}

impl InitiationLog {
    /// One initiation from `src` refused for `reason` at `now` (any clock that only moves
    /// forward). Returns the count it logged, if it wrote a line.
    pub fn note(&mut self, reason: DropReason, src: SocketAddr, now: Duration) -> Option<u64> {
        let slot = DropReason::ALL.iter().position(|r| *r == reason)?;
        let (last, count) = &mut self.kinds[slot];
        *count += 1;
        let since = last.map(|t| now.saturating_sub(t));
        if since.is_some_and(|d| d < LOG_EVERY) {
            return None;
        }
        let count = std::mem::take(count);
        *last = Some(now);
        let window = since.map_or(String::new(), |d| {
            format!(" in the last {:.1} s", d.as_secs_f64())
        });
        tracing::warn!(
            reason = reason.as_str(),
            count,
            latest_source = %src,
            "handshake initiations refused{window}: {count} ({reason}); latest from {src}"
        );
        Some(count)
    }
}

/// How often the same refused key is logged again.
pub const REJECT_LOG_EVERY: Duration = Duration::from_secs(10);
const REJECT_LOG_KEYS: usize = 1024;
const REJECT_LOG_PER_SECOND: u32 = 10;

/// One warning per key refused as not allowed per [`REJECT_LOG_EVERY`], at most ten a
/// second in all; the keys remembered are bounded.
#[derive(Debug, Default)]
pub(crate) struct RejectLog {
    per_key: HashMap<PublicKey, Duration>,
    /// The second the lines are counted in, and the lines written in it.
    second: (Duration, u32),
    /// Lines held back by the per-second limit since the last note of them.
    held: u64,
    last_held_line: Option<Duration>,
}

impl RejectLog {
    pub(crate) fn note(&mut self, key: PublicKey, src: SocketAddr, now: Duration) {
        if self
            .per_key
            .get(&key)
            .is_some_and(|t| now.saturating_sub(*t) < REJECT_LOG_EVERY)
        {
            return;
        }
        if now.saturating_sub(self.second.0) >= Duration::from_secs(1) {
            self.second = (now, 0);
        }
        if self.second.1 >= REJECT_LOG_PER_SECOND {
            self.held += 1;
            if self
                .last_held_line
                .is_none_or(|t| now.saturating_sub(t) >= Duration::from_secs(1))
            {
                self.last_held_line = Some(now);
                tracing::warn!(
                    held_back = std::mem::take(&mut self.held),
                    "many handshakes from keys not on the allow-list; some not logged"
                );
            }
            return;
        }
        if self.per_key.len() >= REJECT_LOG_KEYS {
            self.per_key
                .retain(|_, t| now.saturating_sub(*t) < REJECT_LOG_EVERY);
            if self.per_key.len() >= REJECT_LOG_KEYS {
                return;
            }
        }
        self.per_key.insert(key, now);
        self.second.1 += 1;
        tracing::warn!(
            key = %key,
            source = %src,
            "handshake refused: key not on the allow-list (logged at most every 10 s per key)"
        );
    }
}
