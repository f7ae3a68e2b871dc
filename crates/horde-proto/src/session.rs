//! A Horde session between two hosts over any number of channels (sans-IO).
//!
//! The driver feeds datagrams ([`Session::handle_datagram`]) and timer expiries
//! ([`Session::handle_timeout`]) with the current time, and drains datagrams to send
//! ([`Session::poll_transmit`]), the next deadline ([`Session::poll_timeout`]) and
//! application events ([`Session::poll_event`]). Nothing here reads a clock, touches a
//! socket or draws entropy except from the seeded RNG in the configuration.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::ChannelId;

use crate::channel::{min_opt, Channel, ChannelConfig, Resolved};
use crate::event::{CloseReason, Event};
use crate::recovery::RecoveryLayer;
use crate::wire::{self, Packet};

/// Room for events the session keeps once the driver has taken them all.
const EVENT_ROOM_KEPT: usize = 1024;

mod api;
#[cfg(test)]
mod carry_tests;
mod channels;
mod close;
pub(crate) mod config;
mod cycle;
mod error;
#[cfg(test)]
mod event_room_tests;
mod flow;
mod handshake;
mod lifecycle;
mod pending;
mod plan;
mod receive;
mod recovery_hooks;
mod scratch;
mod sender;
mod succession;
#[cfg(test)]
mod test_session;
mod timeouts;
mod transmit;

pub use api::{AduHandle, ChannelSpec, LatencyMode, SessionStats};
use channels::ChannelSet;
pub(crate) use config::ms;
pub use config::SessionConfig;
use cycle::IDLE_CYCLE_RETRY;
pub use error::SessionError;
pub(crate) use handshake::Hello;
use lifecycle::{Lifecycle, State};
use pending::{PendingAdu, PendingTx};
use receive::{Arrival, Receiver};
use sender::Sender;
use transmit::Header;
pub use transmit::{Transmit, TransmitAdus};

/// One connection with a peer over any number of channels: its streams, objectives,
/// scheduler, channel managers and loss recovery, as a state machine. Created by
/// [`Session::connect`] or [`Session::accept`] (or through an
/// [`Endpoint`](crate::Endpoint), which demultiplexes many); the module text says how a
/// driver runs it.
pub struct Session {
    conn: u64,
    service: u32,
    is_client: bool,
    config: SessionConfig,
    /// Packets are stamped with microseconds since this instant.
    epoch: Duration,
    local_aliases: Vec<SocketAddr>,
    remote_aliases: Vec<SocketAddr>,
    channels: ChannelSet,
    sender: Sender,
    receiver: Receiver,
    life: Lifecycle,
    /// Loss recovery of the streams that ask for it (`docs/recovery.md`).
    recovery: RecoveryLayer,
    events: VecDeque<Event>,
    stats: SessionStats,
    /// Reused for what a channel's ack or timeout resolved.
    resolved: Vec<Resolved>,
    /// The range list of the last ack received, reused to decode the next.
    ack_ranges: Vec<(u64, u64)>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("conn", &self.conn)
            .field("state", &self.life.state)
            .field("channels", &self.channels)
            .finish_non_exhaustive()
    }
}

impl Session {
    fn new(conn: u64, service: u32, is_client: bool, config: SessionConfig, now: Duration) -> Self {
        Self {
            conn,
            service,
            is_client,
            epoch: now,
            local_aliases: Vec::new(),
            remote_aliases: Vec::new(),
            channels: ChannelSet::new(),
            sender: Sender::new(config.seed, now),
            receiver: Receiver::default(),
            life: Lifecycle::new(now, &config),
            recovery: RecoveryLayer::default(),
            events: VecDeque::new(),
            stats: SessionStats::default(),
            resolved: Vec::new(),
            ack_ranges: Vec::new(),
            config,
        }
    }

    /// Open a session to a peer: sends the handshake on every channel.
    pub fn connect(
        config: SessionConfig,
        conn: u64,
        service: u32,
        channels: Vec<ChannelSpec>,
        local_aliases: Vec<SocketAddr>,
        now: Duration,
    ) -> Result<Self, SessionError> {
        if channels.len() > ChannelId::COUNT {
            return Err(SessionError::TooManyChannels);
        }
        let mut s = Self::new(conn, service, true, config, now);
        s.local_aliases = local_aliases;
        for (id, c) in ChannelId::all().zip(channels) {
            s.channels
                .push(Channel::new(id, c.local, c.remote, c.config, now));
        }
        s.send_hellos(now);
        Ok(s)
    }

