//! Arrivals: data and packed packets into the receive streams (or the recovery layer),
//! acks resolving what was in flight, and receive-window flow control.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::{ChannelId, Outcome};

use super::flow::Flow;
use super::{PendingTx, Session, State};
use crate::channel::{Resolution, Resolved};
use crate::event::{Event, NackReason};
use crate::stream::{Delivered, RecvStream};
use crate::wire::{Ack, PackedAdus, FLAG_ORDERED, FLAG_RECOVERY};

/// The receiving side of a session: the receive streams, the ADUs they released for
/// the application, and the receive buffer's flow control.
#[derive(Debug, Default)]
pub(super) struct Receiver {
    pub(super) streams: BTreeMap<u32, RecvStream>,
    /// Released by the streams or the recovery layer, not yet turned into events.
    pub(super) delivered: Vec<Delivered>,
    pub(super) flow: Flow,
}

impl Receiver {
    /// Payload bytes held for in-order delivery.
    pub(super) fn held_bytes(&self) -> usize {
        self.streams.values().map(RecvStream::held_bytes).sum()
    }

    /// The earliest held ADU's deadline, with `hold` the longest an ADU waits for a gap.
    pub(super) fn next_timeout(&self, hold: Duration) -> Option<Duration> {
        self.streams
            .values()
            .filter_map(|r| r.next_timeout(hold))
            .min()
    }

    /// Hand what the streams released to the application as events; with a receive
    /// buffer, it is unread until the application says it read it.
    pub(super) fn flush(&mut self, events: &mut VecDeque<Event>) {
        for d in self.delivered.drain(..) {
            if self.flow.limit.is_some() {
                self.flow.unread += d.payload.len();
            }
            events.push_back(Event::Received {
                stream: d.stream,
                stream_seq: d.stream_seq,
                channel: d.channel,
                payload: d.payload,
            });
        }
    }

    /// One arrived ADU of a stream that does not code, into its stream (opened by its
    /// first ADU).
    pub(super) fn accept(&mut self, now: Duration, ordered: bool, adu: Delivered) {
        let rs = self
            .streams
            .entry(adu.stream)
            .or_insert_with(|| RecvStream::new(ordered));
        rs.on_arrival(now, adu, &mut self.delivered);
    }

    /// Release the ADUs whose gap waited `hold` or longer.
    pub(super) fn on_reorder_timeout(&mut self, now: Duration, hold: Duration) {
        for r in self.streams.values_mut() {
            r.on_timeout(now, hold, &mut self.delivered);
        }
    }

    /// The session ends: release everything held for ordering (it was acknowledged on
    /// arrival).
    pub(super) fn release_all(&mut self) {
        for r in self.streams.values_mut() {
            r.release_all(&mut self.delivered);
        }
    }

    /// The limit to advertise now, if one is due: grown enough since the last, none
    /// sent yet, or (`force`, after a drop) the current one again.
    pub(super) fn window_update(&mut self, now: Duration, force: bool) -> Option<u64> {
        let held = self.held_bytes();
        self.flow.update(now, held, force)
    }
}

impl Session {
    pub(super) fn flush_delivered(&mut self) {
        self.receiver.flush(&mut self.events);
    }

