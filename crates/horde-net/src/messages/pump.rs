//! The endpoint's task: reads the connection's events, cuts pieces while the channels have
//! room, re-sends lost ones, confirms delivery from the session's ADU acks, and reports.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;
use horde_proto::chunks::ChunkPool;
use horde_proto::message::codec::{self, Item};
use horde_proto::message::{ControlItem, Fate, MessageEvent, MessageId, Piece, UsageSample};
use horde_proto::{AduHandle, Event};
use tokio::sync::mpsc;

use super::arrival::{channels_in_flight, Tracks};
use super::slots::Slots;
use super::{
    is_message_stream, DeadlineCheck, EndpointConfig, MessageNotice, Shared, State,
    MESSAGE_CONTROL_STREAM, MESSAGE_QUEUE_LIMIT, MESSAGE_QUICK_STREAM, MESSAGE_STREAM,
};
use crate::connection::{ConnectionHandle, EventReceiver};
use crate::error::NetError;

/// What an ADU of ours in the session carries.
enum Carried {
    Piece {
        id: MessageId,
    },
    Control,
    /// On its way to the session only: a second copy of the overdue piece `of`, which
    /// is remembered as a `Piece` twinned with it.
    Copy {
        id: MessageId,
        of: FlightKey,
    },
}

/// An ADU of ours in the session: (stream, ADU id).
type FlightKey = (u32, u64);

struct InFlight {
    carried: Carried,
    handle: AduHandle,
    adu: Bytes,
    /// When it was handed to the session.
    handed: Duration,
    /// The other copy of an overdue piece sent again on the quick stream: whichever is
    /// acked first completes the piece, and the other is forgotten.
    twin: Option<FlightKey>,
}

/// Events the pump reads in one turn beyond the first, so that the room a burst of acks
/// frees is refilled in one hand-over. Refilled at each ack, every piece cost a turn of
/// this task, a command, a scheduling cycle and a datagram send of its own: messages
/// moved at a sixth of a stream's goodput, at 5-9 times its CPU per byte.
const WAITING_PER_TURN: usize = 32;

/// Bytes of the chunks pieces are cut from: about fifty pieces each.
const PIECE_CHUNK: usize = 64 << 10;
/// Plain streams count as having data (and take their weight's share of the bandwidth
/// in admission, `MessageConfig::stream_weight`) while the session acked or nacked one
/// of their ADUs within this long.
const STREAMS_IDLE: Duration = Duration::from_secs(1);

struct Pump {
    shared: Arc<Shared>,
    handle: ConnectionHandle,
    tx: mpsc::UnboundedSender<MessageNotice>,
    config: EndpointConfig,
    slots: Slots,
    /// Our ADUs the session has not acked or nacked yet, by (stream, ADU id).
    in_flight: HashMap<FlightKey, InFlight>,
    in_flight_bytes: usize,
    /// Whether `send_pieces` stopped at the window since the last refresh.
    window_limited: bool,
    /// How many pieces of each live message are handed over and not acked (each is in
    /// `in_flight` once, re-sent under a new handle when lost).
    unacked: HashMap<MessageId, usize>,
    /// ADUs lost on the way and still wanted, by stream, to go with the next hand-over.
    resend: Vec<(u32, Bytes, Carried)>,
    /// Where the pieces' ADUs are cut from: one allocation per chunk, not per piece.
    chunks: ChunkPool,
    /// Bytes that may be unacked at once; see `refresh_channels`.
    window: usize,
    /// Bytes the quick stream may have unacked while another channel's queue is full
    /// and `window` is 0; 0 otherwise.
    quick_window: usize,
    /// What our acked pieces measured of each channel.
    tracks: Tracks,
    /// The latest landing time of a piece handed over now (the arrival check), and the
    /// quick lane's, for a piece on the quick stream.
    landing: Duration,
    quick_landing: Duration,
    /// The channels' sent bytes at the last bandwidth sample.
    sent_bytes: Option<u64>,
    /// When the session last acked or nacked an ADU of a plain stream.
    plain_resolved: Option<Duration>,
}

