//! The receiver's log of refused handshake initiations: one warning per kind of refusal at
//! most every [`REFUSAL_LOG_EVERY`], with how many there were since the last line, so that
//! an operator sees a flood (and what stopped it) without a line per datagram.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use horde_crypto::DropReason;

/// How often one kind of refusal is logged at most.
pub const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, Default)]
struct Kind {
    /// When this kind was last logged.
    last_line: Option<Instant>,
    /// Refusals since then (including the one that triggers the next line).
    count: u64,
}

/// Counts refusals per reason and logs each reason at most once per [`REFUSAL_LOG_EVERY`].
#[derive(Debug, Default)]
pub(crate) struct RefusalLog {
    kinds: [Kind; DropReason::ALL.len()],
}

impl RefusalLog {
    /// One refused initiation from `src`. Returns the count it logged, if it wrote a line.
    pub(crate) fn note(
        &mut self,
        reason: DropReason,
        src: SocketAddr,
        now: Instant,
    ) -> Option<u64> {
        let slot = DropReason::ALL.iter().position(|r| *r == reason)?;
        let kind = &mut self.kinds[slot];
        kind.count += 1;
        let since = kind.last_line.map(|t| now.duration_since(t));
        if since.is_some_and(|d| d < REFUSAL_LOG_EVERY) {
            return None;
        }
        let count = std::mem::take(&mut kind.count);
        kind.last_line = Some(now);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_kind_per_second_with_counts() {
        let mut log = RefusalLog::default();
        let src: SocketAddr = "100.64.0.1:4000".parse().unwrap();
        let t = Instant::now();
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
        let later = t + REFUSAL_LOG_EVERY;
        assert_eq!(log.note(DropReason::BadMac, src, later), Some(501));
        assert_eq!(log.note(DropReason::BadMac, src, later), None);
    }
}
