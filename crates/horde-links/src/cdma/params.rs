//! Every number of the CDMA2000 1xRTT model, named as in scenario files.
//!
//! Sources and calibration of each default are in `docs/cdma.md`.

use serde::{Deserialize, Serialize};

use crate::error::LinkError;

/// Parameters of the demand-driven CDMA2000 1xRTT downlink scheduler.
///
/// ```toml
/// rate = { model = "cdma1x_rtt", fch_kbps = 9.6, sch_kbps = [19.2, 38.4, 76.8, 153.6] }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CdmaParams {
    /// Fundamental channel rate, held by every user with a backlog (kbit/s).
    pub fch_kbps: f64,
    /// Supplemental channel rates, ascending (kbit/s).
    pub sch_kbps: Vec<f64>,
    /// How many users of one sector may hold each SCH rate at once (same order).
    pub sch_holders: Vec<u32>,
    /// Total SCH rate one sector can hand out at once (its power budget, kbit/s).
    pub sector_sch_kbps: f64,
    /// Scheduler period: a user on the FCH is reconsidered this often (ms).
    pub decision_ms: f64,
    /// Shortest SCH burst once granted (ms).
    pub burst_min_ms: f64,
    /// Longest SCH burst once granted (ms); each burst's length is uniform in between.
    pub burst_max_ms: f64,
    /// Demand is the backlog divided by this horizon, rounded up to the next rate (ms).
    pub drain_horizon_ms: f64,
    /// Long-term limiter: served rate a user may keep up forever (kbit/s).
    pub sustained_kbps: f64,
    /// Long-term limiter: credit above `sustained_kbps` before the user is cut (kbit).
    pub sustained_budget_kbit: f64,
    /// Long-term limiter: how long a cut user gets `denied_kbps` (ms).
    pub deny_ms: f64,
    /// Rate of a cut user (kbit/s); 0 is the observed drop to zero.
    pub denied_kbps: f64,
    /// Long-term limiter: credit given back when a cut ends (kbit).
    pub resume_budget_kbit: f64,
    /// Burst limiter: credit for served bits above `burst_refill_kbps` (kbit).
    pub burst_budget_kbit: f64,
    /// Burst limiter: refill rate of that credit (kbit/s).
    pub burst_refill_kbps: f64,
    /// Burst limiter: the highest rate a user who spent its burst credit may get (kbit/s).
    pub burst_penalty_kbps: f64,
    /// Burst limiter: how long that cap lasts (ms).
    pub burst_penalty_ms: f64,
    /// Burst limiter applies when the sector's long-run mean of active calls is at least this.
    pub burst_limit_min_calls: f64,
    /// Long-run mean pilot Ec/Io at the user's location (dB).
    pub ecio_mean_db: f64,
    /// Standard deviation of the generated 1 s Ec/Io series around that mean (dB).
    pub ecio_sd_db: f64,
    /// Lag-1 correlation of the generated Ec/Io series.
    pub ecio_rho: f64,
    /// Long-run Ec/Io at or above which every SCH rate may be granted (dB).
    pub ecio_good_db: f64,
    /// Long-run Ec/Io below which only the two lowest SCH rates may be granted (dB);
    /// between good and poor the top rate is withheld.
    pub ecio_poor_db: f64,
    /// Long-run mean of active voice and data calls in the sector.
    pub calls_mean: f64,
    /// Most calls a sector carries (clamp of the generated load series).
    pub calls_max: u32,
}

impl Default for CdmaParams {
    fn default() -> Self {
        CdmaParams {
            fch_kbps: 9.6,
            sch_kbps: vec![19.2, 38.4, 76.8, 153.6],
            sch_holders: vec![8, 4, 2, 1],
            sector_sch_kbps: 153.6,
            decision_ms: 100.0,
            burst_min_ms: 200.0,
            burst_max_ms: 600.0,
            drain_horizon_ms: 500.0,
            sustained_kbps: 64.0,
            sustained_budget_kbit: 3584.0,
            deny_ms: 20_000.0,
            denied_kbps: 0.0,
            resume_budget_kbit: 640.0,
            burst_budget_kbit: 140.0,
            burst_refill_kbps: 64.0,
            burst_penalty_kbps: 9.6,
            burst_penalty_ms: 10_000.0,
            burst_limit_min_calls: 5.0,
            ecio_mean_db: -5.0,
            ecio_sd_db: 2.0,
            ecio_rho: 0.9,
            ecio_good_db: -7.0,
            ecio_poor_db: -11.0,
            calls_mean: 8.0,
            calls_max: 30,
        }
    }
}

