//! Up/down state of a channel: a scripted schedule plus runtime overrides.

use std::time::Duration;

/// At time `at` (since emulator start) the channel goes down (`down = true`) or up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleStep {
    pub at: Duration,
    pub down: bool,
}

/// Current up/down state, advanced lazily: the schedule is applied whenever the state
/// is queried, so no timer is needed for it. A runtime [`LinkState::set_down`] holds
/// until the next scheduled step.
#[derive(Debug, Clone)]
pub struct LinkState {
    steps: Vec<ScheduleStep>,
    next: usize,
    down: bool,
}

impl LinkState {
    /// A channel that starts up and follows `steps` (sorted here by time, stably).
    pub fn new(mut steps: Vec<ScheduleStep>) -> Self {
        steps.sort_by_key(|s| s.at);
        Self {
            steps,
            next: 0,
            down: false,
        }
    }

    /// Whether the channel is down at `now` (non-decreasing across calls).
    pub fn is_down(&mut self, now: Duration) -> bool {
        while let Some(step) = self.steps.get(self.next) {
            if step.at > now {
                break;
            }
            self.down = step.down;
            self.next += 1;
        }
        self.down
    }

    /// Force the state at `now`; later scheduled steps still apply when due.
    pub fn set_down(&mut self, now: Duration, down: bool) {
        self.is_down(now);
        self.down = down;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn follows_schedule_in_time_order() {
        let mut st = LinkState::new(vec![
            ScheduleStep {
                at: s(15),
                down: false,
            },
            ScheduleStep {
                at: s(10),
                down: true,
            },
        ]);
        assert!(!st.is_down(s(0)));
        assert!(!st.is_down(Duration::from_millis(9_999)));
        assert!(st.is_down(s(10)));
        assert!(st.is_down(Duration::from_millis(14_999)));
        assert!(!st.is_down(s(15)));
        assert!(!st.is_down(s(100)));
    }

    #[test]
    fn override_holds_until_next_step() {
        let mut st = LinkState::new(vec![ScheduleStep {
            at: s(10),
            down: false,
        }]);
        st.set_down(s(1), true);
        assert!(st.is_down(s(5)));
        assert!(!st.is_down(s(10)), "scheduled step wins when due");
        st.set_down(s(20), true);
        assert!(st.is_down(s(30)));
    }
}
