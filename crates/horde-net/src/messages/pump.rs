//! The endpoint's task: reads the connection's events, cuts pieces while the channels have
//! room, re-sends lost ones, confirms delivery from the session's ADU acks, and reports.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;
use horde_proto::message::codec::{self, Item};
use horde_proto::message::{
    ChannelEstimate, ControlItem, MessageEvent, MessageId, MessageSource, Piece,
};
use horde_proto::{ChannelId, Event};
use tokio::sync::mpsc;

use super::slots::Slots;
use super::{EndpointConfig, MessageNotice, Shared, MESSAGE_CONTROL_STREAM, MESSAGE_STREAM};
use crate::connection::{ConnectionHandle, EventReceiver};

/// What an ADU of ours in the session carries.
enum Carried {
    Piece { id: MessageId, offset: u64 },
    Control,
}

struct InFlight {
    carried: Carried,
    stream: u32,
    adu: Bytes,
}

struct Pump {
    shared: Arc<Shared>,
    handle: ConnectionHandle,
    tx: mpsc::UnboundedSender<MessageNotice>,
    config: EndpointConfig,
    slots: Slots,
    /// Our ADUs the session has not acked or nacked yet, by (stream, ADU id).
    in_flight: HashMap<(u32, u64), InFlight>,
    in_flight_bytes: usize,
    /// Offsets of each live message's pieces handed over but not acked.
    unacked: HashMap<MessageId, BTreeSet<u64>>,
    /// Bytes that may be unacked at once; see `refresh_channels`.
    window: usize,
    /// Bytes of our ADUs acked since the last refresh, and when that was.
    acked_bytes: usize,
    last_refresh: Duration,
    /// What the peer acknowledges of our ADUs, bytes/s, smoothed over refreshes.
    delivery_rate: f64,
    /// The smallest round trip seen per channel: the path without its queue.
    min_rtt: HashMap<ChannelId, Duration>,
    /// Per channel, smoothed time from handing a piece to the session to its arrival
    /// (its ack's latency less half the round trip): the wait in the session's queue and
    /// in the path's, which a piece cut now will see too.
    landing: HashMap<ChannelId, f64>,
}

pub(super) async fn run(
    shared: Arc<Shared>,
    handle: ConnectionHandle,
    mut events: EventReceiver,
    tx: mpsc::UnboundedSender<MessageNotice>,
    config: EndpointConfig,
) {
    let mut refresh = tokio::time::interval(config.refresh);
    refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let piece = config.messages.piece_size as usize;
    let mut pump = Pump {
        shared,
        handle,
        tx,
        config,
        slots: Slots::default(),
        in_flight: HashMap::new(),
        in_flight_bytes: 0,
        unacked: HashMap::new(),
        window: 4 * piece,
        acked_bytes: 0,
        last_refresh: Duration::ZERO,
        delivery_rate: 0.0,
        min_rtt: HashMap::new(),
        landing: HashMap::new(),
    };
    loop {
        pump.send_controls().await;
        pump.send_pieces().await;
        if !pump.report() {
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
                Some(event) => pump.on_event(event).await,
                None => return,
            },
            _ = pump.shared.wake.notified() => {}
            _ = refresh.tick() => pump.refresh_channels().await,
            _ = sleep => {
                let now = pump.shared.now();
                pump.shared.lock().scheduler.handle_timeout(now);
            }
            _ = pump.tx.closed() => return,
        }
    }
}

impl Pump {
    /// Reads each live channel's rate (its congestion controller's) and one-way delay
    /// (half its smoothed round trip) into the scheduler.
    async fn refresh_channels(&mut self) {
        let Ok(channels) = self.handle.channels().await else {
            return;
        };
        let estimates: Vec<ChannelEstimate> = channels
            .iter()
            .map(|c| ChannelEstimate {
                rate: if c.alive { c.rate_bytes_per_s } else { 0.0 },
                delay: Duration::from_secs_f64(
                    (c.srtt_ms.unwrap_or(0.0) / 2e3)
                        .max(self.landing.get(&c.id).copied().unwrap_or(0.0))
                        .max(0.0),
                ),
            })
            .collect();
        let now = self.shared.now();
        let elapsed = now.saturating_sub(self.last_refresh).as_secs_f64();
        if elapsed > 0.0 {
            let sample = self.acked_bytes as f64 / elapsed;
            self.delivery_rate += DELIVERY_GAIN * (sample - self.delivery_rate);
        }
        self.acked_bytes = 0;
        self.last_refresh = now;
        for c in &channels {
            if let Some(srtt) = c.srtt_ms {
                let rtt = Duration::from_secs_f64(srtt.max(0.0) / 1e3);
                let min = self.min_rtt.entry(c.id).or_insert(rtt);
                *min = (*min).min(rtt);
            }
        }
        self.window = self.window_for(&estimates);
        self.slots.resize(estimates.len());
        let mut state = self.shared.lock();
        // Rates come from the session and are finite and non-negative; keep the last good
        // estimates otherwise.
        if state.scheduler.set_channels(now, &estimates).is_ok() {
            state.estimates = estimates;
        }
    }

