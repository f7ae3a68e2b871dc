//! Streams: the sender's per-stream ADU queue with its bandwidth credit and statistics,
//! and the receiver's delivery (as ADUs arrive, or in order with a bounded hold).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use horde_policy::{ChannelId, Demand, Fields, StreamStats};

use crate::recovery::{RecoveryConfig, RecoveryMode};

/// How a stream is configured by its sender.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamConfig {
    /// A maximum rate in kbit/s; absent means elastic (thesis §3.2.3).
    #[serde(default)]
    pub max_kbps: Option<f64>,
    /// Ask the receiver to deliver in stream order (holding ADUs at most `reorder_hold_ms`).
    #[serde(default)]
    pub ordered: bool,
    /// Sender queue limit in bytes; the oldest ADUs are dropped (and nacked) past it.
    #[serde(default = "default_queue_limit")]
    pub max_queue_bytes: usize,
    /// Back-pressure high-water mark, in ms of sending at the stream's allocated rate:
    /// once the queue holds this much the stream stops being writable.
    #[serde(default = "default_high_water_ms")]
    pub high_water_ms: f64,
    /// Back-pressure low-water mark, in ms at the allocated rate: a stream that stopped
    /// being writable becomes writable again, with [`Event::Writable`](crate::Event),
    /// once its queue has fallen to this much.
    #[serde(default = "default_low_water_ms")]
    pub low_water_ms: f64,
    /// Floor of the low-water mark in bytes (the high mark is at least twice it), so a
    /// stream whose allocation is still unknown or tiny keeps a few ADUs queued.
    #[serde(default = "default_water_floor")]
    pub water_floor_bytes: usize,
    /// What happens to this stream's ADUs in flight when the runtime replaces a dead
    /// session with a new one to the same peer (see `docs/architecture.md`, Lifecycle).
    #[serde(default)]
    pub on_reconnect: InFlightPolicy,
    /// Loss recovery for this stream's ADUs (none by default); see `docs/recovery.md`.
    #[serde(default)]
    pub recovery: RecoveryConfig,
    /// A latency objective: the one-way delay, ms, within which this stream's ADUs should
    /// arrive. While the stream is active the session keeps the queues of a few channels
    /// short enough to meet it and sends the stream's ADUs on them; the other channels
    /// and streams are untouched (`docs/congestion.md`, "Latency objectives"). `None`
    /// (the default): no bound, and the channels run their controllers alone.
    #[serde(default)]
    pub latency_bound_ms: Option<f64>,
    /// Copies of each ADU while the latency bound steers the stream: 1 (the default) or
    /// 2, the second on another bounded channel, so an ADU waits only in the shorter of
    /// two queues. The copies travel as the recovery layer's (`fec` at 100%), whose
    /// receiver keeps the first to arrive; needs `latency_bound_ms`, and `recovery` left
    /// at `none` or set to that (`docs/congestion.md`, "Latency objectives").
    #[serde(default = "default_latency_copies")]
    pub latency_copies: u8,
    /// Each of this stream's ADUs leaves on the quickest slot of its cycle: the slot
    /// whose channel has the lowest expected one-way delay (base plus the queue its
    /// latest round trip showed), displacing another stream's ADU, which takes its slot.
    /// No channel is bounded; an ADU waits for a later cycle while the best open slot's
    /// channel is slower than the quickest by more than it has already waited (plus
    /// 5 ms). For ADUs that only the faster channels can deliver in time: the message
    /// layer's urgent pieces (`docs/messages.md`, "Quick lane"). A latency bound, if
    /// set, wins over it.
    #[serde(default)]
    pub quickest: bool,
}

/// The values [`StreamConfig::latency_copies`] accepts.
pub const LATENCY_COPIES: std::ops::RangeInclusive<u8> = 1..=2;

fn default_latency_copies() -> u8 {
    1
}

/// The latency bounds [`StreamConfig::latency_bound_ms`] accepts, ms.
pub const LATENCY_BOUND_MS: std::ops::RangeInclusive<f64> = 1.0..=60_000.0;

/// The fate of a stream's in-flight ADUs (sent, not yet acked or declared lost) when
/// its session ends and a new one takes over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InFlightPolicy {
    /// Nack them ([`NackReason::Abandoned`](crate::NackReason)): right for real-time
    /// data, which would be stale by the time a new session is up.
    #[default]
    Nack,
    /// Queue them again, first, on the new session, with their ids and sequence numbers:
    /// right for data that must arrive (the receiver may then get one twice).
    Resend,
}

