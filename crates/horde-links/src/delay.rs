//! Delay processes, applied after the loss process to packets that survive it.

use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

#[derive(Debug, Clone)]
pub(crate) enum DelayProcess {
    Constant(Duration),
    /// Normal(mean, sd) in ms, negative samples clipped to 0.
    Gaussian(Normal<f64>),
}

impl DelayProcess {
    /// `ms` must be finite and non-negative.
    pub(crate) fn constant_ms(ms: f64) -> DelayProcess {
        DelayProcess::Constant(from_ms(ms))
    }

    /// `mean_ms` and `sd_ms` must be finite, `sd_ms` non-negative.
    pub(crate) fn gaussian_ms(mean_ms: f64, sd_ms: f64) -> DelayProcess {
        DelayProcess::Gaussian(Normal::new(mean_ms, sd_ms).expect("validated: sd is finite"))
    }

    /// Delay of the next surviving packet.
    pub(crate) fn sample(&self, rng: &mut ChaCha8Rng) -> Duration {
        match self {
            DelayProcess::Constant(d) => *d,
            DelayProcess::Gaussian(normal) => from_ms(normal.sample(rng)),
        }
    }
}

/// Milliseconds to a duration: negative or NaN clip to 0, too large saturates.
fn from_ms(ms: f64) -> Duration {
    if ms.is_nan() || ms <= 0.0 {
        Duration::ZERO
    } else {
        Duration::try_from_secs_f64(ms / 1e3).unwrap_or(Duration::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn samples_ms(process: &DelayProcess, seed: u64, n: usize) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| process.sample(&mut rng).as_secs_f64() * 1e3)
            .collect()
    }

    fn mean_sd(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var.sqrt())
    }

    #[test]
    fn constant_is_constant() {
        let d = DelayProcess::constant_ms(20.5);
        assert!(samples_ms(&d, 1, 100)
            .iter()
            .all(|&ms| (ms - 20.5).abs() < 1e-9));
        assert_eq!(
            DelayProcess::constant_ms(0.0).sample(&mut ChaCha8Rng::seed_from_u64(0)),
            Duration::ZERO
        );
    }

    #[test]
    fn gaussian_mean_and_sd() {
        for (mean, sd, seed) in [(300.0, 15.0, 1), (600.0, 50.0, 2), (900.0, 100.0, 3)] {
            let xs = samples_ms(&DelayProcess::gaussian_ms(mean, sd), seed, 50_000);
            let (m, s) = mean_sd(&xs);
            // Standard errors: sd / sqrt(n) for the mean, about sd / sqrt(2n) for the sd.
            assert!((m - mean).abs() < 5.0 * sd / 50_000f64.sqrt(), "mean {m}");
            assert!((s - sd).abs() < 5.0 * sd / 100_000f64.sqrt(), "sd {s}");
            // Shape: about 68.3% within one sd.
            let within = xs.iter().filter(|x| (*x - mean).abs() < sd).count() as f64;
            assert!((within / 50_000.0 - 0.6827).abs() < 0.01);
        }
    }

    #[test]
    fn gaussian_clips_at_zero() {
        // Mean 0: half the samples would be negative; they become exactly 0.
        let xs = samples_ms(&DelayProcess::gaussian_ms(0.0, 10.0), 4, 20_000);
        assert!(xs.iter().all(|&x| x >= 0.0));
        let zeros = xs.iter().filter(|&&x| x == 0.0).count() as f64 / 20_000.0;
        assert!((zeros - 0.5).abs() < 0.02, "{zeros}");
        // Clipped mean of N(0, sd) is sd / sqrt(2 pi).
        let (m, _) = mean_sd(&xs);
        assert!(
            (m - 10.0 / (2.0 * std::f64::consts::PI).sqrt()).abs() < 0.2,
            "{m}"
        );
    }

    #[test]
    fn zero_sd_is_constant() {
        let xs = samples_ms(&DelayProcess::gaussian_ms(42.0, 0.0), 5, 100);
        assert!(xs.iter().all(|&x| (x - 42.0).abs() < 1e-9));
    }
}
