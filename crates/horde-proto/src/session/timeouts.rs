//! The session's timers: handshake repeats, channel timeouts and probes, reorder and
//! recovery holds, idle timeout, keepalives, close repetition and drain.

use std::time::Duration;

use super::flow::ZERO_WINDOW_PROBE;
use super::lifecycle::{UNREACHABLE_SILENCE, UNREACHABLE_UNANSWERED};
use super::{ms, PendingTx, Session, State};
use crate::event::{CloseReason, Event};
use crate::timers::{Deadlines, Timer};

/// The responder's keepalive interval in units of `keepalive_ms` (see
/// [`Session::keepalive_interval`]).
const RESPONDER_KEEPALIVE_FACTOR: u32 = 2;

impl Session {
    /// The work of [`Session::handle_timeout`]. Returns whether any timer ran.
    pub(super) fn run_due_timers(&mut self, now: Duration) -> bool {
        // Which timers are due is decided once, from the table as it stands: running one
        // may move the others' deadlines, and those wait for the next call.
        let table = *self.life.timers.deadlines();
        let due = |t| table.is_due(t, now);
        let (channels_due, reorder_due) = (due(Timer::Channel), due(Timer::Reorder));
        let recovery_due = due(Timer::Recovery);
        let hello_due = self.life.hello_due.is_some_and(|t| t <= now);
        let lifecycle_due = [
            Timer::Idle,
            Timer::Keepalive,
            Timer::CloseRetry,
            Timer::CloseDeadline,
            Timer::Drain,
            Timer::ZeroWindow,
        ]
        .into_iter()
        .any(due);
        if !self.lifecycle_timers(now, &table) {
            return lifecycle_due;
        }
        if !(hello_due || channels_due || reorder_due || recovery_due) {
            return lifecycle_due;
        }
        if self.life.hello_due.is_some_and(|t| t <= now) {
            self.repeat_hellos(now);
        }
        let mut out = std::mem::take(&mut self.resolved);
        for idx in 0..self.channels.len() {
            if !channels_due || self.channels[idx].next_timeout().is_none_or(|t| t > now) {
                continue;
            }
            out.clear();
            let actions = self.channels[idx].on_timeout(now, &mut out);
            let id = self.channels[idx].id;
            self.on_resolved(now, id, &out);
            if actions.died {
                self.events.push_back(Event::ChannelDown { channel: id });
            }
            if actions.probe && matches!(self.life.state, State::Connected | State::Closing) {
                let ts = self.send_ts(now);
                self.channels.ping(idx, now, ts);
            }
        }
        self.resolved = out;
        if reorder_due {
            let hold = ms(self.config.reorder_hold_ms);
            self.receiver.on_reorder_timeout(now, hold);
            self.flush_delivered();
        }
        if recovery_due {
            self.recovery_timeouts(now);
            self.flush_delivered();
        }
        true
    }

    /// Idle timeout, keepalive, close repetition and drain. Returns whether the session
    /// still runs its other timers.
    pub(super) fn lifecycle_timers(&mut self, now: Duration, table: &Deadlines) -> bool {
        match self.life.state {
            State::Closed => return false,
            State::Draining => {
                if table.is_due(Timer::Drain, now) {
                    self.life.drain_until = None;
                    self.life.set_state(State::Closed, &self.config);
                }
                return false;
            }
            State::Closing => {
                if self.life.closing.is_some() {
                    if table.is_due(Timer::CloseDeadline, now) {
                        self.finish(now, CloseReason::LocalClose);
                        return false;
                    }
                    if table.is_due(Timer::CloseRetry, now) {
                        self.channels.queue_on_all(PendingTx::Close);
                        let retry = ms(self.config.close_retry_ms).max(Duration::from_millis(1));
                        self.life.retry_close_at(now + retry);
                    }
                }
            }
            State::Handshaking | State::Connected => {
                if table.is_due(Timer::Idle, now) {
                    self.finish(now, CloseReason::IdleTimeout);
                    return false;
                }
                if self.life.state == State::Connected && table.is_due(Timer::Keepalive, now) {
                    let interval = self.keepalive_interval();
                    for idx in 0..self.channels.len() {
                        if self.channels[idx].last_sent() + interval > now {
                            continue;
                        }
                        let ts = self.send_ts(now);
                        self.channels.ping(idx, now, ts);
                    }
                    self.life.last_tx = now;
                }
            }
        }
        if self.life.state != State::Connected && table.is_due(Timer::ZeroWindow, now) {
            // Only a connected session probes a shut window: a closing one's probe
            // deadline, left due, would be reported as due at every call.
            self.life.zero_window_probe_at(None);
        }
        if self.life.state == State::Connected && self.receiver.flow.probe_due(now) {
            // Held back by the peer's limit for a while: its update may have been lost.
            // A ping on every live channel asks for the limit again; being no data, it
            // cannot overrun a full receiver.
            for idx in 0..self.channels.len() {
                if !self.channels[idx].is_alive() {
                    continue;
                }
                let ts = self.send_ts(now);
                self.channels.ping(idx, now, ts);
            }
            if let Some(b) = self.receiver.flow.blocked.as_mut() {
                b.since = now;
                self.life
                    .zero_window_probe_at(Some(now + ZERO_WINDOW_PROBE));
            }
        }
        true
    }

