//! The application's side of a session: the handles, modes and counters it sees, and
//! the calls that open streams, queue and withdraw ADUs, set objectives, look at the
//! channels and bound the receive buffer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::{ChannelId, Fields, Objective, ObjectiveId, Scheduler, Value};

use super::{Session, SessionError, State};
use crate::channel::{ChannelConfig, ChannelStats, ChannelViews};
use crate::event::{CloseReason, Event, NackReason};
use crate::stream::{QueuedAdu, SendStream, StreamConfig};

/// Identifies a queued or sent ADU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AduHandle {
    /// The stream it was queued on.
    pub stream: u32,
    /// Its id, unique within the stream for the session's life; events name the ADU by it.
    pub id: u64,
    /// The ADU's `stream_seq`, as the receiver will see it.
    pub seq: u64,
}

/// One latency mode (thesis §3.2.5): one per live channel with RTT samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyMode {
    /// The channel this mode belongs to.
    pub channel: ChannelId,
    /// Smoothed round trip, ms.
    pub mean_ms: f64,
    /// Square of the round trip's mean deviation, ms².
    pub variance_ms2: f64,
}

/// Counters of the session as a whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SessionStats {
    /// Datagrams that failed to decode.
    pub malformed: u64,
    /// Datagrams for another connection id.
    pub foreign: u64,
    /// Datagrams naming a channel this session does not have.
    pub unknown_channel: u64,
    /// ADUs the application queued with [`Session::send_adu`].
    pub adus_queued: u64,
    /// ADU transmissions (an ADU sent twice counts twice).
    pub adus_sent: u64,
    /// ADUs acknowledged in time (late acks are in `adus_late_acked`).
    pub adus_acked: u64,
    /// ADUs nacked as lost (late-acked ones included).
    pub adus_lost: u64,
    /// ADUs nacked as lost and then acknowledged after all.
    pub adus_late_acked: u64,
    /// ADUs dropped from a full send queue ([`NackReason::QueueOverflow`]).
    pub adus_dropped: u64,
    /// ADUs that arrived from the peer (before reordering and duplicate removal).
    pub adus_received: u64,
    /// Sent ADUs nacked as [`NackReason::Abandoned`] when the session ended.
    pub adus_abandoned: u64,
    /// Data packets dropped unacknowledged because the receive buffer was full.
    pub flow_dropped: u64,
    /// Scheduling cycles run.
    pub cycles: u64,
    /// Objective evaluations over all cycles: the scheduler's main cost.
    pub objective_evaluations: u64,
}

/// A channel a client opens: local interface index, peer address, settings.
#[derive(Debug, Clone)]
pub struct ChannelSpec {
    /// Index of the driver's interface (socket) that sends for this channel.
    pub local: u16,
    /// The peer's address on this channel.
    pub remote: SocketAddr,
    /// Congestion control, MTU, cost and the rest of the channel's settings.
    pub config: ChannelConfig,
}

impl Session {
    /// The connection id every packet of this session carries (chosen by the client).
    pub fn conn_id(&self) -> u64 {
        self.conn
    }

    /// The service number the client asked for in its hello.
    pub fn service(&self) -> u32 {
        self.service
    }

    /// Whether the handshake has finished and the session has not started closing.
    pub fn is_connected(&self) -> bool {
        self.life.state == State::Connected
    }

    /// Whether the session has ended or is ending: it takes no more ADUs.
    pub fn is_closed(&self) -> bool {
        matches!(
            self.life.state,
            State::Closing | State::Draining | State::Closed
        )
    }

