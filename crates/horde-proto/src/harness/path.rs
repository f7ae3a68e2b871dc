//! One direction of an in-memory path: random loss, an optional bottleneck (a rate with
//! an unbounded FIFO in front of it), fixed delay, and random extra delay (which reorders
//! datagrams sent closer together than it).

use std::time::Duration;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// How a path treats the datagrams that cross it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PathConfig {
    /// One-way delay.
    pub delay: Duration,
    /// Each datagram waits a further uniform random time in `[0, jitter)`: datagrams
    /// sent less than `jitter` apart may arrive out of order.
    pub jitter: Duration,
    /// Probability that a datagram is lost, in `[0, 1]`.
    pub loss: f64,
    /// A bottleneck of this many kbit/s (positive) with an unbounded FIFO in front of
    /// it: a datagram leaves once those queued before it and its own bytes have been
    /// serialized at this rate, and then takes `delay` (and jitter) to arrive. Lost
    /// datagrams take no room in the queue. `None`: no bottleneck, datagrams leave at
    /// once.
    pub rate_kbps: Option<f64>,
}

impl PathConfig {
    /// A lossless path with a fixed one-way delay.
    pub fn delay(delay: Duration) -> Self {
        Self {
            delay,
            ..Self::default()
        }
    }

    /// When a datagram of `len` bytes sent at `now` arrives, or `None` if it is lost.
    /// `queue_free` is when the path's bottleneck queue next empties, and moves on by
    /// the datagram's serialization (it is left alone without a bottleneck). Draws from
    /// `rng` only for the randomness the path has, so that adding a lossless,
    /// jitter-free path does not change what other paths draw.
    pub(crate) fn arrival(
        &self,
        now: Duration,
        len: usize,
        queue_free: &mut Duration,
        rng: &mut ChaCha8Rng,
    ) -> Option<Duration> {
        if self.loss > 0.0 && rng.gen_bool(self.loss.clamp(0.0, 1.0)) {
            return None;
        }
        let leaves = match self.rate_kbps {
            Some(kbps) => {
                let serialize = Duration::try_from_secs_f64(len as f64 * 8.0 / (kbps * 1e3))
                    .expect("a path's rate_kbps is positive");
                *queue_free = (*queue_free).max(now) + serialize;
                *queue_free
            }
            None => now,
        };
        let extra = if self.jitter.is_zero() {
            Duration::ZERO
        } else {
            self.jitter.mul_f64(rng.gen::<f64>())
        };
        Some(leaves + self.delay + extra)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn loss_and_jitter_stay_within_their_settings() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let path = PathConfig {
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(5),
            loss: 0.25,
            rate_kbps: None,
        };
        let now = Duration::from_secs(1);
        let mut queue = Duration::ZERO;
        let arrivals: Vec<_> = (0..4000)
            .map(|_| path.arrival(now, 100, &mut queue, &mut rng))
            .collect();
        assert_eq!(queue, Duration::ZERO, "no bottleneck, no queue");
        let lost = arrivals.iter().filter(|a| a.is_none()).count();
        assert!((800..1200).contains(&lost), "lost {lost} of 4000");
        for a in arrivals.into_iter().flatten() {
            assert!(a >= now + path.delay && a < now + path.delay + path.jitter);
        }
        let plain = PathConfig::delay(Duration::from_millis(3));
        assert_eq!(
            plain.arrival(now, 100, &mut queue, &mut rng),
            Some(now + Duration::from_millis(3))
        );
    }

    #[test]
    fn a_bottleneck_serializes_datagrams_one_after_another() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // 8 kbit/s: a 100-byte datagram takes 100 ms to serialize.
        let path = PathConfig {
            rate_kbps: Some(8.0),
            ..PathConfig::delay(Duration::from_millis(10))
        };
        let ms = Duration::from_millis;
        let mut queue = Duration::ZERO;
        // Two sent together: the second waits for the first.
        assert_eq!(
            path.arrival(ms(0), 100, &mut queue, &mut rng),
            Some(ms(110))
        );
        assert_eq!(
            path.arrival(ms(0), 100, &mut queue, &mut rng),
            Some(ms(210))
        );
        assert_eq!(queue, ms(200));
        // One sent while the queue drains waits for what is left of it.
        assert_eq!(
            path.arrival(ms(150), 50, &mut queue, &mut rng),
            Some(ms(260))
        );
        // One sent after it emptied waits only for its own bytes.
        assert_eq!(
            path.arrival(ms(1_000), 100, &mut queue, &mut rng),
            Some(ms(1_110))
        );
    }
}
