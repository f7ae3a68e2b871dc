//! What a simulation run measured: the collector the driver feeds, and the [`Report`].
//!
//! The driver reports events as they happen, ADUs by the session-unique id it gave them
//! and channels by the [`MetricsChannel`] returned from [`Metrics::add_channel`]:
//!
//! * [`Metrics::adu_inserted`] when the application hands an ADU to Horde. A stream's
//!   ADUs must be inserted in stream order (the order in-order delivery follows);
//! * [`Metrics::adu_dropped`] if Horde drops it unsent (sender-side queue overrun);
//! * [`Metrics::adu_sent`] for every transmission, with the channel and the packet's
//!   channel sequence number (an ADU sent twice, e.g. retransmitted, is two transmissions);
//! * [`Metrics::adu_acked`] / [`Metrics::adu_nacked`] when the sender learns a transmission
//!   arrived / was lost. Each resolves the ADU's *oldest* unresolved transmission (acks and
//!   loss timeouts tend to come back in sending order). A late ack after a nack turns that
//!   transmission back into a delivered one: the data did arrive;
//! * [`Metrics::adu_delivered`] when the receiving host hands the ADU to its application;
//! * [`Metrics::control_sent`] for non-data packets (acks, probes) and
//!   [`Metrics::link_stats`] for the link models' own counters at the end.
//!
//! Memory does not grow with the run's length: counters and histograms are updated as
//! events arrive, and an ADU's record is kept only until it has *settled* (acked, lost,
//! or dropped unsent) and then seen no event for the retention time (30 s of virtual
//! time by default, [`Metrics::set_retention`]); only late acks can change a settled
//! ADU, and they come within a few round trips.
//!
//! Events naming an ADU the collector never saw inserted, or one whose record it has
//! already let go, are counted in `unmatched_events` rather than panicking, so a driver
//! bug shows up in the report.
//!
//! [`Metrics::report`] computes the [`Report`]; definitions of every number are on the
//! report types and in `docs/metrics.md`. Everything is kept in ordered containers, so
//! the same events give the same report, byte for byte.

mod correlation;
mod goodput;
mod histogram;
mod in_order;
mod output;
mod plot;
mod report;
mod stats;
mod windows;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use correlation::LostIndex;
use goodput::IntervalBytes;
use histogram::DelayHistogram;
use in_order::{InOrder, Resolution};

pub use report::{ChannelReport, FrameTypeReport, LinkCounters, Report, StreamReport};
pub use stats::Summary;
pub use windows::WindowBytes;

/// A channel registered with [`Metrics::add_channel`]: its place in the report's channel
/// list, by name (not a session's `ChannelId`, which the wire carries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MetricsChannel(pub usize);

/// Default goodput series interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// Default time a settled ADU's record is kept for late events.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Pending,
    Acked,
    Lost,
}

#[derive(Debug, Clone)]
pub(crate) struct Tx {
    pub(crate) channel: usize,
    pub(crate) seq: u64,
    pub(crate) at: Duration,
    pub(crate) verdict: Verdict,
}

/// An ADU's state as far as the counts go: see `StreamReport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Final {
    Unsent,
    Acked,
    Lost,
    Pending,
}

/// What is kept of an ADU until it settles.
#[derive(Debug, Clone)]
pub(crate) struct AduRecord {
    pub(crate) stream: u32,
    /// Its position in the stream: the stream's `ordinal`-th insertion.
    pub(crate) ordinal: u64,
    pub(crate) size: u32,
    pub(crate) inserted: Duration,
    pub(crate) dropped: bool,
    pub(crate) txs: Vec<Tx>,
    pub(crate) acked: bool,
    pub(crate) delivered: bool,
    /// Resolved for in-order delivery (delivered or given up on).
    pub(crate) resolved: bool,
    /// When it last settled; `None` while it may still change.
    pub(crate) settled_at: Option<Duration>,
    /// The video frame type it belongs to (`frame_type` field), if any.
    pub(crate) frame_type: Option<char>,
}