fn default_queue_limit() -> usize {
    256 * 1024
}
// Why these marks: an application refills its queue within a millisecond or two of
// hearing `Writable` (one hop through the runtime's command channel), and the runtime
// wakes on ~1 ms timers. A low mark of 10 ms at the stream's rate leaves the queue a wide
// margin against running dry meanwhile, and the 10 ms between the marks bounds how often
// the application is woken (about every 10 ms of sending) without queueing more than
// ~20 ms of data ahead of the channels. A rate-relative mark scales from a 1 Mbit/s modem
// to a gigabit path, where a fixed count of ADUs would either starve the fast path or
// queue seconds on the slow one; the floor covers the start, before any rate is known.
fn default_high_water_ms() -> f64 {
    20.0
}
fn default_low_water_ms() -> f64 {
    10.0
}
fn default_water_floor() -> usize {
    8 * 1024
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            max_kbps: None,
            ordered: false,
            max_queue_bytes: default_queue_limit(),
            high_water_ms: default_high_water_ms(),
            low_water_ms: default_low_water_ms(),
            water_floor_bytes: default_water_floor(),
            on_reconnect: InFlightPolicy::Nack,
            recovery: RecoveryConfig::default(),
            latency_bound_ms: None,
            latency_copies: default_latency_copies(),
            quickest: false,
        }
    }
}

impl StreamConfig {
    /// Why [`Self::latency_copies`] cannot be had as configured, if it cannot: a value
    /// other than 1 or 2, two copies without a latency bound, or with a recovery mode
    /// other than the `fec` at 100% that carries them.
    pub fn latency_copies_error(&self) -> Option<String> {
        let n = self.latency_copies;
        if !LATENCY_COPIES.contains(&n) {
            return Some(format!("latency_copies must be 1 or 2, got {n}"));
        }
        if n == 1 {
            return None;
        }
        if self.latency_bound_ms.is_none() {
            return Some("latency_copies = 2 needs a latency bound (latency_bound_ms)".into());
        }
        match self.recovery.mode {
            RecoveryMode::None | RecoveryMode::Fec { percent: 100.0 } => None,
            _ => Some(
                "latency_copies = 2 sends its copies as recovery mode \"fec\" at percent 100; \
                 leave recovery unset or set it to that"
                    .into(),
            ),
        }
    }

    /// How the latency steering treats this stream's ADUs: a bound wins over quickest.
    pub(crate) fn steer(&self) -> crate::latency::Steer {
        use crate::latency::Steer;
        match (self.latency_bound_ms, self.quickest) {
            (Some(ms), _) => Steer::Bound(ms),
            (None, true) => Steer::Quickest,
            (None, false) => Steer::Free,
        }
    }

    /// The configuration the session runs: with two copies, recovery's `fec` at 100%
    /// (one copy after each ADU) unless the stream already asked for it.
    pub(crate) fn with_copies_as_recovery(mut self) -> Self {
        if self.latency_copies == 2 && self.recovery.mode == RecoveryMode::None {
            self.recovery.mode = RecoveryMode::Fec { percent: 100.0 };
        }
        self
    }

    /// The largest ADU the stream takes on a session whose largest is `session_max`:
    /// less room for the recovery frame when the stream codes (two copies included).
    pub fn max_adu(&self, session_max: u32) -> u32 {
        if self.recovery.is_on() || self.latency_copies == 2 {
            session_max.saturating_sub(crate::recovery::header::MAX_OVERHEAD as u32)
        } else {
            session_max
        }
    }

    /// What the stream asks of the bandwidth allocator: its rate cap (`max_kbps`, in
    /// bytes/s) with room for the coded ADUs its recovery always sends, or as much as
    /// it can get.
    pub fn demand(&self) -> Demand {
        match self.max_kbps {
            Some(k) => Demand::MaxRate(self.redundancy() * k * 1000.0 / 8.0),
            None => Demand::Elastic,
        }
    }

    /// Bytes sent per byte of the application's, whatever the path: `fec`'s coded ADUs
    /// (two copies are `fec` at 100%). The other modes send theirs only into spare
    /// capacity or after a loss.
    pub(crate) fn redundancy(&self) -> f64 {
        match self.recovery.mode {
            RecoveryMode::Fec { percent } => 1.0 + percent / 100.0,
            RecoveryMode::None if self.latency_copies == 2 => 2.0,
            _ => 1.0,
        }
    }

