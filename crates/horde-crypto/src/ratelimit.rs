//! Token buckets for handshake initiations, one per source (an address, or an address and
//! port), in a bounded table.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::time::Duration;

/// How many initiations one source address may send.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Tokens added per second (sustained initiations per second).
    pub per_second: f64,
    /// Bucket size (initiations accepted back to back).
    pub burst: f64,
    /// Most sources tracked at once, per table. When a table is full, sources whose bucket
    /// has refilled are forgotten; if none has, one tracked source is forgotten to make room
    /// (a new source is never refused for want of room: that would let many sources lock
    /// out a newcomer).
    pub max_sources: usize,
}

impl Default for RateLimit {
    /// WireGuard's 20 initiations per second, with a burst of 10 so that an initiator
    /// retrying on several channels at once is not throttled.
    fn default() -> Self {
        Self {
            per_second: 20.0,
            burst: 10.0,
            max_sources: 4096,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Duration,
}

/// How often a full table is swept for refilled buckets; in between, a newcomer to a full
/// table takes the place of an arbitrary tracked source (O(1) per newcomer under a flood of
/// new sources, instead of a sweep each).
const SWEEP_EVERY: Duration = Duration::from_millis(100);

/// Token bucket per source: an IP address by default, or any key such as a `SocketAddr`
/// (address and port). Sans-IO: the caller passes the time.
#[derive(Debug)]
pub struct RateLimiter<K = IpAddr> {
    limit: RateLimit,
    buckets: HashMap<K, Bucket>,
    last_sweep: Option<Duration>,
}

impl<K: Eq + Hash + Copy> RateLimiter<K> {
    /// An empty table with the given limits.
    pub fn new(limit: RateLimit) -> Self {
        Self {
            limit,
            buckets: HashMap::new(),
            last_sweep: None,
        }
    }

    /// Takes one token for `source` at time `now`; false if its bucket is empty.
    pub fn allow(&mut self, source: K, now: Duration) -> bool {
        if !self.buckets.contains_key(&source) && self.buckets.len() >= self.limit.max_sources {
            self.make_room(now);
        }
        let limit = self.limit;
        let bucket = self.buckets.entry(source).or_insert(Bucket {
            tokens: limit.burst,
            updated: now,
        });
        let elapsed = now.saturating_sub(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * limit.per_second).min(limit.burst);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Sources tracked now.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether no source is tracked.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// A bucket that has refilled is the same as no bucket: those are dropped (at most once
    /// per [`SWEEP_EVERY`]). If none is, an arbitrary source is forgotten: it gets a full
    /// bucket back, which is the lesser harm than refusing the newcomer.
    fn make_room(&mut self, now: Duration) {
        let due = self
            .last_sweep
            .is_none_or(|t| now.saturating_sub(t) >= SWEEP_EVERY);
        if due {
            self.last_sweep = Some(now);
            let limit = self.limit;
            self.buckets.retain(|_, b| {
                let elapsed = now.saturating_sub(b.updated).as_secs_f64();
                b.tokens + elapsed * limit.per_second < limit.burst
            });
        }
        while self.buckets.len() >= self.limit.max_sources.max(1) {
            let Some(victim) = self.buckets.keys().next().copied() else {
                break;
            };
            self.buckets.remove(&victim);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn burst_then_sustained_rate() {
        let mut r = RateLimiter::new(RateLimit {
            per_second: 10.0,
            burst: 3.0,
            max_sources: 8,
        });
        let t0 = Duration::from_secs(5);
        let allowed = (0..10).filter(|_| r.allow(ip(1), t0)).count();
        assert_eq!(allowed, 3, "the burst");
        // 100 ms later one token has come back, and only one.
        let t1 = t0 + Duration::from_millis(100);
        assert!(r.allow(ip(1), t1));
        assert!(!r.allow(ip(1), t1));
        // Other sources have their own buckets.
        assert!(r.allow(ip(2), t1));
        // Over 10 s at 10/s, about 100 pass out of 1000 attempts.
        let passed = (0..1000)
            .filter(|i| r.allow(ip(1), t1 + Duration::from_millis(10 * (i + 1))))
            .count();
        assert!((99..=101).contains(&passed), "{passed}");
    }

    #[test]
    fn table_is_bounded_and_forgets_idle_sources() {
        let mut r = RateLimiter::new(RateLimit {
            per_second: 1.0,
            burst: 2.0,
            max_sources: 4,
        });
        let t0 = Duration::ZERO;
        for i in 0..4 {
            assert!(r.allow(ip(i), t0));
        }
        // Full of sources that are still limited: a fifth still gets in, in the place of
        // one of them, and the table stays bounded.
        assert!(r.allow(ip(9), t0));
        assert_eq!(r.len(), 4);
        for i in 10..100 {
            assert!(
                r.allow(ip(i), t0),
                "a newcomer is never refused for want of room"
            );
            assert!(r.len() <= 4);
        }
        // Once their buckets have refilled they are forgotten, making room for the next
        // newcomer. (A newcomer: a source still tracked would not sweep, and which ones
        // are still tracked depends on the table's arbitrary evictions.)
        let later = t0 + Duration::from_secs(2);
        assert!(r.allow(ip(200), later));
        assert_eq!(r.len(), 1);
    }
}
