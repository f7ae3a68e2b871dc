//! Ending a session: the local close and its repetition, replacement, unreachability,
//! and what ending does with queued and in-flight ADUs.

use std::time::Duration;

use super::{ms, PendingTx, Session, State};
use crate::event::{CloseReason, Event, NackReason};

impl Session {
    /// Close the session: queued ADUs are nacked at once, and `Close` is repeated on
    /// every channel until the peer acknowledges it or `close_timeout_ms` passes. Acks
    /// for ADUs in flight are still taken meanwhile; what is still in flight at the end
    /// is nacked as [`NackReason::Abandoned`], then [`Event::Closed`] reports
    /// [`CloseReason::LocalClose`].
    pub fn close(&mut self, now: Duration) {
        self.life.timers.invalidate_derived();
        if self.is_closed() {
            return;
        }
        // Closed on purpose: no new session will take anything over.
        self.life.successor_expected = false;
        self.nack_queued();
        self.channels.queue_on_all(PendingTx::Close);
        self.life.set_state(State::Closing, &self.config);
        self.life.start_close(now, &self.config);
        if self.channels.is_empty() {
            self.finish(now, CloseReason::LocalClose);
        }
    }

    /// The peer refused the hello of this (client) session: it does not serve
    /// `service`. The session ends for good; nothing waits for a successor.
    pub(super) fn on_refused(&mut self, now: Duration, service: u32) {
        if !self.is_client || self.life.state != State::Handshaking || service != self.service {
            return;
        }
        self.life.timers.invalidate_derived();
        self.life.successor_expected = false;
        self.finish(now, CloseReason::ServiceRefused);
    }

    /// End the session because a new one with the same peer replaced it.
    pub fn replaced(&mut self, now: Duration) {
        self.life.timers.invalidate_derived();
        if !matches!(self.life.state, State::Closed | State::Draining) {
            self.finish(now, CloseReason::Replaced);
        }
    }

    /// End the session because the peer cannot be reached (the driver saw every channel
    /// die, or ICMP errors on every channel).
    pub fn unreachable(&mut self, now: Duration) {
        self.life.timers.invalidate_derived();
        if !matches!(self.life.state, State::Closed | State::Draining) {
            self.finish(now, CloseReason::Unreachable);
        }
    }

    /// Nack every queued ADU as [`NackReason::Closed`].
    pub(super) fn nack_queued(&mut self) {
        self.sender.take_back_plan();
        for s in self.sender.streams.values_mut() {
            for q in s.queue.drain(..) {
                self.events.push_back(Event::Nack {
                    stream: s.id,
                    adu: q.id,
                    stream_seq: q.seq,
                    channel: None,
                    reason: NackReason::Closed,
                });
            }
            s.queued_bytes = 0;
        }
    }

    /// The session has ended for `reason`: what is in flight is abandoned (nacked, or
    /// kept for the successor if its stream resends), queued ADUs are nacked unless a
    /// successor will take them, and the application hears [`Event::Closed`].
    pub(super) fn finish(&mut self, now: Duration, reason: CloseReason) {
        // ADUs held for slots later in the period are queued ADUs again.
        self.sender.take_back_plan();
        let mut out = Vec::new();
        for c in self.channels.iter_mut() {
            c.abandon(now, &mut out);
        }
        for r in &out {
            let Some(a) = r.adu else { continue };
            match self.life.resend.remove(&a.adu) {
                Some(kept) if self.life.successor_expected => self.life.carried.push(kept),
                _ => {
                    self.stats.adus_abandoned += 1;
                    self.events.push_back(Event::Nack {
                        stream: a.stream,
                        adu: a.adu,
                        stream_seq: a.stream_seq,
                        channel: None,
                        reason: NackReason::Abandoned,
                    });
                }
            }
        }
        self.life.resend.clear();
        if !self.life.successor_expected {
            self.nack_queued();
        }
        self.channels
            .retain_pending(|p| matches!(p, PendingTx::CloseAck(_) | PendingTx::Ack(..)));
        self.life.closing = None;
        let state = if reason == CloseReason::PeerClosed {
            self.life.drain_until = Some(now + ms(self.config.close_timeout_ms));
            State::Draining
        } else {
            State::Closed
        };
        self.life.set_state(state, &self.config);
        self.life.close_reason = Some(reason);
        // ADUs held for ordering were acknowledged on arrival: the application gets them
        // before it hears of the end.
        self.receiver.release_all();
        self.flush_delivered();
        self.events.push_back(Event::Closed { reason });
    }
}