/// The endpoint's task, with the channels' estimates read once, so that the first message
/// submitted is judged on them: until then the scheduler knows no channel and could admit
/// no deadline.
pub(super) async fn start(
    shared: Arc<Shared>,
    handle: ConnectionHandle,
    events: EventReceiver,
    tx: mpsc::UnboundedSender<MessageNotice>,
    config: EndpointConfig,
) -> impl std::future::Future<Output = ()> {
    let piece = config.messages.piece_size as usize;
    let queue_ahead = config.queue_ahead;
    let mut pump = Pump {
        shared,
        handle,
        tx,
        config,
        slots: Slots::default(),
        in_flight: HashMap::new(),
        in_flight_bytes: 0,
        window_limited: false,
        unacked: HashMap::new(),
        resend: Vec::new(),
        chunks: ChunkPool::new(PIECE_CHUNK),
        window: 4 * piece,
        quick_window: 0,
        tracks: Tracks::new(queue_ahead),
        landing: Duration::ZERO,
        quick_landing: Duration::ZERO,
        sent_bytes: None,
        plain_resolved: None,
    };
    pump.refresh_channels().await;
    run(pump, events)
}

async fn run(mut pump: Pump, mut events: EventReceiver) {
    let mut refresh = tokio::time::interval(pump.config.refresh);
    refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let tick = pump.shared.lock().bandwidth.tick();
    let mut bandwidth_tick = tokio::time::interval(tick);
    bandwidth_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        pump.send_controls().await;
        pump.send_pieces().await;
        let fates = pump.take_events();
        pump.withdraw(&fates).await;
        if !pump.report(fates) {
            return;
        }
        let timeout = pump.shared.lock().scheduler.poll_timeout();
        let sleep = async {
            match timeout {
                Some(t) => {
                    let wait = t.saturating_sub(pump.shared.now());
                    tokio::time::sleep(wait).await
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = events.recv() => match event {
                Some(event) => {
                    let mut turn = vec![event];
                    while turn.len() <= WAITING_PER_TURN {
                        let Ok(event) = events.try_recv() else {
                            break;
                        };
                        turn.push(event);
                    }
                    pump.on_events(turn);
                }
                None => return,
            },
            _ = pump.shared.wake.notified() => {}
            _ = refresh.tick() => pump.refresh_channels().await,
            _ = bandwidth_tick.tick() => pump.sample_bandwidth().await,
            _ = sleep => {
                let now = pump.shared.now();
                pump.shared.lock().scheduler.handle_timeout(now);
            }
            _ = pump.tx.closed() => return,
        }
    }
}

impl Pump {
    /// Reads the channels' rates and what our pieces measured into the scheduler's
    /// estimates and the window, and checks the pieces in flight against their deadlines.
    async fn refresh_channels(&mut self) {
        let Ok(channels) = self.handle.channels().await else {
            return;
        };
        let now = self.shared.now();
        self.tracks
            .refresh(now, std::mem::take(&mut self.window_limited), &channels);
        self.tracks.note_queues(&channels);
        self.tracks.settle_idle(&channels);
        let piece = self.config.messages.piece_size as usize;
        let ahead = self.config.queue_ahead;
        let (estimates, quick) = match self.config.deadline_check {
            DeadlineCheck::Arrival => {
                // A channel whose queue is full holds every piece back until the next
                // refresh, since the session may put the next one on it; but for the
                // quick stream's, which the session puts on the quickest channel, while
                // that one is not full itself. One stalled channel then does not stop
                // every message.
                let full = if self.streams_active(now) {
                    Vec::new()
                } else {
                    self.tracks.full_queues(&channels, ahead)
                };
                let (estimates, quick) = self.tracks.arrival_estimate(&channels);
                self.window = if full.is_empty() {
                    self.tracks.arrival_window(&channels, ahead, piece)
                } else {
                    0
                };
                self.quick_window = quick
                    .filter(|q| !full.is_empty() && !full.contains(&q.channel))
                    .and_then(|q| channels.iter().find(|c| c.id == q.channel))
                    .and_then(|c| self.tracks.channel_window(c, ahead))
                    .map_or(0, |bytes| (bytes as usize).max(piece));
                (estimates, quick.map(|q| q.estimate))
            }
            DeadlineCheck::Handover => {
                let estimates = self.tracks.per_channel_estimates(&channels);
                self.window = self.tracks.handover_window(&estimates, ahead, piece);
                self.quick_window = 0;
                self.slots.resize(estimates.len());
                (estimates, None)
            }
        };
        self.window = self.window.min(MESSAGE_QUEUE_LIMIT);
        self.landing = estimates.first().map(|e| e.delay).unwrap_or_default();
        self.quick_landing = quick.map_or(self.landing, |q| estimates[q].delay);
        {
            let mut state = self.shared.lock();
            // Rates come from the session and are finite and non-negative; keep the last
            // good estimates otherwise.
            if state.scheduler.set_channels(now, &estimates).is_ok() {
                state.estimates = estimates;
                state.quick_lane = quick;
            }
            state
                .scheduler
                .set_streams_active(now, self.streams_active(now));
        }
        if self.config.deadline_check == DeadlineCheck::Arrival {
            self.copy_overdue(now).await;
            self.check_in_flight(now);
        }
    }

    /// Whether plain streams count as having data: the session acked or nacked one of
    /// their ADUs within `STREAMS_IDLE`.
    fn streams_active(&self, now: Duration) -> bool {
        self.plain_resolved
            .is_some_and(|t| now.saturating_sub(t) < STREAMS_IDLE)
    }

    /// Sends a second copy of each overdue piece (one not acked within twice the landing
    /// time, as `check_in_flight` presumes lost), or one its lane's landing time now lands
    /// after its deadline (a stalled channel's landing time grows with the stall, so a
    /// piece stuck in it might never look overdue), on the quick stream, when the quick
    /// lane lands it before its message's deadline: a small urgent message whose one
    /// piece sits in a slow channel's queue or outage arrives by the quick channel
    /// instead of firing early. Earliest deadline first, within half of what the quick
    /// lane carries in one refresh, so that copies cannot crowd it out.
    async fn copy_overdue(&mut self, now: Duration) {
        if self.quick_landing >= self.landing {
            return;
        }
        let (mut candidates, quick_rate): (Vec<(Duration, FlightKey, MessageId)>, f64) = {
            let state = self.shared.lock();
            let candidates = self
                .in_flight
                .iter()
                .filter(|&(&(stream, _), f)| stream == MESSAGE_STREAM && f.twin.is_none())
                .filter_map(|(&key, f)| {
                    let Carried::Piece { id } = f.carried else {
                        return None;
                    };
                    let deadline = state.scheduler.status(id).ok()?.deadline?;
                    let overdue = now.saturating_sub(f.handed) > 2 * self.landing;
                    let landing_late = f.handed + self.landing > deadline;
                    ((overdue || landing_late) && now + self.quick_landing <= deadline)
                        .then_some((deadline, key, id))
                })
                .collect();
            let quick_rate = state.quick_lane.map_or(0.0, |q| state.estimates[q].rate);
            (candidates, quick_rate)
        };
        candidates.sort_unstable_by_key(|&(deadline, key, _)| (deadline, key));
        let mut budget = quick_rate * self.config.refresh.as_secs_f64() / 2.0;
        let mut copies = Vec::new();
        for (_, key, id) in candidates {
            let adu = self.in_flight[&key].adu.clone();
            if budget < adu.len() as f64 {
                break;
            }
            budget -= adu.len() as f64;
            copies.push((adu, Carried::Copy { id, of: key }));
        }
        self.hand_over(MESSAGE_QUICK_STREAM, copies).await;
    }

    /// Tells the scheduler when the pieces of each message still in flight are expected
    /// to land: hand-over plus the current landing time of the lane they took. The queues
    /// may have grown since a piece was cut; a message that will now land after its
    /// deadline fires early, before the deadline. A piece not acked within twice the landing time is
    /// presumed lost: it lands, once nacked and sent again, a landing time from now at
    /// the earliest.
    fn check_in_flight(&mut self, now: Duration) {
        let mut latest: HashMap<MessageId, Duration> = HashMap::new();
        for (&(stream, _), flight) in &self.in_flight {
            // A piece copied to the quick stream lands when its copy does.
            if stream != MESSAGE_QUICK_STREAM && flight.twin.is_some() {
                continue;
            }
            if let Carried::Piece { id } = flight.carried {
                let landing = if stream == MESSAGE_QUICK_STREAM {
                    self.quick_landing
                } else {
                    self.landing
                };
                let overdue = now.saturating_sub(flight.handed) > 2 * landing;
                let from = if overdue { now } else { flight.handed };
                let at = from + landing;
                let entry = latest.entry(id).or_insert(at);
                *entry = (*entry).max(at);
            }
        }
        let mut state = self.shared.lock();
        for (id, at) in latest {
            // A message that met its fate meanwhile is no longer the scheduler's.
            let _ = state.scheduler.expect_arrival(now, id, at);
        }
    }

    /// One tick of the bandwidth estimate: the bytes the channels sent since the last, our
    /// pieces still in the session's queue (unacked bytes beyond what the channels have
    /// in flight) as the backlog, and the channels' summed rate as the cap. Ranges the
    /// estimate left are reported.
    async fn sample_bandwidth(&mut self) {
        let Ok(channels) = self.handle.channels().await else {
            return;
        };
        let sent: u64 = channels.iter().map(|c| c.stats.bytes_sent).sum();
        // The first tick only sets the counter; a new session's counters start over.
        let Some(last) = self.sent_bytes.replace(sent) else {
            return;
        };
        let sample = UsageSample {
            sent_bytes: sent.saturating_sub(last),
            backlog_bytes: (self.in_flight_bytes as f64 - channels_in_flight(&channels)).max(0.0)
                as u64,
            capacity: Some(self.tracks.capacity(&channels)),
        };
        let events: Vec<_> = {
            let mut state = self.shared.lock();
            if let Some(estimate) = state.bandwidth.report(sample) {
                state.ranges.on_estimate(&estimate);
            }
            std::iter::from_fn(|| state.ranges.poll_event()).collect()
        };
        for event in events {
            let _ = self.tx.send(MessageNotice::Bandwidth(event));
        }
    }

    /// Cancels, and control ADUs lost on the way, in one hand-over.
    async fn send_controls(&mut self) {
        let mut batch = self.take_resends(MESSAGE_CONTROL_STREAM);
        {
            let mut state = self.shared.lock();
            while let Some(item) = state.scheduler.poll_control() {
                let mut adu = Vec::with_capacity(codec::CANCEL_LEN);
                codec::encode_control(&item, &mut adu);
                let ControlItem::Cancel(id) = item;
                self.unacked.remove(&id);
                batch.push((Bytes::from(adu), Carried::Control));
            }
        }
        self.hand_over(MESSAGE_CONTROL_STREAM, batch).await;
    }

    /// Pieces lost on the way, then new pieces cut while the unacked bytes are under the
    /// window, in one hand-over per stream: on the quick stream the pieces only the quick
    /// lane lands in time, on the message stream the others. The scheduler is locked once
    /// for the lot.
    async fn send_pieces(&mut self) {
        let mut batch = self.take_resends(MESSAGE_STREAM);
        let mut quick_batch = self.take_resends(MESSAGE_QUICK_STREAM);
        let mut queued_bytes = 0;
        let mut quick_bytes = if self.quick_window > 0 {
            self.in_flight
                .iter()
                .filter(|(&(stream, _), _)| stream == MESSAGE_QUICK_STREAM)
                .map(|(_, f)| f.adu.len())
                .sum()
        } else {
            0
        };
        let shared = self.shared.clone();
        {
            let now = shared.now();
            let mut state = shared.lock();
            let check = self.config.deadline_check;
            loop {
                let quick_only = self.in_flight_bytes + queued_bytes >= self.window;
                if quick_only && quick_bytes >= self.quick_window {
                    self.window_limited |= state.scheduler.has_unsent();
                    break;
                }
                let Some((piece, slice)) =
                    next_piece(&mut state, &mut self.slots, check, now, quick_only)
                else {
                    break;
                };
                let room = self.chunks.with_room(codec::PIECE_HEADER_LEN + slice.len());
                codec::encode_piece_header(&piece.header(), room);
                room.extend_from_slice(&slice);
                let adu = room.split().freeze();
                *self.unacked.entry(piece.message).or_default() += 1;
                queued_bytes += adu.len();
                let lane = if quick_only || needs_quick_lane(&state, &piece, now) {
                    quick_bytes += adu.len();
                    &mut quick_batch
                } else {
                    &mut batch
                };
                lane.push((adu, Carried::Piece { id: piece.message }));
            }
        }
        self.hand_over(MESSAGE_QUICK_STREAM, quick_batch).await;
        self.hand_over(MESSAGE_STREAM, batch).await;
    }

    /// The lost ADUs of `stream` that are still wanted, to go again.
    fn take_resends(&mut self, stream: u32) -> Vec<(Bytes, Carried)> {
        self.resend
            .extract_if(.., |(s, ..)| *s == stream)
            .map(|(_, adu, carried)| (adu, carried))
            .collect()
    }

    /// Queues ADUs of one stream on the session in one command, and remembers each until
    /// it is acked or nacked.
    async fn hand_over(&mut self, stream: u32, batch: Vec<(Bytes, Carried)>) {
        if batch.is_empty() {
            return;
        }
        let payloads = batch.iter().map(|(adu, _)| adu.clone()).collect();
        let handed = match self.handle.send_adus(stream, payloads, Fields::new()) {
            Ok(pending) => pending.await,
            Err(e) => Err(e),
        };
        // The batch reached the session whole, or not at all (the host is gone).
        let mut handles = handed.map(Vec::into_iter).ok();
        for (adu, carried) in batch {
            let handle = handles
                .as_mut()
                .and_then(Iterator::next)
                .unwrap_or(Err(NetError::HostGone));
            self.settle(stream, adu, carried, handle);
        }
    }

    /// Remembers an ADU the session took until it is acked or nacked; a session that
    /// refused it cancels the message it carried.
    fn settle(
        &mut self,
        stream: u32,
        adu: Bytes,
        carried: Carried,
        handle: Result<AduHandle, crate::error::NetError>,
    ) {
        match (handle, carried) {
            (Ok(handle), carried) => {
                let key = (stream, handle.id);
                let (carried, twin) = match carried {
                    Carried::Copy { id, of } => {
                        if let Some(original) = self.in_flight.get_mut(&of) {
                            original.twin = Some(key);
                        }
                        self.shared.lock().copied_pieces += 1;
                        (Carried::Piece { id }, Some(of))
                    }
                    carried => (carried, None),
                };
                self.in_flight_bytes += adu.len();
                self.in_flight.insert(
                    key,
                    InFlight {
                        carried,
                        handle,
                        adu,
                        handed: self.shared.now(),
                        twin,
                    },
                );
            }
            // The original is still in flight.
            (Err(_), Carried::Copy { .. }) => {}
            (Err(error), carried) => {
                if let Carried::Piece { id } = carried {
                    let now = self.shared.now();
                    let _ = self.shared.lock().scheduler.cancel(now, id);
                    self.unacked.remove(&id);
                    let _ = self.tx.send(MessageNotice::SendFailed { id, error });
                }
            }
        }
    }

    /// One turn's events, with the shared state locked once for all of them.
    fn on_events(&mut self, events: Vec<Event>) {
        let shared = self.shared.clone();
        let now = shared.now();
        let mut state = shared.lock();
        for event in events {
            match event {
                Event::Ack {
                    stream,
                    adu,
                    channel,
                    rtt,
                    latency,
                    ..
                } if is_message_stream(stream) => {
                    let landed = now.saturating_sub(self.tracks.return_delay(channel, rtt));
                    if let Some(bytes) = self.on_acked(&mut state, now, landed, stream, adu) {
                        self.tracks.on_ack(channel, rtt, latency, bytes);
                    }
                }
                Event::LateAck {
                    stream,
                    adu,
                    channel,
                    rtt,
                    ..
                } if is_message_stream(stream) => {
                    let landed = now.saturating_sub(self.tracks.return_delay(channel, rtt));
                    if let Some(bytes) = self.on_acked(&mut state, now, landed, stream, adu) {
                        self.tracks.on_late_ack(channel, bytes);
                    }
                }
                Event::Nack { stream, adu, .. } if is_message_stream(stream) => {
                    self.on_lost(stream, adu)
                }
                Event::Received {
                    stream, payload, ..
                } if is_message_stream(stream) => {
                    if let Some(notice) = on_received(&mut state, payload) {
                        let _ = self.tx.send(notice);
                    }
                }
                Event::Writable { stream } | Event::Throttle { stream, .. }
                    if is_message_stream(stream) => {}
                lost @ Event::Reconnecting { .. } => {
                    self.start_over(&mut state);
                    let _ = self.tx.send(MessageNotice::Connection(lost));
                }
                other => {
                    if let Event::Ack { .. } | Event::Nack { .. } | Event::LateAck { .. } = other {
                        self.plain_resolved = Some(now);
                    }
                    let _ = self.tx.send(MessageNotice::Connection(other));
                }
            }
        }
    }

    /// Forgets an acked ADU of ours, which `landed` at the receiver, and confirms its
    /// message once every piece is acked: a message whose last piece landed after its
    /// deadline fires early first, if it has not yet, so that none is confirmed late
    /// without its callback. The ADU's length, if it was still in flight.
    fn on_acked(
        &mut self,
        state: &mut State,
        now: Duration,
        landed: Duration,
        stream: u32,
        adu: u64,
    ) -> Option<usize> {
        let Some(flight) = self.in_flight.remove(&(stream, adu)) else {
            return None; // a late ack of an ADU already re-sent, or of a twin's copy
        };
        let bytes = flight.adu.len();
        self.in_flight_bytes -= bytes;
        if let Some(twin) = flight.twin.and_then(|key| self.in_flight.remove(&key)) {
            self.in_flight_bytes -= twin.adu.len();
        }
        let Carried::Piece { id } = flight.carried else {
            return Some(bytes);
        };
        let Some(unacked) = self.unacked.get_mut(&id) else {
            return Some(bytes); // the message met another fate meanwhile
        };
        *unacked -= 1;
        if *unacked == 0 && state.scheduler.status(id).is_ok_and(|s| s.fully_sent) {
            let _ = state.scheduler.expect_arrival(now, id, landed);
            if state.scheduler.confirm_delivered(now, id).is_ok() {
                self.unacked.remove(&id);
            }
        }
        Some(bytes)
    }

    /// The session is gone and the next may reach a receiver that lost what it held (one
    /// restarted after a crash): every message with pieces handed over starts again from
    /// its first byte, and the pieces of the old session are forgotten, so that a late
    /// ack of one cannot complete a message the new receiver does not hold whole. A
    /// receiver that kept its state drops the repeats. Cancels still unacked stay.
    fn start_over(&mut self, state: &mut State) {
        self.in_flight
            .retain(|_, f| matches!(f.carried, Carried::Control));
        self.in_flight_bytes = self.in_flight.values().map(|f| f.adu.len()).sum();
        self.resend
            .retain(|(_, _, carried)| matches!(carried, Carried::Control));
        for (&id, count) in &mut self.unacked {
            *count = 0;
            let _ = state.scheduler.restart(id);
        }
    }

    /// A lost ADU of a message still live, or a cancel, goes again with the next
    /// hand-over of its stream.
    fn on_lost(&mut self, stream: u32, adu: u64) {
        let Some(flight) = self.in_flight.remove(&(stream, adu)) else {
            return;
        };
        self.in_flight_bytes -= flight.adu.len();
        // Its twin still carries the piece.
        if let Some(twin) = flight.twin.and_then(|key| self.in_flight.get_mut(&key)) {
            twin.twin = None;
            return;
        }
        let wanted = match &flight.carried {
            Carried::Piece { id } | Carried::Copy { id, .. } => self.unacked.contains_key(id),
            Carried::Control => true,
        };
        if wanted {
            self.resend.push((stream, flight.adu, flight.carried));
        }
    }

    /// The scheduler's events; finished messages' bytes and unacked pieces are forgotten.
    fn take_events(&mut self) -> Vec<MessageEvent> {
        let mut events = Vec::new();
        let mut state = self.shared.lock();
        while let Some(event) = state.scheduler.poll_event() {
            if let MessageEvent::Finished { id, .. } = &event {
                state.sources.remove(id);
                self.unacked.remove(id);
            }
            events.push(event);
        }
        events
    }

    /// Passes the events on. `false` once nobody listens.
    fn report(&mut self, events: Vec<MessageEvent>) -> bool {
        for event in events {
            if self.tx.send(MessageNotice::Sender(event)).is_err() {
                return false;
            }
        }
        !self.tx.is_closed()
    }

    /// Takes the pieces of messages that ended undelivered out of the session's queue,
    /// where they would otherwise still be sent (and dropped by the receiver), before the
    /// application hears of the fate. Pieces already on a channel stay; the session nacks
    /// the withdrawn ones, which are then forgotten.
    async fn withdraw(&mut self, events: &[MessageEvent]) {
        let undelivered: Vec<MessageId> = events
            .iter()
            .filter_map(|e| match e {
                MessageEvent::Finished { id, fate, .. } if *fate != Fate::Delivered => Some(*id),
                _ => None,
            })
            .collect();
        if undelivered.is_empty() {
            return;
        }
        let queued: Vec<AduHandle> = self
            .in_flight
            .values()
            .filter(|f| matches!(f.carried, Carried::Piece { id } if undelivered.contains(&id)))
            .map(|f| f.handle)
            .collect();
        let mut withdrawn = 0;
        for handle in queued {
            if let Ok(true) = self.handle.remove_adu(handle).await {
                withdrawn += 1;
            }
        }
        self.shared.lock().withdrawn_pieces += withdrawn;
    }
}

/// Whether `piece` must go on the quick lane: its message has a deadline that the quick
/// lane meets (it was cut for it) and no other lane does.
fn needs_quick_lane(state: &State, piece: &Piece, now: Duration) -> bool {
    let Some(quick) = state.quick_lane else {
        return false;
    };
    let Some(deadline) = state
        .scheduler
        .status(piece.message)
        .ok()
        .and_then(|s| s.deadline)
    else {
        return false;
    };
    let mut others = state
        .estimates
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != quick);
    !others.any(|(_, lane)| lane.arrives_by(now, piece.len, deadline))
}