impl AduRecord {
    pub(crate) fn state(&self) -> Final {
        if self.txs.is_empty() {
            Final::Unsent
        } else if self.txs.iter().any(|t| t.verdict == Verdict::Acked) {
            Final::Acked
        } else if self.txs.iter().all(|t| t.verdict == Verdict::Lost) {
            Final::Lost
        } else {
            Final::Pending
        }
    }

    fn settled(&self) -> bool {
        match self.state() {
            Final::Unsent => self.dropped,
            Final::Acked | Final::Lost => true,
            Final::Pending => false,
        }
    }
}

/// Running totals of one stream.
#[derive(Debug, Clone, Default)]
pub(crate) struct StreamAcc {
    pub(crate) inserted: u64,
    pub(crate) dropped: u64,
    pub(crate) sent: u64,
    pub(crate) transmissions: u64,
    pub(crate) acked: u64,
    pub(crate) lost: u64,
    pub(crate) pending: u64,
    pub(crate) delivered: u64,
    /// Lost ADUs already retired and found correlated.
    pub(crate) lost_correlated: u64,
    pub(crate) acked_bytes: u64,
    pub(crate) delivered_bytes: u64,
    /// Transmissions per channel index (shorter than the channel list if the last
    /// channels carried none).
    pub(crate) per_channel: Vec<u64>,
    pub(crate) latency: DelayHistogram,
    pub(crate) rtt: DelayHistogram,
    pub(crate) one_way: DelayHistogram,
    pub(crate) in_order: DelayHistogram,
    pub(crate) goodput: IntervalBytes,
    pub(crate) order: InOrder,
    /// Payload bytes inserted, and first transmitted, per [`windows::BUCKET`].
    pub(crate) offered_series: IntervalBytes,
    pub(crate) sent_series: IntervalBytes,
    /// Final states of the ADUs of each video frame type, e.g. I-frames apart, since
    /// objectives single them out.
    pub(crate) frame_types: BTreeMap<char, FrameTypeAcc>,
}

/// Final states of the ADUs of one frame type of a stream.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FrameTypeAcc {
    pub(crate) sent: u64,
    pub(crate) acked: u64,
    pub(crate) lost: u64,
}

impl FrameTypeAcc {
    fn shift(&mut self, from: Final, to: Final) {
        for (state, step) in [(from, -1i64), (to, 1)] {
            let count = match state {
                Final::Acked => &mut self.acked,
                Final::Lost => &mut self.lost,
                Final::Unsent | Final::Pending => continue,
            };
            *count = count.wrapping_add_signed(step);
        }
        if from == Final::Unsent && to != Final::Unsent {
            self.sent += 1;
        }
    }
}

impl StreamAcc {
    /// Move one ADU (of `frame_type`, if a video frame) from state `from` to `to`.
    fn shift_adu(&mut self, frame_type: Option<char>, from: Final, to: Final) {
        if from == to {
            return;
        }
        if let Some(f) = frame_type {
            self.frame_types.entry(f).or_default().shift(from, to);
        }
        self.shift(from, to);
    }

    /// Move one ADU's count from state `from` to state `to`.
    fn shift(&mut self, from: Final, to: Final) {
        if from == to {
            return;
        }
        if let Some(c) = self.count_of(from) {
            *c -= 1;
        }
        if let Some(c) = self.count_of(to) {
            *c += 1;
        }
        if from == Final::Unsent {
            self.sent += 1;
        }
    }

    fn count_of(&mut self, state: Final) -> Option<&mut u64> {
        match state {
            Final::Unsent => None,
            Final::Acked => Some(&mut self.acked),
            Final::Lost => Some(&mut self.lost),
            Final::Pending => Some(&mut self.pending),
        }
    }

