//! A Horde session between two hosts over any number of channels (sans-IO).
//!
//! The driver feeds datagrams ([`Session::handle_datagram`]) and timer expiries
//! ([`Session::handle_timeout`]) with the current time, and drains datagrams to send
//! ([`Session::poll_transmit`]), the next deadline ([`Session::poll_timeout`]) and
//! application events ([`Session::poll_event`]). Nothing here reads a clock, touches a
//! socket or draws entropy except from the seeded RNG in the configuration.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::{ChannelId, HistoryEntry, ObjectiveSet, RandomizedRoundRobin, Scheduler};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::channel::{min_opt, Channel, ChannelConfig, Resolved};
use crate::event::{CloseReason, Event};
use crate::fair_share::FairShare;
use crate::lifecycle::Lifecycle;
use crate::recovery::RecoveryLayer;
use crate::stream::{Delivered, RecvStream, SendStream};
use crate::timers::{Deadlines, TimerTable};
use crate::wire::{self, Packet};

mod api;
#[cfg(test)]
mod carry_tests;
mod close;
pub(crate) mod config;
mod cycle;
mod error;
mod handshake;
mod receive;
mod recovery_hooks;
mod succession;
mod timeouts;
mod transmit;

pub use api::{AduHandle, ChannelSpec, LatencyMode, SessionStats};
pub(crate) use config::ms;
pub use config::SessionConfig;
use cycle::{CycleScratch, IDLE_CYCLE_RETRY};
pub use error::SessionError;
use receive::Arrival;
use transmit::{PendingAdu, PendingTx};
pub use transmit::{Transmit, TransmitAdus};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
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

/// One connection with a peer over any number of channels: its streams, objectives,
/// scheduler, channel managers and loss recovery, as a state machine. Created by
/// [`Session::connect`] or [`Session::accept`] (or through an
/// [`Endpoint`](crate::Endpoint), which demultiplexes many); the module text says how a
/// driver runs it.
pub struct Session {
    conn: u64,
    service: u32,
    is_client: bool,
    state: State,
    config: SessionConfig,
    epoch: Duration,
    channels: Vec<Channel>,
    /// Configuration for channels the peer opens (server side), by channel id.
    peer_channel_config: Arc<dyn Fn(ChannelId) -> ChannelConfig + Send + Sync>,
    local_aliases: Vec<SocketAddr>,
    remote_aliases: Vec<SocketAddr>,
    send: BTreeMap<u32, SendStream>,
    recv: BTreeMap<u32, RecvStream>,
    scheduler: Box<dyn Scheduler>,
    objectives: ObjectiveSet,
    history: VecDeque<HistoryEntry>,
    history_base: u64,
    events: VecDeque<Event>,
    tx: VecDeque<PendingTx>,
    /// Entries of queued `PendingTx::Packed` packets, in order; `tx_adus_base` is the
    /// absolute index of the first.
    tx_adus: VecDeque<PendingAdu>,
    tx_adus_base: u64,
    rng: ChaCha8Rng,
    next_adu_id: u64,
    next_cycle: Duration,
    last_refill: Duration,
    hello_due: Option<Duration>,
    /// Channels added after the handshake whose hello the peer has not acknowledged yet
    /// (client side); their hello is repeated every `hello_interval_ms`.
    unconfirmed: Vec<ChannelId>,
    /// Channels the peer opened that this end removed (accepting side): when the peer's
    /// traffic re-creates one, the application hears [`Event::ChannelUp`].
    removed: Vec<ChannelId>,
    stats: SessionStats,
    cycle: CycleScratch,
    fair_share: FairShare,
    /// Per stream: payload bytes of its allocation it has not been sent while it had
    /// ADUs waiting, less the common shortfall of the streams at the fair-share level
    /// (see [`Session::track_debt`]). Unlike credit, never capped: it is what the
    /// fairness pass checks before letting a stream wait for phantom slots.
    debt: BTreeMap<u32, f64>,
    resolved: Vec<Resolved>,
    delivered: Vec<Delivered>,
    life: Lifecycle,
    close_reason: Option<CloseReason>,
    /// The range list of the last ack received, reused to decode the next.
    ack_ranges: Vec<(u64, u64)>,
    /// Loss recovery of the streams that ask for it (`docs/recovery.md`).
    recovery: RecoveryLayer,
    /// The named timers' deadlines.
    timers: TimerTable,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("conn", &self.conn)
            .field("state", &self.state)
            .field("channels", &self.channels)
            .finish_non_exhaustive()
    }
}

