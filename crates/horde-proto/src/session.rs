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
    AduView, Allocator, Assignment, Demand, Fields, HistoryEntry, Objective, ObjectiveId,
    ObjectiveSet, Outcome, RandomizedRoundRobin, ScheduleInput, Scheduler, StreamStats, TxSlot,
    Value,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

use crate::channel::{
    min_opt, Channel, ChannelConfig, ChannelStats, Resolution, Resolved, SentAdu,
};
use crate::event::{CloseReason, Event, NackReason};
use crate::fair_share::{FairShare, SlotChoice};
use crate::lifecycle::{Lifecycle, ZERO_WINDOW_PROBE};
use crate::packing::{packed_capacity, packet_size, Packer, PlanInput};
use crate::recovery::RecoveryLayer;
use crate::stream::{Delivered, InFlightPolicy, QueuedAdu, RecvStream, SendStream, StreamConfig};
use crate::timers::{Deadlines, Timer, TimerTable};
use crate::wire::{
    self, Ack, Packet, FLAG_ORDERED, FLAG_RECOVERY, MAX_PACKED_ADUS, PACKED_ENTRY_LEN,
};

mod recovery_hooks;

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

/// How far behind its allocation, in seconds of it, a stream may fall while a scheduler
/// keeps its ADUs for phantom slots, before the fairness pass puts them on real slots
/// regardless. Small against the 5 s windows over which each stream is promised 95% of
/// its allocation.
const DEFERRAL_BUDGET_SECS: f64 = 0.15;

/// How long an event-driven session waits after a cycle that sent nothing before trying
/// again without news.
const IDLE_CYCLE_RETRY: Duration = Duration::from_millis(1);

fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x.max(0.0) / 1e3)
}

/// A datagram the driver must send: `payload` was written into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Local interface (socket) to send from.
    pub local: u16,
    pub dst: SocketAddr,
    pub channel: u8,
    /// The channel sequence number the datagram carries (data, packed data and pings).
    pub seq: Option<u64>,
    /// The ADUs it carries, in packet order; empty for control packets.
    pub adus: TransmitAdus,
}

/// The ADUs of one [`Transmit`]: at most [`MAX_PACKED_ADUS`], held inline so that
/// polling a datagram allocates nothing. Dereferences to a slice.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TransmitAdus {
    len: u8,
    items: [AduHandle; MAX_PACKED_ADUS],
}

impl TransmitAdus {
    const NONE: Self = Self {
        len: 0,
        items: [AduHandle {
            stream: 0,
            id: 0,
            seq: 0,
        }; MAX_PACKED_ADUS],
    };

    fn push(&mut self, h: AduHandle) {
        if let Some(slot) = self.items.get_mut(usize::from(self.len)) {
            *slot = h;
            self.len += 1;
        }
    }
}

impl Default for TransmitAdus {
    fn default() -> Self {
        Self::NONE
    }
}