    /// The (low, high) back-pressure marks in bytes for a stream allocated `rate`
    /// bytes/s. The high mark is at most half the queue limit, so a stream stops being
    /// writable well before its queue drops anything even if the application overshoots
    /// by a burst; the low mark is at most half the high one, so the hysteresis survives
    /// that cap on fast paths.
    pub fn water_marks(&self, rate: f64) -> (usize, usize) {
        let at = |ms: f64| (rate.max(0.0) * ms.max(0.0) / 1e3) as usize;
        let high = at(self.high_water_ms)
            .max(2 * self.water_floor_bytes)
            .min(self.max_queue_bytes / 2);
        let low = at(self.low_water_ms)
            .max(self.water_floor_bytes)
            .min(high / 2);
        (low, high)
    }
}

#[derive(Debug, Clone)]
pub struct QueuedAdu {
    pub id: u64,
    pub seq: u64,
    pub payload: Bytes,
    pub fields: Fields,
    pub inserted: Duration,
    /// When a scheduler first left it on a phantom slot (kept only with
    /// `SessionConfig::phantom_wait_ms`, which bounds the wait from then).
    pub deferred_since: Option<Duration>,
}

/// Credit never banks more than this much of a stream's allocation, so a stream that was
/// idle cannot later crowd out the others for long.
const CREDIT_HORIZON: f64 = 0.5;
/// Gain of the per-stream latency and loss averages exposed to hose stream variables.
const STATS_GAIN: f64 = 1.0 / 32.0;

#[derive(Debug)]
pub struct SendStream {
    pub id: u32,
    pub config: StreamConfig,
    pub next_seq: u64,
    pub queue: VecDeque<QueuedAdu>,
    pub queued_bytes: usize,
    /// Bytes/s granted by the bandwidth allocator.
    pub allocation: f64,
    /// The allocation last reported in a throttle event.
    pub announced: f64,
    /// Bytes this stream may still send ahead of others (may go negative).
    pub credit: f64,
    /// The stream took over a dead session's queue and has not emptied it yet: until
    /// it does, its credit may bank what its queue will cost ([`Self::queued_cost`]).
    catching_up: bool,
    /// Back-pressure: the queue reached the high-water mark and has not yet fallen to
    /// the low-water mark.
    blocked: bool,
    /// When the application last queued an ADU.
    pub last_queued: Option<Duration>,
    latency_ave: f64,
    latency_var: f64,
    loss_rate: f64,
    samples: u64,
}

impl SendStream {
    pub fn new(id: u32, config: StreamConfig) -> Self {
        Self {
            id,
            config,
            next_seq: 0,
            queue: VecDeque::new(),
            queued_bytes: 0,
            allocation: 0.0,
            announced: f64::NAN,
            credit: 0.0,
            catching_up: false,
            blocked: false,
            last_queued: None,
            latency_ave: 0.0,
            latency_var: 0.0,
            loss_rate: 0.0,
            samples: 0,
        }
    }

    /// Queue an ADU; returns the ADUs dropped to respect the queue limit (oldest first).
    pub fn push(&mut self, adu: QueuedAdu) -> Vec<QueuedAdu> {
        self.queued_bytes += adu.payload.len();
        self.queue.push_back(adu);
        self.trim()
    }

    /// Drop the oldest ADUs while the queue is over its limit (always keeping one).
    pub fn trim(&mut self) -> Vec<QueuedAdu> {
        let mut dropped = Vec::new();
        while self.queued_bytes > self.config.max_queue_bytes && self.queue.len() > 1 {
            let old = self.queue.pop_front().expect("queue has more than one ADU");
            self.queued_bytes -= old.payload.len();
            dropped.push(old);
        }
        dropped
    }

    /// Whether the application may queue more (back-pressure with hysteresis between the
    /// marks of [`StreamConfig::water_marks`]).
    pub fn writable(&self) -> bool {
        !self.blocked
    }

    /// Take over an ended session's back-pressure with its queue: an application that
    /// waits for the old queue to drain now waits for this one, which must announce it.
    pub fn carry_back_pressure(&mut self, old: &SendStream) {
        self.blocked = old.blocked;
    }

