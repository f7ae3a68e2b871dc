//! Loss processes, applied to each packet as it leaves the bottleneck.
//!
//! Each process makes one decision per packet, in departure order, drawing from the
//! link's loss RNG only.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Ratio between the probabilities of successive burst sizes in the thesis model (Fig. 7-6).
pub(crate) const BURST_DECAY: f64 = 0.2;

#[derive(Debug, Clone)]
pub(crate) enum LossProcess {
    None,
    Bernoulli(f64),
    GilbertElliott(GilbertElliott),
    BurstMarkov(BurstMarkov),
}

impl LossProcess {
    /// Decide whether the next packet is lost.
    pub(crate) fn lose(&mut self, rng: &mut ChaCha8Rng) -> bool {
        match self {
            LossProcess::None => false,
            LossProcess::Bernoulli(p) => chance(rng, *p),
            LossProcess::GilbertElliott(ge) => ge.lose(rng),
            LossProcess::BurstMarkov(bm) => bm.lose(rng),
        }
    }
}

/// True with probability `p` in [0, 1]; exact at both ends.
fn chance(rng: &mut ChaCha8Rng, p: f64) -> bool {
    rng.gen::<f64>() < p
}

/// Two-state Markov chain. The current state's loss probability decides the packet, then
/// the chain moves. It starts in the good state.
#[derive(Debug, Clone)]
pub(crate) struct GilbertElliott {
    pub(crate) p_good_to_bad: f64,
    pub(crate) p_bad_to_good: f64,
    pub(crate) loss_in_good: f64,
    pub(crate) loss_in_bad: f64,
    pub(crate) bad: bool,
}

impl GilbertElliott {
    fn lose(&mut self, rng: &mut ChaCha8Rng) -> bool {
        let lost = chance(
            rng,
            if self.bad {
                self.loss_in_bad
            } else {
                self.loss_in_good
            },
        );
        let flip = chance(
            rng,
            if self.bad {
                self.p_bad_to_good
            } else {
                self.p_good_to_bad
            },
        );
        self.bad ^= flip;
        lost
    }
}

/// The thesis's burst-loss Markov chain (Fig. 7-6).
///
/// State 0 is the only no-loss state. Each packet moves the chain one step and is lost iff
/// the new state is a loss state. From state 0 the chain starts, with probability `q`, a
/// burst of `2^j` loss states (`j = 0..=n`, chosen with probability `0.2^j / (1 + s)`,
/// `s = sum_{i=1..=n} 0.2^i`); the last loss state of a burst leads back to state 0. So
/// every burst is exactly `2^j` consecutive losses followed by at least one delivery.
#[derive(Debug, Clone)]
pub(crate) struct BurstMarkov {
    q: f64,
    /// Cumulative probabilities of burst sizes 2^0..=2^n; the last is 1.
    cumulative: Vec<f64>,
    /// Losses still to come in the current burst, this packet included; 0 = state 0.
    remaining: u32,
}

impl BurstMarkov {
    /// `max_burst` must be a power of two (so `n = log2(max_burst)`), `q` in [0, 1].
    pub(crate) fn new(q: f64, max_burst: u32) -> BurstMarkov {
        let probs = burst_size_probabilities(max_burst);
        let mut total = 0.0;
        let mut cumulative: Vec<f64> = probs
            .iter()
            .map(|p| {
                total += p;
                total
            })
            .collect();
        *cumulative.last_mut().expect("at least one burst size") = 1.0;
        BurstMarkov {
            q,
            cumulative,
            remaining: 0,
        }
    }

    fn lose(&mut self, rng: &mut ChaCha8Rng) -> bool {
        if self.remaining > 0 {
            // Inside a burst: step along it; after its last loss the chain is back in 0.
            self.remaining -= 1;
            return self.remaining > 0;
        }
        if !chance(rng, self.q) {
            return false;
        }
        let u: f64 = rng.gen();
        let j = self.cumulative.partition_point(|&c| c <= u);
        self.remaining = 1 << j.min(self.cumulative.len() - 1);
        true
    }
}

/// `P(j) = 0.2^j / (1 + s)` for `j = 0..=log2(max_burst)`.
pub(crate) fn burst_size_probabilities(max_burst: u32) -> Vec<f64> {
    let n = max_burst.max(1).ilog2() as i32;
    let weights: Vec<f64> = (0..=n).map(|j| BURST_DECAY.powi(j)).collect();
    let total: f64 = weights.iter().sum();
    weights.iter().map(|w| w / total).collect()
}

/// Mean burst length `E[B] = sum_j 2^j P(j)`.
pub(crate) fn mean_burst_length(max_burst: u32) -> f64 {
    burst_size_probabilities(max_burst)
        .iter()
        .enumerate()
        .map(|(j, p)| p * f64::from(1u32 << j))
        .sum()
}

