//! Live statistics of a real-time run: what the sender learns from acks and nacks, and
//! what the receiver got, per stream and per channel.

use std::collections::{BTreeMap, VecDeque};

use horde_proto::{Event, NackReason};

use crate::latency::Latencies;

#[derive(Debug, Default, Clone)]
pub struct StreamLive {
    pub queued: u64,
    pub acked: u64,
    pub lost: u64,
    pub dropped: u64,
    /// Queued or in flight when the session closed: never known to arrive or not.
    pub abandoned: u64,
    /// Of those, still queued (never sent) when the session closed.
    pub unsent_at_close: u64,
    /// Of the `dropped`, those dropped from a full queue.
    pub dropped_queue_full: u64,
    /// Of the `dropped`, those the application withdrew.
    pub dropped_removed: u64,
    /// Of the `dropped`, those offered after the connection had ended, before the
    /// application heard of it: no session took them ([`Live::settle_after_end`]).
    pub dropped_after_end: u64,
    /// The highest stream sequence number acked or nacked.
    pub max_resolved: Option<u64>,
    /// Insertion-to-ack latencies over the run, in bounded memory.
    pub latency: Latencies,
    /// The same since the report's last interval row ([`Live::take_interval_latencies`]).
    pub latency_window: Latencies,
    /// Payload bytes of the acked ADUs (the sender's view of goodput).
    pub acked_bytes: u64,
    pub received: u64,
    pub bytes_received: u64,
    /// ADUs acked per channel.
    pub by_channel: BTreeMap<u8, u64>,
    /// ADUs declared lost per channel, late acks included.
    pub lost_by_channel: BTreeMap<u8, u64>,
    /// Of the `lost`, those acknowledged later after all (the loss was spurious).
    pub late_acked: u64,
    /// The same per channel.
    pub late_by_channel: BTreeMap<u8, u64>,
}

impl StreamLive {
    fn resolved(&mut self, seq: u64) {
        self.max_resolved = Some(self.max_resolved.map_or(seq, |m| m.max(seq)));
    }

    /// ADUs neither acked, lost, dropped nor abandoned.
    pub fn unresolved(&self) -> u64 {
        self.queued
            .saturating_sub(self.acked + self.lost + self.dropped + self.abandoned)
    }

    /// The nearest-rank `p`-th percentile (`p` in 1..=100) of the latencies, as the
    /// simulator reports it.
    pub fn percentile(&self, p: u32) -> Option<f64> {
        self.latency.percentile_ms(f64::from(p))
    }

    pub fn mean(&self) -> Option<f64> {
        self.latency.mean_ms()
    }

    /// ADUs that did not get through: lost (less those a late ack took back, which the
    /// simulator also counts as deliveries), dropped or abandoned. The numerator of
    /// [`StreamLive::loss_rate`], so a table's lost column and its loss % agree.
    pub fn not_delivered(&self) -> u64 {
        self.lost.saturating_sub(self.late_acked) + self.dropped + self.abandoned
    }

    /// Fraction of resolved ADUs that were lost, dropped or abandoned.
    pub fn loss_rate(&self) -> f64 {
        let resolved = self.acked + self.lost + self.dropped + self.abandoned;
        if resolved == 0 {
            0.0
        } else {
            self.not_delivered() as f64 / resolved as f64
        }
    }
}

/// How many declared losses are remembered for a late ack to find its class: far more
/// than can be outstanding within a few round trips at the demo's or `send`'s rates.
const LATE_ACK_MEMORY: usize = 4096;

