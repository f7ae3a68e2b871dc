//! The session's named timers: one deadline per [`Timer`], kept in a table so that
//! `Session::poll_timeout` is a minimum over it and `Session::handle_timeout` runs only
//! the timers that are due.
//!
//! The lifecycle's timers (hellos, idle, close, drain, zero window) are set and stopped
//! where their deadline changes. The derived timers ([`Timer::DERIVED`]: the channels'
//! own timers, keepalive, reorder and recovery holds) are minima over state the
//! channels, streams and recovery layer keep to themselves; anything that may move one
//! marks them stale, and the session reads them again when a driver is done with it for
//! the moment (the last `poll_transmit` of a flush, or `handle_timeout`). Stale derived
//! deadlines read through `&self` are computed on the spot and not kept.

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

    /// The timers whose deadline is a minimum over the channels, streams or recovery
    /// layer, read from them rather than set.
    pub(crate) const DERIVED: [Timer; 4] = [
        Timer::Keepalive,
        Timer::Channel,
        Timer::Reorder,
        Timer::Recovery,
    ];
}

/// One deadline per timer, and whether the derived ones still reflect the session.
#[derive(Debug)]
pub(crate) struct TimerTable {
    deadlines: Deadlines,
    derived_stale: bool,
}

impl Default for TimerTable {
    fn default() -> Self {
        Self {
            deadlines: Deadlines::default(),
            derived_stale: true,
        }
    }
}

impl TimerTable {
    /// Run `timer` at `at`, or stop it (`None`).
    pub fn set(&mut self, timer: Timer, at: Option<Duration>) {
        self.deadlines.set(timer, at);
    }

    /// Something may have moved a derived deadline: read them again before they count.
    pub fn invalidate_derived(&mut self) {
        self.derived_stale = true;
    }

    pub fn derived_stale(&self) -> bool {
        self.derived_stale
    }

    /// Replace the derived deadlines (`fill` sets those that run) and mark them current.
    pub fn refresh_derived(&mut self, fill: impl FnOnce(&mut Deadlines)) {
        let mut d = Deadlines::default();
        fill(&mut d);
        for t in Timer::DERIVED {
            self.deadlines.set(t, d.get(t));
        }
        self.derived_stale = false;
    }

    /// The deadlines as they stand (the derived ones as last read, stale or not).
    pub fn deadlines(&self) -> &Deadlines {
        &self.deadlines
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

    /// Whether `timer` runs and its deadline has come.
    pub fn is_due(&self, timer: Timer, now: Duration) -> bool {
        self.get(timer).is_some_and(|t| t <= now)
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
        for (i, t) in Timer::ALL.iter().enumerate() {
            table.set(*t, Some(ms(100 + 10 * i as u64)));
        }
        let d = table.deadlines();
        assert_eq!(d.next(), Some(ms(100)));
        for (i, t) in Timer::ALL.iter().enumerate() {
            let at = ms(100 + 10 * i as u64);
            assert!(!d.is_due(*t, at - Duration::from_nanos(1)), "{t:?}");
            assert!(d.is_due(*t, at), "{t:?}");
        }
        table.set(Timer::Idle, None);
        assert!(!table.deadlines().is_due(Timer::Idle, ms(1000)));
    }

    #[test]
    fn a_refresh_replaces_the_derived_timers_only() {
        let mut table = TimerTable::default();
        assert!(table.derived_stale());
        table.set(Timer::Idle, Some(ms(50)));
        table.refresh_derived(|d| {
            d.set(Timer::Channel, Some(ms(5)));
            d.set(Timer::Idle, Some(ms(1)));
        });
        assert!(!table.derived_stale());
        assert_eq!(table.deadlines().get(Timer::Idle), Some(ms(50)));
        assert_eq!(table.deadlines().next(), Some(ms(5)));
        table.invalidate_derived();
        assert!(table.derived_stale());
        table.refresh_derived(|_| {});
        assert_eq!(table.deadlines().next(), Some(ms(50)));
    }
}
