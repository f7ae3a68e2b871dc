//! An application that sends a workload's messages at their times (Table 2): each with
//! its class's priority and its timer; an early callback cancels the message.

use std::time::Duration;

use horde_proto::message::BandwidthEvent;

use super::host::{App, Ctx};
use super::workloads::{Arrival, Workload};

/// Replays `arrivals`.
pub struct Replay {
    workload: Workload,
    arrivals: Vec<Arrival>,
    next: usize,
    priorities: bool,
    timers: bool,
}

impl Replay {
    /// With `priorities` false, every message goes at one level; with `timers` false,
    /// the scheduler is not told the timers (no admission, no early callback: FIFO within
    /// a level), though a message still counts only if it arrives within its timer.
    pub fn new(workload: Workload, arrivals: Vec<Arrival>, priorities: bool, timers: bool) -> Self {
        Self {
            workload,
            arrivals,
            next: 0,
            priorities,
            timers,
        }
    }
}

impl App for Replay {
    fn next_wake(&self) -> Option<Duration> {
        self.arrivals.get(self.next).map(|a| a.at)
    }

    fn wake(&mut self, now: Duration, host: &mut Ctx<'_>) {
        while let Some(a) = self.arrivals.get(self.next).filter(|a| a.at <= now) {
            let priority = if self.priorities {
                self.workload.priority(a.class)
            } else {
                0
            };
            host.submit(now, a.class, priority, a.size, a.timer, self.timers);
            self.next += 1;
        }
    }

    fn on_bandwidth(&mut self, _now: Duration, _event: BandwidthEvent, _host: &mut Ctx<'_>) {}
}
