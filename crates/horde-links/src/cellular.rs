//! Synthetic cellular-like Mahimahi traces.
//!
//! Measured LTE uplinks (the Saturatr traces of the Sprout study, replayed by Mahimahi)
//! are neither constant nor white noise: the rate sits at one level for seconds, jumps to
//! another, wanders around it by tens of percent from one 100 ms to the next, and now and
//! then drops to nothing for a fraction of a second. [`generate`] produces traces with that
//! structure from a seed:
//!
//! 1. **Rate states.** A Markov chain over a few [`RateState`]s, each a relative level
//!    held for an exponentially distributed dwell time; at the end of a dwell the chain
//!    moves to one of the other states, chosen uniformly.
//! 2. **Fading within a state.** The level is multiplied by a log-normal factor
//!    `exp(σ·z − σ²/2)` (mean 1) whose `z` is a unit-variance AR(1) process updated every
//!    [`FADING_STEP_MS`], with correlation time `fading_coherence_ms`.
//! 3. **Outages.** Periods of `outage_min_ms..=outage_max_ms` (uniform) with no delivery
//!    opportunity, starting on average every `outage_interval_s`.
//! 4. **Opportunities.** The resulting rate curve is scaled so that its integral over the
//!    trace is exactly `mean_mbps` (a 60 s trace holds only a few dozen state dwells, so
//!    the raw curve's mean would wander by tens of percent); each millisecond then gets a
//!    Poisson number of 1500-byte opportunities with that mean.
//!
//! Each of the four parts draws from its own stream of one `ChaCha8Rng`, so a trace is a
//! pure function of the parameters, the duration and the seed. See `docs/traces.md`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Poisson, StandardNormal};
use serde::{Deserialize, Serialize};

use crate::error::CellularError;
use crate::trace::{Trace, OPPORTUNITY_BYTES};

/// How often the fading factor is redrawn, in ms.
pub const FADING_STEP_MS: u64 = 10;

/// Longest trace [`generate`] makes: one day, in ms.
pub const MAX_DURATION_MS: u64 = 24 * 3600 * 1000;

/// Highest mean rate [`generate`] accepts, in Mbit/s.
pub const MAX_MEAN_MBPS: f64 = 1000.0;

/// RNG streams, one per part of the process, so each part is independent of the others'
/// parameters.
const STATE_STREAM: u64 = 1;
const FADING_STREAM: u64 = 2;
const OUTAGE_STREAM: u64 = 3;
const OPPORTUNITY_STREAM: u64 = 4;

/// One level of the rate chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateState {
    /// Rate in this state relative to the others (only ratios matter: the whole curve is
    /// scaled to the requested mean). Positive.
    pub level: f64,
    /// Mean time spent in the state per visit, in seconds (exponentially distributed).
    /// Positive.
    pub dwell_s: f64,
}

/// Parameters of the cellular trace process. Every field has a default, so a TOML table
/// may give only the ones it changes.
///
/// ```toml
/// mean_mbps = 6
/// fading_sigma = 0.5
/// outage_interval_s = 10
/// states = [{ level = 0.3, dwell_s = 1 }, { level = 1, dwell_s = 3 }]
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CellularParams {
    /// Long-run capacity of the trace in Mbit/s (10^6 bit/s).
    pub mean_mbps: f64,
    /// The rate chain's states; at least one.
    pub states: Vec<RateState>,
    /// Standard deviation of the log of the fading factor within a state.
    pub fading_sigma: f64,
    /// Correlation time of the fading factor, in ms.
    pub fading_coherence_ms: f64,
    /// Mean time between outage starts, in seconds.
    pub outage_interval_s: f64,
    /// Shortest outage, in ms.
    pub outage_min_ms: u64,
    /// Longest outage, in ms.
    pub outage_max_ms: u64,
}

