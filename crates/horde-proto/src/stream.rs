//! Streams: the sender's per-stream ADU queue with its bandwidth credit and statistics,
//! and the receiver's delivery (as ADUs arrive, or in order with a bounded hold).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use horde_policy::{Demand, Fields, StreamStats};

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
}

fn default_queue_limit() -> usize {
    256 * 1024
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            max_kbps: None,
            ordered: false,
            max_queue_bytes: default_queue_limit(),
        }
    }
}

impl StreamConfig {
    pub fn demand(&self) -> Demand {
        match self.max_kbps {
            Some(k) => Demand::MaxRate(k * 1000.0 / 8.0),
            None => Demand::Elastic,
        }
    }
}

#[derive(Debug, Clone)]
pub struct QueuedAdu {
    pub id: u64,
    pub seq: u64,
    pub payload: Bytes,
    pub fields: Fields,
    pub inserted: Duration,
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
        let mut dropped = Vec::new();
        while self.queued_bytes > self.config.max_queue_bytes && self.queue.len() > 1 {
            let old = self.queue.pop_front().expect("queue has more than one ADU");
            self.queued_bytes -= old.payload.len();
            dropped.push(old);
        }
        dropped
    }

    /// Take the ADU with `id` out of the queue.
    pub fn take(&mut self, id: u64) -> Option<QueuedAdu> {
        let pos = self.queue.iter().position(|a| a.id == id)?;
        let adu = self.queue.remove(pos)?;
        self.queued_bytes -= adu.payload.len();
        Some(adu)
    }

    pub fn find_mut(&mut self, id: u64) -> Option<&mut QueuedAdu> {
        self.queue.iter_mut().find(|a| a.id == id)
    }

    /// How long, at its allocated rate, the stream has been owed service.
    pub fn owed_secs(&self) -> f64 {
        self.credit / self.allocation.max(1.0)
    }

    pub fn refill(&mut self, dt: Duration, mtu: f64) {
        let cap = (self.allocation * CREDIT_HORIZON).max(mtu);
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
    pub channel: u8,
    pub payload: Bytes,
}

/// Receive side of one stream.
#[derive(Debug, Default)]
pub struct RecvStream {
    ordered: bool,
    /// Next stream sequence number owed to the application when ordered.
    next: u64,
    held: BTreeMap<u64, (Delivered, Duration)>,
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
        self.held.insert(adu.stream_seq, (adu, now));
        self.release_in_order(out);
    }

    fn release_in_order(&mut self, out: &mut Vec<Delivered>) {
        while let Some(entry) = self.held.first_entry() {
            if *entry.key() != self.next {
                break;
            }
            let (adu, _) = entry.remove();
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
            self.delivered += 1;
            out.push(adu);
        }
        self.next = last.saturating_add(1);
        self.release_in_order(out);
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
            channel: 0,
            payload: Bytes::new(),
        }
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
            }));
        }
        assert_eq!(dropped.iter().map(|a| a.id).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(s.queued_bytes, 200);
    }
}
