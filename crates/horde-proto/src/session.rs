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
use horde_policy::{
    ChannelId, Fields, HistoryEntry, Objective, ObjectiveId, ObjectiveSet, RandomizedRoundRobin,
    Scheduler, Value,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

use crate::channel::{min_opt, Channel, ChannelConfig, ChannelStats, ChannelViews, Resolved};
use crate::event::{CloseReason, Event, NackReason};
use crate::fair_share::FairShare;
use crate::lifecycle::Lifecycle;
use crate::recovery::{RecoveryConfigError, RecoveryLayer, Reframed};
use crate::stream::{Delivered, QueuedAdu, RecvStream, SendStream, StreamConfig};
use crate::timers::{Deadlines, TimerTable};
use crate::wire::{self, Packet, WireError};

#[cfg(test)]
mod carry_tests;
mod cycle;
mod handshake;
mod receive;
mod recovery_hooks;
mod timeouts;
mod transmit;

use cycle::{CycleScratch, IDLE_CYCLE_RETRY};
use receive::Arrival;
use transmit::{PendingAdu, PendingTx};
pub use transmit::{Transmit, TransmitAdus};

/// Session-wide settings.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionConfig {
    /// Seed of the session's RNG (scheduler randomness).
    #[serde(default)]
    pub seed: u64,
    /// Scheduling cycle period T in ms; 0 schedules whenever a slot and an ADU meet.
    #[serde(default)]
    pub cycle_ms: f64,
    /// Look-ahead N in ms: how far ahead channels predict phantom slots.
    #[serde(default)]
    pub lookahead_ms: f64,
    /// Longest an ADU may wait for phantom slots, in ms from the cycle that first left
    /// it on one; then the fairness pass puts it on a real slot. 0 (the thesis's
    /// scheduling, which its reproductions use) sets no limit per ADU, only the
    /// stream's deferral budget: an ADU that an objective ranks alike on a real and a
    /// phantom slot may then wait for the whole run while later ones go.
    #[serde(default)]
    pub phantom_wait_ms: f64,
    /// Run a cycle early once this many real slots are waiting (thesis `m`).
    #[serde(default)]
    pub early_cycle_slots: Option<usize>,
    /// Transmissions kept for objective contexts (only while objectives are active).
    #[serde(default = "default_history")]
    pub history_len: usize,
    /// Longest an ordered stream's receiver holds an ADU waiting for a gap to fill, ms.
    #[serde(default = "default_reorder_hold_ms")]
    pub reorder_hold_ms: f64,
    /// Handshake retransmission interval, ms.
    #[serde(default = "default_hello_ms")]
    pub hello_interval_ms: f64,
    /// Close the session ([`CloseReason::IdleTimeout`]) when nothing has arrived from
    /// the peer for this long, ms; 0 disables.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: f64,
    /// Send a keepalive (a ping on every channel) when nothing has been sent for this
    /// long, ms, so that a quiet but live session outlasts its peer's idle timeout (and
    /// NAT bindings stay open, as WireGuard's persistent keepalive); 0 disables.
    #[serde(default = "default_keepalive_ms")]
    pub keepalive_ms: f64,
    /// How long a local close waits for the peer's `CloseAck`, repeating `Close`, and
    /// how long an end closed by its peer keeps answering repeated `Close`s, ms.
    #[serde(default = "default_close_timeout_ms")]
    pub close_timeout_ms: f64,
    /// Interval between repetitions of an unacknowledged `Close`, ms.
    #[serde(default = "default_close_retry_ms")]
    pub close_retry_ms: f64,
    /// Pack several ADUs into one packet when they fit in a slot (wire version 2's
    /// `Packed` packets). Off, every slot carries exactly one ADU, as in the thesis; its
    /// reproductions run that way.
    #[serde(default = "default_pack_adus")]
    pub pack_adus: bool,
}

fn default_history() -> usize {
    64
}
fn default_reorder_hold_ms() -> f64 {
    50.0
}
fn default_hello_ms() -> f64 {
    500.0
}
fn default_idle_timeout_ms() -> f64 {
    10_000.0
}
fn default_keepalive_ms() -> f64 {
    1_000.0
}
fn default_close_timeout_ms() -> f64 {
    2_000.0
}
fn default_close_retry_ms() -> f64 {
    100.0
}
fn default_pack_adus() -> bool {
    true
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            cycle_ms: 0.0,
            lookahead_ms: 0.0,
            phantom_wait_ms: 0.0,
            early_cycle_slots: None,
            history_len: default_history(),
            reorder_hold_ms: default_reorder_hold_ms(),
            hello_interval_ms: default_hello_ms(),
            idle_timeout_ms: default_idle_timeout_ms(),
            keepalive_ms: default_keepalive_ms(),
            close_timeout_ms: default_close_timeout_ms(),
            close_retry_ms: default_close_retry_ms(),
            pack_adus: default_pack_adus(),
        }
    }
}

fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x.max(0.0) / 1e3)
}

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

/// Why a [`Session`] call was refused. Nothing a peer sends produces one after the
/// handshake: bad datagrams are counted in [`SessionStats`] instead.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SessionError {
    /// No stream with this id was opened with [`Session::open_stream`].
    #[error("unknown stream {0}")]
    UnknownStream(u32),
    /// [`Session::open_stream`] was called twice with this id.
    #[error("stream {0} already open")]
    StreamExists(u32),
    /// The ADU would not fit the largest slot any channel offers (its MTU).
    #[error("ADU of {len} bytes exceeds the largest slot ({max} bytes)")]
    AduTooLarge {
        /// The ADU's payload length, bytes.
        len: usize,
        /// The largest payload a slot carries now, bytes.
        max: u32,
    },
    /// The session has ended or is ending and takes no more ADUs.
    #[error("session is closed")]
    Closed,
    /// Channel ids are one byte: a session has at most 256 channels.
    #[error("too many channels (at most 256)")]
    TooManyChannels,
    /// The datagram that should open a session does not decode.
    #[error("not a handshake packet: {0}")]
    Malformed(#[from] WireError),
    /// The datagram that should open a session is a valid packet of another kind.
    #[error("not a handshake packet: a {0} packet")]
    NotAHello(&'static str),
    /// The peer's hello is of a wire version this end does not speak.
    #[error("peer speaks wire version {peer}; this end speaks version {ours} only")]
    UnsupportedVersion {
        /// The version in the peer's hello.
        peer: u8,
        /// [`wire::VERSION`].
        ours: u8,
    },
    /// A stream's [`RecoveryConfig`](crate::RecoveryConfig) is out of range.
    #[error("bad recovery settings: {0}")]
    BadRecovery(#[from] RecoveryConfigError),
    /// The ADU is not (or no longer) in its stream's send queue: it was sent, dropped
    /// or withdrawn already.
    #[error("ADU {} of stream {} is not queued", .0.id, .0.stream)]
    AduNotQueued(AduHandle),
    /// The session has no channel by that id.
    #[error("no channel {0}")]
    UnknownChannel(ChannelId),
    /// No objective by that id is active.
    #[error("no such objective")]
    UnknownObjective,
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
        self.state == State::Connected
    }

    /// Whether the session has ended or is ending: it takes no more ADUs.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closing | State::Draining | State::Closed)
    }

    /// Why the session ended, once it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.close_reason
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
        self.scheduler = scheduler;
    }

    /// The scheduler's name, as it reports it (for logs and reports).
    pub fn scheduler_name(&self) -> &'static str {
        self.scheduler.name()
    }

    // ----- application API -------------------------------------------------------

    /// Open stream `id` for sending with `config` (queue limit, ordering, recovery).
    /// Receiving needs no call: the peer's streams open when their first ADU arrives.
    pub fn open_stream(&mut self, id: u32, config: StreamConfig) -> Result<(), SessionError> {
        if self.send.contains_key(&id) {
            return Err(SessionError::StreamExists(id));
        }
        self.recovery.open(id, &config.recovery)?;
        self.send.insert(id, SendStream::new(id, config));
        Ok(())
    }

    /// Change a stream's rate limit (`None` = elastic).
    pub fn set_max_rate(&mut self, stream: u32, max_kbps: Option<f64>) -> Result<(), SessionError> {
        let s = self
            .send
            .get_mut(&stream)
            .ok_or(SessionError::UnknownStream(stream))?;
        s.config.max_kbps = max_kbps;
        Ok(())
    }

    /// Largest ADU any live channel can carry.
    pub fn max_adu(&self) -> u32 {
        self.channels.iter().map(|c| c.max_adu()).max().unwrap_or(0)
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
            .send
            .get_mut(&stream)
            .ok_or(SessionError::UnknownStream(stream))?;
        let id = self.next_adu_id;
        self.next_adu_id += 1;
        let seq = s.next_seq;
        s.next_seq += 1;
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
        let q = self
            .send
            .get_mut(&adu.stream)
            .and_then(|s| s.find_mut(adu.id))
            .ok_or(SessionError::AduNotQueued(adu))?;
        q.fields.set(name, value);
        Ok(())
    }

    /// Withdraw a queued ADU; the application hears [`Event::Nack`] with
    /// [`NackReason::Removed`]. Fails with [`SessionError::AduNotQueued`] if it already
    /// left the queue (sent or dropped).
    pub fn remove_adu(&mut self, adu: AduHandle) -> Result<(), SessionError> {
        let removed = self
            .send
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

    /// ADUs waiting in a stream's send queue.
    pub fn queued(&self, stream: u32) -> usize {
        self.send.get(&stream).map_or(0, |s| s.queue.len())
    }

    /// Payload bytes waiting in a stream's send queue.
    pub fn queued_bytes(&self, stream: u32) -> usize {
        self.send.get(&stream).map_or(0, |s| s.queued_bytes)
    }

    /// Whether the application may queue more on `stream` now: `false` from the moment
    /// its queue reaches the high-water mark until it falls to the low-water mark, which
    /// [`Event::Writable`] announces (marks: [`StreamConfig::water_marks`]). Advisory:
    /// [`Session::send_adu`] still accepts ADUs up to the queue limit.
    pub fn writable(&self, stream: u32) -> Result<bool, SessionError> {
        self.send
            .get(&stream)
            .map(SendStream::writable)
            .ok_or(SessionError::UnknownStream(stream))
    }

    /// Announce streams whose queue fell to the low-water mark.
    fn note_drained(&mut self) {
        for s in self.send.values_mut() {
            if s.update_writable() {
                self.events.push_back(Event::Writable { stream: s.id });
            }
        }
    }

    /// Give the scheduler an objective (a compiled hose program) to rank schedules by,
    /// from the next cycle on; the id withdraws it.
    pub fn inject_objective(&mut self, objective: Arc<dyn Objective>) -> ObjectiveId {
        self.objectives.inject(objective)
    }

    /// Withdraw an objective given to [`Session::inject_objective`].
    pub fn remove_objective(&mut self, id: ObjectiveId) -> Result<(), SessionError> {
        let removed = self.objectives.remove(id);
        if self.objectives.is_empty() {
            self.history.clear();
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

    /// Add a channel at run time (a new interface came up, or came back). Returns its id,
    /// the lowest free one: it may be the id of a channel removed earlier. The
    /// application hears [`Event::ChannelUp`]. On the client side the channel's hello is
    /// repeated until the peer acknowledges it, and the peer restarts its state for that
    /// id when the hello arrives (see [`Session::handle_datagram`]).
    pub fn add_channel(
        &mut self,
        now: Duration,
        spec: ChannelSpec,
    ) -> Result<ChannelId, SessionError> {
        self.timers.invalidate();
        let id = ChannelId::all()
            .find(|id| self.channel_index(*id).is_none())
            .ok_or(SessionError::TooManyChannels)?;
        self.channels
            .push(Channel::new(id, spec.local, spec.remote, spec.config, now));
        self.removed.retain(|&c| c != id);
        self.events.push_back(Event::ChannelUp { channel: id });
        if self.is_client {
            let idx = self.channels.len() - 1;
            self.tx.push_back(PendingTx::Hello(idx));
            self.unconfirmed.push(id);
            if self.hello_due.is_none() {
                self.hello_due = Some(now + ms(self.config.hello_interval_ms));
            }
        }
        Ok(id)
    }

    /// Remove a channel (its interface went away). A live channel is announced with
    /// [`Event::ChannelDown`] first; then its outstanding ADUs are nacked. On the
    /// accepting side, the peer's traffic may bring the channel back (it still sends on
    /// it, perhaps from a new address), and the session then announces
    /// [`Event::ChannelUp`].
    pub fn remove_channel(&mut self, now: Duration, id: ChannelId) -> Result<(), SessionError> {
        let alive = self
            .channel_index(id)
            .is_some_and(|i| self.channels[i].is_alive());
        if alive {
            self.events.push_back(Event::ChannelDown { channel: id });
        }
        if !self.drop_channel(now, id) {
            return Err(SessionError::UnknownChannel(id));
        }
        if !self.is_client && !self.removed.contains(&id) {
            self.removed.push(id);
        }
        Ok(())
    }

    /// Forget channel `id`, nacking what was in flight on it, without telling the
    /// application of the channel itself.
    fn drop_channel(&mut self, now: Duration, id: ChannelId) -> bool {
        self.timers.invalidate();
        let Some(idx) = self.channel_index(id) else {
            return false;
        };
        let mut ch = self.channels.remove(idx);
        self.unconfirmed.retain(|&c| c != id);
        // Everything outstanding on it is lost.
        let mut out = Vec::new();
        ch.abandon(now, &mut out);
        self.drop_pending_on(idx);
        self.on_resolved(now, id, &out);
        true
    }

    /// Close the session: queued ADUs are nacked at once, and `Close` is repeated on
    /// every channel until the peer acknowledges it or `close_timeout_ms` passes. Acks
    /// for ADUs in flight are still taken meanwhile; what is still in flight at the end
    /// is nacked as [`NackReason::Abandoned`], then [`Event::Closed`] reports
    /// [`CloseReason::LocalClose`].
    pub fn close(&mut self, now: Duration) {
        self.timers.invalidate();
        if self.is_closed() {
            return;
        }
        // Closed on purpose: no new session will take anything over.
        self.life.successor_expected = false;
        self.nack_queued();
        for i in 0..self.channels.len() {
            self.tx.push_back(PendingTx::Close(i));
        }
        self.state = State::Closing;
        self.life.start_close(now, &self.config);
        if self.channels.is_empty() {
            self.finish(now, CloseReason::LocalClose);
        }
    }

    /// End the session because a new one with the same peer replaced it.
    pub fn replaced(&mut self, now: Duration) {
        self.timers.invalidate();
        if !matches!(self.state, State::Closed | State::Draining) {
            self.finish(now, CloseReason::Replaced);
        }
    }

    /// End the session because the peer cannot be reached (the driver saw every channel
    /// die, or ICMP errors on every channel).
    pub fn unreachable(&mut self, now: Duration) {
        self.timers.invalidate();
        if !matches!(self.state, State::Closed | State::Draining) {
            self.finish(now, CloseReason::Unreachable);
        }
    }

    /// Nack every queued ADU as [`NackReason::Closed`].
    fn nack_queued(&mut self) {
        for s in self.send.values_mut() {
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
    fn finish(&mut self, now: Duration, reason: CloseReason) {
        let mut out = Vec::new();
        for c in &mut self.channels {
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
        self.tx
            .retain(|p| matches!(p, PendingTx::CloseAck(_) | PendingTx::Ack(..)));
        self.life.closing = None;
        self.state = if reason == CloseReason::PeerClosed {
            self.life.drain_until = Some(now + ms(self.config.close_timeout_ms));
            State::Draining
        } else {
            State::Closed
        };
        self.close_reason = Some(reason);
        // ADUs held for ordering were acknowledged on arrival: the application gets them
        // before it hears of the end.
        for r in self.recv.values_mut() {
            r.release_all(&mut self.delivered);
        }
        self.flush_delivered();
        self.events.push_back(Event::Closed { reason });
    }

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
        self.next_adu_id = self.next_adu_id.max(old.next_adu_id);
        let mut carried = std::mem::take(&mut old.life.carried);
        carried.sort_by_key(|(_, q)| std::cmp::Reverse(q.seq));
        for (id, old_stream) in std::mem::take(&mut old.send) {
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
            self.send.insert(id, s);
        }
        self.recovery.carry_stats(&old.recovery);
        self.objectives = std::mem::take(&mut old.objectives);
        std::mem::swap(&mut self.scheduler, &mut old.scheduler);
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

    /// Bound the receive buffer (payload bytes delivered to the application and not yet
    /// read, as told by [`Session::consumed`]); `None` leaves it unbounded, for drivers
    /// that hand ADUs straight to their consumer.
    pub fn set_receive_buffer(&mut self, limit: Option<usize>) {
        self.life.flow.limit = limit;
        // The peer learns the limit once the session is up (here, or on the handshake's
        // completion for the initiating end). The last arrival's time stands in for now:
        // it only spaces forced updates.
        if self.state == State::Connected {
            self.advertise_window(self.life.last_rx);
        }
    }

    /// The application has read `bytes` of payload delivered earlier.
    pub fn consumed(&mut self, now: Duration, bytes: usize) {
        self.timers.invalidate();
        let flow = &mut self.life.flow;
        flow.unread = flow.unread.saturating_sub(bytes);
        self.advertise_window(now);
    }

    /// Payload bytes the application must still read (report them with
    /// [`Session::consumed`]) before this end advertises a larger limit to its peer
    /// (a peer that used up the last one waits for it); `None` without a receive buffer.
    /// A driver that is not woken by reading should wake when this much has been read.
    pub fn reopens_after_reading(&self) -> Option<usize> {
        self.life.flow.reopens_after_reading(self.held_bytes())
    }

    /// Payload bytes delivered to the application and not yet read.
    pub fn unread_bytes(&self) -> usize {
        self.life.flow.unread
    }

    /// Whether the peer's advertised limit holds back this end's data now.
    pub fn flow_blocked(&self) -> bool {
        self.life.flow.blocked.is_some()
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
