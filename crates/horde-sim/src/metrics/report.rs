//! The end-of-run report and how each number in it is computed.

use std::collections::BTreeMap;
use std::time::Duration;

use horde_policy::CORRELATION_SPAN;
use serde::Serialize;

use super::stats::{sort_samples, Summary};
use super::{AduRecord, Metrics, Verdict};

/// One run's results. Serialises to JSON as
/// `{ "duration_s", "streams": [..], "channels": [..], "unmatched_events" }`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The scenario's name, if the driver sets it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    pub duration_s: f64,
    /// Ascending by id.
    pub streams: Vec<StreamReport>,
    /// In registration order.
    pub channels: Vec<ChannelReport>,
    /// Events naming an unknown ADU or channel, a second insertion of one ADU id, or an
    /// ack/nack with no transmission left to resolve. Non-zero means a driver bug.
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
    /// apart as uncorrelated). `null` if nothing was sent.
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
    /// Channel name → transmissions of this stream's ADUs it carried (every registered
    /// channel, zeros included).
    pub channels: BTreeMap<String, u64>,
    /// Channel name → that channel's fraction of this stream's transmissions; all
    /// zero if the stream sent nothing.
    pub channel_share: BTreeMap<String, f64>,
    /// Latency samples (ms) of acked ADUs, ascending: the CDF in `latency_cdf.csv`.
    /// Too big for JSON.
    #[serde(skip)]
    pub latency_samples_ms: Vec<f64>,
}

/// Per channel, from the sender's point of view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelReport {
    pub name: String,
    /// Data packets (ADU transmissions) sent.
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

fn ms(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

#[derive(Default)]
struct StreamAcc {
    inserted: u64,
    dropped: u64,
    sent: u64,
    transmissions: u64,
    acked: u64,
    lost: u64,
    pending: u64,
    delivered: u64,
    lost_correlated: u64,
    acked_bytes: u64,
    latency: Vec<f64>,
    rtt: Vec<f64>,
    per_channel: Vec<u64>,
}

#[derive(Default)]
struct ChannelAcc {
    sent: u64,
    lost: u64,
    bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Final {
    Unsent,
    Acked,
    Lost,
    Pending,
}

fn final_state(r: &AduRecord) -> Final {
    if r.txs.is_empty() {
        Final::Unsent
    } else if r.txs.iter().any(|t| t.verdict == Verdict::Acked) {
        Final::Acked
    } else if r.txs.iter().all(|t| t.verdict == Verdict::Lost) {
        Final::Lost
    } else {
        Final::Pending
    }
}

/// Ids of ADUs with a lost transmission that shares a loss burst with a lost
/// transmission of another ADU of the same stream (see `StreamReport::lost_correlated`).
fn correlated_adus(m: &Metrics) -> std::collections::BTreeSet<u64> {
    // (channel, stream) -> lost transmissions as (channel seq, adu), sorted by seq.
    let mut lost: BTreeMap<(usize, u32), Vec<(u64, u64)>> = BTreeMap::new();
    for (&id, r) in &m.adus {
        for t in r.txs.iter().filter(|t| t.verdict == Verdict::Lost) {
            lost.entry((t.channel, r.stream))
                .or_default()
                .push((t.seq, id));
        }
    }
    let span = CORRELATION_SPAN as u64;
    let mut out = std::collections::BTreeSet::new();
    for list in lost.values_mut() {
        list.sort_unstable();
        for (i, &(seq, id)) in list.iter().enumerate() {
            // Neighbours within the span on either side; sequence numbers are unique per
            // channel, so at most `span` entries each way are looked at.
            let before = list[..i].iter().rev().take_while(|(s, _)| seq - s <= span);
            let after = list[i + 1..].iter().take_while(|(s, _)| s - seq <= span);
            if before.chain(after).any(|&(_, other)| other != id) {
                out.insert(id);
            }
        }
    }
    out
}

pub(super) fn build(m: &Metrics, duration: Duration) -> Report {
    let nch = m.channels.len();
    let mut streams: BTreeMap<u32, StreamAcc> = m
        .streams
        .iter()
        .map(|&id| {
            (
                id,
                StreamAcc {
                    per_channel: vec![0; nch],
                    ..StreamAcc::default()
                },
            )
        })
        .collect();
    let mut channels: Vec<ChannelAcc> = (0..nch).map(|_| ChannelAcc::default()).collect();
    let correlated = correlated_adus(m);

    for (id, r) in &m.adus {
        // Every inserted ADU's stream is registered by `adu_inserted`.
        let Some(s) = streams.get_mut(&r.stream) else {
            continue;
        };
        s.inserted += 1;
        s.dropped += u64::from(r.dropped);
        s.transmissions += r.txs.len() as u64;
        for t in &r.txs {
            s.per_channel[t.channel] += 1;
            let c = &mut channels[t.channel];
            c.sent += 1;
            c.bytes += u64::from(r.size);
            c.lost += u64::from(t.verdict == Verdict::Lost);
        }
        s.delivered += u64::from(r.delivered.is_some());
        match final_state(r) {
            Final::Unsent => continue,
            Final::Acked => {
                s.acked += 1;
                s.acked_bytes += u64::from(r.size);
                if let Some((at, i)) = r.acked {
                    s.latency.push(ms(at.saturating_sub(r.inserted)));
                    s.rtt.push(ms(at.saturating_sub(r.txs[i].at)));
                }
            }
            Final::Lost => {
                s.lost += 1;
                s.lost_correlated += u64::from(correlated.contains(id));
            }
            Final::Pending => s.pending += 1,
        }
        s.sent += 1;
    }

    let secs = duration.as_secs_f64();
    let streams = streams
        .into_iter()
        .map(|(id, mut s)| {
            sort_samples(&mut s.latency);
            sort_samples(&mut s.rtt);
            let names = m.channels.iter().map(|c| c.name.clone());
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
                lost_correlated: s.lost_correlated,
                correlated_loss_fraction: ratio(s.lost_correlated, s.sent),
                goodput_kbps: if secs > 0.0 {
                    s.acked_bytes as f64 * 8.0 / secs / 1000.0
                } else {
                    0.0
                },
                latency_ms: Summary::from_sorted(&s.latency),
                rtt_ms: Summary::from_sorted(&s.rtt),
                channels: names.clone().zip(s.per_channel.iter().copied()).collect(),
                channel_share: names
                    .zip(
                        s.per_channel
                            .iter()
                            .map(|&n| ratio(n, s.transmissions).unwrap_or(0.0)),
                    )
                    .collect(),
                latency_samples_ms: s.latency,
            }
        })
        .collect();

    let channels = m
        .channels
        .iter()
        .zip(channels)
        .map(|(c, a)| ChannelReport {
            name: c.name.clone(),
            sent: a.sent,
            lost: a.lost,
            loss_rate: ratio(a.lost, a.sent),
            bytes_sent: a.bytes,
            control_sent: c.control_sent,
            control_bytes: c.control_bytes,
            link: c.link.map(|l| LinkCounters {
                offered: l.offered,
                queue_drops: l.queue_drops,
                lost: l.lost,
                delivered: l.delivered,
                bytes_delivered: l.bytes_delivered,
            }),
        })
        .collect();

    Report {
        scenario: None,
        duration_s: secs,
        streams,
        channels,
        unmatched_events: m.unmatched,
    }
}
