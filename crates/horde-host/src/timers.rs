//! The host's deadlines, per connection: when to send the next handshake initiation,
//! when to give the handshake up, and when its session's next timer is due. Each is set
//! or stopped where it changes, so the next one is always at hand and an idle
//! connection costs one entry, not a look per driver turn.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// Which of a connection's deadlines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Timer {
    /// The session's earliest timer (`Session::poll_timeout`), as read when the host
    /// last walked the connection.
    Session,
    /// The handshake is given up (checked before a resend due at the same time); on
    /// the responder's side, the wait for the hello ends.
    GiveUp,
    /// The initiation is sent (again).
    Resend,
}

#[derive(Debug, Default)]
pub(crate) struct TimerTable {
    at: HashMap<(u64, Timer), Duration>,
    queue: BTreeSet<(Duration, Timer, u64)>,
}

impl TimerTable {
    pub fn set(&mut self, conn: u64, timer: Timer, at: Duration) {
        if let Some(old) = self.at.insert((conn, timer), at) {
            if old == at {
                return;
            }
            self.queue.remove(&(old, timer, conn));
        }
        self.queue.insert((at, timer, conn));
    }

    pub fn stop(&mut self, conn: u64, timer: Timer) {
        if let Some(old) = self.at.remove(&(conn, timer)) {
            self.queue.remove(&(old, timer, conn));
        }
    }

    /// Set `timer` to `at`, or stop it when there is no deadline.
    pub fn set_or_stop(&mut self, conn: u64, timer: Timer, at: Option<Duration>) {
        match at {
            Some(at) => self.set(conn, timer, at),
            None => self.stop(conn, timer),
        }
    }

    /// The handshake's deadlines stop (the session's, if any, stays).
    pub fn stop_handshake(&mut self, conn: u64) {
        self.stop(conn, Timer::GiveUp);
        self.stop(conn, Timer::Resend);
    }

    pub fn stop_all(&mut self, conn: u64) {
        self.stop_handshake(conn);
        self.stop(conn, Timer::Session);
    }

    pub fn next(&self) -> Option<Duration> {
        self.queue.first().map(|e| e.0)
    }

    /// Every deadline due at `now`, removed from the table; a connection's give-up
    /// before its resend.
    pub fn expired(&mut self, now: Duration, out: &mut Vec<(u64, Timer)>) {
        while let Some(&(at, timer, conn)) = self.queue.first() {
            if at > now {
                break;
            }
            self.queue.pop_first();
            self.at.remove(&(conn, timer));
            out.push((conn, timer));
        }
        out.sort_by_key(|&(conn, timer)| (conn, timer));
    }

    /// Deadlines set (tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        debug_assert_eq!(self.at.len(), self.queue.len());
        self.at.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_moved_or_stopped_fires_once_at_its_last_time() {
        let ms = Duration::from_millis;
        let mut t = TimerTable::default();
        t.set(1, Timer::Resend, ms(10));
        t.set(1, Timer::Resend, ms(30));
        t.set(2, Timer::GiveUp, ms(20));
        t.set(3, Timer::Resend, ms(5));
        t.stop(3, Timer::Resend);
        assert_eq!(t.next(), Some(ms(20)));
        let mut due = Vec::new();
        t.expired(ms(25), &mut due);
        assert_eq!(due, vec![(2, Timer::GiveUp)]);
        due.clear();
        t.expired(ms(30), &mut due);
        assert_eq!(due, vec![(1, Timer::Resend)]);
        assert_eq!(t.next(), None);
    }

    #[test]
    fn a_session_deadline_set_again_at_the_same_time_stays_one_entry() {
        let ms = Duration::from_millis;
        let mut t = TimerTable::default();
        t.set_or_stop(1, Timer::Session, Some(ms(10)));
        t.set_or_stop(1, Timer::Session, Some(ms(10)));
        t.set(1, Timer::Resend, ms(10));
        assert_eq!(t.len(), 2);
        t.stop_handshake(1);
        assert_eq!(t.len(), 1);
        t.set_or_stop(1, Timer::Session, None);
        assert_eq!((t.len(), t.next()), (0, None));
        t.set(2, Timer::Session, ms(7));
        t.set(2, Timer::GiveUp, ms(7));
        let mut due = Vec::new();
        t.expired(ms(7), &mut due);
        assert_eq!(due, vec![(2, Timer::Session), (2, Timer::GiveUp)]);
    }
}
