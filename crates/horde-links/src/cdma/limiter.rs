//! The per-user rate limiter of the CDMA2000 scheduler (thesis 003 §6.1.5).
//!
//! Two credit buckets charged with the bits a user was actually served:
//!
//! - the **long-term** bucket refills at `sustained_kbps`; a user who empties it (a
//!   source well above ~60 kbit/s for tens of seconds) is cut to `denied_kbps` for
//!   `deny_ms`, earning nothing meanwhile, and resumes with `resume_budget_kbit`;
//! - the **burst** bucket refills at `burst_refill_kbps` and is small; a user who empties
//!   it (a long burst at a high rate) is capped at `burst_penalty_kbps` for
//!   `burst_penalty_ms`. It guards only sectors whose long-run load has other users.
//!
//! Denial thus grows with both the intensity and the duration of past service, as the
//! thesis infers; the two buckets are needed because a 4 s burst at 115.2 kbit/s is
//! refused while 40 s at 153.6 kbit/s in an empty sector is not (docs/cdma.md).

use std::time::Duration;

use super::params::CdmaParams;

#[derive(Debug, Clone)]
pub(crate) struct Limiter {
    sustained_kbit: f64,
    burst_kbit: f64,
    denied_until: Option<Duration>,
    capped_until: Option<Duration>,
    /// Cuts and caps so far.
    pub(crate) denials: u32,
    pub(crate) caps: u32,
}

impl Limiter {
    pub(crate) fn new(p: &CdmaParams) -> Limiter {
        Limiter {
            sustained_kbit: p.sustained_budget_kbit,
            burst_kbit: p.burst_budget_kbit,
            denied_until: None,
            capped_until: None,
            denials: 0,
            caps: 0,
        }
    }

    /// Charge `served_kbit` served over the `dt` seconds that end at `now`.
    pub(crate) fn charge(&mut self, p: &CdmaParams, now: Duration, dt: f64, served_kbit: f64) {
        if let Some(until) = self.denied_until {
            if now >= until {
                self.denied_until = None;
                self.sustained_kbit = p.resume_budget_kbit;
            }
        }
        if let Some(until) = self.capped_until {
            if now >= until {
                self.capped_until = None;
            }
        }
        if self.denied_until.is_none() {
            self.sustained_kbit = (self.sustained_kbit + p.sustained_kbps * dt - served_kbit)
                .min(p.sustained_budget_kbit);
            if self.sustained_kbit <= 0.0 {
                self.sustained_kbit = 0.0;
                self.denied_until = Some(now + ms(p.deny_ms));
                self.denials += 1;
            }
        }
        self.burst_kbit =
            (self.burst_kbit + p.burst_refill_kbps * dt - served_kbit).min(p.burst_budget_kbit);
        if self.burst_kbit <= 0.0 {
            self.burst_kbit = 0.0;
            if p.burst_limited() && self.capped_until.is_none() {
                self.capped_until = Some(now + ms(p.burst_penalty_ms));
                self.caps += 1;
            }
        }
    }

    /// The highest rate the user may have at `now`, if the limiter restricts it.
    pub(crate) fn ceiling_kbps(&self, p: &CdmaParams, now: Duration) -> Option<f64> {
        if self.denied_until.is_some_and(|t| now < t) {
            Some(p.denied_kbps)
        } else if self.capped_until.is_some_and(|t| now < t) {
            Some(p.burst_penalty_kbps)
        } else {
            None
        }
    }
}

pub(crate) fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x.max(0.0) / 1e3)
}
