//! What a simulation run measured: the collector the driver feeds, and the [`Report`].
//!
//! The driver reports events as they happen, ADUs by the session-unique id it gave them
//! and channels by the [`ChannelId`] returned from [`Metrics::add_channel`]:
//!
//! * [`Metrics::adu_inserted`] when the application hands an ADU to Horde;
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
//! Events naming an ADU the collector never saw inserted are counted in
//! `unmatched_events` rather than panicking, so a driver bug shows up in the report.
//!
//! [`Metrics::report`] computes the [`Report`]; definitions of every number are on the
//! report types. Everything is kept in ordered containers, so the same events give the
//! same report, byte for byte.

mod output;
mod plot;
mod report;
mod stats;
mod windows;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

pub use report::{ChannelReport, LinkCounters, Report, StreamReport};
pub use stats::{percentile, Summary};
pub use windows::WindowBytes;

/// A channel registered with [`Metrics::add_channel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChannelId(pub usize);

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

#[derive(Debug, Clone)]
pub(crate) struct AduRecord {
    pub(crate) stream: u32,
    pub(crate) size: u32,
    pub(crate) inserted: Duration,
    pub(crate) dropped: bool,
    pub(crate) txs: Vec<Tx>,
    /// First ack, and the transmission it resolved.
    pub(crate) acked: Option<(Duration, usize)>,
    pub(crate) delivered: Option<Duration>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ChannelRecord {
    pub(crate) name: String,
    pub(crate) control_sent: u64,
    pub(crate) control_bytes: u64,
    pub(crate) link: Option<horde_links::LinkStats>,
}

/// Collects one run's events. See the module documentation for what to call when.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    pub(crate) channels: Vec<ChannelRecord>,
    /// Registered streams; streams first seen in `adu_inserted` are added too.
    pub(crate) streams: BTreeSet<u32>,
    pub(crate) adus: BTreeMap<u64, AduRecord>,
    pub(crate) unmatched: u64,
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Register a channel; the report lists channels in registration order. Registering
    /// a name twice returns the first id.
    pub fn add_channel(&mut self, name: &str) -> ChannelId {
        if let Some(i) = self.channels.iter().position(|c| c.name == name) {
            return ChannelId(i);
        }
        self.channels.push(ChannelRecord {
            name: name.to_string(),
            ..ChannelRecord::default()
        });
        ChannelId(self.channels.len() - 1)
    }

    /// Register a stream so that it appears in the report even if it never sends.
    pub fn add_stream(&mut self, id: u32) {
        self.streams.insert(id);
    }

    /// The application handed ADU `adu` of `size` bytes to stream `stream` at `at`.
    pub fn adu_inserted(&mut self, stream: u32, adu: u64, size: u32, at: Duration) {
        if self.adus.contains_key(&adu) {
            self.unmatched += 1;
            return;
        }
        self.streams.insert(stream);
        self.adus.insert(
            adu,
            AduRecord {
                stream,
                size,
                inserted: at,
                dropped: false,
                txs: Vec::new(),
                acked: None,
                delivered: None,
            },
        );
    }

    /// Horde dropped the ADU before sending it.
    pub fn adu_dropped(&mut self, adu: u64, _at: Duration) {
        match self.adus.get_mut(&adu) {
            Some(r) => r.dropped = true,
            None => self.unmatched += 1,
        }
    }

    /// One transmission of `adu` on `channel` with channel sequence number `seq`.
    pub fn adu_sent(&mut self, adu: u64, channel: ChannelId, seq: u64, at: Duration) {
        let known_channel = channel.0 < self.channels.len();
        match self.adus.get_mut(&adu) {
            Some(r) if known_channel => r.txs.push(Tx {
                channel: channel.0,
                seq,
                at,
                verdict: Verdict::Pending,
            }),
            _ => self.unmatched += 1,
        }
    }

    /// The sender learned that a transmission of `adu` arrived.
    pub fn adu_acked(&mut self, adu: u64, at: Duration) {
        let Some(r) = self.adus.get_mut(&adu) else {
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
        match i {
            Some(i) => {
                r.txs[i].verdict = Verdict::Acked;
                if r.acked.is_none() {
                    r.acked = Some((at, i));
                }
            }
            None => self.unmatched += 1,
        }
    }

    /// The sender declared a transmission of `adu` lost (nack or timeout).
    pub fn adu_nacked(&mut self, adu: u64, _at: Duration) {
        let Some(r) = self.adus.get_mut(&adu) else {
            self.unmatched += 1;
            return;
        };
        match r.txs.iter_mut().find(|t| t.verdict == Verdict::Pending) {
            Some(t) => t.verdict = Verdict::Lost,
            None => self.unmatched += 1,
        }
    }

    /// The receiving host delivered `adu` to its application. Duplicates are ignored.
    pub fn adu_delivered(&mut self, adu: u64, at: Duration) {
        match self.adus.get_mut(&adu) {
            Some(r) => {
                r.delivered.get_or_insert(at);
            }
            None => self.unmatched += 1,
        }
    }

    /// A packet that carries no ADU (an ack, a probe) went out on `channel`.
    pub fn control_sent(&mut self, channel: ChannelId, bytes: u32) {
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
    pub fn link_stats(&mut self, channel: ChannelId, stats: horde_links::LinkStats) {
        match self.channels.get_mut(channel.0) {
            Some(c) => c.link = Some(stats),
            None => self.unmatched += 1,
        }
    }

    /// The report for a run of length `duration` (used for goodput).
    pub fn report(&self, duration: Duration) -> Report {
        report::build(self, duration)
    }
}