    /// Re-evaluate back-pressure after the queue grew or shrank. Returns `true` when the
    /// stream has just become writable again (time for an `Event::Writable`).
    pub fn update_writable(&mut self) -> bool {
        let (low, high) = self.config.water_marks(self.allocation);
        if self.queued_bytes >= high {
            self.blocked = true;
        } else if self.blocked && self.queued_bytes <= low {
            self.blocked = false;
            return true;
        }
        false
    }

    /// Take the ADU with `id` out of the queue.
    pub fn take(&mut self, id: u64) -> Option<QueuedAdu> {
        let pos = self.position(id)?;
        let adu = self.queue.remove(pos)?;
        self.queued_bytes -= adu.payload.len();
        Some(adu)
    }

    /// Return an ADU taken from the queue and not sent, to its place by id (ids grow in
    /// queue order).
    pub fn put_back(&mut self, adu: QueuedAdu) {
        let at = self.queue.partition_point(|q| q.id < adu.id);
        self.queued_bytes += adu.payload.len();
        self.queue.insert(at, adu);
    }

    pub fn find_mut(&mut self, id: u64) -> Option<&mut QueuedAdu> {
        let pos = self.position(id)?;
        self.queue.get_mut(pos)
    }

    /// Where the ADU with `id` stands in the queue. Ids are handed out in increasing
    /// order and the queue mostly keeps it, and ADUs mostly leave from near the front:
    /// an exponential search from the front brackets the id, and a binary search within
    /// the bracket finds it, in a time that grows with the log of its position. Data put
    /// ahead of spare coded ADUs (and in-flight ADUs carried to a successor) break the
    /// order; a scan covers them.
    fn position(&self, id: u64) -> Option<usize> {
        let q = &self.queue;
        if q.front()?.id == id {
            return Some(0);
        }
        let mut bound = 1;
        while bound < q.len() && q[bound].id < id {
            bound *= 2;
        }
        // Ordered, the ADU lies in `bound / 2 ..= bound` (`q[bound / 2]` is below it).
        let (mut lo, mut hi) = (bound / 2, bound.min(q.len() - 1) + 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if q[mid].id < id {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if q.get(lo).is_some_and(|a| a.id == id) {
            return Some(lo);
        }
        q.iter().position(|a| a.id == id)
    }

    /// How long, at its allocated rate, the stream has been owed service.
    pub fn owed_secs(&self) -> f64 {
        self.credit / self.allocation.max(1.0)
    }

    /// Bytes of its allocation the stream spends on sending `adu`: the application's
    /// bytes, not the recovery layer's header. A voice stream sending its 64 kbit/s at
    /// `max_kbps = 64` with two copies fell behind when each copy's 9- and 14-byte
    /// headers were charged too, and its queue grew without end.
    pub fn charge(&self, adu: &QueuedAdu) -> f64 {
        let len = if self.config.recovery.is_on() {
            crate::recovery::header::carried_len(&adu.payload)
        } else {
            adu.payload.len()
        };
        len as f64
    }

    /// What the ADUs waiting in the queue will cost to send, their coded ADUs too.
    pub fn queued_cost(&self) -> f64 {
        self.queued_bytes as f64 * self.config.redundancy()
    }

    /// The stream took over a dead session's queue: what waited through the
    /// reconnection is owed, so it starts with credit for all of it and banks what its
    /// queue costs until the queue first empties. Held to its allocation alone, a
    /// stream sending at exactly its `max_kbps` (voice) could never send faster than
    /// it queues, and would keep the outage as a standing delay for as long as it talked.
    pub fn catch_up(&mut self) {
        self.catching_up = true;
        self.credit = self.queued_cost();
    }

    /// Add `dt`'s worth of the allocation to the credit, up to [`CREDIT_HORIZON`] of it
    /// (or, catching up, what the queue costs).
    pub fn refill(&mut self, dt: Duration, mtu: f64) {
        self.catching_up &= !self.queue.is_empty();
        let mut cap = (self.allocation * CREDIT_HORIZON).max(mtu);
        if self.catching_up {
            cap = cap.max(self.queued_cost());
        }
        self.credit = (self.credit + self.allocation * dt.as_secs_f64()).min(cap);
    }

    pub fn on_acked(&mut self, latency: Duration) {
        let l = latency.as_secs_f64() * 1e3;
        self.samples += 1;
        if self.samples == 1 {
            self.latency_ave = l;
        } else {
            let d = l - self.latency_ave;
            self.latency_ave += STATS_GAIN * d;
            self.latency_var = (1.0 - STATS_GAIN) * (self.latency_var + STATS_GAIN * d * d);
        }
        self.loss_rate *= 1.0 - STATS_GAIN;
    }

    pub fn on_lost(&mut self) {
        self.loss_rate = (1.0 - STATS_GAIN) * self.loss_rate + STATS_GAIN;
    }

    /// Values for hose stream variables (`latency_ave`, `latency_sdev`, `loss_rate`).
    pub fn stats(&self) -> StreamStats {
        StreamStats {
            stream_id: self.id,
            latency_ave_ms: self.latency_ave,
            latency_sdev_ms: self.latency_var.sqrt(),
            loss_rate_pct: self.loss_rate * 100.0,
        }
    }
}

/// A received ADU ready for the application.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivered {
    pub stream: u32,
    pub stream_seq: u64,
    pub channel: ChannelId,
    pub payload: Bytes,
}

/// Receive side of one stream.
#[derive(Debug, Default)]
pub struct RecvStream {
    ordered: bool,
    /// Next stream sequence number owed to the application when ordered.
    next: u64,
    held: BTreeMap<u64, (Delivered, Duration)>,
    /// Payload bytes of the held ADUs.
    held_bytes: usize,
    pub delivered: u64,
}

impl RecvStream {
    pub fn new(ordered: bool) -> Self {
        Self {
            ordered,
            ..Self::default()
        }
    }