    /// The unacked bytes allowed: the channels' congestion controllers may overestimate
    /// what they carry, and every byte over it waits in the session's queue where the
    /// scheduler's priorities no longer apply. So the window is at most `WINDOW_GAIN`
    /// times what the peer acknowledged over the longest path's empty round trip plus
    /// `queue_ahead` (the gain lets it grow by half each round trip), and at most what
    /// the controllers expect over that time.
    fn window_for(&self, estimates: &[ChannelEstimate]) -> usize {
        let piece = self.config.messages.piece_size as usize;
        let rtt =
            self.min_rtt.values().max().copied().unwrap_or_default() + self.config.queue_ahead;
        let expected: f64 = estimates.iter().map(|e| e.rate).sum::<f64>() * rtt.as_secs_f64();
        let measured = WINDOW_GAIN * self.delivery_rate * rtt.as_secs_f64();
        (expected.min(measured) as usize).max(MIN_WINDOW_PIECES * piece)
    }

    async fn send_controls(&mut self) {
        loop {
            let Some(item) = self.shared.lock().scheduler.poll_control() else {
                return;
            };
            let mut adu = Vec::with_capacity(codec::CANCEL_LEN);
            codec::encode_control(&item, &mut adu);
            let ControlItem::Cancel(id) = item;
            self.unacked.remove(&id);
            self.hand_over(MESSAGE_CONTROL_STREAM, Bytes::from(adu), Carried::Control)
                .await;
        }
    }

    /// Cuts pieces while the unacked bytes are under the window.
    async fn send_pieces(&mut self) {
        while self.in_flight_bytes < self.window {
            let Some((piece, slice)) = self.next_piece() else {
                return;
            };
            let mut adu = Vec::with_capacity(codec::PIECE_HEADER_LEN + slice.len());
            codec::encode_piece_header(&piece.header(), &mut adu);
            adu.extend_from_slice(&slice);
            self.unacked
                .entry(piece.message)
                .or_default()
                .insert(piece.offset);
            let carried = Carried::Piece {
                id: piece.message,
                offset: piece.offset,
            };
            self.hand_over(MESSAGE_STREAM, Bytes::from(adu), carried)
                .await;
        }
    }

    /// The next piece and its bytes, cut for the channel whose slot is free first among
    /// those where some message's piece lands in time.
    fn next_piece(&mut self) -> Option<(Piece, Bytes)> {
        let now = self.shared.now();
        let mut state = self.shared.lock();
        let estimates = state.estimates.clone();
        for c in self.slots.order(now, &estimates) {
            let Ok(Some(piece)) = state.scheduler.poll_piece(now, c) else {
                continue;
            };
            self.slots.take(now, c, piece.len, estimates[c].rate);
            let slice = match state.sources.get_mut(&piece.message) {
                Some(source) => source.read_piece(&piece),
                None => Ok(Bytes::new()),
            };
            match slice {
                Ok(slice) => return Some((piece, slice)),
                Err(_) => {
                    // The payload's length was checked at submission; a short read means
                    // the message cannot be sent.
                    let _ = state.scheduler.cancel(now, piece.message);
                    continue;
                }
            }
        }
        None
    }

    /// Queues one ADU on the session and remembers it until it is acked or nacked. A
    /// session that refuses it cancels the message it carried.
    async fn hand_over(&mut self, stream: u32, adu: Bytes, carried: Carried) {
        match self
            .handle
            .send_adu(stream, adu.clone(), Fields::new())
            .await
        {
            Ok(handle) => {
                self.in_flight_bytes += adu.len();
                self.in_flight.insert(
                    (stream, handle.id),
                    InFlight {
                        carried,
                        stream,
                        adu,
                    },
                );
            }
            Err(error) => {
                if let Carried::Piece { id, .. } = carried {
                    let now = self.shared.now();
                    let _ = self.shared.lock().scheduler.cancel(now, id);
                    self.unacked.remove(&id);
                    let _ = self.tx.send(MessageNotice::SendFailed { id, error });
                }
            }
        }
    }