#[derive(Debug, Default, Clone)]
pub struct Live {
    pub streams: BTreeMap<u32, StreamLive>,
    pub channels: BTreeMap<u8, u64>,
    /// Payload bytes acked per channel.
    pub channel_acked_bytes: BTreeMap<u8, u64>,
    /// Sender-side results of tagged ADUs (e.g. a video's I-frames), by tag.
    pub classes: BTreeMap<String, StreamLive>,
    tagged: BTreeMap<(u32, u64), String>,
    /// ADUs declared lost (stream, sequence, class if tagged), oldest first, until a
    /// late ack or until [`LATE_ACK_MEMORY`] newer losses push them out. One block,
    /// sized at the first loss and never grown: a map's nodes, made and freed as losses
    /// come and go, filled over a sender's first minutes and were scattered over the
    /// heap among an outage's ADUs.
    declared_lost: VecDeque<(u32, u64, Option<String>)>,
    /// Payload size of each unresolved ADU, by (stream, stream_seq).
    sizes: BTreeMap<(u32, u64), u32>,
}

impl Live {
    /// Account for an event the sender saw.
    pub fn on_sender_event(&mut self, e: &Event) {
        match e {
            Event::Ack {
                stream,
                stream_seq,
                channel,
                latency,
                ..
            } => {
                *self.channels.entry(u8::from(*channel)).or_default() += 1;
                let size = u64::from(self.sizes.remove(&(*stream, *stream_seq)).unwrap_or(0));
                *self
                    .channel_acked_bytes
                    .entry(u8::from(*channel))
                    .or_default() += size;
                for s in self.targets(*stream, *stream_seq) {
                    s.resolved(*stream_seq);
                    s.acked += 1;
                    s.acked_bytes += size;
                    s.latency.record(*latency);
                    s.latency_window.record(*latency);
                    *s.by_channel.entry(u8::from(*channel)).or_default() += 1;
                }
            }
            Event::Nack {
                stream,
                stream_seq,
                reason,
                channel,
                ..
            } => {
                if let Some(c) = channel {
                    *self.channels.entry(u8::from(*c)).or_default() += 1;
                }
                self.sizes.remove(&(*stream, *stream_seq));
                if *reason == NackReason::Lost {
                    let class = self.tagged.get(&(*stream, *stream_seq)).cloned();
                    if self.declared_lost.capacity() == 0 {
                        self.declared_lost.reserve_exact(LATE_ACK_MEMORY + 1);
                    }
                    self.declared_lost.push_back((*stream, *stream_seq, class));
                    if self.declared_lost.len() > LATE_ACK_MEMORY {
                        self.declared_lost.pop_front();
                    }
                }
                for s in self.targets(*stream, *stream_seq) {
                    s.resolved(*stream_seq);
                    if let (NackReason::Lost, Some(c)) = (reason, channel) {
                        *s.lost_by_channel.entry(u8::from(*c)).or_default() += 1;
                    }
                    match reason {
                        NackReason::Lost => s.lost += 1,
                        NackReason::Closed => {
                            s.abandoned += 1;
                            s.unsent_at_close += 1;
                        }
                        NackReason::Abandoned => s.abandoned += 1,
                        NackReason::QueueOverflow => {
                            s.dropped += 1;
                            s.dropped_queue_full += 1;
                        }
                        NackReason::Removed => {
                            s.dropped += 1;
                            s.dropped_removed += 1;
                        }
                    }
                }
            }
            // The ADU arrived after all: a delivery, not a loss (as the simulator counts).
            Event::LateAck {
                stream,
                stream_seq,
                channel,
                ..
            } => {
                // Late acks are rare (a spurious loss), and the newest losses come last.
                let Some(at) = self
                    .declared_lost
                    .iter()
                    .rposition(|(s, q, _)| s == stream && q == stream_seq)
                else {
                    return;
                };
                let Some((_, _, class)) = self.declared_lost.remove(at) else {
                    return;
                };
                let mut out = vec![self.streams.entry(*stream).or_default()];
                if let Some(c) = class {
                    out.push(self.classes.entry(c).or_default());
                }
                for s in out {
                    s.late_acked += 1;
                    *s.late_by_channel.entry(u8::from(*channel)).or_default() += 1;
                }
            }
            _ => {}
        }
    }