    /// Accept an arriving ADU; deliverable ones are appended to `out`.
    pub fn on_arrival(&mut self, now: Duration, adu: Delivered, out: &mut Vec<Delivered>) {
        if !self.ordered {
            self.delivered += 1;
            out.push(adu);
            return;
        }
        if adu.stream_seq < self.next {
            // Arrived after we gave up waiting for it: deliver late rather than lose it.
            self.delivered += 1;
            out.push(adu);
            return;
        }
        self.held_bytes += adu.payload.len();
        if let Some((old, _)) = self.held.insert(adu.stream_seq, (adu, now)) {
            self.held_bytes -= old.payload.len();
        }
        self.release_in_order(out);
    }

    fn release_in_order(&mut self, out: &mut Vec<Delivered>) {
        while let Some(entry) = self.held.first_entry() {
            if *entry.key() != self.next {
                break;
            }
            let (adu, _) = entry.remove();
            self.held_bytes -= adu.payload.len();
            // Saturates at the last number: later arrivals are then delivered as late.
            self.next = self.next.saturating_add(1);
            self.delivered += 1;
            out.push(adu);
        }
    }

    /// Release ADUs held longer than `hold`, and everything held in front of them,
    /// skipping the gaps. The expired ADU need not be the lowest-numbered one: a later
    /// ADU may have arrived first.
    pub fn on_timeout(&mut self, now: Duration, hold: Duration, out: &mut Vec<Delivered>) {
        let expired = self
            .held
            .iter()
            .filter(|(_, (_, since))| now.saturating_sub(*since) >= hold)
            .map(|(&seq, _)| seq)
            .max();
        let Some(last) = expired else { return };
        while let Some(entry) = self.held.first_entry() {
            if *entry.key() > last {
                break;
            }
            let (adu, _) = entry.remove();
            self.held_bytes -= adu.payload.len();
            self.delivered += 1;
            out.push(adu);
        }
        self.next = last.saturating_add(1);
        self.release_in_order(out);
    }

    /// The session is ending: hand over everything held, in order, gaps skipped. Each
    /// was acknowledged when it arrived, so holding it back now would lose it.
    pub fn release_all(&mut self, out: &mut Vec<Delivered>) {
        while let Some((seq, (adu, _))) = self.held.pop_first() {
            self.held_bytes -= adu.payload.len();
            self.next = seq.saturating_add(1);
            self.delivered += 1;
            out.push(adu);
        }
    }

    /// Payload bytes held for ordering: receive-buffer memory as much as unread data.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    pub fn next_timeout(&self, hold: Duration) -> Option<Duration> {
        self.held.values().map(|(_, since)| *since + hold).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(seq: u64) -> Delivered {
        Delivered {
            stream: 1,
            stream_seq: seq,
            channel: ChannelId::new(0),
            payload: Bytes::new(),
        }
    }

