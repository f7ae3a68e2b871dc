//! CoDel (RFC 8289) on one packet queue: drop at dequeue once the sojourn time has stayed
//! above `target` for `interval`, then at a rate growing with the square root of the
//! number of drops, until the sojourn time falls below `target`.

use std::collections::VecDeque;
use std::time::Duration;

use crate::{Packet, QdiscError};

/// CoDel's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodelParams {
    /// Acceptable standing queue delay (RFC 8289: 5 ms).
    pub target: Duration,
    /// How long the delay may stay above `target` before dropping starts (100 ms).
    pub interval: Duration,
    /// A queue holding at most this many bytes is never dropped from (one MTU, 1514).
    pub mtu: u32,
}

impl Default for CodelParams {
    fn default() -> CodelParams {
        CodelParams {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            mtu: 1514,
        }
    }
}

impl CodelParams {
    pub(crate) fn validate(&self) -> Result<(), QdiscError> {
        if self.target.is_zero() {
            return Err(QdiscError::invalid("codel target", "positive", "0"));
        }
        if self.interval < self.target {
            return Err(QdiscError::invalid(
                "codel interval",
                format!("at least the target ({:?})", self.target),
                format!("{:?}", self.interval),
            ));
        }
        Ok(())
    }

    fn control_law(&self, t: Duration, count: u32) -> Duration {
        t + self.interval.div_f64(f64::from(count.max(1)).sqrt())
    }
}

/// CoDel's state for one queue.
#[derive(Debug, Clone, Default)]
pub(crate) struct Codel {
    /// When the sojourn time, above target since, will have been so for an interval.
    first_above_time: Option<Duration>,
    drop_next: Duration,
    count: u32,
    lastcount: u32,
    dropping: bool,
}

impl Codel {
    /// Pops the head of `queue` (whose bytes are `backlog`) and says whether it may be dropped.
    fn pop<T>(
        &mut self,
        params: &CodelParams,
        queue: &mut VecDeque<Packet<T>>,
        backlog: &mut u64,
        now: Duration,
    ) -> (Option<Packet<T>>, bool) {
        let Some(packet) = queue.pop_front() else {
            self.first_above_time = None;
            return (None, false);
        };
        *backlog -= u64::from(packet.len);
        let sojourn = now.saturating_sub(packet.arrival);
        let mut ok_to_drop = false;
        if sojourn < params.target || *backlog <= u64::from(params.mtu) {
            self.first_above_time = None;
        } else {
            match self.first_above_time {
                None => self.first_above_time = Some(now + params.interval),
                Some(t) => ok_to_drop = now >= t,
            }
        }
        (Some(packet), ok_to_drop)
    }

    /// The next packet of `queue` to send at `now`; dropped ones go to `drops`.
    pub(crate) fn dequeue<T>(
        &mut self,
        params: &CodelParams,
        queue: &mut VecDeque<Packet<T>>,
        backlog: &mut u64,
        now: Duration,
        drops: &mut Vec<Packet<T>>,
    ) -> Option<Packet<T>> {
        let (mut packet, mut ok_to_drop) = self.pop(params, queue, backlog, now);
        if packet.is_none() {
            self.dropping = false;
            return None;
        }
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
            }
            while self.dropping && now >= self.drop_next {
                drops.extend(packet.take());
                self.count = self.count.saturating_add(1);
                (packet, ok_to_drop) = self.pop(params, queue, backlog, now);
                if ok_to_drop {
                    self.drop_next = params.control_law(self.drop_next, self.count);
                } else {
                    self.dropping = false;
                }
            }
        } else if ok_to_drop {
            drops.extend(packet.take());
            (packet, _) = self.pop(params, queue, backlog, now);
            self.dropping = true;
            // Resume near the previous drop rate if the last dropping state ended recently.
            let delta = self.count.wrapping_sub(self.lastcount);
            self.count = 1;
            if delta > 1 && now.saturating_sub(self.drop_next) < params.interval * 16 {
                self.count = delta;
            }
            self.drop_next = params.control_law(now, self.count);
            self.lastcount = self.count;
        }
        packet
    }
}