/// The next piece and its bytes. Checked at arrival, it is cut for the quick lane first,
/// if there is one (a piece lands soonest there), then for the other estimates, or for
/// the quick lane only when `quick_only`; checked
/// at hand-over, for the channel whose slot is free first among those where some
/// message's piece lands in time.
fn next_piece(
    state: &mut State,
    slots: &mut Slots,
    check: DeadlineCheck,
    now: Duration,
    quick_only: bool,
) -> Option<(Piece, Bytes)> {
    let order = match check {
        DeadlineCheck::Arrival => {
            let lanes = if quick_only {
                0..0
            } else {
                0..state.estimates.len()
            };
            state.quick_lane.into_iter().chain(lanes).collect()
        }
        DeadlineCheck::Handover => slots.order(now, &state.estimates),
    };
    for c in order {
        let Ok(Some(piece)) = state.scheduler.poll_piece(now, c) else {
            continue;
        };
        if check == DeadlineCheck::Handover {
            slots.take(now, c, piece.len, state.estimates[c].rate);
        }
        let slice = match state.sources.get_mut(&piece.message) {
            Some(source) => source.read_piece(&piece),
            None => Ok(Bytes::new()),
        };
        match slice {
            Ok(slice) => return Some((piece, slice)),
            Err(_) => {
                // The payload's length was checked at submission; a short read means the
                // message cannot be sent.
                let _ = state.scheduler.cancel(now, piece.message);
                continue;
            }
        }
    }
    None
}

/// A piece or a control ADU from the peer; the whole message it completes, or why it was
/// dropped.
fn on_received(state: &mut State, payload: Bytes) -> Option<MessageNotice> {
    match codec::decode(payload) {
        Ok(Item::Piece(header, slice)) => match state.reassembly.on_piece(header, slice) {
            Ok(Some(message)) => Some(MessageNotice::Received(message)),
            Ok(None) => None,
            Err(e) => Some(MessageNotice::Dropped {
                error: e.to_string(),
            }),
        },
        Ok(Item::Control(item)) => {
            state.reassembly.on_control(item);
            None
        }
        Err(e) => Some(MessageNotice::Dropped {
            error: e.to_string(),
        }),
    }
}