    pub(super) fn on_resolved(&mut self, now: Duration, channel: ChannelId, resolved: &[Resolved]) {
        for r in resolved {
            let Some(a) = r.adu else { continue };
            // What was declared lost took no room at the peer: its credit comes back
            // (and goes again if the packet is acked late after all).
            match r.resolution {
                Resolution::Lost(_) => self.receiver.flow.lost += u64::from(a.payload),
                Resolution::LateAcked { .. } => {
                    let f = &mut self.receiver.flow;
                    f.lost = f.lost.saturating_sub(u64::from(a.payload));
                }
                Resolution::Acked { .. } => {}
            }
            self.life.resend.remove(&a.adu);
            let acked = !matches!(r.resolution, Resolution::Lost(_));
            if self.recovery.on_resolved(a.stream, a.adu, acked) {
                continue; // the recovery layer's own ADU
            }
            let stream_state = self.sender.streams.get_mut(&a.stream);
            let outcome = match r.resolution {
                Resolution::Acked { rtt } | Resolution::LateAcked { rtt, .. } => {
                    let late = matches!(r.resolution, Resolution::LateAcked { .. });
                    let latency = now.saturating_sub(a.inserted);
                    let (stream, adu, stream_seq) = (a.stream, a.adu, a.stream_seq);
                    if late {
                        self.stats.adus_late_acked += 1;
                        self.events.push_back(Event::LateAck {
                            stream,
                            adu,
                            stream_seq,
                            channel,
                            rtt,
                            latency,
                        });
                    } else {
                        if let Some(s) = stream_state {
                            s.on_acked(latency);
                        }
                        self.stats.adus_acked += 1;
                        self.events.push_back(Event::Ack {
                            stream,
                            adu,
                            stream_seq,
                            channel,
                            rtt,
                            latency,
                        });
                    }
                    Outcome::Acked {
                        latency_ms: latency.as_secs_f64() * 1e3,
                    }
                }
                Resolution::Lost(_) => {
                    if let Some(s) = stream_state {
                        s.on_lost();
                    }
                    self.stats.adus_lost += 1;
                    self.events.push_back(Event::Nack {
                        stream: a.stream,
                        adu: a.adu,
                        stream_seq: a.stream_seq,
                        channel: Some(channel),
                        reason: NackReason::Lost,
                    });
                    Outcome::Lost
                }
            };
            if let Some(h) = a.history {
                if let Some(e) = h
                    .checked_sub(self.sender.history_base)
                    .and_then(|i| self.sender.history.get_mut(i as usize))
                {
                    e.outcome = outcome;
                }
            }
        }
        if self.receiver.flow.blocked.is_some() {
            self.flow_credit_changed(now);
        }
    }

    /// Whether the receive buffer can take `bytes` more of payload. A full buffer takes
    /// nothing more: the packet is not acked, so the sender counts it lost, and is told
    /// the current limit. A sender that keeps to the advertised limit never gets here.
    pub(super) fn admit(&mut self, now: Duration, bytes: usize) -> bool {
        // ADUs held for ordering take buffer space too: they become unread data soon.
        let held = self.held_bytes();
        if self.receiver.flow.fits(held, bytes) {
            return true;
        }
        self.stats.flow_dropped += 1;
        if let Some(limit) = self.receiver.window_update(now, true) {
            self.queue_window(limit);
        }
        false
    }

    /// Payload bytes held for in-order delivery.
    pub(super) fn held_bytes(&self) -> usize {
        self.receiver.held_bytes()
    }

    /// `bytes` of payload were taken in: count them, and advertise a new limit if one
    /// is due.
    fn admitted(&mut self, now: Duration, bytes: usize) {
        if self.receiver.flow.limit.is_none() {
            return;
        }
        self.receiver.flow.admitted += bytes as u64;
        self.advertise_window(now);
    }

    /// Send a new limit if it has grown enough since the last (or none went yet).
    pub(super) fn advertise_window(&mut self, now: Duration) {
        if let Some(limit) = self.receiver.window_update(now, false) {
            self.queue_window(limit);
        }
    }

    pub(super) fn queue_window(&mut self, limit: u64) {
        // On every channel: updates are rare and small, and one channel's path back to
        // the sender may be broken without this end knowing (a NAT rebinding the sender
        // has not yet announced on it, a dead downlink); a lost update would leave the
        // sender waiting for its probe.
        self.channels
            .queue_on_all(|id| PendingTx::Window(id, limit));
    }

    /// A ping: the sender may be probing for a lost update (or just keeping the channel
    /// alive); answer with the current limit on its channel.
    pub(super) fn answer_ping_with_window(&mut self, idx: usize) {
        if self.receiver.flow.limit.is_none() {
            return;
        }
        if let Some(limit) = self.receiver.flow.advertised {
            let id = self.channels[idx].id;
            self.channels.queue(PendingTx::Window(id, limit));
        }
    }

