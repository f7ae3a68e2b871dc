//! Windowed extremum filters for the model-based controllers: the minimum round trip over
//! a time window (Copa's standing and minimum RTT) and the maximum delivery rate over a
//! number of round trips (BBR's bottleneck bandwidth).

use std::collections::VecDeque;
use std::time::Duration;

/// The minimum (or maximum) of samples taken within a time window: a monotone deque,
/// amortised O(1) per sample, and exact, unlike a three-sample approximation.
#[derive(Debug, Clone)]
pub struct Windowed<T> {
    /// Each entry is the best of the samples from its time on: times increase, values
    /// get worse.
    samples: VecDeque<(Duration, T)>,
    /// Whether the first value is at least as good as the second.
    better: fn(&T, &T) -> bool,
}

pub type WindowedMin = Windowed<Duration>;

impl<T: Copy + PartialOrd> Windowed<T> {
    /// A filter that keeps the smallest sample.
    pub fn min() -> Self {
        Self {
            samples: VecDeque::new(),
            better: |a, b| a <= b,
        }
    }

    /// A filter that keeps the largest sample.
    pub fn max() -> Self {
        Self {
            samples: VecDeque::new(),
            better: |a, b| a >= b,
        }
    }

    /// Adds a sample taken at `now`; times must not go backwards.
    pub fn update(&mut self, now: Duration, sample: T) {
        while self
            .samples
            .back()
            .is_some_and(|(_, v)| (self.better)(&sample, v))
        {
            self.samples.pop_back();
        }
        self.samples.push_back((now, sample));
    }

    /// The best of the samples taken in `[now - window, now]`; older ones are forgotten,
    /// so windows must not grow between calls.
    pub fn get(&mut self, now: Duration, window: Duration) -> Option<T> {
        while self.samples.len() > 1
            && self
                .samples
                .front()
                .is_some_and(|&(t, _)| now.saturating_sub(t) > window)
        {
            self.samples.pop_front();
        }
        // The newest sample always counts, however old: better a stale estimate than none.
        self.samples.front().map(|&(_, v)| v)
    }
}

/// The maximum of samples over the last `rounds` round trips (BBR's BtlBw filter).
#[derive(Debug, Clone)]
pub struct MaxOverRounds {
    rounds: u64,
    /// (round, best sample of that round), oldest first.
    best: VecDeque<(u64, f64)>,
}

impl MaxOverRounds {
    pub fn new(rounds: u64) -> Self {
        Self {
            rounds: rounds.max(1),
            best: VecDeque::new(),
        }
    }

    pub fn update(&mut self, round: u64, sample: f64) {
        match self.best.back_mut() {
            Some((r, v)) if *r == round => *v = v.max(sample),
            _ => self.best.push_back((round, sample)),
        }
        self.expire(round);
    }

    /// Forget rounds that have left the window as of `round`.
    pub fn expire(&mut self, round: u64) {
        while self
            .best
            .front()
            .is_some_and(|&(r, _)| r + self.rounds <= round)
        {
            self.best.pop_front();
        }
    }

    pub fn get(&self) -> Option<f64> {
        self.best.iter().map(|&(_, v)| v).reduce(f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn windowed_min_forgets_old_minima() {
        let mut f = WindowedMin::min();
        f.update(t(0), t(50));
        f.update(t(10), t(80));
        f.update(t(20), t(60));
        assert_eq!(f.get(t(20), t(100)), Some(t(50)));
        // The 50 ms sample leaves the window; 60 ms (taken later) is the minimum.
        assert_eq!(f.get(t(105), t(100)), Some(t(60)));
        // Everything is old: the newest sample stands in.
        assert_eq!(f.get(t(1000), t(100)), Some(t(60)));
    }

    #[test]
    fn windowed_max_keeps_the_largest_recent() {
        let mut f = Windowed::max();
        f.update(t(0), 5.0);
        f.update(t(10), 3.0);
        assert_eq!(f.get(t(10), t(100)), Some(5.0));
        assert_eq!(f.get(t(105), t(100)), Some(3.0));
    }

    #[test]
    fn max_over_rounds_keeps_the_window() {
        let mut f = MaxOverRounds::new(3);
        f.update(0, 10.0);
        f.update(0, 12.0);
        f.update(1, 5.0);
        f.update(2, 7.0);
        assert_eq!(f.get(), Some(12.0));
        f.update(3, 6.0);
        assert_eq!(f.get(), Some(7.0));
        f.expire(6);
        assert_eq!(f.get(), None);
    }
}
