//! Hellos for a service this host does not serve: each is answered with a sealed
//! `Refused`, so that the sender stops at once and can name the service, and the
//! refusals are logged at most once a second, with the count since the last line.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
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