    fn queued(id: u64) -> QueuedAdu {
        QueuedAdu {
            id,
            seq: id,
            payload: Bytes::from_static(b"adu"),
            fields: Fields::default(),
            inserted: Duration::ZERO,
            deferred_since: None,
        }
    }

    #[test]
    fn take_finds_an_adu_in_id_order_and_out_of_it() {
        let mut s = SendStream::new(1, StreamConfig::default());
        // Data moved ahead of coded ADUs leaves ids out of order (5 before 3 and 4).
        for id in [1, 2, 5, 3, 4, 6] {
            let _ = s.push(queued(id));
        }
        assert_eq!(s.take(5).map(|a| a.id), Some(5));
        assert_eq!(s.take(3).map(|a| a.id), Some(3));
        assert_eq!(s.take(6).map(|a| a.id), Some(6));
        assert!(s.take(5).is_none() && s.take(7).is_none());
        assert!(s.find_mut(4).is_some());
        let left: Vec<u64> = s.queue.iter().map(|a| a.id).collect();
        assert_eq!(left, vec![1, 2, 4]);
        assert_eq!(s.queued_bytes, 9);

        // In order, every position is found, and ids that are not queued are not.
        let mut s = SendStream::new(1, StreamConfig::default());
        let ids: Vec<u64> = (0..40).map(|i| 3 * i + 1).collect();
        for &id in &ids {
            let _ = s.push(queued(id));
        }
        for &id in ids.iter().rev() {
            assert!(s.find_mut(id - 1).is_none() && s.find_mut(id + 1).is_none());
            assert_eq!(s.find_mut(id).map(|a| a.id), Some(id));
        }
        for (taken, &id) in ids.iter().enumerate().filter(|(i, _)| i % 2 == 1) {
            assert_eq!(s.take(id).map(|a| a.id), Some(id), "after {taken}");
        }
        assert_eq!(s.queue.len(), 20);
    }