impl Session {
    fn new(conn: u64, service: u32, is_client: bool, config: SessionConfig, now: Duration) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        Self {
            conn,
            service,
            is_client,
            state: State::Handshaking,
            epoch: now,
            channels: Vec::new(),
            peer_channel_config: Arc::new(|_| ChannelConfig::default()),
            local_aliases: Vec::new(),
            remote_aliases: Vec::new(),
            send: BTreeMap::new(),
            recv: BTreeMap::new(),
            scheduler: Box::new(RandomizedRoundRobin::default()),
            objectives: ObjectiveSet::new(),
            history: VecDeque::new(),
            history_base: 0,
            events: VecDeque::new(),
            tx: VecDeque::new(),
            tx_adus: VecDeque::new(),
            tx_adus_base: 0,
            rng,
            next_adu_id: 0,
            next_cycle: now,
            last_refill: now,
            hello_due: None,
            unconfirmed: Vec::new(),
            removed: Vec::new(),
            stats: SessionStats::default(),
            cycle: CycleScratch::default(),
            fair_share: FairShare::default(),
            debt: BTreeMap::new(),
            resolved: Vec::new(),
            delivered: Vec::new(),
            life: Lifecycle::new(now),
            close_reason: None,
            ack_ranges: Vec::new(),
            recovery: RecoveryLayer::default(),
            timers: TimerTable::default(),
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
        let (conn, service) = handshake::parse_hello(&datagram)?;
        let mut s = Self::new(conn, service, false, config, now);
        s.local_aliases = local_aliases;
        s.peer_channel_config = channel_config;
        s.state = State::Connected;
        s.events.push_back(Event::Connected);
        s.handle_datagram(now, local, src, datagram);
        Ok(s)
    }

    /// The oldest event not yet taken; call until `None` after every input.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ----- driver API --------------------------------------------------------------

    /// Feed one received datagram. Malformed or foreign datagrams are counted and dropped.
    pub fn handle_datagram(&mut self, now: Duration, local: u16, src: SocketAddr, datagram: Bytes) {
        self.timers.invalidate();
        let packet = match wire::decode_reusing(&datagram, &mut self.ack_ranges) {
            Ok(p) => p,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        if packet.conn() != self.conn {
            self.stats.foreign += 1;
            return;
        }
        self.life.last_rx = now;
        self.life.sent_at_rx = self.packets_sent();
        match self.state {
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
                for idx in 0..self.channels.len() {
                    if let Some(ack) = self.channels[idx].take_ack(now, self.conn) {
                        self.tx.push_back(PendingTx::Ack(idx, ack));
                    }
                }
                self.answer_close(local, src);
                let reason = if self.state == State::Closing {
                    CloseReason::LocalClose // both ends closed at once
                } else {
                    CloseReason::PeerClosed
                };
                self.finish(now, reason);
            }
            Packet::CloseAck { .. } => {
                if self.state == State::Closing {
                    self.finish(now, CloseReason::LocalClose);
                }
            }
            Packet::Window { limit, .. } => self.on_window(now, limit),
        }
    }

    /// Process timers that are due (and only those).
    pub fn handle_timeout(&mut self, now: Duration) {
        if self.timers.is_stale() {
            self.refill_timers();
        }
        let ran = self.run_due_timers(now);
        if ran {
            self.refill_timers();
        }
    }

    /// The next time [`Session::handle_timeout`] or [`Session::poll_transmit`] has work:
    /// now if datagrams wait, else the earliest named timer or, with ADUs queued, the
    /// next slot.
    pub fn poll_timeout(&self, now: Duration) -> Option<Duration> {
        if !self.tx.is_empty() {
            return Some(now);
        }
        let mut t = if self.timers.is_stale() {
            let mut d = Deadlines::default();
            self.fill_timers(&mut d);
            d.next()
        } else {
            self.timers.deadlines().next()
        };
        if self.state == State::Connected
            && self.life.flow.may_send()
            && (self.send.values().any(|s| !s.queue.is_empty()) || self.recovery.wants_spare())
        {
            let slot_at = self
                .channels
                .iter()
                .filter_map(|c| c.next_send_at(now))
                .min();
            t = min_opt(t, slot_at.map(|s| s.max(self.next_cycle)));
        }
        t
    }

    /// Write the next datagram to send into `buf` (cleared first).
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.timers.invalidate();
        if self.tx.is_empty() {
            for idx in 0..self.channels.len() {
                if let Some(ack) = self.channels[idx].take_ack(now, self.conn) {
                    self.tx.push_back(PendingTx::Ack(idx, ack));
                }
            }
        }
        if self.tx.is_empty() {
            self.queue_recovery(now);
            if self.cycle_due(now) {
                self.run_cycle(now);
                self.note_drained();
            } else if self.send.values().all(|s| s.queue.is_empty()) {
                if self.offer_spare_slots(now) && self.cycle_due(now) {
                    self.run_cycle(now);
                } else {
                    self.mark_idle_channels_app_limited(now);
                }
            }
        }
        let Some(p) = self.tx.pop_front() else {
            // The driver's flush ends here: its next question is when to come back.
            self.refill_timers();
            return None;
        };
        buf.clear();
        self.life.last_tx = now;
        Some(self.encode_pending(now, p, buf))
    }
}