impl CdmaParams {
    /// Check every parameter; names in errors are as written in TOML under `rate.`.
    pub fn validate(&self) -> Result<(), LinkError> {
        positive("rate.fch_kbps", self.fch_kbps)?;
        if self.sch_kbps.is_empty()
            || self.sch_kbps.iter().any(|r| !(r.is_finite() && *r > 0.0))
            || self.sch_kbps.windows(2).any(|w| w[0] >= w[1])
        {
            return Err(LinkError::invalid(
                "rate.sch_kbps",
                "a non-empty ascending list of positive rates",
                format!("{:?}", self.sch_kbps),
            ));
        }
        if self.sch_holders.len() != self.sch_kbps.len() || self.sch_holders.contains(&0) {
            return Err(LinkError::invalid(
                "rate.sch_holders",
                format!(
                    "{} positive counts, one per sch_kbps rate",
                    self.sch_kbps.len()
                ),
                format!("{:?}", self.sch_holders),
            ));
        }
        positive("rate.sector_sch_kbps", self.sector_sch_kbps)?;
        positive("rate.decision_ms", self.decision_ms)?;
        positive("rate.burst_min_ms", self.burst_min_ms)?;
        if !(self.burst_max_ms.is_finite() && self.burst_max_ms >= self.burst_min_ms) {
            return Err(LinkError::invalid(
                "rate.burst_max_ms",
                "at least burst_min_ms",
                self.burst_max_ms,
            ));
        }
        positive("rate.drain_horizon_ms", self.drain_horizon_ms)?;
        positive("rate.sustained_kbps", self.sustained_kbps)?;
        positive("rate.sustained_budget_kbit", self.sustained_budget_kbit)?;
        non_negative("rate.deny_ms", self.deny_ms)?;
        non_negative("rate.denied_kbps", self.denied_kbps)?;
        non_negative("rate.resume_budget_kbit", self.resume_budget_kbit)?;
        positive("rate.burst_budget_kbit", self.burst_budget_kbit)?;
        positive("rate.burst_refill_kbps", self.burst_refill_kbps)?;
        non_negative("rate.burst_penalty_kbps", self.burst_penalty_kbps)?;
        non_negative("rate.burst_penalty_ms", self.burst_penalty_ms)?;
        non_negative("rate.burst_limit_min_calls", self.burst_limit_min_calls)?;
        finite("rate.ecio_mean_db", self.ecio_mean_db)?;
        non_negative("rate.ecio_sd_db", self.ecio_sd_db)?;
        if !(0.0..1.0).contains(&self.ecio_rho) {
            return Err(LinkError::invalid(
                "rate.ecio_rho",
                "in [0, 1)",
                self.ecio_rho,
            ));
        }
        finite("rate.ecio_good_db", self.ecio_good_db)?;
        if !(self.ecio_poor_db.is_finite() && self.ecio_poor_db < self.ecio_good_db) {
            return Err(LinkError::invalid(
                "rate.ecio_poor_db",
                "below ecio_good_db",
                self.ecio_poor_db,
            ));
        }
        non_negative("rate.calls_mean", self.calls_mean)?;
        if f64::from(self.calls_max) < self.calls_mean {
            return Err(LinkError::invalid(
                "rate.calls_max",
                "at least calls_mean",
                self.calls_max,
            ));
        }
        Ok(())
    }

    /// How many SCH rates (from the lowest) the long-run channel quality allows.
    pub(crate) fn sch_levels_allowed(&self) -> usize {
        let n = self.sch_kbps.len();
        if self.ecio_mean_db >= self.ecio_good_db {
            n
        } else if self.ecio_mean_db >= self.ecio_poor_db {
            n.saturating_sub(1).max(1)
        } else {
            n.min(2)
        }
    }

    /// Whether the burst limiter guards this sector (its long-run load has other users).
    pub(crate) fn burst_limited(&self) -> bool {
        self.calls_mean >= self.burst_limit_min_calls
    }
}

fn finite(what: &'static str, x: f64) -> Result<f64, LinkError> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(LinkError::invalid(what, "a finite number", x))
    }
}

fn positive(what: &'static str, x: f64) -> Result<f64, LinkError> {
    if x.is_finite() && x > 0.0 {
        Ok(x)
    } else {
        Err(LinkError::invalid(what, "a positive number", x))
    }
}

fn non_negative(what: &'static str, x: f64) -> Result<f64, LinkError> {
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(LinkError::invalid(what, "a non-negative number", x))
    }
}
