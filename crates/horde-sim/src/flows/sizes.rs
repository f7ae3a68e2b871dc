//! Heavy-tailed web object sizes: the truncated lognormal of Lee and Gupta's HTTP
//! model, as tabulated in the CHAP dissertation (Table 6.1, "HTML object size":
//! μ = 7.90272, σ = 1.7643, at most 2 MB). See `docs/flows.md` for the source and for
//! why the mean computed here differs from the table's 11872 B.

use rand::Rng;
use rand_distr::{Distribution, LogNormal};

/// Location of ln(size) (Table 6.1, HTML object size).
pub const HTML_MU: f64 = 7.90272;
/// Scale of ln(size) (Table 6.1, HTML object size).
pub const HTML_SIGMA: f64 = 1.7643;
/// Largest object (Table 6.1: "Max 2 MB"; taken as 2·10^6 bytes).
pub const HTML_MAX_BYTES: u64 = 2_000_000;

/// A lognormal size distribution truncated to `[1, max]` bytes: draws above `max` are
/// redrawn, as a truncated (not clipped) distribution requires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TruncatedLogNormal {
    pub mu: f64,
    pub sigma: f64,
    pub max_bytes: u64,
}

impl TruncatedLogNormal {
    /// The HTML object size of Lee and Gupta's model.
    pub fn html() -> Self {
        TruncatedLogNormal {
            mu: HTML_MU,
            sigma: HTML_SIGMA,
            max_bytes: HTML_MAX_BYTES,
        }
    }

    /// Checked parameters (finite, `sigma > 0`, `max_bytes >= 1`).
    pub fn validate(&self) -> Result<(), String> {
        if !(self.mu.is_finite() && self.sigma.is_finite() && self.sigma > 0.0) {
            return Err(format!(
                "lognormal needs a finite mu and a positive sigma, got mu {} sigma {}",
                self.mu, self.sigma
            ));
        }
        if self.max_bytes == 0 {
            return Err("max_bytes must be at least 1".into());
        }
        // Most of the mass must lie below the cap, or redrawing would take forever.
        if normal_cdf(((self.max_bytes as f64).ln() - self.mu) / self.sigma) < 0.01 {
            return Err(format!(
                "max_bytes {} keeps less than 1% of the distribution",
                self.max_bytes
            ));
        }
        Ok(())
    }

    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let d = LogNormal::new(self.mu, self.sigma).expect("validated parameters");
        loop {
            let x = d.sample(rng);
            if x <= self.max_bytes as f64 {
                return (x.round() as u64).max(1);
            }
        }
    }

    /// The mean of the truncated distribution:
    /// `exp(μ + σ²/2) · Φ((ln M − μ − σ²)/σ) / Φ((ln M − μ)/σ)`.
    pub fn mean(&self) -> f64 {
        let ln_max = (self.max_bytes as f64).ln();
        let kept = normal_cdf((ln_max - self.mu) / self.sigma);
        let shifted = normal_cdf((ln_max - self.mu - self.sigma * self.sigma) / self.sigma);
        (self.mu + self.sigma * self.sigma / 2.0).exp() * shifted / kept
    }
}

/// The standard normal CDF, by Simpson's rule on the density (ample for sizing loads:
/// absolute error below 1e-9 over the range used).
pub fn normal_cdf(z: f64) -> f64 {
    if z.is_nan() {
        return f64::NAN;
    }
    let z = z.clamp(-12.0, 12.0);
    const STEPS: usize = 2_000;
    let h = z / STEPS as f64;
    let pdf = |x: f64| (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let mut sum = pdf(0.0) + pdf(z);
    for i in 1..STEPS {
        let w = if i % 2 == 1 { 4.0 } else { 2.0 };
        sum += w * pdf(i as f64 * h);
    }
    0.5 + sum * h / 3.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn normal_cdf_matches_known_values() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-12);
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
        assert!((normal_cdf(-1.0) - 0.158_655_25).abs() < 1e-7);
        assert!(normal_cdf(40.0) > 0.999_999);
    }

    #[test]
    fn sampled_mean_matches_the_formula_and_respects_the_cap() {
        let d = TruncatedLogNormal::html();
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let n = 400_000;
        let xs: Vec<u64> = (0..n).map(|_| d.sample(&mut rng)).collect();
        assert!(xs.iter().all(|&x| (1..=HTML_MAX_BYTES).contains(&x)));
        let mean = xs.iter().sum::<u64>() as f64 / n as f64;
        let expected = d.mean();
        assert!(
            (mean - expected).abs() / expected < 0.03,
            "{mean} vs {expected}"
        );
        // Heavy tail: the largest 1% of objects carry a large share of the bytes.
        let mut sorted = xs.clone();
        sorted.sort_unstable();
        let top: u64 = sorted[n * 99 / 100..].iter().sum();
        assert!(top as f64 / (mean * n as f64) > 0.25);
        // The median is exp(mu) (truncation removes almost nothing below it).
        let median = sorted[n / 2] as f64;
        assert!((median / HTML_MU.exp() - 1.0).abs() < 0.03, "{median}");
    }

    #[test]
    fn bad_parameters_are_refused() {
        let d = TruncatedLogNormal::html();
        assert!(d.validate().is_ok());
        assert!(TruncatedLogNormal { sigma: 0.0, ..d }.validate().is_err());
        assert!(TruncatedLogNormal { max_bytes: 0, ..d }.validate().is_err());
        assert!(TruncatedLogNormal { max_bytes: 2, ..d }.validate().is_err());
    }
}