/// Long-run loss rate of the chain: a renewal cycle starts at each visit to state 0 (one
/// delivered packet) and, with probability `q`, continues with a burst of mean length
/// `E[B]`, so `rate = q E[B] / (1 + q E[B])`.
pub(crate) fn burst_markov_loss_rate(q: f64, max_burst: u32) -> f64 {
    let lost = q * mean_burst_length(max_burst);
    lost / (1.0 + lost)
}

/// Inverse of [`burst_markov_loss_rate`]: `q = rate / (E[B] (1 - rate))`.
///
/// `q <= 1` needs `rate <= E[B] / (1 + E[B])`; see [`max_burst_markov_loss_rate`].
pub(crate) fn burst_markov_q(rate: f64, max_burst: u32) -> f64 {
    rate / (mean_burst_length(max_burst) * (1.0 - rate))
}

/// The highest long-run loss rate the chain can reach (at `q = 1`).
pub(crate) fn max_burst_markov_loss_rate(max_burst: u32) -> f64 {
    burst_markov_loss_rate(1.0, max_burst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rng(seed: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed)
    }

    /// Loss pattern of `n` packets.
    fn run(process: &mut LossProcess, seed: u64, n: usize) -> Vec<bool> {
        let mut rng = rng(seed);
        (0..n).map(|_| process.lose(&mut rng)).collect()
    }

    fn loss_rate(pattern: &[bool]) -> f64 {
        pattern.iter().filter(|&&l| l).count() as f64 / pattern.len() as f64
    }

    /// Lengths of the completed maximal runs of consecutive losses (a run still open at
    /// the end is left out, since it may be cut short).
    fn loss_runs(pattern: &[bool]) -> Vec<usize> {
        let mut runs = Vec::new();
        let mut current = 0;
        for &lost in pattern {
            if lost {
                current += 1;
            } else if current > 0 {
                runs.push(current);
                current = 0;
            }
        }
        runs
    }

    /// `count` is within 4.5 standard deviations (+1) of a binomial(n, p) mean.
    fn assert_binomial(count: usize, n: usize, p: f64, what: &str) {
        let mean = n as f64 * p;
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (count as f64 - mean).abs() <= 4.5 * sd + 1.0,
            "{what}: {count} of {n}, expected {mean:.1} ± {sd:.1}"
        );
    }

    #[test]
    fn none_never_loses() {
        assert!(!run(&mut LossProcess::None, 1, 10_000).contains(&true));
    }

    #[test]
    fn bernoulli_rate_and_independence() {
        for (p, seed) in [(0.0, 1), (0.05, 2), (0.3, 3), (1.0, 4)] {
            let pattern = run(&mut LossProcess::Bernoulli(p), seed, 100_000);
            let lost = pattern.iter().filter(|&&l| l).count();
            assert_binomial(lost, pattern.len(), p, "bernoulli losses");
            // Memoryless: P(loss | previous lost) = p too.
            if p > 0.0 && p < 1.0 {
                let after_loss = pattern.windows(2).filter(|w| w[0]).count();
                let both = pattern.windows(2).filter(|w| w[0] && w[1]).count();
                assert_binomial(both, after_loss, p, "bernoulli loss after loss");
            }
        }
    }

    fn gilbert(p_gb: f64, p_bg: f64, lg: f64, lb: f64) -> LossProcess {
        LossProcess::GilbertElliott(GilbertElliott {
            p_good_to_bad: p_gb,
            p_bad_to_good: p_bg,
            loss_in_good: lg,
            loss_in_bad: lb,
            bad: false,
        })
    }

    #[test]
    fn gilbert_elliott_bad_runs_are_geometric() {
        // Loss exactly in the bad state, so loss runs are bad-state sojourns.
        let (p_gb, p_bg) = (0.02, 0.25);
        let pattern = run(&mut gilbert(p_gb, p_bg, 0.0, 1.0), 7, 300_000);
        let runs = loss_runs(&pattern);
        let mean_run = runs.iter().sum::<usize>() as f64 / runs.len() as f64;
        assert!(
            (mean_run - 1.0 / p_bg).abs() < 0.2,
            "mean bad run {mean_run}, expected {}",
            1.0 / p_bg
        );
        // Geometric: P(run = 1) = p_bg, P(run = 2) = (1 - p_bg) p_bg.
        let ones = runs.iter().filter(|&&r| r == 1).count();
        let twos = runs.iter().filter(|&&r| r == 2).count();
        assert_binomial(ones, runs.len(), p_bg, "runs of 1");
        assert_binomial(twos, runs.len(), (1.0 - p_bg) * p_bg, "runs of 2");
        // Good runs have mean 1 / p_gb.
        let good_runs = loss_runs(&pattern.iter().map(|l| !l).collect::<Vec<_>>());
        let mean_good = good_runs.iter().sum::<usize>() as f64 / good_runs.len() as f64;
        assert!(
            (mean_good - 1.0 / p_gb).abs() < 2.5,
            "mean good run {mean_good}"
        );
        let stationary = p_gb / (p_gb + p_bg);
        assert!((loss_rate(&pattern) - stationary).abs() < 0.005);
    }

    #[test]
    fn gilbert_elliott_long_run_loss_rate() {
        let (p_gb, p_bg, lg, lb) = (0.05, 0.2, 0.01, 0.6);
        let pattern = run(&mut gilbert(p_gb, p_bg, lg, lb), 8, 300_000);
        let pi_bad = p_gb / (p_gb + p_bg);
        let expected = (1.0 - pi_bad) * lg + pi_bad * lb;
        let got = loss_rate(&pattern);
        assert!((got - expected).abs() < 0.006, "{got} vs {expected}");
    }

    #[test]
    fn burst_size_distribution_constants() {
        // The thesis caption's s for max bursts 16 and 4.
        let p16 = burst_size_probabilities(16);
        assert_eq!(p16.len(), 5);
        assert!((1.0 / p16[0] - 1.2496).abs() < 1e-12);
        let p4 = burst_size_probabilities(4);
        assert!((1.0 / p4[0] - 1.24).abs() < 1e-12);
        assert_eq!(burst_size_probabilities(1), vec![1.0]);
        for w in p16.windows(2) {
            assert!((w[1] / w[0] - 0.2).abs() < 1e-12);
        }
        assert!((mean_burst_length(16) - 1.6496 / 1.2496).abs() < 1e-12);
    }

    #[test]
    fn q_from_rate_inverts_the_rate_formula() {
        for max in [1, 2, 4, 16, 1024] {
            for rate in [0.0, 0.001, 0.05, 0.2, max_burst_markov_loss_rate(max)] {
                let q = burst_markov_q(rate, max);
                assert!((0.0..=1.0 + 1e-12).contains(&q), "q = {q}");
                assert!((burst_markov_loss_rate(q, max) - rate).abs() < 1e-12);
            }
        }
        assert!((max_burst_markov_loss_rate(1) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn burst_markov_hits_target_loss_rate() {
        for (rate, max, seed, tolerance) in [
            (0.2, 16, 11, 0.004),
            (0.2, 4, 12, 0.004),
            (0.03, 4, 13, 0.002),
            (0.005, 16, 14, 0.001),
        ] {
            let q = burst_markov_q(rate, max);
            let pattern = run(
                &mut LossProcess::BurstMarkov(BurstMarkov::new(q, max)),
                seed,
                250_000,
            );
            let got = loss_rate(&pattern);
            assert!(
                (got - rate).abs() < tolerance,
                "max {max}: loss {got}, target {rate}"
            );
        }
    }

    #[test]
    fn burst_markov_bursts_are_powers_of_two_with_decaying_frequency() {
        for (max, seed) in [(16u32, 21), (4, 22)] {
            let q = burst_markov_q(0.2, max);
            let pattern = run(
                &mut LossProcess::BurstMarkov(BurstMarkov::new(q, max)),
                seed,
                400_000,
            );
            let runs = loss_runs(&pattern);
            assert!(runs.len() > 10_000);
            let probs = burst_size_probabilities(max);
            for (j, &p) in probs.iter().enumerate() {
                let count = runs.iter().filter(|&&r| r == 1 << j).count();
                assert_binomial(count, runs.len(), p, &format!("bursts of {}", 1 << j));
            }
            // Every run is one of those sizes.
            assert!(runs
                .iter()
                .all(|&r| r.is_power_of_two() && r <= max as usize));
            // The largest size does occur.
            assert!(runs.contains(&(max as usize)));
        }
    }

    #[test]
    fn burst_markov_starts_bursts_with_probability_q() {
        // After a delivered packet, the next is lost with probability q.
        let (q, max) = (0.3, 8);
        let pattern = run(
            &mut LossProcess::BurstMarkov(BurstMarkov::new(q, max)),
            31,
            200_000,
        );
        let after_delivery = pattern.windows(2).filter(|w| !w[0]).count();
        let starts = pattern.windows(2).filter(|w| !w[0] && w[1]).count();
        assert_binomial(starts, after_delivery, q, "burst starts");
    }

    #[test]
    fn burst_markov_extremes() {
        let never = run(
            &mut LossProcess::BurstMarkov(BurstMarkov::new(0.0, 16)),
            1,
            10_000,
        );
        assert!(!never.contains(&true));
        // q = 1, max 1: lose, deliver, lose, deliver...
        let always = run(
            &mut LossProcess::BurstMarkov(BurstMarkov::new(1.0, 1)),
            1,
            6,
        );
        assert_eq!(always, [true, false, true, false, true, false]);
    }
}