    /// The stream's statistics, and its ADU's class if it was tagged.
    fn targets(&mut self, stream: u32, seq: u64) -> Vec<&mut StreamLive> {
        let class = self.tagged.remove(&(stream, seq));
        let mut out = vec![self.streams.entry(stream).or_default()];
        if let Some(c) = class {
            out.push(self.classes.entry(c).or_default());
        }
        out
    }

    /// The connection is over and every event of it has been read: an ADU still
    /// unresolved and queued after every resolved one of its stream was offered after
    /// the last session ended, and no session ever took it. It is counted as dropped
    /// (`dropped_after_end`). Returns how many were; anything else unresolved stays
    /// unaccounted, as a fault to report.
    pub fn settle_after_end(&mut self) -> u64 {
        let tail: Vec<(u32, u64)> = self
            .sizes
            .keys()
            .filter(|(stream, seq)| {
                self.streams
                    .get(stream)
                    .is_some_and(|s| s.max_resolved.is_none_or(|m| *seq > m))
            })
            .copied()
            .collect();
        for &(stream, seq) in &tail {
            self.sizes.remove(&(stream, seq));
            for s in self.targets(stream, seq) {
                s.dropped += 1;
                s.dropped_after_end += 1;
            }
        }
        tail.len() as u64
    }

    /// Count an ADU of `stream` as also belonging to `class`.
    pub fn tag(&mut self, stream: u32, seq: u64, class: &str) {
        self.classes.entry(class.to_string()).or_default().queued += 1;
        self.tagged.insert((stream, seq), class.to_string());
    }

    /// Empty each stream's latency window (`latency_window`), once an interval row has
    /// read it. Read in place, not copied: once an outage has stretched a window's
    /// range to seconds its histogram is over 100 KB, and a copy of it every second was
    /// a large block on the heap, among which an outage's small blocks settled.
    pub fn clear_interval_latencies(&mut self) {
        for s in self.streams.values_mut() {
            s.latency_window.clear();
        }
    }

    /// ADUs acked per channel, over every stream.
    pub fn by_channel_acks(&self) -> BTreeMap<u8, u64> {
        let mut out = BTreeMap::new();
        for s in self.streams.values() {
            for (c, n) in &s.by_channel {
                *out.entry(*c).or_default() += n;
            }
        }
        out
    }

    pub fn on_receiver_event(&mut self, e: &Event) {
        if let Event::Received {
            stream, payload, ..
        } = e
        {
            let s = self.streams.entry(*stream).or_default();
            s.received += 1;
            s.bytes_received += payload.len() as u64;
        }
    }

