//! The session's named timers: one deadline per [`Timer`], kept in a table so that
//! `Session::poll_timeout` is a minimum over it and `Session::handle_timeout` runs only
//! the timers that are due.
//!
//! The table is filled from the session's state, lazily: anything that may move a
//! deadline marks it stale, and the session refills it when a driver is done with it
//! for the moment (the last `poll_transmit` of a flush, or `handle_timeout`). A stale
//! table read through `&self` is computed on the spot and not kept.

use std::time::Duration;

/// Every timer a session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Repeat the hellos of the handshake, or of channels added after it.
    Hello,
    /// Nothing heard from the peer for the idle timeout: the session ends.
    Idle,
    /// Nothing sent for the keepalive interval: ping every channel.
    Keepalive,
    /// Repeat an unacknowledged `Close`.
    CloseRetry,
    /// Give up waiting for the peer's `CloseAck`.
    CloseDeadline,
    /// Stop answering a peer's repeated `Close`.
    Drain,
    /// Send again through the peer's zero window (the probe).
    ZeroWindow,
    /// The earliest of the channels' own timers: ack delay, loss detection, probe
    /// timeout, death and the probes of a dead channel.
    Channel,
    /// The earliest held ADU of an ordered stream whose gap waited long enough.
    Reorder,
    /// The earliest packet a loss-recovery stream's reorder cache holds past its wait.
    Recovery,
}

impl Timer {
    pub(crate) const ALL: [Timer; 10] = [
        Timer::Hello,
        Timer::Idle,
        Timer::Keepalive,
        Timer::CloseRetry,
        Timer::CloseDeadline,
        Timer::Drain,
        Timer::ZeroWindow,
        Timer::Channel,
        Timer::Reorder,
        Timer::Recovery,
    ];
}

/// One deadline per timer, and whether they still reflect the session's state.
#[derive(Debug)]
pub(crate) struct TimerTable {
    deadlines: Deadlines,
    stale: bool,
}

impl Default for TimerTable {
    fn default() -> Self {
        Self {
            deadlines: Deadlines::default(),
            stale: true,
        }
    }
}

impl TimerTable {
    /// Something may have moved a deadline: refill before the next read.
    pub fn invalidate(&mut self) {
        self.stale = true;
    }

    pub fn is_stale(&self) -> bool {
        self.stale
    }

    /// Replace every deadline (`fill` sets those that run) and mark the table current.
    pub fn refill(&mut self, fill: impl FnOnce(&mut Deadlines)) {
        let mut d = Deadlines::default();
        fill(&mut d);
        self.deadlines = d;
        self.stale = false;
    }

    /// The deadlines as last filled (stale or not).
    pub fn deadlines(&self) -> &Deadlines {
        &self.deadlines
    }

    /// Whether `timer` runs and its deadline has come.
    pub fn is_due(&self, timer: Timer, now: Duration) -> bool {
        self.deadlines.get(timer).is_some_and(|t| t <= now)
    }
}

/// A deadline per timer; `None` for timers that do not run.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Deadlines([Option<Duration>; Timer::ALL.len()]);

impl Deadlines {
    pub fn set(&mut self, timer: Timer, at: Option<Duration>) {
        self.0[timer as usize] = at;
    }

    pub fn get(&self, timer: Timer) -> Option<Duration> {
        self.0[timer as usize]
    }

    /// The earliest deadline of all.
    pub fn next(&self) -> Option<Duration> {
        self.0.iter().flatten().min().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    #[test]
    fn each_timer_is_due_at_its_deadline_and_not_before() {
        let mut table = TimerTable::default();
        assert!(table.is_stale());
        table.refill(|d| {
            for (i, t) in Timer::ALL.iter().enumerate() {
                d.set(*t, Some(ms(100 + 10 * i as u64)));
            }
        });
        assert!(!table.is_stale());
        assert_eq!(table.deadlines().next(), Some(ms(100)));
        for (i, t) in Timer::ALL.iter().enumerate() {
            let at = ms(100 + 10 * i as u64);
            assert!(!table.is_due(*t, at - Duration::from_nanos(1)), "{t:?}");
            assert!(table.is_due(*t, at), "{t:?}");
        }
        table.invalidate();
        assert!(table.is_stale());
    }

    #[test]
    fn a_refill_clears_the_timers_it_does_not_set() {
        let mut table = TimerTable::default();
        table.refill(|d| d.set(Timer::Idle, Some(ms(5))));
        table.refill(|d| d.set(Timer::Drain, Some(ms(9))));
        assert_eq!(table.deadlines().get(Timer::Idle), None);
        assert_eq!(table.deadlines().next(), Some(ms(9)));
        table.refill(|_| {});
        assert_eq!(table.deadlines().next(), None);
    }
}