    /// Whether a connected session should give its peer up as unreachable: every
    /// channel is dead, and the peer has stayed silent for [`UNREACHABLE_SILENCE`] while
    /// at least [`UNREACHABLE_UNANSWERED`] packets went out to it. Dead channels alone
    /// are not enough: under heavy bursty loss a channel dies whenever a keepalive and
    /// its few backed-off probes are all lost, while the peer still answers a share of
    /// the probes that follow. The runtime asks this after every flush and, for a
    /// connection that reconnects, handshakes again when it holds.
    pub fn peer_unreachable(&self, now: Duration) -> bool {
        self.life.state == State::Connected
            && !self.channels.is_empty()
            && self.channels.iter().all(|c| !c.is_alive())
            && now.saturating_sub(self.life.last_rx) >= UNREACHABLE_SILENCE
            && self
                .channels
                .packets_sent()
                .saturating_sub(self.life.sent_at_rx)
                >= UNREACHABLE_UNANSWERED
    }

    /// Each channel is pinged once it has sent nothing for the keepalive interval, not
    /// only when the whole session is quiet: a channel the scheduler leaves unused (its
    /// peer prefers another) must still tell the peer where it is after an address
    /// change, and find out whether it still works. Otherwise one channel's traffic, or
    /// a dead channel's probes, hides another channel's silence until the session idles
    /// out (`docs/tunnel.md`, "The download test's stall").
    pub(super) fn keepalive_deadline(&self) -> Option<Duration> {
        if self.config.keepalive_ms <= 0.0 {
            return None;
        }
        self.channels.keepalive_deadline(self.keepalive_interval())
    }

    /// How long a channel stays silent before this end pings it. The initiator pings
    /// after `keepalive_ms`; the responder waits twice as long, so that the initiator's
    /// pings, which it acknowledges, keep it from pinging at all: an idle channel costs a
    /// ping and an ack per interval, not a ping and an ack from each end. The responder
    /// still pings a peer that does not (its keepalive off or longer), and never waits so
    /// long that less than one interval would remain before its own idle timeout. Each
    /// end still notices a vanished peer: the responder by its idle timeout, the
    /// initiator by its unanswered pings.
    fn keepalive_interval(&self) -> Duration {
        let interval = ms(self.config.keepalive_ms);
        if self.is_client {
            return interval;
        }
        let mut wait = interval * RESPONDER_KEEPALIVE_FACTOR;
        if self.config.idle_timeout_ms > 0.0 {
            let before_idle = ms(self.config.idle_timeout_ms).saturating_sub(interval);
            wait = wait.min(before_idle.max(interval));
        }
        wait
    }

    /// Read the derived timers again from the channels, streams and recovery layer.
    pub(super) fn refresh_derived_timers(&mut self) {
        let mut d = *self.life.timers.deadlines();
        self.fill_derived_timers(&mut d);
        self.life.timers.refresh_derived(|table| *table = d);
    }

    /// The derived timers' deadlines ([`Timer::DERIVED`]), from the parts: none once the
    /// session is draining or closed, no keepalive unless connected and not closing.
    pub(super) fn fill_derived_timers(&self, d: &mut Deadlines) {
        let runs = !matches!(self.life.state, State::Draining | State::Closed);
        let keepalive = runs && self.life.state == State::Connected && self.life.closing.is_none();
        d.set(
            Timer::Keepalive,
            self.keepalive_deadline().filter(|_| keepalive),
        );
        let hold = ms(self.config.reorder_hold_ms);
        let (channels, held, recovery) = if runs {
            (
                self.channels.next_timeout(),
                self.receiver.next_timeout(hold),
                self.recovery.next_timeout(),
            )
        } else {
            (None, None, None)
        };
        d.set(Timer::Channel, channels);
        d.set(Timer::Reorder, held);
        d.set(Timer::Recovery, recovery);
    }
}