impl Default for CellularParams {
    fn default() -> Self {
        CellularParams {
            mean_mbps: 6.0,
            // Poor, fair, good and excellent coverage: a 7:1 spread between the extremes,
            // with the good state the most common.
            states: vec![
                RateState {
                    level: 0.3,
                    dwell_s: 1.0,
                },
                RateState {
                    level: 0.7,
                    dwell_s: 2.0,
                },
                RateState {
                    level: 1.2,
                    dwell_s: 3.0,
                },
                RateState {
                    level: 2.0,
                    dwell_s: 1.5,
                },
            ],
            fading_sigma: 0.55,
            fading_coherence_ms: 300.0,
            outage_interval_s: 8.0,
            outage_min_ms: 100,
            outage_max_ms: 1000,
        }
    }
}

impl CellularParams {
    /// The defaults with another mean rate.
    pub fn with_mean_mbps(mean_mbps: f64) -> Self {
        CellularParams {
            mean_mbps,
            ..CellularParams::default()
        }
    }

    /// Check every parameter; errors read like `mean_mbps must be ..., got -1`.
    pub fn validate(&self) -> Result<(), CellularError> {
        let positive = |what: &'static str, v: f64| {
            if v > 0.0 && v.is_finite() {
                Ok(())
            } else {
                Err(CellularError::invalid(what, "a positive number", v))
            }
        };
        if !(self.mean_mbps > 0.0 && self.mean_mbps <= MAX_MEAN_MBPS) {
            return Err(CellularError::invalid(
                "mean_mbps",
                format!("a positive number of Mbit/s, at most {MAX_MEAN_MBPS}"),
                self.mean_mbps,
            ));
        }
        if self.states.is_empty() {
            return Err(CellularError::invalid(
                "states",
                "at least one state",
                "none",
            ));
        }
        for state in &self.states {
            positive("states.level", state.level)?;
            positive("states.dwell_s", state.dwell_s)?;
        }
        if !(self.fading_sigma >= 0.0 && self.fading_sigma <= 3.0) {
            return Err(CellularError::invalid(
                "fading_sigma",
                "a number in [0, 3]",
                self.fading_sigma,
            ));
        }
        positive("fading_coherence_ms", self.fading_coherence_ms)?;
        positive("outage_interval_s", self.outage_interval_s)?;
        if self.outage_min_ms == 0 || self.outage_min_ms > self.outage_max_ms {
            return Err(CellularError::invalid(
                "outage_min_ms",
                format!(
                    "at least 1 and at most outage_max_ms ({})",
                    self.outage_max_ms
                ),
                self.outage_min_ms,
            ));
        }
        Ok(())
    }
}

/// Generate a trace of `duration_ms` milliseconds (its period) from `params` and `seed`.
///
/// Opportunities fall in milliseconds `1..=duration_ms` (never at 0, which would double
/// up with the period when the trace repeats); the last line is always `duration_ms`, so
/// the trace repeats with exactly that period.
pub fn generate(
    params: &CellularParams,
    duration_ms: u64,
    seed: u64,
) -> Result<Trace, CellularError> {
    params.validate()?;
    if duration_ms == 0 || duration_ms > MAX_DURATION_MS {
        return Err(CellularError::invalid(
            "duration",
            format!("between 1 ms and {MAX_DURATION_MS} ms"),
            format!("{duration_ms} ms"),
        ));
    }
    let rng = |stream| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        rng
    };
    let steps = duration_ms.div_ceil(FADING_STEP_MS) as usize;
    let mut rate = state_levels(params, steps, &mut rng(STATE_STREAM));
    apply_fading(params, &mut rate, &mut rng(FADING_STREAM));
    let outages = outages(params, duration_ms, &mut rng(OUTAGE_STREAM));

    // Per-millisecond relative rate: the step's value, or 0 inside an outage.
    let relative = |ms: u64, outage: &mut std::iter::Peekable<std::slice::Iter<'_, (u64, u64)>>| {
        while outage.peek().is_some_and(|&&(_, end)| end < ms) {
            outage.next();
        }
        match outage.peek() {
            Some(&&(start, end)) if (start..=end).contains(&ms) => 0.0,
            _ => rate[((ms - 1) / FADING_STEP_MS) as usize],
        }
    };
    let total: f64 = {
        let mut outage = outages.iter().peekable();
        (1..=duration_ms).map(|ms| relative(ms, &mut outage)).sum()
    };
    let opportunities_per_ms =
        params.mean_mbps * 1e6 / (f64::from(OPPORTUNITY_BYTES) * 8.0) / 1000.0;
    // All outages (an absurd parameter set): nothing to scale, only the closing line.
    let scale = if total > 0.0 {
        opportunities_per_ms * duration_ms as f64 / total
    } else {
        0.0
    };

    let mut draw = rng(OPPORTUNITY_STREAM);
    let mut opportunities = Vec::new();
    let mut outage = outages.iter().peekable();
    for ms in 1..=duration_ms {
        let mean = scale * relative(ms, &mut outage);
        let count = match Poisson::new(mean) {
            Ok(poisson) => poisson.sample(&mut draw) as u64,
            Err(_) => 0, // mean 0
        };
        opportunities.extend(std::iter::repeat_n(ms, count as usize));
    }
    if opportunities.last() != Some(&duration_ms) {
        opportunities.push(duration_ms);
    }
    Ok(Trace::from_sorted(opportunities))
}