impl std::ops::Deref for TransmitAdus {
    type Target = [AduHandle];
    fn deref(&self) -> &[AduHandle] {
        &self.items[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for TransmitAdus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Identifies a queued or sent ADU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AduHandle {
    pub stream: u32,
    pub id: u64,
    /// The ADU's `stream_seq`, as the receiver will see it.
    pub seq: u64,
}

/// One latency mode (thesis §3.2.5): one per live channel with RTT samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyMode {
    pub channel: u8,
    pub mean_ms: f64,
    pub variance_ms2: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SessionError {
    #[error("unknown stream {0}")]
    UnknownStream(u32),
    #[error("stream {0} already open")]
    StreamExists(u32),
    #[error("ADU of {len} bytes exceeds the largest slot ({max} bytes)")]
    AduTooLarge { len: usize, max: u32 },
    #[error("session is closed")]
    Closed,
    #[error("too many channels (at most 256)")]
    TooManyChannels,
    #[error("not a handshake packet: {0}")]
    NotAHello(String),
    /// The peer's hello is of a wire version this end does not speak.
    #[error("peer speaks wire version {peer}; this end speaks version {ours} only")]
    UnsupportedVersion { peer: u8, ours: u8 },
    #[error("bad recovery settings: {0}")]
    BadRecovery(String),
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
    pub adus_queued: u64,
    pub adus_sent: u64,
    pub adus_acked: u64,
    /// ADUs nacked as lost (late-acked ones included).
    pub adus_lost: u64,
    /// ADUs nacked as lost and then acknowledged after all.
    pub adus_late_acked: u64,
    pub adus_dropped: u64,
    pub adus_received: u64,
    /// Sent ADUs nacked as [`NackReason::Abandoned`] when the session ended.
    pub adus_abandoned: u64,
    /// Data packets dropped unacknowledged because the receive buffer was full.
    pub flow_dropped: u64,
    pub cycles: u64,
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

#[derive(Debug)]
enum PendingTx {
    Hello(usize),
    HelloAck(usize),
    Data {
        channel: usize,
        seq: u64,
        flags: u8,
        send_ts: u32,
        id: u64,
        stream: u32,
        stream_seq: u64,
        payload: Bytes,
    },
    /// Several ADUs in one packet: the next `count` entries of `Session::tx_adus`
    /// from absolute index `first`.
    Packed {
        channel: usize,
        seq: u64,
        send_ts: u32,
        first: u64,
        count: u8,
    },
    Ack(usize, Ack),
    Ping(usize, u64, u32),
    Close(usize),
    CloseAck(usize),
    Window(usize, u64),
}

/// One ADU waiting in a packed packet's entry list.
#[derive(Debug)]
struct PendingAdu {
    id: u64,
    flags: u8,
    stream: u32,
    stream_seq: u64,
    payload: Bytes,
}

/// Working space of the scheduling cycle, reused so that a cycle at steady state does
/// not touch the heap.
#[derive(Debug, Default)]
struct CycleScratch {
    slots: Vec<TxSlot>,
    adus: Vec<AduView>,
    assignment: Assignment,
    /// Per collected ADU: whether the fairness pass lets it wait for a phantom slot.
    may_wait: Vec<bool>,
    /// Per channel: real slots offered this cycle.
    real_counts: Vec<usize>,
    streams: Vec<StreamStats>,
    demands: Vec<Demand>,
    allocations: Vec<f64>,
    allocator: Allocator,
    /// Per stream with ADUs waiting, in collection priority order.
    cursors: Vec<StreamCursor>,
    packer: Packer,
    /// The ADUs of the packet being sent.
    sent_adus: Vec<SentAdu>,
    packet_adus: Vec<PendingAdu>,
}

/// A stream's place in [`Session::collect_adus`].
#[derive(Debug, Clone, Copy)]
struct StreamCursor {
    id: u32,
    /// Position among the streams with ADUs waiting, by id.
    index: usize,
    owed_secs: f64,
    /// ADUs taken from the front of its queue so far.
    taken: usize,
    credit: f64,
    owed: bool,
    patient: bool,
}

pub struct Session {
    conn: u64,
    service: u32,
    is_client: bool,
    state: State,
    config: SessionConfig,
    epoch: Duration,
    channels: Vec<Channel>,
    /// Configuration for channels the peer opens (server side), by channel id.
    peer_channel_config: Arc<dyn Fn(u8) -> ChannelConfig + Send + Sync>,
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
    unconfirmed: Vec<u8>,
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
    pub local: u16,
    pub remote: SocketAddr,
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
        if channels.len() > 256 {
            return Err(SessionError::TooManyChannels);
        }
        let mut s = Self::new(conn, service, true, config, now);
        s.local_aliases = local_aliases;
        for (i, c) in channels.into_iter().enumerate() {
            s.channels
                .push(Channel::new(i as u8, c.local, c.remote, c.config, now));
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
        channel_config: Arc<dyn Fn(u8) -> ChannelConfig + Send + Sync>,
    ) -> Result<Self, SessionError> {
        if let Some(peer) = wire::foreign_hello_version(&datagram) {
            return Err(SessionError::UnsupportedVersion {
                peer,
                ours: wire::VERSION,
            });
        }
        let packet = wire::decode(&datagram).map_err(|e| SessionError::NotAHello(e.to_string()))?;
        let Packet::Hello { conn, service, .. } = packet else {
            return Err(SessionError::NotAHello(format!("{packet:?}")));
        };
        let mut s = Self::new(conn, service, false, config, now);
        s.local_aliases = local_aliases;
        s.peer_channel_config = channel_config;
        s.state = State::Connected;
        s.events.push_back(Event::Connected);
        s.handle_datagram(now, local, src, datagram);
        Ok(s)
    }

    pub fn conn_id(&self) -> u64 {
        self.conn
    }

    pub fn service(&self) -> u32 {
        self.service
    }

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

    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    pub fn remote_aliases(&self) -> &[SocketAddr] {
        &self.remote_aliases
    }

    pub fn set_scheduler(&mut self, scheduler: Box<dyn Scheduler>) {
        self.scheduler = scheduler;
    }

    pub fn scheduler_name(&self) -> &'static str {
        self.scheduler.name()
    }

    // ----- application API -------------------------------------------------------

    pub fn open_stream(&mut self, id: u32, config: StreamConfig) -> Result<(), SessionError> {
        if self.send.contains_key(&id) {
            return Err(SessionError::StreamExists(id));
        }
        self.recovery
            .open(id, &config.recovery)
            .map_err(|e| SessionError::BadRecovery(e.to_string()))?;
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

    /// Change a header field of a queued ADU. Returns `false` if it already left.
    pub fn set_adu_field(&mut self, adu: AduHandle, name: &str, value: Value) -> bool {
        match self
            .send
            .get_mut(&adu.stream)
            .and_then(|s| s.find_mut(adu.id))
        {
            Some(q) => {
                q.fields.set(name, value);
                true
            }
            None => false,
        }
    }

    /// Withdraw a queued ADU. Returns `false` if it already left.
    pub fn remove_adu(&mut self, adu: AduHandle) -> bool {
        let removed = self
            .send
            .get_mut(&adu.stream)
            .and_then(|s| s.take(adu.id))
            .is_some();
        self.note_drained();
        removed
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

    pub fn inject_objective(&mut self, objective: Arc<dyn Objective>) -> ObjectiveId {
        self.objectives.inject(objective)
    }

    pub fn remove_objective(&mut self, id: ObjectiveId) -> bool {
        let removed = self.objectives.remove(id);
        if self.objectives.is_empty() {
            self.history.clear();
        }
        removed
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

    pub fn channel_stats(&self) -> Vec<(u8, ChannelStats)> {
        self.channels.iter().map(|c| (c.id, c.stats)).collect()
    }

    pub fn channels(&self) -> &[Channel] {
        &self.channels
    }

    /// Add a channel at run time (a new interface came up). Returns its id, the lowest
    /// free one: it may be the id of a channel removed earlier. On the client side the
    /// channel's hello is repeated until the peer acknowledges it, and the peer restarts
    /// its state for that id when the hello arrives (see [`Session::handle_datagram`]).
    pub fn add_channel(&mut self, now: Duration, spec: ChannelSpec) -> Result<u8, SessionError> {
        self.timers.invalidate();
        let id = (0..=255u8)
            .find(|id| self.channel_index(*id).is_none())
            .ok_or(SessionError::TooManyChannels)?;
        self.channels
            .push(Channel::new(id, spec.local, spec.remote, spec.config, now));
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

    /// Remove a channel (its interface went away). Its outstanding ADUs are nacked.
    pub fn remove_channel(&mut self, now: Duration, id: u8) -> bool {
        self.timers.invalidate();
        let Some(idx) = self.channel_index(id) else {
            return false;
        };
        let mut ch = self.channels.remove(idx);
        self.unconfirmed.retain(|&c| c != id);
        // Everything outstanding on it is lost.
        let mut out = Vec::new();
        ch.abandon(now, &mut out);
        self.tx.retain(|p| pending_channel(p) != idx);
        for p in self.tx.iter_mut() {
            shift_channel_index(p, idx);
        }
        // Entries of packed packets that went with the channel are skipped when the next
        // packed packet is encoded; with none left, drop them now.
        if !self
            .tx
            .iter()
            .any(|p| matches!(p, PendingTx::Packed { .. }))
        {
            self.tx_adus_base += self.tx_adus.len() as u64;
            self.tx_adus.clear();
        }
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
    /// nor the in-flight ADUs of streams with [`InFlightPolicy::Resend`].
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
            for (_, q) in carried.iter().filter(|(st, _)| *st == id) {
                s.queued_bytes += q.payload.len();
                s.queue.push_front(q.clone());
            }
            for q in old_stream.queue {
                s.queued_bytes += q.payload.len();
                s.queue.push_back(q);
            }
            // Carried ADUs count against the queue limit like any other.
            for d in s.trim() {
                self.stats.adus_dropped += 1;
                self.events.push_back(Event::Nack {
                    stream: id,
                    adu: d.id,
                    stream_seq: d.seq,
                    channel: None,
                    reason: NackReason::QueueOverflow,
                });
            }
            self.send.insert(id, s);
        }
        self.objectives = std::mem::take(&mut old.objectives);
        std::mem::swap(&mut self.scheduler, &mut old.scheduler);
        self.wake_cycle(now);
    }

    /// Bound the receive buffer (payload bytes delivered to the application and not yet
    /// read, as told by [`Session::consumed`]); `None` leaves it unbounded, for drivers
    /// that hand ADUs straight to their consumer.
    pub fn set_receive_buffer(&mut self, limit: Option<usize>) {
        self.life.flow.limit = limit;
    }

    /// The application has read `bytes` of payload delivered earlier.
    pub fn consumed(&mut self, now: Duration, bytes: usize) {
        self.timers.invalidate();
        let flow = &mut self.life.flow;
        flow.unread = flow.unread.saturating_sub(bytes);
        if let Some(open) = flow.update(now, false) {
            self.queue_window(open);
        }
    }

    /// Payload bytes delivered to the application and not yet read.
    pub fn unread_bytes(&self) -> usize {
        self.life.flow.unread
    }

    /// Whether the peer's zero window holds back this end's data now.
    pub fn flow_blocked(&self) -> bool {
        self.life.flow.blocked_since.is_some()
    }

    /// Whether the receive buffer can take `bytes` more of payload. A full buffer takes
    /// nothing more: the packet is not acked, so the sender counts it lost, and is told
    /// to stop.
    fn admit(&mut self, now: Duration, bytes: usize) -> bool {
        // ADUs held for ordering take buffer space too: they become unread data soon.
        let held: usize = self.recv.values().map(RecvStream::held_bytes).sum();
        if self.life.flow.fits(bytes + held) {
            return true;
        }
        self.stats.flow_dropped += 1;
        if let Some(open) = self.life.flow.update(now, true) {
            self.queue_window(open);
        }
        false
    }

    fn queue_window(&mut self, open: u64) {
        // On every channel: updates are rare and small, and one channel's path back to
        // the sender may be broken without this end knowing (a NAT rebinding the sender
        // has not yet announced on it, a dead downlink); a lost reopening would leave
        // the sender probing forever.
        for idx in 0..self.channels.len() {
            self.tx.push_back(PendingTx::Window(idx, open));
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ----- driver API --------------------------------------------------------------

    fn channel_index(&self, id: u8) -> Option<usize> {
        self.channels.iter().position(|c| c.id == id)
    }

    fn send_ts(&self, now: Duration) -> u32 {
        now.saturating_sub(self.epoch).as_micros() as u32
    }

    fn send_hellos(&mut self, now: Duration) {
        for i in 0..self.channels.len() {
            self.tx.push_back(PendingTx::Hello(i));
        }
        self.hello_due = Some(now + ms(self.config.hello_interval_ms));
    }

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
            } => {
                if self.is_client {
                    return;
                }
                // A hello on a channel that already carried the peer's packets means the
                // peer removed the channel and added it again under the same id: its
                // sequence numbers start over, so this end starts over too (otherwise
                // they would look like duplicates of the old channel's packets).
                if self
                    .channel_index(channel)
                    .is_some_and(|i| self.channels[i].has_received())
                {
                    self.remove_channel(now, channel);
                }
                let idx = self.peer_channel(now, channel, local, src);
                self.remote_aliases = aliases;
                self.tx.push_back(PendingTx::HelloAck(idx));
            }
            Packet::HelloAck {
                channel, aliases, ..
            } => {
                if !self.is_client {
                    return;
                }
                let Some(idx) = self.known_channel(channel, src) else {
                    return;
                };
                let _ = idx;
                self.remote_aliases = aliases;
                self.unconfirmed.retain(|&c| c != channel);
                if self.state == State::Handshaking {
                    self.state = State::Connected;
                    self.hello_due = None;
                    self.events.push_back(Event::Connected);
                }
                if self.unconfirmed.is_empty() {
                    self.hello_due = None;
                } else if self.hello_due.is_none() {
                    self.hello_due = Some(now + ms(self.config.hello_interval_ms));
                }
            }
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
                if self.state == State::Closing {
                    return;
                }
                let Some(idx) = self.data_channel(now, channel, local, src) else {
                    return;
                };
                if !self.admit(now, payload.len()) {
                    return;
                }
                if !self.channels[idx].on_receive(now, seq, send_ts) {
                    return;
                }
                self.stats.adus_received += 1;
                let ordered = flags & FLAG_ORDERED != 0;
                if flags & FLAG_RECOVERY != 0 {
                    self.recovery_arrival(now, stream, (channel, seq, send_ts), &payload);
                } else {
                    let rs = self
                        .recv
                        .entry(stream)
                        .or_insert_with(|| RecvStream::new(ordered));
                    rs.on_arrival(
                        now,
                        Delivered {
                            stream,
                            stream_seq,
                            channel,
                            payload,
                        },
                        &mut self.delivered,
                    );
                }
                self.flush_delivered();
                if let Some(open) = self.life.flow.update(now, false) {
                    self.queue_window(open);
                }
            }
            Packet::Packed {
                channel,
                seq,
                send_ts,
                adus,
                ..
            } => {
                if self.state == State::Closing {
                    return;
                }
                let Some(idx) = self.data_channel(now, channel, local, src) else {
                    return;
                };
                if !self.admit(now, adus.iter().map(|a| a.payload.len()).sum()) {
                    return;
                }
                if !self.channels[idx].on_receive(now, seq, send_ts) {
                    return;
                }
                for a in adus.iter() {
                    self.stats.adus_received += 1;
                    if a.flags & FLAG_RECOVERY != 0 {
                        self.recovery_arrival(now, a.stream, (channel, seq, send_ts), &a.payload);
                        continue;
                    }
                    let ordered = a.flags & FLAG_ORDERED != 0;
                    let rs = self
                        .recv
                        .entry(a.stream)
                        .or_insert_with(|| RecvStream::new(ordered));
                    rs.on_arrival(
                        now,
                        Delivered {
                            stream: a.stream,
                            stream_seq: a.stream_seq,
                            channel,
                            payload: a.payload,
                        },
                        &mut self.delivered,
                    );
                }
                self.flush_delivered();
                if let Some(open) = self.life.flow.update(now, false) {
                    self.queue_window(open);
                }
            }
            Packet::Ping {
                channel,
                seq,
                send_ts,
                ..
            } => {
                if let Some(idx) = self.data_channel(now, channel, local, src) {
                    self.channels[idx].on_receive(now, seq, send_ts);
                }
            }
            Packet::Ack(ack) => {
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
            Packet::Window { open, .. } => {
                let flow = &mut self.life.flow;
                if open == 0 {
                    if flow.blocked_since.is_none() {
                        self.events.push_back(Event::FlowBlocked);
                    }
                    flow.blocked_since = Some(now);
                } else if flow.blocked_since.take().is_some() {
                    self.events.push_back(Event::FlowResumed);
                    self.wake_cycle(now);
                }
            }
        }
    }

    /// Acknowledge a `Close` on the channel it came over (the first channel if the
    /// address is not one of them).
    fn answer_close(&mut self, local: u16, src: SocketAddr) {
        if self.channels.is_empty() {
            return;
        }
        let idx = self
            .channels
            .iter()
            .position(|c| c.remote == src && c.local == local)
            .unwrap_or(0);
        self.tx.push_back(PendingTx::CloseAck(idx));
    }

    /// The channel a hello or data packet arrived on, creating it on the accepting side.
    fn peer_channel(&mut self, now: Duration, id: u8, local: u16, src: SocketAddr) -> usize {
        if let Some(idx) = self.channel_index(id) {
            let ch = &mut self.channels[idx];
            ch.remote = src; // follow the peer across address changes
            ch.local = local;
            return idx;
        }
        let cfg = (self.peer_channel_config)(id);
        self.channels.push(Channel::new(id, local, src, cfg, now));
        self.channels.len() - 1
    }

    fn data_channel(
        &mut self,
        now: Duration,
        id: u8,
        local: u16,
        src: SocketAddr,
    ) -> Option<usize> {
        if self.is_client {
            self.known_channel(id, src)
        } else {
            Some(self.peer_channel(now, id, local, src))
        }
    }

    fn known_channel(&mut self, id: u8, src: SocketAddr) -> Option<usize> {
        match self.channel_index(id) {
            Some(idx) => {
                self.channels[idx].remote = src;
                Some(idx)
            }
            None => {
                self.stats.unknown_channel += 1;
                None
            }
        }
    }

    fn flush_delivered(&mut self) {
        for d in self.delivered.drain(..) {
            if self.life.flow.limit.is_some() {
                self.life.flow.unread += d.payload.len();
            }
            self.events.push_back(Event::Received {
                stream: d.stream,
                stream_seq: d.stream_seq,
                channel: d.channel,
                payload: d.payload,
            });
        }
    }

    fn on_resolved(&mut self, now: Duration, channel: u8, resolved: &[Resolved]) {
        for r in resolved {
            let Some(a) = r.adu else { continue };
            self.life.resend.remove(&a.adu);
            let acked = !matches!(r.resolution, Resolution::Lost(_));
            if self.recovery.on_resolved(a.stream, a.adu, acked) {
                continue; // the recovery layer's own ADU
            }
            let stream_state = self.send.get_mut(&a.stream);
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
                    .checked_sub(self.history_base)
                    .and_then(|i| self.history.get_mut(i as usize))
                {
                    e.outcome = outcome;
                }
            }
        }
    }

    /// Process timers that are due (and only those).
    pub fn handle_timeout(&mut self, now: Duration) {
        if self.timers.is_stale() {
            self.refill_timers(now);
        }
        let ran = self.run_due_timers(now);
        if ran {
            self.refill_timers(now);
        }
    }

    /// The work of [`Session::handle_timeout`]. Returns whether any timer ran.
    fn run_due_timers(&mut self, now: Duration) -> bool {
        let due = |t| self.timers.is_due(t, now);
        let (channels_due, reorder_due) = (due(Timer::Channel), due(Timer::Reorder));
        let recovery_due = due(Timer::Recovery);
        let hello_due = self.hello_due.is_some_and(|t| t <= now);
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
        if !self.lifecycle_timers(now) {
            return lifecycle_due;
        }
        if !(hello_due || channels_due || reorder_due || recovery_due) {
            return lifecycle_due;
        }
        if self.hello_due.is_some_and(|t| t <= now) {
            match self.state {
                State::Handshaking => self.send_hellos(now),
                State::Connected if !self.unconfirmed.is_empty() => {
                    for i in 0..self.channels.len() {
                        if self.unconfirmed.contains(&self.channels[i].id) {
                            self.tx.push_back(PendingTx::Hello(i));
                        }
                    }
                    self.hello_due = Some(now + ms(self.config.hello_interval_ms));
                }
                _ => self.hello_due = None,
            }
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
            if actions.probe && matches!(self.state, State::Connected | State::Closing) {
                let seq = self.channels[idx].on_send(now, wire::DATA_HEADER_LEN as u32, &[]);
                let ts = self.send_ts(now);
                self.tx.push_back(PendingTx::Ping(idx, seq, ts));
            }
        }
        self.resolved = out;
        if reorder_due {
            let hold = ms(self.config.reorder_hold_ms);
            for r in self.recv.values_mut() {
                r.on_timeout(now, hold, &mut self.delivered);
            }
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
    fn lifecycle_timers(&mut self, now: Duration) -> bool {
        match self.state {
            State::Closed => return false,
            State::Draining => {
                if self.timers.is_due(Timer::Drain, now) {
                    self.life.drain_until = None;
                    self.state = State::Closed;
                }
                return false;
            }
            State::Closing => {
                if let Some(c) = self.life.closing {
                    if self.timers.is_due(Timer::CloseDeadline, now) {
                        self.finish(now, CloseReason::LocalClose);
                        return false;
                    }
                    if self.timers.is_due(Timer::CloseRetry, now) {
                        for i in 0..self.channels.len() {
                            self.tx.push_back(PendingTx::Close(i));
                        }
                        let retry = ms(self.config.close_retry_ms).max(Duration::from_millis(1));
                        self.life.closing = Some(crate::lifecycle::Closing {
                            next_retry: now + retry,
                            ..c
                        });
                    }
                }
            }
            State::Handshaking | State::Connected => {
                if self.timers.is_due(Timer::Idle, now) {
                    self.finish(now, CloseReason::IdleTimeout);
                    return false;
                }
                if self.state == State::Connected && self.timers.is_due(Timer::Keepalive, now) {
                    let interval = ms(self.config.keepalive_ms);
                    for idx in 0..self.channels.len() {
                        if self.channels[idx].last_sent() + interval > now {
                            continue;
                        }
                        let seq =
                            self.channels[idx].on_send(now, wire::DATA_HEADER_LEN as u32, &[]);
                        let ts = self.send_ts(now);
                        self.tx.push_back(PendingTx::Ping(idx, seq, ts));
                    }
                    self.life.last_tx = now;
                }
            }
        }
        if self.life.flow.blocked_since.is_some() && self.life.flow.may_send(now) {
            // Zero-window probe: send again; a still-full receiver shuts the window anew.
            self.wake_cycle(now);
        }
        true
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
            self.fill_timers(now, &mut d);
            d.next()
        } else {
            self.timers.deadlines().next()
        };
        if self.state == State::Connected
            && self.life.flow.may_send(now)
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

    /// Each channel is pinged once it has sent nothing for the keepalive interval, not
    /// only when the whole session is quiet: a channel the scheduler leaves unused (its
    /// peer prefers another) must still tell the peer where it is after an address
    /// change, and find out whether it still works. Otherwise one channel's traffic, or
    /// a dead channel's probes, hides another channel's silence until the session idles
    /// out (`docs/tunnel.md`, "The download test's stall").
    fn keepalive_deadline(&self) -> Option<Duration> {
        if self.config.keepalive_ms <= 0.0 {
            return None;
        }
        let interval = ms(self.config.keepalive_ms);
        self.channels.iter().map(|c| c.last_sent() + interval).min()
    }

    fn refill_timers(&mut self, now: Duration) {
        let mut d = Deadlines::default();
        self.fill_timers(now, &mut d);
        self.timers.refill(|table| *table = d);
    }

    /// Every named timer's deadline, from the session's state.
    fn fill_timers(&self, now: Duration, d: &mut Deadlines) {
        let hellos = match self.state {
            State::Handshaking => true,
            State::Connected => !self.unconfirmed.is_empty(),
            State::Closing => false,
            State::Draining => {
                d.set(Timer::Drain, self.life.drain_until);
                return;
            }
            State::Closed => return,
        };
        d.set(Timer::Hello, self.hello_due.filter(|_| hellos));
        if let Some(c) = self.life.closing {
            d.set(Timer::CloseRetry, Some(c.next_retry));
            d.set(Timer::CloseDeadline, Some(c.deadline));
        } else {
            d.set(Timer::Idle, self.life.idle_deadline(&self.config));
            if self.state == State::Connected {
                d.set(Timer::Keepalive, self.keepalive_deadline());
            }
        }
        if let Some(b) = self.life.flow.blocked_since {
            if !self.life.flow.may_send(now) {
                d.set(Timer::ZeroWindow, Some(b + ZERO_WINDOW_PROBE));
            }
        }
        let channels = self.channels.iter().filter_map(Channel::next_timeout).min();
        d.set(Timer::Channel, channels);
        let hold = ms(self.config.reorder_hold_ms);
        let held = self
            .recv
            .values()
            .filter_map(|r| r.next_timeout(hold))
            .min();
        d.set(Timer::Reorder, held);
        d.set(Timer::Recovery, self.recovery.next_timeout());
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
            self.refill_timers(now);
            return None;
        };
        buf.clear();
        self.life.last_tx = now;
        let idx = pending_channel(&p);
        let (conn, cid) = (self.conn, self.channels[idx].id);
        let mut sent = TransmitAdus::NONE;
        let mut packet_seq = None;
        match p {
            PendingTx::Hello(_) => wire::encode(
                &Packet::Hello {
                    conn,
                    channel: cid,
                    service: self.service,
                    aliases: self.local_aliases.clone(),
                },
                buf,
            ),
            PendingTx::HelloAck(_) => wire::encode(
                &Packet::HelloAck {
                    conn,
                    channel: cid,
                    aliases: self.local_aliases.clone(),
                },
                buf,
            ),
            PendingTx::Data {
                seq,
                flags,
                send_ts,
                id,
                stream,
                stream_seq,
                payload,
                ..
            } => {
                buf.reserve(wire::DATA_HEADER_LEN + payload.len());
                wire::encode_data_header(conn, cid, flags, seq, send_ts, stream, stream_seq, buf);
                buf.extend_from_slice(&payload);
                packet_seq = Some(seq);
                sent.push(AduHandle {
                    stream,
                    id,
                    seq: stream_seq,
                });
            }
            PendingTx::Packed {
                seq,
                send_ts,
                first,
                count,
                ..
            } => {
                packet_seq = Some(seq);
                self.encode_packed(conn, cid, seq, send_ts, first, count, buf, &mut sent);
            }
            PendingTx::Ack(_, ack) => {
                wire::encode_ack(&ack, buf);
                self.channels[idx].recycle_ack(ack);
                self.channels[idx].on_ack_sent(now);
            }
            PendingTx::Ping(_, seq, send_ts) => {
                packet_seq = Some(seq);
                wire::encode(
                    &Packet::Ping {
                        conn,
                        channel: cid,
                        seq,
                        send_ts,
                    },
                    buf,
                )
            }
            PendingTx::Close(_) => wire::encode(&Packet::Close { conn }, buf),
            PendingTx::CloseAck(_) => wire::encode(&Packet::CloseAck { conn }, buf),
            PendingTx::Window(_, open) => wire::encode(&Packet::Window { conn, open }, buf),
        }
        let ch = &self.channels[idx];
        Some(Transmit {
            local: ch.local,
            dst: ch.remote,
            channel: cid,
            seq: packet_seq,
            adus: sent,
        })
    }

    /// Write a packed packet whose entries start at absolute index `first` of
    /// `tx_adus`. Entries before it belong to packets dropped with their channel.
    #[allow(clippy::too_many_arguments)]
    fn encode_packed(
        &mut self,
        conn: u64,
        cid: u8,
        seq: u64,
        send_ts: u32,
        first: u64,
        count: u8,
        buf: &mut Vec<u8>,
        sent: &mut TransmitAdus,
    ) {
        while self.tx_adus_base < first && self.tx_adus.pop_front().is_some() {
            self.tx_adus_base += 1;
        }
        let n = usize::from(count).min(self.tx_adus.len());
        let body: usize = self
            .tx_adus
            .iter()
            .take(n)
            .map(|a| PACKED_ENTRY_LEN + a.payload.len())
            .sum();
        buf.reserve(wire::PACKED_HEADER_LEN + body);
        wire::encode_packed_header(conn, cid, seq, send_ts, n as u8, buf);
        for a in self.tx_adus.drain(..n) {
            // Lengths were checked against the slot (at most an mtu, far below 64 KiB).
            let _ = wire::encode_packed_entry(a.flags, a.stream, a.stream_seq, &a.payload, buf);
            sent.push(AduHandle {
                stream: a.stream,
                id: a.id,
                seq: a.stream_seq,
            });
        }
        self.tx_adus_base += n as u64;
    }

    /// Channels that could send but have nothing to: their rate samples understate them.
    fn mark_idle_channels_app_limited(&mut self, now: Duration) {
        for c in &mut self.channels {
            if c.next_send_at(now).is_some_and(|t| t <= now) {
                c.mark_app_limited();
            }
        }
    }

    /// News (an ADU, an ack) ends an event-driven session's wait after an empty cycle.
    fn wake_cycle(&mut self, now: Duration) {
        if self.config.cycle_ms <= 0.0 {
            self.next_cycle = self.next_cycle.min(now);
        }
    }

    fn cycle_due(&self, now: Duration) -> bool {
        if self.state != State::Connected
            || self.send.values().all(|s| s.queue.is_empty())
            || !self.life.flow.may_send(now)
        {
            return false;
        }
        let ready = self
            .channels
            .iter()
            .filter(|c| c.next_send_at(now).is_some_and(|t| t <= now))
            .count();
        if ready == 0 {
            return false;
        }
        if now >= self.next_cycle {
            return true;
        }
        self.config.early_cycle_slots.is_some_and(|m| {
            let n: usize = self.channels.iter().map(|c| c.real_slot_count(now)).sum();
            n >= m
        })
    }

    /// One scheduling cycle (thesis §6.3): collect slots and ADUs, schedule, pack the
    /// ADUs mapped to real slots into packets and transmit them, forget the phantom
    /// assignments. Works in `self.cycle`'s reused buffers: no allocation at steady state.
    fn run_cycle(&mut self, now: Duration) {
        self.stats.cycles += 1;
        if self.config.cycle_ms > 0.0 {
            let period = ms(self.config.cycle_ms);
            self.next_cycle = (self.next_cycle + period).max(now);
        }
        let mut cy = std::mem::take(&mut self.cycle);
        self.update_allocations(now, &mut cy);

        cy.slots.clear();
        cy.real_counts.clear();
        for c in &self.channels {
            cy.real_counts.push(c.real_slots(now, &mut cy.slots));
        }
        let n_real = cy.slots.len();
        if n_real == 0 {
            self.cycle = cy;
            return;
        }
        let lookahead = ms(self.config.lookahead_ms);
        for (c, &real) in self.channels.iter().zip(&cy.real_counts) {
            c.phantom_slots(now, lookahead, real, &mut cy.slots);
        }

        // One ADU per slot for the scheduler; with packing, more after them, as many as
        // the real slots' byte capacity could carry besides the first n_real.
        let n_sched = cy.slots.len();
        self.collect_adus(now, n_sched, &mut cy);
        if self.config.pack_adus && cy.adus.len() == n_sched {
            let capacity: usize = cy.slots[..n_real]
                .iter()
                .map(|s| packed_capacity(s.max_size))
                .sum();
            let leads: usize = cy.adus[..n_real.min(cy.adus.len())]
                .iter()
                .map(|a| PACKED_ENTRY_LEN + a.length as usize)
                .sum();
            if capacity > leads {
                self.take_adus(
                    now,
                    n_sched,
                    n_real * MAX_PACKED_ADUS,
                    capacity - leads,
                    &mut cy,
                );
            }
        }
        let n_sched = n_sched.min(cy.adus.len());
        cy.streams.clear();
        cy.streams.extend(self.send.values().map(|s| s.stats()));
        let history = self.history.make_contiguous();
        let input = ScheduleInput {
            slots: &cy.slots,
            adus: &cy.adus[..n_sched],
            history,
            streams: &cy.streams,
            objectives: &self.objectives,
        };
        let cs = self
            .scheduler
            .schedule(&input, &mut self.rng, &mut cy.assignment);
        self.stats.objective_evaluations += cs.evaluations;
        cy.assignment.resize(n_sched, None);
        let choice = SlotChoice {
            keep_channel: !self.objectives.is_empty(),
            // A hash of the cycle number: a plain counter would fall into step with
            // periodic sources and slot clocks and favour one channel for them.
            offset: (self.stats.cycles.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize,
        };
        self.fair_share.enforce(
            &cy.slots,
            n_real,
            &cy.adus[..n_sched],
            &cy.may_wait[..n_sched],
            &mut cy.assignment,
            choice,
        );
        if self.config.phantom_wait_ms > 0.0 {
            self.note_deferrals(now, n_real, &cy.adus[..n_sched], &cy.assignment);
        }

        // Send in slot order so consecutive real slots of a channel get consecutive
        // sequence numbers, as the slots predicted.
        cy.packer.plan(&PlanInput {
            slots: &cy.slots,
            n_real,
            adus: &cy.adus,
            assignment: &cy.assignment,
            may_wait: &cy.may_wait,
            pack: self.config.pack_adus,
            keep_channel: choice.keep_channel,
            offset: choice.offset,
        });
        let packer = std::mem::take(&mut cy.packer);
        for (slot, members) in packer.packets() {
            let slot = cy.slots[slot].clone();
            if !self.life.flow.may_send(now) {
                break; // a zero-window probe is one packet
            }
            self.transmit_packet(now, &slot, members, &mut cy);
        }
        // A channel left with real slots it had no ADU for is application-limited.
        let app_limited = if self.config.pack_adus {
            packer.len() < n_real && packer.all_placed()
        } else {
            cy.adus.len() < n_real
        };
        if app_limited {
            self.mark_idle_channels_app_limited(now);
        }
        // Event-driven cycles: one that sent nothing (every waiting stream over its rate,
        // say) would otherwise run again at once, forever; wait for news or a moment.
        if self.config.cycle_ms <= 0.0 && packer.len() == 0 {
            self.next_cycle = now + IDLE_CYCLE_RETRY;
        }
        cy.packer = packer;
        self.cycle = cy;
    }

    /// Start the patience clock of each ADU left on a phantom slot for the first time
    /// (see [`QueuedAdu::deferred_since`]).
    fn note_deferrals(
        &mut self,
        now: Duration,
        n_real: usize,
        adus: &[AduView],
        assignment: &[Option<usize>],
    ) {
        for (a, slot) in adus.iter().zip(assignment) {
            if slot.is_none_or(|s| s < n_real) {
                continue;
            }
            let queued = self
                .send
                .get_mut(&a.stream_id)
                .and_then(|s| s.find_mut(a.id));
            if let Some(q) = queued {
                q.deferred_since.get_or_insert(now);
            }
        }
    }

    /// Send one packet in `slot` carrying the collected ADUs `members` (indices into
    /// `cy.adus`): one ADU as a `Data` packet, several as a `Packed` one.
    fn transmit_packet(
        &mut self,
        now: Duration,
        slot: &TxSlot,
        members: &[usize],
        cy: &mut CycleScratch,
    ) {
        let Some(idx) = self.channel_index(slot.channel as u8) else {
            return;
        };
        cy.sent_adus.clear();
        cy.packet_adus.clear();
        if let Some(t) = self.life.flow.blocked_since.as_mut() {
            *t = now; // this packet is the probe; the next one waits
        }
        let seq_peek = self.channels[idx].next_seq_peek();
        for &a in members {
            let view = &cy.adus[a];
            let Some(stream) = self.send.get_mut(&view.stream_id) else {
                continue;
            };
            let Some(q) = stream.take(view.id) else {
                continue;
            };
            let (ch, p) = (slot.channel as u8, slot.loss_probability);
            self.recovery
                .on_transmit(view.stream_id, q.id, ch, p, q.payload.len());
            stream.credit -= q.payload.len() as f64;
            if let Some(d) = self.debt.get_mut(&view.stream_id) {
                *d -= q.payload.len() as f64;
            }
            if stream.config.on_reconnect == InFlightPolicy::Resend {
                self.life.resend.insert(q.id, (view.stream_id, q.clone()));
            }
            let mut flags = if stream.config.ordered {
                FLAG_ORDERED
            } else {
                0
            };
            if stream.config.recovery.is_on() {
                flags |= FLAG_RECOVERY;
            }
            let history = if self.objectives.is_empty() {
                None
            } else {
                let h = self.history_base + self.history.len() as u64;
                let mut s = slot.clone();
                s.sequence = seq_peek;
                self.history.push_back(HistoryEntry {
                    adu: view.clone(),
                    slot: s,
                    outcome: Outcome::Pending,
                });
                while self.history.len() > self.config.history_len {
                    self.history.pop_front();
                    self.history_base += 1;
                }
                Some(h)
            };
            cy.sent_adus.push(SentAdu {
                adu: q.id,
                stream: view.stream_id,
                stream_seq: q.seq,
                inserted: q.inserted,
                history,
            });
            cy.packet_adus.push(PendingAdu {
                id: q.id,
                flags,
                stream: view.stream_id,
                stream_seq: q.seq,
                payload: q.payload,
            });
        }
        if cy.packet_adus.is_empty() {
            return;
        }
        let size = packet_size(cy.packet_adus.iter().map(|a| a.payload.len())) as u32;
        let seq = self.channels[idx].on_send(now, size, &cy.sent_adus);
        self.stats.adus_sent += cy.packet_adus.len() as u64;
        let send_ts = self.send_ts(now);
        if cy.packet_adus.len() == 1 {
            let a = cy.packet_adus.pop().expect("one ADU");
            self.tx.push_back(PendingTx::Data {
                channel: idx,
                seq,
                flags: a.flags,
                send_ts,
                id: a.id,
                stream: a.stream,
                stream_seq: a.stream_seq,
                payload: a.payload,
            });
            return;
        }
        let first = self.tx_adus_base + self.tx_adus.len() as u64;
        let count = cy.packet_adus.len() as u8;
        self.tx_adus.extend(cy.packet_adus.drain(..));
        self.tx.push_back(PendingTx::Packed {
            channel: idx,
            seq,
            send_ts,
            first,
            count,
        });
    }

    /// Re-divide the channels' aggregate rate among streams (min-max fair), refill each
    /// stream's credit, and tell streams whose allocation moved by more than 10%.
    fn update_allocations(&mut self, now: Duration, cy: &mut CycleScratch) {
        // Allocations and credit are in ADU payload bytes, like streams' `max_kbps`, so
        // divide the payload the channels carry: a channel's rate counts headers too.
        let total: f64 = self.channels.iter().map(|c| c.payload_rate()).sum();
        cy.demands.clear();
        cy.demands
            .extend(self.send.values().map(|s| s.config.demand()));
        cy.allocator
            .allocate_into(total, &cy.demands, &mut cy.allocations);
        let dt = now.saturating_sub(self.last_refill);
        self.last_refill = now;
        let mtu = f64::from(self.max_adu());
        for (s, &a) in self.send.values_mut().zip(&cy.allocations) {
            s.allocation = a;
            s.refill(dt, mtu);
            let moved = s.announced.is_nan() || (a - s.announced).abs() > 0.1 * s.announced;
            if moved {
                s.announced = a;
                self.events.push_back(Event::Throttle {
                    stream: s.id,
                    rate: a,
                });
            }
        }
        self.track_debt(dt);
    }

    /// Streams with ADUs waiting fall behind by their allocation; idle ones owe and are
    /// owed nothing. The capacity the allocator counts is not all carried (slots lost to
    /// pacing, partly filled slots): min-max fairness over what is carried takes that
    /// shortfall from the streams at the fair-share level (those that want more than
    /// their allocation) alike, and none from streams that asked for less, so when all
    /// of the former are behind, the common part of their debt is forgiven.
    fn track_debt(&mut self, dt: Duration) {
        let mut floor = f64::INFINITY;
        for s in self.send.values() {
            let d = self.debt.entry(s.id).or_insert(0.0);
            if s.queue.is_empty() {
                *d = 0.0;
                continue;
            }
            *d += s.allocation * dt.as_secs_f64();
            if at_fair_level(s) {
                floor = floor.min(*d / s.allocation.max(1.0));
            }
        }
        if floor.is_finite() && floor > 0.0 {
            for s in self.send.values().filter(|s| at_fair_level(s)) {
                if let Some(d) = self.debt.get_mut(&s.id) {
                    *d -= floor * s.allocation.max(1.0);
                }
            }
        }
    }

    /// Pick up to `want` ADUs (one per slot, real or phantom: thesis Fig. 6-4) from the
    /// stream queues in FIFO order per stream, round-robin, most owed stream first (the
    /// thesis's starved-stream priority), in three passes:
    ///
    /// 1. streams with credit, each up to its credit;
    /// 2. the same streams beyond their credit;
    /// 3. any stream.
    ///
    /// Filling every slot, not just the real ones, keeps real slots from going empty when
    /// a scheduler defers some ADUs to phantoms. The order is the priority: the first
    /// ADUs, one per real slot, are what a cycle without look-ahead would send, and the
    /// fairness pass (`fair_share`) keeps them on real slots unless `may_wait` says their
    /// stream may wait for a better slot to come: only while objectives are active (no
    /// objective, no reason to wait) and the stream's `debt` is less than
    /// [`DEFERRAL_BUDGET_SECS`] of its allocation, and (with
    /// [`SessionConfig::phantom_wait_ms`]) for each ADU no longer than that after a
    /// scheduler first left it on a phantom. The stream's budget alone does not bound one
    /// ADU's wait: a stream whose other ADUs flow is never behind.
    fn collect_adus(&mut self, now: Duration, want: usize, cy: &mut CycleScratch) {
        cy.adus.clear();
        cy.may_wait.clear();
        let cursors = &mut cy.cursors;
        cursors.clear();
        let objectives = !self.objectives.is_empty();
        for (index, s) in self
            .send
            .values()
            .filter(|s| !s.queue.is_empty())
            .enumerate()
        {
            let debt = self.debt.get(&s.id).copied().unwrap_or(0.0);
            cursors.push(StreamCursor {
                id: s.id,
                index,
                owed_secs: s.owed_secs(),
                taken: 0,
                credit: s.credit,
                owed: s.credit > 0.0,
                patient: objectives && debt < DEFERRAL_BUDGET_SECS * s.allocation,
            });
        }
        // Most owed first, in seconds of the stream's own allocation, so a small stream
        // is not outranked by a big one merely because its byte credit is smaller.
        // Ties (common when every stream's credit sits at its cap, e.g. while the
        // channels' estimated rate exceeds what they carry) go to each stream in turn,
        // not always to the lowest id. Every key differs, so an unstable sort (which
        // needs no buffer) gives the one order.
        let n = cursors.len().max(1);
        let turn = (self.stats.cycles % n as u64) as usize;
        cursors.sort_unstable_by(|a, b| {
            b.owed_secs
                .total_cmp(&a.owed_secs)
                .then(((a.index + n - turn) % n).cmp(&((b.index + n - turn) % n)))
        });
        self.take_adus(now, want, 0, 0, cy);
    }

    /// Take ADUs from the streams in `cy.cursors`' order, where the cursors stand, until
    /// `cy.adus` holds `want`, then (for packing) at most `extra_count` more and until
    /// those would take `extra_bytes` of packed entries.
    fn take_adus(
        &self,
        now: Duration,
        want: usize,
        extra_count: usize,
        extra_bytes: usize,
        cy: &mut CycleScratch,
    ) {
        let out = &mut cy.adus;
        let may_wait = &mut cy.may_wait;
        let cursors = &mut cy.cursors;
        let limit = want + extra_count;
        let patience = (self.config.phantom_wait_ms > 0.0).then(|| ms(self.config.phantom_wait_ms));
        let mut extra_used = 0usize;
        let full = |len: usize, extra_used: usize| {
            len >= limit || (len >= want && extra_used >= extra_bytes)
        };
        for pass in 0..3 {
            loop {
                let mut progressed = false;
                for c in cursors.iter_mut() {
                    if full(out.len(), extra_used) {
                        break;
                    }
                    let Some(s) = self.send.get(&c.id) else {
                        continue;
                    };
                    let Some(q) = s.queue.get(c.taken) else {
                        continue;
                    };
                    if (pass == 0 && c.credit <= 0.0) || (pass == 1 && !c.owed) {
                        continue;
                    }
                    if out.len() >= want {
                        extra_used += PACKED_ENTRY_LEN + q.payload.len();
                    }
                    c.credit -= q.payload.len() as f64;
                    c.taken += 1;
                    progressed = true;
                    let waited = q.deferred_since.map(|t| now.saturating_sub(t));
                    let expired = patience.zip(waited).is_some_and(|(p, w)| w >= p);
                    may_wait.push(c.patient && !expired);
                    out.push(AduView {
                        id: q.id,
                        stream_id: s.id,
                        stream_seq: q.seq,
                        length: q.payload.len() as u32,
                        queue_delay_ms: now.saturating_sub(q.inserted).as_millis() as i64,
                        fields: q.fields.clone(),
                    });
                }
                if !progressed || full(out.len(), extra_used) {
                    break;
                }
            }
        }
    }
}

/// Whether a stream with ADUs waiting wants more than its allocation: min-max fairness
/// holds it at the fair-share level.
fn at_fair_level(s: &SendStream) -> bool {
    !s.queue.is_empty()
        && match s.config.demand() {
            Demand::Elastic => true,
            Demand::MaxRate(r) => s.allocation < r * (1.0 - 1e-9),
        }
}

fn pending_channel(p: &PendingTx) -> usize {
    match p {
        PendingTx::Hello(i)
        | PendingTx::HelloAck(i)
        | PendingTx::Ack(i, _)
        | PendingTx::Ping(i, _, _)
        | PendingTx::Close(i)
        | PendingTx::CloseAck(i)
        | PendingTx::Window(i, _) => *i,
        PendingTx::Data { channel, .. } | PendingTx::Packed { channel, .. } => *channel,
    }
}

/// After removing channel index `removed`, later indices move down by one.
fn shift_channel_index(p: &mut PendingTx, removed: usize) {
    let i = match p {
        PendingTx::Hello(i)
        | PendingTx::HelloAck(i)
        | PendingTx::Ack(i, _)
        | PendingTx::Ping(i, _, _)
        | PendingTx::Close(i)
        | PendingTx::CloseAck(i)
        | PendingTx::Window(i, _) => i,
        PendingTx::Data { channel, .. } | PendingTx::Packed { channel, .. } => channel,
    };
    if *i > removed {
        *i -= 1;
    }
}