    /// Accept a session from the first datagram a peer sent (which must be a hello).
    /// `channel_config` gives the settings of each channel the peer opens.
    pub fn accept(
        config: SessionConfig,
        now: Duration,
        local: u16,
        src: SocketAddr,
        datagram: Bytes,
        local_aliases: Vec<SocketAddr>,
        channel_config: Arc<dyn Fn(ChannelId) -> ChannelConfig + Send + Sync>,
    ) -> Result<Self, SessionError> {
        let hello = handshake::parse_hello(&datagram)?;
        Ok(Self::accept_hello(
            config,
            now,
            local,
            src,
            hello,
            local_aliases,
            channel_config,
        ))
    }

    /// [`Session::accept`] on a hello already decoded (by an [`Endpoint`](crate::Endpoint)
    /// routing it), so that the datagram is decoded once.
    pub(crate) fn accept_hello(
        config: SessionConfig,
        now: Duration,
        local: u16,
        src: SocketAddr,
        hello: Hello,
        local_aliases: Vec<SocketAddr>,
        channel_config: Arc<dyn Fn(ChannelId) -> ChannelConfig + Send + Sync>,
    ) -> Self {
        let mut s = Self::new(hello.conn, hello.service, false, config, now);
        s.local_aliases = local_aliases;
        s.channels.peer_config = channel_config;
        s.life.set_state(State::Connected, &s.config);
        s.events.push_back(Event::Connected);
        s.life.timers.invalidate_derived();
        s.handle_packet(now, local, src, hello.packet);
        s
    }

    /// The oldest event not yet taken; call until `None` after every input.
    pub fn poll_event(&mut self) -> Option<Event> {
        let e = self.events.pop_front();
        if e.is_none() {
            // Drained: the ring starts again at its start, and room grown for a burst
            // (an outage's end resolves thousands of ADUs at once) goes back. Kept and
            // written round and round, every page of it would in time be resident.
            self.events.clear();
            self.events.shrink_to(EVENT_ROOM_KEPT);
        }
        e
    }

    // ----- driver API --------------------------------------------------------------