    #[test]
    fn ordered_delivery_holds_then_skips_gaps() {
        let t = Duration::from_millis;
        let mut r = RecvStream::new(true);
        let mut out = Vec::new();
        r.on_arrival(t(0), d(1), &mut out);
        r.on_arrival(t(1), d(2), &mut out);
        assert!(out.is_empty());
        r.on_arrival(t(2), d(0), &mut out);
        assert_eq!(
            out.iter().map(|a| a.stream_seq).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        out.clear();
        r.on_arrival(t(10), d(5), &mut out);
        r.on_timeout(t(40), t(50), &mut out);
        assert!(out.is_empty());
        assert_eq!(r.next_timeout(t(50)), Some(t(60)));
        r.on_timeout(t(60), t(50), &mut out);
        assert_eq!(
            out.iter().map(|a| a.stream_seq).collect::<Vec<_>>(),
            vec![5]
        );
        out.clear();
        // A straggler from the skipped gap is still delivered.
        r.on_arrival(t(70), d(3), &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn an_ending_session_releases_what_it_held_in_order() {
        let t = Duration::from_millis;
        let mut r = RecvStream::new(true);
        let mut out = Vec::new();
        for seq in [4, 2, 7] {
            r.on_arrival(t(1), d(seq), &mut out);
        }
        assert!(out.is_empty());
        r.release_all(&mut out);
        let seqs: Vec<u64> = out.iter().map(|a| a.stream_seq).collect();
        assert_eq!(seqs, vec![2, 4, 7]);
        assert_eq!(r.next_timeout(t(50)), None);
        assert_eq!(r.held_bytes(), 0);
    }

    #[test]
    fn an_expired_later_adu_releases_earlier_ones_held_behind_a_gap() {
        let t = Duration::from_millis;
        let mut r = RecvStream::new(true);
        let mut out = Vec::new();
        // 0 is missing; 9 arrives first, then 4.
        r.on_arrival(t(0), d(9), &mut out);
        r.on_arrival(t(30), d(4), &mut out);
        assert_eq!(r.next_timeout(t(50)), Some(t(50)));
        r.on_timeout(t(50), t(50), &mut out);
        assert_eq!(
            out.iter().map(|a| a.stream_seq).collect::<Vec<_>>(),
            vec![4, 9]
        );
        assert_eq!(r.next_timeout(t(50)), None, "nothing left to time out");
    }

    #[test]
    fn an_expired_adu_releases_younger_ones_below_it() {
        let t = Duration::from_millis;
        let mut r = RecvStream::new(true);
        let mut out = Vec::new();
        r.on_arrival(t(0), d(3), &mut out);
        r.on_arrival(t(30), d(2), &mut out);
        assert!(out.is_empty());
        assert_eq!(r.next_timeout(t(50)), Some(t(50)));
        r.on_timeout(t(50), t(50), &mut out);
        assert_eq!(
            out.iter().map(|a| a.stream_seq).collect::<Vec<_>>(),
            vec![2, 3]
        );
        assert_eq!(r.next_timeout(t(50)), None);
    }

    fn adu(id: u64, len: usize) -> QueuedAdu {
        QueuedAdu {
            id,
            seq: id,
            payload: Bytes::from(vec![0; len]),
            fields: Fields::new(),
            inserted: Duration::ZERO,
            deferred_since: None,
        }
    }

    #[test]
    fn water_marks_follow_the_rate_above_their_floors_and_under_the_queue_limit() {
        let c = StreamConfig::default();
        // Unknown rate: the floors.
        assert_eq!(c.water_marks(0.0), (8 * 1024, 16 * 1024));
        // 2.5 MB/s (20 Mbit/s): 10 ms and 20 ms of it.
        assert_eq!(c.water_marks(2.5e6), (25_000, 50_000));
        // A gigabit path is capped by the queue limit, the low mark under the high one.
        let (low, high) = c.water_marks(125e6);
        assert_eq!(high, c.max_queue_bytes / 2);
        assert_eq!(low, high / 2);
        // A queue limit under the floors wins over them.
        let small = StreamConfig {
            max_queue_bytes: 10_000,
            ..StreamConfig::default()
        };
        assert_eq!(small.water_marks(0.0), (2_500, 5_000));
    }

    #[test]
    fn writable_has_hysteresis_between_the_marks() {
        let mut s = SendStream::new(
            1,
            StreamConfig {
                water_floor_bytes: 1000,
                high_water_ms: 0.0,
                low_water_ms: 0.0,
                ..StreamConfig::default()
            },
        );
        // Marks: low 1000, high 2000 bytes.
        let mut next = 0;
        let mut push = |s: &mut SendStream| {
            s.push(adu(next, 300));
            next += 1;
            s.update_writable()
        };
        for _ in 0..6 {
            assert!(!push(&mut s), "no event on the way up");
            assert!(
                s.writable(),
                "{} bytes is under the high mark",
                s.queued_bytes
            );
        }
        assert!(!push(&mut s));
        assert_eq!(s.queued_bytes, 2100);
        assert!(!s.writable(), "at the high mark");
        // Draining to just above the low mark keeps it blocked, without events.
        let mut id = 0;
        let mut pop = |s: &mut SendStream| {
            s.take(id).expect("queued");
            id += 1;
            s.update_writable()
        };
        for _ in 0..3 {
            assert!(!pop(&mut s));
            assert!(!s.writable(), "{} bytes: still blocked", s.queued_bytes);
        }
        assert_eq!(s.queued_bytes, 1200);
        assert!(pop(&mut s), "writable again at the low mark: one event");
        assert_eq!(s.queued_bytes, 900);
        assert!(s.writable());
        assert!(!pop(&mut s), "only once per crossing");
        // Refilling to between the marks stays writable: no event on the way down.
        for _ in 0..3 {
            assert!(!push(&mut s));
        }
        assert_eq!(s.queued_bytes, 1500);
        assert!(s.writable());
        while !s.queue.is_empty() {
            let first = s.queue[0].id;
            s.take(first);
            assert!(!s.update_writable(), "never blocked, so no event");
        }
    }

    #[test]
    fn queue_limit_drops_oldest() {
        let mut s = SendStream::new(
            1,
            StreamConfig {
                max_queue_bytes: 250,
                ..StreamConfig::default()
            },
        );
        let mut dropped = Vec::new();
        for i in 0..4 {
            dropped.extend(s.push(QueuedAdu {
                id: i,
                seq: i,
                payload: Bytes::from(vec![0; 100]),
                fields: Fields::new(),
                inserted: Duration::ZERO,
                deferred_since: None,
            }));
        }
        assert_eq!(dropped.iter().map(|a| a.id).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(s.queued_bytes, 200);
    }
}