    /// A `Data` packet: one ADU.
    pub(super) fn on_data(
        &mut self,
        now: Duration,
        at: Arrival,
        flags: u8,
        stream: u32,
        stream_seq: u64,
        payload: Bytes,
    ) {
        if self.life.state == State::Closing {
            return;
        }
        let Some(idx) = self.data_channel(now, at.channel, at.local, at.src) else {
            return;
        };
        if !self.admit(now, payload.len()) {
            return;
        }
        if !self.channels[idx].on_receive(now, at.seq, at.send_ts) {
            return;
        }
        self.stats.adus_received += 1;
        let bytes = payload.len();
        self.accept_adu(now, &at, flags, stream, stream_seq, payload);
        self.flush_delivered();
        self.admitted(now, bytes);
    }

    /// A `Packed` packet: several ADUs under one channel sequence number.
    pub(super) fn on_packed(&mut self, now: Duration, at: Arrival, adus: PackedAdus) {
        if self.life.state == State::Closing {
            return;
        }
        let Some(idx) = self.data_channel(now, at.channel, at.local, at.src) else {
            return;
        };
        let bytes = adus.iter().map(|a| a.payload.len()).sum();
        if !self.admit(now, bytes) {
            return;
        }
        if !self.channels[idx].on_receive(now, at.seq, at.send_ts) {
            return;
        }
        for a in adus.iter() {
            self.stats.adus_received += 1;
            self.accept_adu(now, &at, a.flags, a.stream, a.stream_seq, a.payload);
        }
        self.flush_delivered();
        self.admitted(now, bytes);
    }

    /// Hand one arrived ADU to its stream's receiver, or to the recovery layer if its
    /// stream codes.
    pub(super) fn accept_adu(
        &mut self,
        now: Duration,
        at: &Arrival,
        flags: u8,
        stream: u32,
        stream_seq: u64,
        payload: Bytes,
    ) {
        if flags & FLAG_RECOVERY != 0 {
            self.recovery_arrival(now, stream, (at.channel, at.seq, at.send_ts), &payload);
            return;
        }
        let ordered = flags & FLAG_ORDERED != 0;
        let adu = Delivered {
            stream,
            stream_seq,
            channel: at.channel,
            payload,
        };
        self.receiver.accept(now, ordered, adu);
    }

    /// An ack from the peer: resolves ADUs in flight, and may bring a dead channel back.
    pub(super) fn on_ack(&mut self, now: Duration, ack: Ack, src: SocketAddr) {
        let Some(idx) = self.known_channel(ack.channel, src) else {
            return;
        };
        self.wake_cycle(now);
        let was_alive = self.channels[idx].is_alive();
        let mut out = std::mem::take(&mut self.resolved);
        out.clear();
        self.channels[idx].on_ack(now, &ack, &mut out);
        if !was_alive && self.channels[idx].is_alive() {
            self.events.push_back(Event::ChannelUp {
                channel: ack.channel,
            });
        }
        self.on_resolved(now, ack.channel, &out);
        self.resolved = out;
        self.ack_ranges = ack.ranges;
    }

    /// The peer advertised a new cumulative limit (they only grow; a reordered older
    /// one changes nothing).
    pub(super) fn on_window(&mut self, now: Duration, limit: u64) {
        let flow = &mut self.receiver.flow;
        flow.peer_limit = Some(flow.peer_limit.map_or(limit, |l| l.max(limit)));
        self.flow_credit_changed(now);
    }

    /// The peer's credit grew (a new limit, a loss given back): a blocked sender whose
    /// packet fits again resumes.
    pub(super) fn flow_credit_changed(&mut self, now: Duration) {
        if self.receiver.flow.unblock_if_fits() {
            self.life.zero_window_probe_at(None);
            self.events.push_back(Event::FlowResumed);
            self.wake_cycle(now);
        }
    }
}

/// Where a data-bearing packet came from and its channel header.
pub(super) struct Arrival {
    pub(super) channel: ChannelId,
    pub(super) seq: u64,
    pub(super) send_ts: u32,
    pub(super) local: u16,
    pub(super) src: SocketAddr,
}