    /// Feed one received datagram. Malformed or foreign datagrams are counted and dropped.
    pub fn handle_datagram(&mut self, now: Duration, local: u16, src: SocketAddr, datagram: Bytes) {
        self.life.timers.invalidate_derived();
        let packet = match wire::decode_reusing(&datagram, &mut self.ack_ranges) {
            Ok(p) => p,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        self.handle_packet(now, local, src, packet);
    }

    /// One decoded packet of this session's connection (or of another: counted foreign).
    fn handle_packet(&mut self, now: Duration, local: u16, src: SocketAddr, packet: Packet) {
        if packet.conn() != self.conn {
            self.stats.foreign += 1;
            return;
        }
        self.life.heard(now, &self.config);
        self.life.sent_at_rx = self.channels.packets_sent();
        match self.life.state {
            State::Closed => return,
            State::Draining => {
                if matches!(packet, Packet::Close { .. }) {
                    self.answer_close(local, src);
                }
                return;
            }
            _ => {}
        }
        match packet {
            Packet::Hello {
                channel, aliases, ..
            } => self.on_hello(now, channel, aliases, local, src),
            Packet::HelloAck {
                channel, aliases, ..
            } => self.on_hello_ack(now, channel, aliases, src),
            Packet::Data {
                channel,
                flags,
                seq,
                send_ts,
                stream,
                stream_seq,
                payload,
                ..
            } => {
                let arrival = Arrival {
                    channel,
                    seq,
                    send_ts,
                    local,
                    src,
                };
                self.on_data(now, arrival, flags, stream, stream_seq, payload);
            }
            Packet::Packed {
                channel,
                seq,
                send_ts,
                adus,
                ..
            } => {
                let arrival = Arrival {
                    channel,
                    seq,
                    send_ts,
                    local,
                    src,
                };
                self.on_packed(now, arrival, adus);
            }
            Packet::Ping {
                channel,
                seq,
                send_ts,
                ..
            } => {
                if let Some(idx) = self.data_channel(now, channel, local, src) {
                    self.channels[idx].on_receive(now, seq, send_ts);
                    self.answer_ping_with_window(idx);
                }
            }
            Packet::Ack(ack) => self.on_ack(now, ack, src),
            Packet::Close { .. } => {
                // The last acks go out before the CloseAck, so the closing end learns
                // the fate of what it had in flight.
                self.channels.queue_acks(now, self.conn);
                self.answer_close(local, src);
                let reason = if self.life.state == State::Closing {
                    CloseReason::LocalClose // both ends closed at once
                } else {
                    CloseReason::PeerClosed
                };
                self.finish(now, reason);
            }
            Packet::CloseAck { .. } => {
                if self.life.state == State::Closing {
                    self.finish(now, CloseReason::LocalClose);
                }
            }
            Packet::Window { limit, .. } => self.on_window(now, limit),
            Packet::Refused { service, .. } => self.on_refused(now, service),
        }
    }

    /// Process timers that are due (and only those).
    pub fn handle_timeout(&mut self, now: Duration) {
        if self.life.timers.derived_stale() {
            self.refresh_derived_timers();
        }
        let ran = self.run_due_timers(now);
        if ran {
            self.refresh_derived_timers();
        }
    }

    /// The next time [`Session::handle_timeout`] or [`Session::poll_transmit`] has work:
    /// now if datagrams wait, else the earliest named timer or the next send.
    pub fn poll_timeout(&self, now: Duration) -> Option<Duration> {
        if self.channels.has_pending() {
            return Some(now);
        }
        let mut deadlines = *self.life.timers.deadlines();
        if self.life.timers.derived_stale() {
            self.fill_derived_timers(&mut deadlines);
        }
        min_opt(deadlines.next(), self.next_send(now))
    }

    /// When [`Session::poll_transmit`] next has something to queue or send: now while
    /// the recovery layer holds ADUs to queue; with ADUs queued (or spare capacity
    /// wanted), the next slot; and the next packet a periodic cycle holds. Before then a
    /// poll sends only what already waits, so a driver that polls more often than it
    /// is asked to changes no run (`horde-sim/tests/tunnel_carrier.rs` checks it).
    fn next_send(&self, now: Duration) -> Option<Duration> {
        if self.recovery.has_outgoing() {
            return Some(now);
        }
        if self.life.state != State::Connected || !self.receiver.flow.may_send() {
            return None;
        }
        let mut t = None;
        if self.sender.has_queued() || self.recovery.wants_spare() {
            let bound_waiting = self.sender.bound_waiting();
            let slot_at = self
                .channels
                .iter()
                .filter_map(|c| cycle::slot_open_at(c, now, bound_waiting))
                .min();
            t = slot_at.map(|s| s.max(self.sender.next_cycle));
            if self.sender.has_queued() {
                t = min_opt(t, self.next_refill(now));
            }
        }
        min_opt(t, self.sender.next_release(&self.channels, now))
    }

    /// Write the next datagram to send into `buf` (cleared first).
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.life.timers.invalidate_derived();
        if !self.channels.has_pending() {
            self.channels.queue_acks(now, self.conn);
        }
        if !self.channels.has_pending() {
            // Work that time brings (recovery ADUs to queue, a cycle, spare capacity to
            // offer) waits for its deadline, so that polling early changes nothing.
            let due = self.next_send(now).is_some_and(|t| t <= now);
            if due {
                self.queue_recovery(now);
            }
            if due && self.cycle_due(now) {
                self.run_cycle(now);
                self.note_drained();
            } else if due && !self.sender.plan.is_empty() {
                self.release_planned(now);
            } else if !self.sender.has_queued() && self.sender.plan.is_empty() {
                if due && self.offer_spare_slots(now) && self.cycle_due(now) {
                    self.run_cycle(now);
                } else {
                    // Nothing to send where a channel could: its rate samples from here
                    // on are the application's limit, not the path's.
                    self.channels.mark_idle_app_limited(now);
                }
            }
        }
        let header = Header {
            conn: self.conn,
            service: self.service,
            aliases: &self.local_aliases,
        };
        // Every queued packet names a channel the set holds (those of a removed channel
        // leave with it); one that does not is skipped.
        while let Some(p) = self.channels.pop_pending() {
            buf.clear();
            if let Some(t) = self.channels.encode_pending(now, p, &header, buf) {
                self.life.last_tx = now;
                return Some(t);
            }
        }
        // The driver's flush ends here: its next question is when to come back.
        self.refresh_derived_timers();
        None
    }
}
