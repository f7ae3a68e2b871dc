//! Handing a session's streams to its successor when the runtime reconnects: whether
//! ending keeps them, taking them over, and giving them up when no successor comes.

use std::time::Duration;

use super::Session;
use crate::event::{Event, NackReason};
use crate::recovery::{RecoveryLayer, Reframed};
use crate::stream::SendStream;

impl Session {
    /// The runtime will open a new session to the same peer when this one ends and hand
    /// it this one's streams ([`Session::inherit`]): ending must not nack what is queued,
    /// nor the in-flight ADUs of streams with [`crate::InFlightPolicy::Resend`].
    pub fn set_successor_expected(&mut self, expected: bool) {
        self.life.successor_expected = expected;
    }

    /// Whether an ended session keeps its streams (and takes ADUs) for a successor.
    pub fn successor_expected(&self) -> bool {
        self.life.successor_expected
    }

    /// No successor after all: nack what an ended session kept for one (queued ADUs as
    /// [`NackReason::Closed`], carried in-flight ones as [`NackReason::Abandoned`]).
    pub fn release(&mut self) {
        self.life.successor_expected = false;
        for (stream, q) in std::mem::take(&mut self.life.carried) {
            self.stats.adus_abandoned += 1;
            self.events.push_back(Event::Nack {
                stream,
                adu: q.id,
                stream_seq: q.seq,
                channel: None,
                reason: NackReason::Abandoned,
            });
        }
        self.nack_queued();
    }

    /// Take over an ended session's streams: their configuration, sequence numbers,
    /// queued ADUs (in-flight ones of resending streams first), objectives, scheduler
    /// and ADU ids, so that the application's handles and counts carry on.
    pub fn inherit(&mut self, old: &mut Session, now: Duration) {
        self.sender.next_adu_id = self.sender.next_adu_id.max(old.sender.next_adu_id);
        let mut carried = std::mem::take(&mut old.life.carried);
        carried.sort_by_key(|(_, q)| std::cmp::Reverse(q.seq));
        for (id, old_stream) in std::mem::take(&mut old.sender.streams) {
            let mut s = SendStream::new(id, old_stream.config.clone());
            s.next_seq = old_stream.next_seq;
            s.carry_back_pressure(&old_stream);
            for (_, q) in carried.iter().filter(|(st, _)| *st == id) {
                s.queued_bytes += q.payload.len();
                s.queue.push_front(q.clone());
            }
            for q in old_stream.queue {
                s.queued_bytes += q.payload.len();
                s.queue.push_back(q);
            }
            self.carry_recovery(now, &mut s, &old.recovery);
            s.catch_up();
            // Carried ADUs count against the queue limit like any other.
            for d in s.trim() {
                self.stats.adus_dropped += 1;
                self.recovery.forget(id, d.id);
                self.events.push_back(Event::Nack {
                    stream: id,
                    adu: d.id,
                    stream_seq: d.seq,
                    channel: None,
                    reason: NackReason::QueueOverflow,
                });
            }
            // A stream that was blocked and whose carried queue is already down to its
            // low-water mark says so now; otherwise the drain will (`note_drained`).
            if s.update_writable() {
                self.events.push_back(Event::Writable { stream: id });
            }
            self.sender.streams.insert(id, s);
        }
        self.recovery.carry_stats(&old.recovery);
        self.sender.objectives = std::mem::take(&mut old.sender.objectives);
        std::mem::swap(&mut self.sender.scheduler, &mut old.sender.scheduler);
        self.wake_cycle(now);
    }

    /// A recovery stream carried into this session starts a fresh tunnel sequence
    /// space, as the peer's new session does: its queued data ADUs are framed again, and
    /// the old layer's coded, parity and report ADUs are dropped (`docs/recovery.md`,
    /// "Reconnection"). A data ADU that cannot be framed again is nacked as abandoned:
    /// the application hears of every ADU it handed over.
    fn carry_recovery(&mut self, now: Duration, s: &mut SendStream, old: &RecoveryLayer) {
        if !s.config.recovery.is_on() {
            return;
        }
        // Validated when the stream was first opened, so not expected to fail; if it
        // does, the reframing below fails for every data ADU and each one is nacked.
        if let Err(e) = self.recovery.open(s.id, &s.config.recovery) {
            tracing::warn!(stream = s.id, error = %e, "recovery not carried over");
        }
        let queue = std::mem::take(&mut s.queue);
        for mut q in queue {
            match self
                .recovery
                .reframe(now, s.id, q.id, &q.payload, old.kind(s.id, q.id))
            {
                Ok(Reframed::Data(framed)) => {
                    q.payload = framed;
                    s.queue.push_back(q);
                }
                Ok(Reframed::LayerOnly) => {}
                Err(e) => {
                    tracing::warn!(stream = s.id, adu = q.id, error = %e, "carried ADU abandoned");
                    self.stats.adus_abandoned += 1;
                    self.events.push_back(Event::Nack {
                        stream: s.id,
                        adu: q.id,
                        stream_seq: q.seq,
                        channel: None,
                        reason: NackReason::Abandoned,
                    });
                }
            }
        }
        s.queued_bytes = s.queue.iter().map(|q| q.payload.len()).sum();
    }
}
