//! The end-of-run report and how each number in it is computed.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::correlation::LostIndex;
use super::goodput::interval_len;
use super::stats::Summary;
use super::{AduRecord, Final, Metrics, Verdict};

/// One run's results. Serialises to JSON as
/// `{ "duration_s", "goodput_interval_s", "streams": [..], "channels": [..],
/// "unmatched_events" }`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The scenario's name, if the driver sets it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    pub duration_s: f64,
    /// Length of each interval of the streams' `delivered_goodput_series_kbps`, in s.
    pub goodput_interval_s: f64,
    /// Ascending by id.
    pub streams: Vec<StreamReport>,
    /// In registration order.
    pub channels: Vec<ChannelReport>,
    /// One-way delay of every packet in the channels' `up` direction, all channels
    /// together, in ms.
    pub packet_delay_ms: Summary,
    /// Events naming an unknown ADU or channel, a second insertion of one ADU id, an
    /// ack/nack with no transmission left to resolve, or an event for an ADU settled
    /// longer than the retention time ago. Non-zero means a driver bug.
    pub unmatched_events: u64,
}

/// Per stream. An ADU's *final state* is: acked if any of its transmissions was acked;
/// lost if it was sent and every transmission was declared lost; pending otherwise.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamReport {
    pub id: u32,
    /// ADUs the application inserted.
    pub inserted: u64,
    /// ADUs dropped unsent.
    pub dropped: u64,
    /// ADUs transmitted at least once.
    pub sent: u64,
    /// Transmissions (retransmissions and copies included).
    pub transmissions: u64,
    /// ADUs whose final state is acked.
    pub acked: u64,
    /// ADUs whose final state is lost.
    pub lost: u64,
    /// Sent ADUs still unresolved at the end of the run.
    pub pending: u64,
    /// ADUs the receiving host delivered to its application.
    pub delivered: u64,
    /// `lost / sent`; `null` if nothing was sent.
    pub loss_rate: Option<f64>,
    /// Lost ADUs with a correlated loss (see `correlated_loss_fraction`).
    pub lost_correlated: u64,
    /// `lost_correlated / sent`. A lost ADU counts as a correlated loss when one of its
    /// lost transmissions has, on the same channel and within `CORRELATION_SPAN` (8)
    /// channel sequence numbers, a lost transmission of *another* ADU of the same stream:
    /// the two were lost in the same loss burst (thesis §7.2.1 treats slots more than 8
    /// apart as uncorrelated). Only losses declared within the collector's retention
    /// time (30 s) of each other are compared. `null` if nothing was sent.
    pub correlated_loss_fraction: Option<f64>,
    /// Payload bytes of acked ADUs × 8 / run duration, in kbit/s (1 kbit = 1000 bits):
    /// bytes whose reception the peer acknowledged (thesis §7.4.1 footnote 16).
    pub goodput_kbps: f64,
    /// Insertion into Horde to first ack, over acked ADUs, in ms: the thesis's ADU
    /// `latency` (queueing plus round trip, §3.2.2, §B.2.7).
    pub latency_ms: Summary,
    /// Send of the acked transmission to its ack, over acked ADUs, in ms: the network
    /// round trip alone, without queueing inside Horde (as in Figs. 7-3 and 7-24).
    pub rtt_ms: Summary,
    /// Insertion at the sender to delivery to the receiving application, over delivered
    /// ADUs, in ms: the one-way delay the application sees.
    pub one_way_delay_ms: Summary,
    /// Insertion to the moment an application reading the stream in order could take
    /// the ADU, over delivered ADUs released in order, in ms: the ADU must have arrived
    /// and every earlier ADU of the stream must have arrived or been given up on
    /// (declared lost, or dropped unsent). Head-of-line waiting included; ADUs still
    /// held behind an unresolved one at the end are not counted.
    pub in_order_delay_ms: Summary,
    /// Payload bytes of ADUs delivered to the receiving application.
    pub delivered_bytes: u64,
    /// `delivered_bytes` × 8 / run duration, in kbit/s: the goodput the application sees.
    pub delivered_goodput_kbps: f64,
    /// Delivered payload kbit/s in each `goodput_interval_s` interval of the run (the
    /// last one may be shorter; its rate is over its own length).
    pub delivered_goodput_series_kbps: Vec<f64>,
    /// Channel name → transmissions of this stream's ADUs it carried (every registered
    /// channel, zeros included).
    pub channels: BTreeMap<String, u64>,
    /// Channel name → that channel's fraction of this stream's transmissions; all
    /// zero if the stream sent nothing.
    pub channel_share: BTreeMap<String, f64>,
    /// The latency CDF as (latency ms, fraction of acked ADUs at or below it), one point
    /// per histogram bucket, ascending: `latency_cdf.csv` and the plot. Not in JSON.
    #[serde(skip)]
    pub latency_cdf: Vec<(f64, f64)>,
    /// Delivered payload bytes per goodput interval, for `goodput.csv`. Not in JSON.
    #[serde(skip)]
    pub delivered_bytes_series: Vec<u64>,
    /// Video frame type (`"I"`, `"P"`, `"B"`) → the final states of that type's ADUs;
    /// empty for streams without frame types.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub frame_types: BTreeMap<String, FrameTypeReport>,
}

