//! The session's lifecycle beside its data path: its state, the named timers, the
//! handshake's hellos, liveness (idle timeout, keepalive), the reliable close, and what
//! a dead session hands to its successor. The decisions are made by the session; this
//! part keeps the state and the arithmetic of its deadlines.

use std::collections::HashMap;
use std::time::Duration;

use horde_policy::ChannelId;

use super::config::{ms, SessionConfig};
use crate::event::CloseReason;
use crate::stream::QueuedAdu;
use crate::timers::{Timer, TimerTable};

/// The peer is given up as unreachable only once every channel is dead (no ack for its
/// dead-man time), nothing at all has arrived from the peer for `UNREACHABLE_SILENCE`,
/// and at least `UNREACHABLE_UNANSWERED` packets that elicit an answer (data, pings,
/// probes) went out since it was last heard. A channel dies after a second or three
/// probe timeouts without an ack, which bursty loss of a quarter of the packets each way
/// reaches often when little is in flight (a keepalive and its two backed-off probes all
/// unanswered); a peer that still answers a fraction of the dead channels' probes (sent
/// every 50 ms for a second after a death) is not gone. With 44% of round trips failing,
/// sixteen unanswered in a row happen with odds of 2e-6; in a real outage with data in
/// flight the count is passed before the channels die, so detection waits for nothing
/// more than before, and on an idle session about 0.6 s more (`docs/architecture.md`,
/// "Unreachability").
pub(crate) const UNREACHABLE_SILENCE: Duration = Duration::from_millis(1000);
pub(crate) const UNREACHABLE_UNANSWERED: u64 = 16;
/// Local close in progress: `Close` is repeated until acknowledged or `deadline`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Closing {
    pub deadline: Duration,
    pub next_retry: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum State {
    #[default]
    Handshaking,
    Connected,
    /// Closed locally: `Close` is repeated until acknowledged or timed out; acks of
    /// data in flight are still taken.
    Closing,
    /// Closed by the peer (or replaced, or timed out): no more data either way;
    /// repeated `Close`s are answered until the drain time ends.
    Draining,
    Closed,
}

#[derive(Debug, Default)]
pub(super) struct Lifecycle {
    pub state: State,
    /// The named timers' deadlines.
    pub timers: TimerTable,
    /// When the hellos not yet answered are repeated.
    pub hello_due: Option<Duration>,
    /// Channels added after the handshake whose hello the peer has not acknowledged yet
    /// (client side); their hello is repeated every `hello_interval_ms`.
    pub unconfirmed: Vec<ChannelId>,
    /// Why the session ended, once it has.
    pub close_reason: Option<CloseReason>,
    /// Last authenticated packet from the peer (the idle timer's start).
    pub last_rx: Duration,
    /// Packets the channels had sent when the peer was last heard (`last_rx`).
    pub sent_at_rx: u64,
    /// Last packet sent (the keepalive timer's start).
    pub last_tx: Duration,
    pub closing: Option<Closing>,
    /// After the peer's `Close`: until when retransmitted `Close`s are still answered.
    pub drain_until: Option<Duration>,
    /// The runtime will hand this session's unfinished ADUs to a new session when it
    /// ends, so ending it must not nack them.
    pub successor_expected: bool,
    /// Payloads of in-flight ADUs of streams with [`InFlightPolicy::Resend`], by ADU id,
    /// kept until the ADU is acked or declared lost.
    ///
    /// [`InFlightPolicy::Resend`]: crate::InFlightPolicy::Resend
    pub resend: HashMap<u64, (u32, QueuedAdu)>,
    /// In-flight ADUs kept for the successor when the session ended, by stream.
    pub carried: Vec<(u32, QueuedAdu)>,
}

impl Lifecycle {
    pub fn new(now: Duration, config: &SessionConfig) -> Self {
        let mut life = Self {
            last_rx: now,
            last_tx: now,
            ..Self::default()
        };
        life.update_idle(config);
        life
    }

    pub fn idle_deadline(&self, config: &SessionConfig) -> Option<Duration> {
        (config.idle_timeout_ms > 0.0).then(|| self.last_rx + ms(config.idle_timeout_ms))
    }

    /// Move to `state`; the timers it runs start or stop.
    pub fn set_state(&mut self, state: State, config: &SessionConfig) {
        self.state = state;
        self.update_hello();
        self.update_idle(config);
        self.update_close();
        self.set(
            Timer::Drain,
            self.drain_until.filter(|_| state == State::Draining),
        );
        if matches!(state, State::Draining | State::Closed) {
            self.set(Timer::ZeroWindow, None);
        }
    }

    /// Something arrived from the peer at `now`: the idle timer starts over.
    pub fn heard(&mut self, now: Duration, config: &SessionConfig) {
        self.last_rx = now;
        self.update_idle(config);
    }

    /// Repeat the unanswered hellos at `at` (`None`: nothing to repeat).
    pub fn schedule_hellos(&mut self, at: Option<Duration>) {
        self.hello_due = at;
        self.update_hello();
    }

    /// A channel added after the handshake waits for the peer's answer to its hello.
    pub fn unconfirmed(&mut self, id: ChannelId) {
        self.unconfirmed.push(id);
        self.update_hello();
    }

    /// Channel `id` needs no more hellos: answered, or gone.
    pub fn confirmed(&mut self, id: ChannelId) {
        self.unconfirmed.retain(|&c| c != id);
        self.update_hello();
    }

    pub fn start_close(&mut self, now: Duration, config: &SessionConfig) {
        self.closing = Some(Closing {
            deadline: now + ms(config.close_timeout_ms),
            next_retry: now + ms(config.close_retry_ms),
        });
        self.update_close();
        self.update_idle(config);
    }

    /// The next repetition of an unacknowledged `Close` is at `at`.
    pub fn retry_close_at(&mut self, at: Duration) {
        if let Some(c) = self.closing.as_mut() {
            c.next_retry = at;
        }
        self.update_close();
    }

    /// The peer's limit holds data back: probe for a lost update at `at` (`None`: no
    /// longer held back). Only a session that still runs its data path probes.
    pub fn zero_window_probe_at(&mut self, at: Option<Duration>) {
        let runs = !matches!(self.state, State::Draining | State::Closed);
        self.set(Timer::ZeroWindow, at.filter(|_| runs));
    }

    fn set(&mut self, timer: Timer, at: Option<Duration>) {
        self.timers.set(timer, at);
    }

    /// Hellos repeat while handshaking, and after it while a channel added later is
    /// unconfirmed.
    fn update_hello(&mut self) {
        let runs = match self.state {
            State::Handshaking => true,
            State::Connected => !self.unconfirmed.is_empty(),
            State::Closing | State::Draining | State::Closed => false,
        };
        self.set(Timer::Hello, self.hello_due.filter(|_| runs));
    }

    /// The idle timeout runs until the session starts closing.
    fn update_idle(&mut self, config: &SessionConfig) {
        let runs = !matches!(self.state, State::Draining | State::Closed) && self.closing.is_none();
        let at = if runs {
            self.idle_deadline(config)
        } else {
            None
        };
        self.set(Timer::Idle, at);
    }

    fn update_close(&mut self) {
        let closing = self
            .closing
            .filter(|_| !matches!(self.state, State::Draining | State::Closed));
        self.set(Timer::CloseRetry, closing.map(|c| c.next_retry));
        self.set(Timer::CloseDeadline, closing.map(|c| c.deadline));
    }
}