    fn heap_bytes(&self) -> usize {
        self.per_channel.capacity() * 8
            + self.latency.heap_bytes()
            + self.rtt.heap_bytes()
            + self.one_way.heap_bytes()
            + self.in_order.heap_bytes()
            + self.goodput.heap_bytes()
            + self.offered_series.heap_bytes()
            + self.sent_series.heap_bytes()
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ChannelRecord {
    pub(crate) name: String,
    pub(crate) sent: u64,
    /// Transmissions currently declared lost.
    pub(crate) lost: u64,
    pub(crate) bytes: u64,
    pub(crate) control_sent: u64,
    pub(crate) control_bytes: u64,
    pub(crate) link: Option<horde_links::LinkStats>,
    /// One-way delay through the link of every packet delivered in the channel's `up`
    /// direction (queueing, serialization, propagation).
    pub(crate) packet_delay: DelayHistogram,
}

/// Collects one run's events. See the module documentation for what to call when.
#[derive(Debug, Clone)]
pub struct Metrics {
    pub(crate) channels: Vec<ChannelRecord>,
    /// Registered streams; streams first seen in `adu_inserted` are added too.
    pub(crate) streams: BTreeMap<u32, StreamAcc>,
    /// ADUs not yet retired.
    pub(crate) live: BTreeMap<u64, AduRecord>,
    /// (settled at, ADU) in settling order: candidates for retirement.
    settled: VecDeque<(Duration, u64)>,
    pub(crate) lost_index: LostIndex,
    /// The latest event time seen.
    now: Duration,
    retention: Duration,
    pub(crate) interval: Duration,
    pub(crate) unmatched: u64,
    /// When the first ADU of any stream was transmitted.
    pub(crate) first_send: Option<Duration>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            channels: Vec::new(),
            streams: BTreeMap::new(),
            live: BTreeMap::new(),
            settled: VecDeque::new(),
            lost_index: LostIndex::default(),
            now: Duration::ZERO,
            retention: DEFAULT_RETENTION,
            interval: DEFAULT_INTERVAL,
            unmatched: 0,
            first_send: None,
        }
    }
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// The length of each goodput series interval (default 1 s); set it before the run.
    /// Zero is ignored.
    pub fn set_goodput_interval(&mut self, interval: Duration) {
        if !interval.is_zero() {
            self.interval = interval;
        }
    }

    /// How long a settled ADU's record waits for late events before it is let go
    /// (default 30 s of virtual time). Losses declared more than twice this apart are
    /// not compared for correlation.
    pub fn set_retention(&mut self, retention: Duration) {
        self.retention = retention;
    }

    /// Register a channel; the report lists channels in registration order. Registering
    /// a name twice returns the first id.
    pub fn add_channel(&mut self, name: &str) -> MetricsChannel {
        if let Some(i) = self.channels.iter().position(|c| c.name == name) {
            return MetricsChannel(i);
        }
        self.channels.push(ChannelRecord {
            name: name.to_string(),
            ..ChannelRecord::default()
        });
        MetricsChannel(self.channels.len() - 1)
    }

    /// Register a stream so that it appears in the report even if it never sends.
    pub fn add_stream(&mut self, id: u32) {
        self.streams.entry(id).or_default();
    }

    /// The application handed ADU `adu` of `size` bytes to stream `stream` at `at`.
    pub fn adu_inserted(&mut self, stream: u32, adu: u64, size: u32, at: Duration) {
        self.advance(at);
        if self.live.contains_key(&adu) {
            self.unmatched += 1;
            return;
        }
        let s = self.streams.entry(stream).or_default();
        let ordinal = s.inserted;
        s.inserted += 1;
        s.offered_series.add(windows::BUCKET, at, u64::from(size));
        self.live.insert(
            adu,
            AduRecord {
                stream,
                ordinal,
                size,
                inserted: at,
                dropped: false,
                txs: Vec::new(),
                acked: false,
                delivered: false,
                resolved: false,
                settled_at: None,
                frame_type: None,
            },
        );
    }

    /// ADU `adu`, just inserted, is part of a video frame of type `frame_type` (`I`,
    /// `P`, `B`): its final state is also counted per frame type.
    pub fn adu_frame_type(&mut self, adu: u64, frame_type: char) {
        match self.live.get_mut(&adu) {
            Some(r) if r.txs.is_empty() => r.frame_type = Some(frame_type),
            _ => self.unmatched += 1,
        }
    }

