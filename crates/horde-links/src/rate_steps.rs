//! Scripted rate changes: a bottleneck rate that is constant between given times.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::LinkError;
use crate::limits::MAX_RATE_KBPS;

/// One scripted rate of [`RateSpec::Steps`](crate::RateSpec::Steps).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateStep {
    /// When this rate starts, in seconds since the start of the run.
    pub at_s: f64,
    /// Rate in kbit/s; positive.
    pub kbps: f64,
}

/// Validated steps: (start, ns per byte), strictly increasing starts, the first at 0.
#[derive(Debug, Clone)]
pub(crate) struct RateSteps(Vec<(Duration, f64)>);

impl RateSteps {
    pub(crate) fn new(steps: &[RateStep]) -> Result<RateSteps, LinkError> {
        if steps.first().map(|s| s.at_s) != Some(0.0) {
            return Err(LinkError::invalid(
                "rate.steps",
                "a first step at at_s = 0",
                steps
                    .first()
                    .map_or("none".into(), |s| format!("at_s = {}", s.at_s)),
            ));
        }
        let mut out: Vec<(Duration, f64)> = Vec::with_capacity(steps.len());
        for s in steps {
            if !(s.kbps.is_finite() && s.kbps > 0.0 && s.kbps <= MAX_RATE_KBPS) {
                return Err(LinkError::invalid(
                    "rate.steps.kbps",
                    "a positive number of kbit/s, at most 100000000 (100 Gbit/s)",
                    s.kbps,
                ));
            }
            let at = Duration::try_from_secs_f64(s.at_s)
                .map_err(|_| LinkError::invalid("rate.steps.at_s", "a time in seconds", s.at_s))?;
            if out.last().is_some_and(|&(prev, _)| at <= prev) {
                return Err(LinkError::invalid(
                    "rate.steps.at_s",
                    "strictly increasing times",
                    s.at_s,
                ));
            }
            out.push((at, 8e6 / s.kbps));
        }
        Ok(RateSteps(out))
    }

    /// The index of the step in force at `t`.
    fn step_at(&self, t: Duration) -> usize {
        self.0.partition_point(|&(at, _)| at <= t).saturating_sub(1)
    }

    /// When a packet of `size` bytes whose serialization starts at `start` is done; a
    /// rate change during it applies to its remaining bytes.
    pub(crate) fn finish(&self, start: Duration, size: u32) -> Duration {
        let mut t = start;
        let mut bytes = f64::from(size);
        let mut i = self.step_at(t);
        loop {
            let ns_per_byte = self.0[i].1;
            // `as` saturates, so an absurdly slow rate just never finishes.
            let need = Duration::from_nanos((bytes * ns_per_byte).round() as u64);
            match self.0.get(i + 1) {
                Some(&(next, _)) if t.saturating_add(need) > next => {
                    bytes -= (next - t).as_nanos() as f64 / ns_per_byte;
                    t = next;
                    i += 1;
                }
                _ => return t.saturating_add(need),
            }
        }
    }

    /// Bytes the steps can serve in the first `duration`.
    pub(crate) fn capacity_bytes_until(&self, duration: Duration) -> u64 {
        let mut bytes = 0.0;
        for (i, &(at, ns_per_byte)) in self.0.iter().enumerate() {
            if at >= duration {
                break;
            }
            let end = self
                .0
                .get(i + 1)
                .map_or(duration, |&(n, _)| n.min(duration));
            bytes += (end - at).as_nanos() as f64 / ns_per_byte;
        }
        bytes as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(pairs: &[(f64, f64)]) -> Result<RateSteps, LinkError> {
        let v: Vec<RateStep> = pairs
            .iter()
            .map(|&(at_s, kbps)| RateStep { at_s, kbps })
            .collect();
        RateSteps::new(&v)
    }

    #[test]
    fn a_packet_spanning_a_change_finishes_at_the_new_rate() {
        // 8000 kbit/s = 1 byte/µs until 1 s, then 800 kbit/s = 0.1 byte/µs.
        let s = steps(&[(0.0, 8000.0), (1.0, 800.0)]).unwrap();
        let ms = Duration::from_millis;
        let us = Duration::from_micros;
        assert_eq!(s.finish(ms(0), 1000), us(1000));
        assert_eq!(s.finish(ms(2000), 1000), us(2_010_000));
        // 500 bytes before the change, the other 500 at a tenth of the speed.
        assert_eq!(s.finish(us(999_500), 1000), us(1_005_000));
        assert_eq!(s.capacity_bytes_until(ms(2000)), 1_000_000 + 100_000);
        assert_eq!(s.capacity_bytes_until(ms(500)), 500_000);
    }

    #[test]
    fn bad_steps_are_refused() {
        assert!(steps(&[]).is_err());
        assert!(steps(&[(1.0, 100.0)]).is_err());
        assert!(steps(&[(0.0, 100.0), (0.0, 200.0)]).is_err());
        assert!(steps(&[(0.0, 100.0), (2.0, 0.0)]).is_err());
        assert!(steps(&[(0.0, 100.0), (-1.0, 5.0)]).is_err());
        assert!(steps(&[(0.0, 100.0), (3.0, 5.0)]).is_ok());
    }
}