    /// Why the session ended, once it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.life.close_reason
    }

    /// The session's counters so far.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// The addresses the peer announced in its hello (its interfaces), empty until then.
    pub fn remote_aliases(&self) -> &[SocketAddr] {
        &self.remote_aliases
    }

    /// Replace the scheduler that assigns ADUs to slots; it takes over at the next cycle.
    pub fn set_scheduler(&mut self, scheduler: Box<dyn Scheduler>) {
        self.sender.scheduler = scheduler;
    }

    /// The scheduler's name, as it reports it (for logs and reports).
    pub fn scheduler_name(&self) -> &'static str {
        self.sender.scheduler.name()
    }

    // ----- application API -------------------------------------------------------

    /// Open stream `id` for sending with `config` (queue limit, ordering, recovery).
    /// Receiving needs no call: the peer's streams open when their first ADU arrives.
    pub fn open_stream(&mut self, id: u32, config: StreamConfig) -> Result<(), SessionError> {
        if self.sender.streams.contains_key(&id) {
            return Err(SessionError::StreamExists(id));
        }
        if let Some(ms) = config.latency_bound_ms {
            if !crate::LATENCY_BOUND_MS.contains(&ms) {
                return Err(SessionError::BadLatencyBound { stream: id, ms });
            }
        }
        if let Some(reason) = config.latency_copies_error() {
            return Err(SessionError::BadLatencyCopies { stream: id, reason });
        }
        let config = config.with_copies_as_recovery();
        self.recovery.open(id, &config.recovery)?;
        self.sender.streams.insert(id, SendStream::new(id, config));
        Ok(())
    }

    /// Change a stream's rate limit (`None` = elastic).
    pub fn set_max_rate(&mut self, stream: u32, max_kbps: Option<f64>) -> Result<(), SessionError> {
        let s = self
            .sender
            .streams
            .get_mut(&stream)
            .ok_or(SessionError::UnknownStream(stream))?;
        s.config.max_kbps = max_kbps;
        Ok(())
    }

    /// Largest ADU any live channel can carry.
    pub fn max_adu(&self) -> u32 {
        self.channels.max_adu()
    }

    /// Queue an ADU. Header `fields` are for policy only and never sent.
    pub fn send_adu(
        &mut self,
        now: Duration,
        stream: u32,
        payload: Bytes,
        fields: Fields,
    ) -> Result<AduHandle, SessionError> {
        self.wake_cycle(now);
        if self.is_closed() && !self.life.successor_expected {
            return Err(SessionError::Closed);
        }
        let max = self.max_stream_adu(stream);
        if payload.len() > max as usize {
            return Err(SessionError::AduTooLarge {
                len: payload.len(),
                max,
            });
        }
        let s = self
            .sender
            .streams
            .get_mut(&stream)
            .ok_or(SessionError::UnknownStream(stream))?;
        let id = self.sender.next_adu_id;
        self.sender.next_adu_id += 1;
        let seq = s.next_seq;
        s.next_seq += 1;
        s.last_queued = Some(now);
        let (Ok(payload) | Err(payload)) = self.recovery.frame(now, stream, id, payload);
        let dropped = s.push(QueuedAdu {
            id,
            seq,
            payload,
            fields,
            inserted: now,
            deferred_since: None,
        });
        self.stats.adus_queued += 1;
        if s.update_writable() {
            self.events.push_back(Event::Writable { stream });
        }
        self.data_before_spare_coded(stream);
        for d in dropped {
            self.stats.adus_dropped += 1;
            self.recovery.forget(stream, d.id);
            self.events.push_back(Event::Nack {
                stream,
                adu: d.id,
                stream_seq: d.seq,
                channel: None,
                reason: NackReason::QueueOverflow,
            });
        }
        Ok(AduHandle { stream, id, seq })
    }

    /// Change a header field of a queued ADU, for the scheduler's objectives to see.
    /// Fails with [`SessionError::AduNotQueued`] once the ADU has left the queue.
    pub fn set_adu_field(
        &mut self,
        adu: AduHandle,
        name: &str,
        value: Value,
    ) -> Result<(), SessionError> {
        let sender = &mut self.sender;
        let q = sender
            .streams
            .get_mut(&adu.stream)
            .and_then(|s| s.find_mut(adu.id))
            .or_else(|| sender.plan.find_mut(adu.stream, adu.id))
            .ok_or(SessionError::AduNotQueued(adu))?;
        q.fields.set(name, value);
        Ok(())
    }

    /// Withdraw a queued ADU; the application hears [`Event::Nack`] with
    /// [`NackReason::Removed`]. Fails with [`SessionError::AduNotQueued`] if it already
    /// left the queue (sent or dropped).
    pub fn remove_adu(&mut self, adu: AduHandle) -> Result<(), SessionError> {
        // An ADU held for a slot later in the period has not left: it can still go.
        self.sender.take_back_plan();
        let removed = self
            .sender
            .streams
            .get_mut(&adu.stream)
            .and_then(|s| s.take(adu.id))
            .ok_or(SessionError::AduNotQueued(adu))?;
        self.recovery.forget(adu.stream, removed.id);
        self.events.push_back(Event::Nack {
            stream: adu.stream,
            adu: removed.id,
            stream_seq: removed.seq,
            channel: None,
            reason: NackReason::Removed,
        });
        self.note_drained();
        Ok(())
    }

    /// ADUs waiting in a stream's send queue, counting those a periodic cycle holds for
    /// a slot later in its period.
    pub fn queued(&self, stream: u32) -> usize {
        let queue = self
            .sender
            .streams
            .get(&stream)
            .map_or(0, |s| s.queue.len());
        queue + self.sender.plan.held(stream).0
    }

    /// Payload bytes waiting in a stream's send queue, counting those a periodic cycle
    /// holds for a slot later in its period.
    pub fn queued_bytes(&self, stream: u32) -> usize {
        let queue = self
            .sender
            .streams
            .get(&stream)
            .map_or(0, |s| s.queued_bytes);
        queue + self.sender.plan.held(stream).1
    }

    /// Whether the application may queue more on `stream` now: `false` from the moment
    /// its queue reaches the high-water mark until it falls to the low-water mark, which
    /// [`Event::Writable`] announces (marks: [`StreamConfig::water_marks`]). Advisory:
    /// [`Session::send_adu`] still accepts ADUs up to the queue limit.
    pub fn writable(&self, stream: u32) -> Result<bool, SessionError> {
        self.sender
            .streams
            .get(&stream)
            .map(SendStream::writable)
            .ok_or(SessionError::UnknownStream(stream))
    }

    /// Announce streams whose queue fell to the low-water mark.
    pub(super) fn note_drained(&mut self) {
        for s in self.sender.streams.values_mut() {
            if s.update_writable() {
                self.events.push_back(Event::Writable { stream: s.id });
            }
        }
    }

    /// Give the scheduler an objective (a compiled hose program) to rank schedules by,
    /// from the next cycle on; the id withdraws it.
    pub fn inject_objective(&mut self, objective: Arc<dyn Objective>) -> ObjectiveId {
        self.sender.objectives.inject(objective)
    }

    /// Withdraw an objective given to [`Session::inject_objective`].
    pub fn remove_objective(&mut self, id: ObjectiveId) -> Result<(), SessionError> {
        let removed = self.sender.objectives.remove(id);
        if self.sender.objectives.is_empty() {
            self.sender.history.clear();
        }
        if removed {
            Ok(())
        } else {
            Err(SessionError::UnknownObjective)
        }
    }

    /// (mean, variance) of RTT per live channel (thesis §3.2.5: one mode per channel).
    pub fn latency_modes(&self) -> Vec<LatencyMode> {
        self.channels
            .iter()
            .filter(|c| c.is_alive())
            .filter_map(|c| {
                let mean = c.rtt.srtt_ms()?;
                let dev = c.rtt.rttvar_ms();
                Some(LatencyMode {
                    channel: c.id,
                    mean_ms: mean,
                    variance_ms2: dev * dev,
                })
            })
            .collect()
    }

    /// Packet and byte counters of every channel, by id.
    pub fn channel_stats(&self) -> Vec<(ChannelId, ChannelStats)> {
        self.channels.iter().map(|c| (c.id, c.stats)).collect()
    }

    /// A read-only look at each channel, in the order they were added.
    pub fn channels(&self) -> ChannelViews<'_> {
        ChannelViews::new(&self.channels)
    }

    /// Bound the receive buffer (payload bytes delivered to the application and not yet
    /// read, as told by [`Session::consumed`]); `None` leaves it unbounded, for drivers
    /// that hand ADUs straight to their consumer.
    pub fn set_receive_buffer(&mut self, limit: Option<usize>) {
        self.receiver.flow.limit = limit;
        // The peer learns the limit once the session is up (here, or on the handshake's
        // completion for the initiating end). The last arrival's time stands in for now:
        // it only spaces forced updates.
        if self.life.state == State::Connected {
            self.advertise_window(self.life.last_rx);
        }
    }

    /// The application has read `bytes` of payload delivered earlier.
    pub fn consumed(&mut self, now: Duration, bytes: usize) {
        self.life.timers.invalidate_derived();
        let flow = &mut self.receiver.flow;
        flow.unread = flow.unread.saturating_sub(bytes);
        self.advertise_window(now);
    }

    /// Payload bytes the application must still read (report them with
    /// [`Session::consumed`]) before this end advertises a larger limit to its peer
    /// (a peer that used up the last one waits for it); `None` without a receive buffer.
    /// A driver that is not woken by reading should wake when this much has been read.
    pub fn reopens_after_reading(&self) -> Option<usize> {
        self.receiver.flow.reopens_after_reading(self.held_bytes())
    }

    /// Payload bytes delivered to the application and not yet read.
    pub fn unread_bytes(&self) -> usize {
        self.receiver.flow.unread
    }

    /// Whether the peer's advertised limit holds back this end's data now.
    pub fn flow_blocked(&self) -> bool {
        self.receiver.flow.blocked.is_some()
    }
}