    /// Horde dropped the ADU before sending it.
    pub fn adu_dropped(&mut self, adu: u64, at: Duration) {
        self.advance(at);
        let Some(r) = self.live.get_mut(&adu) else {
            self.unmatched += 1;
            return;
        };
        let s = self.streams.get_mut(&r.stream).expect("inserted stream");
        if !r.dropped {
            r.dropped = true;
            s.dropped += 1;
        }
        if !r.resolved {
            r.resolved = true;
            s.order.resolve(r.ordinal, Resolution::Skipped { at }, |d| {
                s.in_order.record(d)
            });
        }
        self.note_settling(adu, at);
    }

    /// One transmission of `adu` on `channel` with channel sequence number `seq`.
    pub fn adu_sent(&mut self, adu: u64, channel: MetricsChannel, seq: u64, at: Duration) {
        self.advance(at);
        let (Some(r), Some(c)) = (self.live.get_mut(&adu), self.channels.get_mut(channel.0)) else {
            self.unmatched += 1;
            return;
        };
        let s = self.streams.get_mut(&r.stream).expect("inserted stream");
        let before = r.state();
        if r.txs.is_empty() {
            s.sent_series.add(windows::BUCKET, at, u64::from(r.size));
            self.first_send = Some(self.first_send.map_or(at, |t| t.min(at)));
        }
        r.txs.push(Tx {
            channel: channel.0,
            seq,
            at,
            verdict: Verdict::Pending,
        });
        s.shift_adu(r.frame_type, before, r.state());
        s.transmissions += 1;
        if s.per_channel.len() <= channel.0 {
            s.per_channel.resize(channel.0 + 1, 0);
        }
        s.per_channel[channel.0] += 1;
        c.sent += 1;
        c.bytes += u64::from(r.size);
        self.note_settling(adu, at);
    }

    /// The sender learned that a transmission of `adu` arrived.
    pub fn adu_acked(&mut self, adu: u64, at: Duration) {
        self.advance(at);
        let Some(r) = self.live.get_mut(&adu) else {
            self.unmatched += 1;
            return;
        };
        // Oldest unresolved transmission; failing that, the oldest one declared lost (a
        // late ack after a loss timeout).
        let i = r
            .txs
            .iter()
            .position(|t| t.verdict == Verdict::Pending)
            .or_else(|| r.txs.iter().position(|t| t.verdict == Verdict::Lost));
        let Some(i) = i else {
            self.unmatched += 1;
            return;
        };
        let s = self.streams.get_mut(&r.stream).expect("inserted stream");
        let before = r.state();
        let tx = &mut r.txs[i];
        if tx.verdict == Verdict::Lost {
            self.channels[tx.channel].lost -= 1;
            self.lost_index.remove((tx.channel, r.stream, tx.seq));
        }
        tx.verdict = Verdict::Acked;
        if !r.acked {
            r.acked = true;
            s.latency.record(at.saturating_sub(r.inserted));
            s.rtt.record(at.saturating_sub(tx.at));
            s.acked_bytes += u64::from(r.size);
        }
        s.shift_adu(r.frame_type, before, r.state());
        self.note_settling(adu, at);
    }

    /// The sender declared a transmission of `adu` lost (nack or timeout).
    pub fn adu_nacked(&mut self, adu: u64, at: Duration) {
        self.advance(at);
        let Some(r) = self.live.get_mut(&adu) else {
            self.unmatched += 1;
            return;
        };
        let before = r.state();
        let Some(tx) = r.txs.iter_mut().find(|t| t.verdict == Verdict::Pending) else {
            self.unmatched += 1;
            return;
        };
        tx.verdict = Verdict::Lost;
        self.channels[tx.channel].lost += 1;
        self.lost_index
            .insert((tx.channel, r.stream, tx.seq), adu, at);
        let s = self.streams.get_mut(&r.stream).expect("inserted stream");
        let after = r.state();
        s.shift_adu(r.frame_type, before, after);
        if after == Final::Lost && !r.resolved {
            // Every transmission is declared lost: an in-order reader stops waiting.
            r.resolved = true;
            s.order.resolve(r.ordinal, Resolution::Skipped { at }, |d| {
                s.in_order.record(d)
            });
        }
        self.note_settling(adu, at);
    }

