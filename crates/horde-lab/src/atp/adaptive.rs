//! The four-level adaptive application of the paper's §4.4 (Table 1). Every message has
//! a 1 s timer; level `n` alone needs `LEVEL_USAGE[n]` KB/s, so running levels 1..=n
//! needs 25, 125, 250 or 500 KB/s.
//!
//! - **Bandwidth notifications only** (modal): one mode per level. In mode `n` it sends
//!   levels 1..=n, all at one priority, and registers the range of mode `n` (from the
//!   upper bound of level `n − 1` to that of level `n`); when the estimate leaves it, it
//!   moves to the mode whose range holds the new estimate and registers that one.
//! - **Callbacks plus priorities**: every level all the time, level `n` at priority
//!   `n − 1`; an early callback cancels the message.
//!
//! The paper gives no message sizes; here each level sends one message every 100 ms, so
//! a message is a tenth of a second of its level's rate (2.5, 10, 12.5 and 25 KB).

use std::time::Duration;

use horde_proto::message::{BandwidthEvent, MessageId};
use serde::Serialize;

use super::host::{App, Ctx};
use super::traces::KB;

/// KB/s each level uses when all its messages are delivered (paper, Table 1's "usage").
pub const LEVEL_USAGE: [f64; 4] = [25.0, 100.0, 125.0, 250.0];
/// KB/s above which the next level starts (paper: "upper bound"; level 4 has none).
pub const LEVEL_UPPER: [f64; 3] = [100.0, 200.0, 400.0];
/// Every message's timer.
pub const TIMEOUT: Duration = Duration::from_secs(1);
/// How often each level sends a message.
pub const ROUND: Duration = Duration::from_millis(100);
/// The top of mode 4's range: a range must be finite.
const NO_LIMIT: f64 = 1e12;

/// How the application adapts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheme {
    /// Modes chosen by bandwidth notifications.
    Bandwidth,
    /// All levels at once, ranked by priority, timers cancel what cannot make it.
    Callbacks,
}

impl Ablation {
    /// Its name in tables ("" for none).
    pub fn name(self) -> &'static str {
        match self {
            Ablation::None => "",
            Ablation::NoPriorities => "no priorities",
            Ablation::NoTimers => "no timers",
            Ablation::NoNotifications => "no notifications",
        }
    }
}

impl Scheme {
    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Bandwidth => "bandwidth",
            Scheme::Callbacks => "callbacks",
        }
    }
}

/// A feature of the scheme turned off, to show what it is worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ablation {
    /// Nothing off.
    None,
    /// Callbacks: every level at the same priority.
    NoPriorities,
    /// Callbacks: no timers, so no admission control and no early callbacks (messages
    /// still count only if they arrive within 1 s).
    NoTimers,
    /// Bandwidth: no range is registered, so the application stays in mode 1.
    NoNotifications,
}

/// The application.
#[derive(Debug)]
pub struct Adaptive {
    scheme: Scheme,
    ablation: Ablation,
    mode: u8,
    next: Duration,
    until: Duration,
}

impl Adaptive {
    /// An application that sends until `until`.
    pub fn new(scheme: Scheme, ablation: Ablation, until: Duration) -> Self {
        Self {
            scheme,
            ablation,
            mode: match scheme {
                Scheme::Bandwidth => 1,
                Scheme::Callbacks => 4,
            },
            next: Duration::ZERO,
            until,
        }
    }

    /// The message size of level `level` (0-based), bytes.
    pub fn message_bytes(level: usize) -> u64 {
        (LEVEL_USAGE[level] * KB * ROUND.as_secs_f64()).round() as u64
    }

    /// The mode whose range holds `available` (bytes per second).
    pub fn mode_for(available: f64) -> u8 {
        let kbps = available / KB;
        1 + LEVEL_UPPER.iter().filter(|upper| kbps > **upper).count() as u8
    }

    /// The range of mode `mode`, bytes per second.
    pub fn range(mode: u8) -> (f64, f64) {
        let i = usize::from(mode - 1);
        let min = if i == 0 { 0.0 } else { LEVEL_UPPER[i - 1] * KB };
        let max = LEVEL_UPPER.get(i).map_or(NO_LIMIT, |u| u * KB);
        (min, max)
    }

    fn register(&self, host: &mut Ctx<'_>) {
        if self.scheme == Scheme::Bandwidth && self.ablation != Ablation::NoNotifications {
            let (min, max) = Self::range(self.mode);
            host.register(min, max);
        }
    }
}

impl App for Adaptive {
    fn next_wake(&self) -> Option<Duration> {
        (self.next < self.until).then_some(self.next)
    }

    fn wake(&mut self, now: Duration, host: &mut Ctx<'_>) {
        if now.is_zero() {
            self.register(host);
        }
        for level in 0..usize::from(self.mode) {
            let priority = match (self.scheme, self.ablation) {
                (Scheme::Callbacks, Ablation::NoPriorities) | (Scheme::Bandwidth, _) => 0,
                (Scheme::Callbacks, _) => level as u8,
            };
            let timer = self.ablation != Ablation::NoTimers;
            host.submit(
                now,
                level,
                priority,
                Self::message_bytes(level),
                TIMEOUT,
                timer,
            );
        }
        self.next += ROUND;
    }

    fn on_bandwidth(&mut self, _now: Duration, event: BandwidthEvent, host: &mut Ctx<'_>) {
        self.mode = Self::mode_for(event.available);
        self.register(host);
    }

    fn on_early(&mut self, now: Duration, id: MessageId, host: &mut Ctx<'_>) {
        host.cancel(now, id);
    }

    fn mode(&self) -> u8 {
        self.mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_follow_the_level_bounds() {
        assert_eq!(Adaptive::mode_for(0.0), 1);
        assert_eq!(Adaptive::mode_for(100_000.0), 1);
        assert_eq!(Adaptive::mode_for(100_001.0), 2);
        assert_eq!(Adaptive::mode_for(250_000.0), 3);
        assert_eq!(Adaptive::mode_for(900_000.0), 4);
        assert_eq!(Adaptive::range(1), (0.0, 100_000.0));
        assert_eq!(Adaptive::range(3), (200_000.0, 400_000.0));
        // The levels' cumulative needs: 25, 125, 250, 500 KB/s.
        let rounds = (Duration::from_secs(1).as_nanos() / ROUND.as_nanos()) as u64;
        let mut sum = 0;
        let cumulative: Vec<u64> = (0..4)
            .map(|l| {
                sum += Adaptive::message_bytes(l) * rounds;
                sum
            })
            .collect();
        assert_eq!(cumulative, [25_000, 125_000, 250_000, 500_000]);
    }
}