/// The rate chain's level for each fading step.
fn state_levels(params: &CellularParams, steps: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
    let states = &params.states;
    // Start in the chain's stationary distribution: with uniform jumps every state is
    // entered equally often, so time in a state is proportional to its dwell.
    let total_dwell: f64 = states.iter().map(|s| s.dwell_s).sum();
    let mut pick = rng.gen::<f64>() * total_dwell;
    let mut current = states.len() - 1;
    for (i, s) in states.iter().enumerate() {
        if pick < s.dwell_s {
            current = i;
            break;
        }
        pick -= s.dwell_s;
    }
    let mut levels = Vec::with_capacity(steps);
    let mut left_ms = dwell_ms(&states[current], rng);
    for _ in 0..steps {
        while left_ms <= 0.0 {
            if states.len() > 1 {
                let other = rng.gen_range(0..states.len() - 1);
                current = if other >= current { other + 1 } else { other };
            }
            left_ms += dwell_ms(&states[current], rng);
        }
        levels.push(states[current].level);
        left_ms -= FADING_STEP_MS as f64;
    }
    levels
}

fn dwell_ms(state: &RateState, rng: &mut ChaCha8Rng) -> f64 {
    Exp::new(1.0 / (state.dwell_s * 1000.0))
        .expect("dwell_s is validated positive")
        .sample(rng)
}

/// Multiply each step by a mean-1 log-normal factor driven by a unit-variance AR(1).
fn apply_fading(params: &CellularParams, rate: &mut [f64], rng: &mut ChaCha8Rng) {
    let sigma = params.fading_sigma;
    let rho = (-(FADING_STEP_MS as f64) / params.fading_coherence_ms).exp();
    let innovation = (1.0 - rho * rho).sqrt();
    let mut z: f64 = rng.sample(StandardNormal);
    for r in rate.iter_mut() {
        *r *= (sigma * z - sigma * sigma / 2.0).exp();
        let e: f64 = rng.sample(StandardNormal);
        z = rho * z + innovation * e;
    }
}

/// Outages as inclusive millisecond ranges, in order and disjoint.
fn outages(params: &CellularParams, duration_ms: u64, rng: &mut ChaCha8Rng) -> Vec<(u64, u64)> {
    let gap = Exp::new(1.0 / (params.outage_interval_s * 1000.0))
        .expect("outage_interval_s is validated positive");
    let mut out = Vec::new();
    let mut at = gap.sample(rng);
    while at < duration_ms as f64 {
        let start = at as u64 + 1;
        let length = rng.gen_range(params.outage_min_ms..=params.outage_max_ms);
        let end = start + length - 1;
        out.push((start, end));
        // The next outage starts after this one ends.
        at = end as f64 + gap.sample(rng);
    }
    out
}

#[cfg(test)]
mod tests;