/// The ADUs of one video frame type of a stream, counted as in [`StreamReport`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FrameTypeReport {
    pub sent: u64,
    pub acked: u64,
    pub lost: u64,
    /// `lost / sent`; `null` if nothing was sent.
    pub loss_rate: Option<f64>,
}

/// Per channel, from the sender's point of view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelReport {
    pub name: String,
    /// ADU transmissions sent (a packed packet counts once per ADU it carries).
    pub sent: u64,
    /// Of those, declared lost (nack or timeout) and never acked.
    pub lost: u64,
    /// `lost / sent`; `null` if nothing was sent.
    pub loss_rate: Option<f64>,
    /// Payload bytes of data packets.
    pub bytes_sent: u64,
    /// Packets carrying no ADU (acks, probes).
    pub control_sent: u64,
    pub control_bytes: u64,
    /// The link model's own counters, if the driver supplied them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkCounters>,
    /// One-way delay of the packets the `up` direction delivered, in ms.
    pub packet_delay_ms: Summary,
}

/// A link model's counters (ground truth, as opposed to what the sender inferred).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LinkCounters {
    pub offered: u64,
    pub queue_drops: u64,
    pub lost: u64,
    pub delivered: u64,
    pub bytes_delivered: u64,
}

fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

fn kbps(bytes: u64, over: Duration) -> f64 {
    let secs = over.as_secs_f64();
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs / 1000.0
    } else {
        0.0
    }
}

/// Whether lost ADU `adu` shares a loss burst with another ADU of its stream.
pub(super) fn is_correlated(index: &LostIndex, adu: u64, r: &AduRecord) -> bool {
    r.txs
        .iter()
        .filter(|t| t.verdict == Verdict::Lost)
        .any(|t| index.has_neighbour((t.channel, r.stream, t.seq), adu))
}

pub(super) fn build(m: &Metrics, duration: Duration) -> Report {
    // Lost ADUs not yet retired: their correlation is decided now.
    let mut live_correlated: BTreeMap<u32, u64> = BTreeMap::new();
    for (&id, r) in &m.live {
        if r.state() == Final::Lost && is_correlated(&m.lost_index, id, r) {
            *live_correlated.entry(r.stream).or_default() += 1;
        }
    }
    let streams = m
        .streams
        .iter()
        .map(|(&id, s)| {
            let lost_correlated =
                s.lost_correlated + live_correlated.get(&id).copied().unwrap_or(0);
            let per_channel = |i: usize| s.per_channel.get(i).copied().unwrap_or(0);
            let names = m.channels.iter().map(|c| c.name.clone());
            let series = s.goodput.series(m.interval, duration);
            let series_kbps = series
                .iter()
                .enumerate()
                .map(|(k, &b)| kbps(b, interval_len(k, m.interval, duration)))
                .collect();
            StreamReport {
                id,
                inserted: s.inserted,
                dropped: s.dropped,
                sent: s.sent,
                transmissions: s.transmissions,
                acked: s.acked,
                lost: s.lost,
                pending: s.pending,
                delivered: s.delivered,
                loss_rate: ratio(s.lost, s.sent),
                lost_correlated,
                correlated_loss_fraction: ratio(lost_correlated, s.sent),
                goodput_kbps: kbps(s.acked_bytes, duration),
                latency_ms: s.latency.summary(),
                rtt_ms: s.rtt.summary(),
                one_way_delay_ms: s.one_way.summary(),
                in_order_delay_ms: s.in_order.summary(),
                delivered_bytes: s.delivered_bytes,
                delivered_goodput_kbps: kbps(s.delivered_bytes, duration),
                delivered_goodput_series_kbps: series_kbps,
                channels: names
                    .clone()
                    .enumerate()
                    .map(|(i, n)| (n, per_channel(i)))
                    .collect(),
                channel_share: names
                    .enumerate()
                    .map(|(i, n)| (n, ratio(per_channel(i), s.transmissions).unwrap_or(0.0)))
                    .collect(),
                latency_cdf: s.latency.cdf(),
                delivered_bytes_series: series,
                frame_types: s
                    .frame_types
                    .iter()
                    .map(|(t, f)| {
                        let r = FrameTypeReport {
                            sent: f.sent,
                            acked: f.acked,
                            lost: f.lost,
                            loss_rate: ratio(f.lost, f.sent),
                        };
                        (t.to_string(), r)
                    })
                    .collect(),
            }
        })
        .collect();

    let channels = m
        .channels
        .iter()
        .map(|c| ChannelReport {
            name: c.name.clone(),
            sent: c.sent,
            lost: c.lost,
            loss_rate: ratio(c.lost, c.sent),
            bytes_sent: c.bytes,
            control_sent: c.control_sent,
            control_bytes: c.control_bytes,
            packet_delay_ms: c.packet_delay.summary(),
            link: c.link.map(|l| LinkCounters {
                offered: l.offered,
                queue_drops: l.queue_drops,
                lost: l.lost,
                delivered: l.delivered,
                bytes_delivered: l.bytes_delivered,
            }),
        })
        .collect();

    let mut packet_delay = super::histogram::DelayHistogram::default();
    for c in &m.channels {
        packet_delay.merge(&c.packet_delay);
    }
    Report {
        scenario: None,
        duration_s: duration.as_secs_f64(),
        goodput_interval_s: m.interval.as_secs_f64(),
        streams,
        channels,
        packet_delay_ms: packet_delay.summary(),
        unmatched_events: m.unmatched,
    }
}