    /// The receiving host delivered `adu` to its application. Duplicates are ignored.
    pub fn adu_delivered(&mut self, adu: u64, at: Duration) {
        self.advance(at);
        let Some(r) = self.live.get_mut(&adu) else {
            self.unmatched += 1;
            return;
        };
        if r.delivered {
            return;
        }
        r.delivered = true;
        let s = self.streams.get_mut(&r.stream).expect("inserted stream");
        s.delivered += 1;
        s.delivered_bytes += u64::from(r.size);
        s.one_way.record(at.saturating_sub(r.inserted));
        s.goodput.add(self.interval, at, u64::from(r.size));
        if !r.resolved {
            r.resolved = true;
            let how = Resolution::Delivered {
                at,
                inserted: r.inserted,
            };
            s.order.resolve(r.ordinal, how, |d| s.in_order.record(d));
        }
    }

    /// A packet that carries no ADU (an ack, a probe) went out on `channel`.
    /// A packet crossed `channel`'s `up` direction in `delay`.
    pub fn packet_delivered(&mut self, channel: MetricsChannel, delay: Duration) {
        match self.channels.get_mut(channel.0) {
            Some(c) => c.packet_delay.record(delay),
            None => self.unmatched += 1,
        }
    }

    pub fn control_sent(&mut self, channel: MetricsChannel, bytes: u32) {
        match self.channels.get_mut(channel.0) {
            Some(c) => {
                c.control_sent += 1;
                c.control_bytes += u64::from(bytes);
            }
            None => self.unmatched += 1,
        }
    }

    /// The link model's own counters for `channel` (usually its data direction), for
    /// comparison with what the sender inferred. The last call wins.
    pub fn link_stats(&mut self, channel: MetricsChannel, stats: horde_links::LinkStats) {
        match self.channels.get_mut(channel.0) {
            Some(c) => c.link = Some(stats),
            None => self.unmatched += 1,
        }
    }

    /// The report for a run of length `duration` (used for goodput).
    pub fn report(&self, duration: Duration) -> Report {
        report::build(self, duration)
    }

    /// Per-ADU state held right now: live ADU records, resolved ADUs waiting for in-order
    /// release, and recent losses kept for correlation. Bounded by what is in flight and
    /// the retention time, not by the run's length.
    pub fn held_records(&self) -> usize {
        self.live.len()
            + self.settled.len()
            + self.lost_index.len()
            + self
                .streams
                .values()
                .map(|s| s.order.waiting())
                .sum::<usize>()
    }

    /// Heap bytes held by the streaming summaries (histograms, goodput series), which
    /// grow with the spread of the delays and the run's length over the interval.
    pub fn summary_heap_bytes(&self) -> usize {
        self.streams.values().map(StreamAcc::heap_bytes).sum()
    }

    /// Move the clock to `at` (if later) and let go of ADUs settled long enough ago.
    fn advance(&mut self, at: Duration) {
        if at <= self.now {
            return;
        }
        self.now = at;
        while let Some(&(t, id)) = self.settled.front() {
            if t.saturating_add(self.retention) > self.now {
                break;
            }
            self.settled.pop_front();
            if self.live.get(&id).is_some_and(|r| r.settled_at == Some(t)) {
                self.retire(id);
            }
        }
        let horizon = self.retention.saturating_mul(2);
        self.lost_index.expire(self.now.saturating_sub(horizon));
    }

    /// Record whether `adu`'s last event left it settled; every event on a settled ADU
    /// restarts its retention time.
    fn note_settling(&mut self, adu: u64, at: Duration) {
        let Some(r) = self.live.get_mut(&adu) else {
            return;
        };
        if r.settled() {
            r.settled_at = Some(at);
            self.settled.push_back((at, adu));
        } else {
            r.settled_at = None;
        }
    }

    /// Forget a settled ADU; a lost one's correlation is decided now.
    fn retire(&mut self, adu: u64) {
        let Some(r) = self.live.remove(&adu) else {
            return;
        };
        if r.state() == Final::Lost && report::is_correlated(&self.lost_index, adu, &r) {
            if let Some(s) = self.streams.get_mut(&r.stream) {
                s.lost_correlated += 1;
            }
        }
    }
}