    /// Count an ADU of `size` payload bytes queued on `stream`; returns its stream
    /// sequence number (ADUs are numbered from 0 in the order they are queued).
    pub fn on_queued(&mut self, stream: u32, size: u32) -> u64 {
        let s = self.streams.entry(stream).or_default();
        let seq = s.queued;
        s.queued += 1;
        self.sizes.insert((stream, seq), size);
        seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_proto::ChannelId;
    use std::time::Duration;

    #[test]
    fn accounts_acks_nacks_and_receptions() {
        let mut l = Live::default();
        l.tag(1, 0, "video I-frames");
        for (i, ms) in [10u64, 20, 30, 40].iter().enumerate() {
            l.on_sender_event(&Event::Ack {
                stream: 1,
                adu: i as u64,
                stream_seq: i as u64,
                channel: ChannelId::new([0, 1][i % 2]),
                rtt: Duration::from_millis(*ms),
                latency: Duration::from_millis(*ms),
            });
        }
        l.on_sender_event(&Event::Nack {
            stream: 1,
            adu: 9,
            stream_seq: 9,
            channel: Some(ChannelId::new(1)),
            reason: NackReason::Lost,
        });
        let s = &l.streams[&1];
        assert_eq!((s.acked, s.lost), (4, 1));
        // Within the histogram's 0.1 %.
        let p50 = s.percentile(50).unwrap();
        assert!((p50 - 20.0).abs() <= 0.02, "{p50}");
        assert_eq!(s.mean(), Some(25.0));
        assert!((s.loss_rate() - 0.2).abs() < 1e-12);
        assert_eq!(l.channels[&1], 3);
        assert_eq!(l.classes["video I-frames"].acked, 1);
    }

    #[test]
    fn a_late_ack_takes_a_loss_back_and_losses_are_kept_apart_by_cause() {
        let mut l = Live::default();
        for _ in 0..4 {
            l.on_queued(1, 100);
        }
        l.tag(1, 0, "video I-frames");
        let nack = |seq: u64, channel: Option<u8>, reason| Event::Nack {
            stream: 1,
            adu: seq,
            stream_seq: seq,
            channel: channel.map(ChannelId::new),
            reason,
        };
        l.on_sender_event(&nack(0, Some(2), NackReason::Lost));
        l.on_sender_event(&nack(1, Some(1), NackReason::Lost));
        l.on_sender_event(&nack(2, None, NackReason::Closed));
        l.on_sender_event(&nack(3, Some(0), NackReason::Abandoned));
        let s = &l.streams[&1];
        assert_eq!((s.lost, s.abandoned, s.unsent_at_close), (2, 2, 1));
        assert_eq!(s.lost_by_channel, BTreeMap::from([(1, 1), (2, 1)]));
        assert!((s.loss_rate() - 1.0).abs() < 1e-12);
        l.on_sender_event(&Event::LateAck {
            stream: 1,
            adu: 0,
            stream_seq: 0,
            channel: ChannelId::new(2),
            rtt: Duration::from_millis(300),
            latency: Duration::from_millis(300),
        });
        let s = &l.streams[&1];
        assert_eq!(s.late_acked, 1);
        assert_eq!(s.late_by_channel, BTreeMap::from([(2, 1)]));
        assert!((s.loss_rate() - 0.75).abs() < 1e-12);
        let i = &l.classes["video I-frames"];
        assert_eq!((i.lost, i.late_acked), (1, 1));
        assert_eq!(i.loss_rate(), 0.0);
        // A second late ack of the same ADU takes nothing back twice.
        l.on_sender_event(&Event::LateAck {
            stream: 1,
            adu: 0,
            stream_seq: 0,
            channel: ChannelId::new(2),
            rtt: Duration::from_millis(300),
            latency: Duration::from_millis(300),
        });
        assert_eq!(l.streams[&1].late_acked, 1);
    }

    /// Losses are remembered for the last [`LATE_ACK_MEMORY`] of them, oldest out first,
    /// in one block that never grows however many come and go.
    #[test]
    fn the_last_losses_are_remembered_in_one_block_of_fixed_size() {
        let mut l = Live::default();
        let n = 3 * LATE_ACK_MEMORY as u64;
        for seq in 0..n {
            l.on_queued(1, 100);
            l.on_sender_event(&Event::Nack {
                stream: 1,
                adu: seq,
                stream_seq: seq,
                channel: Some(ChannelId::new(0)),
                reason: NackReason::Lost,
            });
            if seq == 0 {
                assert!(l.declared_lost.capacity() > LATE_ACK_MEMORY);
            }
        }
        let capacity = l.declared_lost.capacity();
        assert!(capacity <= 2 * LATE_ACK_MEMORY, "{capacity}");
        let late = |l: &mut Live, seq: u64| {
            l.on_sender_event(&Event::LateAck {
                stream: 1,
                adu: seq,
                stream_seq: seq,
                channel: ChannelId::new(0),
                rtt: Duration::from_millis(300),
                latency: Duration::from_millis(300),
            });
            l.streams[&1].late_acked
        };
        // Pushed out by newer losses: forgotten. Among the last ones: taken back.
        assert_eq!(late(&mut l, n - LATE_ACK_MEMORY as u64 - 1), 0);
        assert_eq!(late(&mut l, n - LATE_ACK_MEMORY as u64), 1);
        assert_eq!(late(&mut l, n - 1), 2);
        assert_eq!(l.declared_lost.capacity(), capacity);
    }
}
