//! One direction of an in-memory path: fixed delay, random extra delay (which reorders
//! datagrams sent closer together than it), and random loss.

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
}

impl PathConfig {
    /// A lossless path with a fixed one-way delay.
    pub fn delay(delay: Duration) -> Self {
        Self {
            delay,
            ..Self::default()
        }
    }

    /// When a datagram sent at `now` arrives, or `None` if it is lost. Draws from
    /// `rng` only for the randomness the path has, so that adding a lossless,
    /// jitter-free path does not change what other paths draw.
    pub(crate) fn arrival(&self, now: Duration, rng: &mut ChaCha8Rng) -> Option<Duration> {
        if self.loss > 0.0 && rng.gen_bool(self.loss.clamp(0.0, 1.0)) {
            return None;
        }
        let extra = if self.jitter.is_zero() {
            Duration::ZERO
        } else {
            self.jitter.mul_f64(rng.gen::<f64>())
        };
        Some(now + self.delay + extra)
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
        };
        let now = Duration::from_secs(1);
        let arrivals: Vec<_> = (0..4000).map(|_| path.arrival(now, &mut rng)).collect();
        let lost = arrivals.iter().filter(|a| a.is_none()).count();
        assert!((800..1200).contains(&lost), "lost {lost} of 4000");
        for a in arrivals.into_iter().flatten() {
            assert!(a >= now + path.delay && a < now + path.delay + path.jitter);
        }
        let plain = PathConfig::delay(Duration::from_millis(3));
        assert_eq!(
            plain.arrival(now, &mut rng),
            Some(now + Duration::from_millis(3))
        );
    }
}