    async fn on_event(&mut self, event: Event) {
        match event {
            Event::Ack {
                stream,
                adu,
                channel,
                rtt,
                latency,
                ..
            } if is_ours(stream) => {
                let sample = latency.saturating_sub(rtt / 2).as_secs_f64();
                let landing = self.landing.entry(channel).or_insert(sample);
                *landing += LANDING_GAIN * (sample - *landing);
                self.on_acked(stream, adu)
            }
            Event::LateAck { stream, adu, .. } if is_ours(stream) => self.on_acked(stream, adu),
            Event::Nack { stream, adu, .. } if is_ours(stream) => self.on_lost(stream, adu).await,
            Event::Received {
                stream: MESSAGE_STREAM | MESSAGE_CONTROL_STREAM,
                payload,
                ..
            } => self.on_received(payload),
            Event::Writable { stream } | Event::Throttle { stream, .. } if is_ours(stream) => {}
            other => {
                let _ = self.tx.send(MessageNotice::Connection(other));
            }
        }
    }

    fn on_acked(&mut self, stream: u32, adu: u64) {
        let Some(flight) = self.in_flight.remove(&(stream, adu)) else {
            return; // a late ack of an ADU already re-sent
        };
        self.in_flight_bytes -= flight.adu.len();
        self.acked_bytes += flight.adu.len();
        let Carried::Piece { id, offset } = flight.carried else {
            return;
        };
        let Some(unacked) = self.unacked.get_mut(&id) else {
            return; // the message met another fate meanwhile
        };
        unacked.remove(&offset);
        if unacked.is_empty() {
            let now = self.shared.now();
            let mut state = self.shared.lock();
            if state.scheduler.status(id).is_ok_and(|s| s.fully_sent)
                && state.scheduler.confirm_delivered(now, id).is_ok()
            {
                self.unacked.remove(&id);
            }
        }
    }

    /// A lost ADU of a message still live, or a cancel, is sent again.
    async fn on_lost(&mut self, stream: u32, adu: u64) {
        let Some(flight) = self.in_flight.remove(&(stream, adu)) else {
            return;
        };
        self.in_flight_bytes -= flight.adu.len();
        let wanted = match &flight.carried {
            Carried::Piece { id, offset } => self
                .unacked
                .get(id)
                .is_some_and(|pending| pending.contains(offset)),
            Carried::Control => true,
        };
        if wanted {
            self.hand_over(flight.stream, flight.adu, flight.carried)
                .await;
        }
    }

    fn on_received(&mut self, payload: Bytes) {
        let notice = {
            let mut state = self.shared.lock();
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
        };
        if let Some(notice) = notice {
            let _ = self.tx.send(notice);
        }
    }

    /// Passes the scheduler's events on and forgets finished messages' bytes. `false` once
    /// nobody listens.
    fn report(&mut self) -> bool {
        loop {
            let event = {
                let mut state = self.shared.lock();
                let event = state.scheduler.poll_event();
                if let Some(MessageEvent::Finished { id, .. }) = &event {
                    state.sources.remove(id);
                }
                event
            };
            let Some(event) = event else {
                return !self.tx.is_closed();
            };
            if let MessageEvent::Finished { id, .. } = &event {
                self.unacked.remove(id);
            }
            if self.tx.send(MessageNotice::Sender(event)).is_err() {
                return false;
            }
        }
    }
}

/// Weight of a new delivery-rate sample.
const DELIVERY_GAIN: f64 = 0.25;
/// Weight of a new landing-time sample.
const LANDING_GAIN: f64 = 0.125;
/// How much the window may exceed the measured delivery over a round trip.
const WINDOW_GAIN: f64 = 1.5;
/// The window never shrinks below this many pieces, so that the rate can be measured.
const MIN_WINDOW_PIECES: usize = 8;

fn is_ours(stream: u32) -> bool {
    stream == MESSAGE_STREAM || stream == MESSAGE_CONTROL_STREAM
}
