//! iperf3-style reports of `horde send` and `horde recv`: a row per stream and per
//! channel every interval (rates over that interval only), then a summary over the whole
//! run; as text tables or, with `--json`, one JSON object at the end.

use std::collections::BTreeMap;
use std::time::Duration;

use horde_emu::Histogram;
use serde::Serialize;

use crate::by_id::ById;
use crate::inorder::InOrder;
use crate::latency::Latencies;
use crate::live::Live;
use crate::messages::recv::PriorityInterval;
use crate::recent::Recent;
use crate::stamp;

/// p50 and p95 in ms; `None` (JSON null) without samples.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Quantiles {
    pub p50: Option<f64>,
    pub p95: Option<f64>,
}

impl Quantiles {
    fn of_latencies(l: &Latencies) -> Self {
        Self {
            p50: l.percentile_ms(50.0),
            p95: l.percentile_ms(95.0),
        }
    }

    fn of_histogram(h: &Histogram) -> Self {
        let q = |p: f64| (h.count() > 0).then(|| h.quantile(p).as_secs_f64() * 1e3);
        Self {
            p50: q(0.5),
            p95: q(0.95),
        }
    }
}

pub(crate) fn kbps(bytes: u64, secs: f64) -> f64 {
    bytes as f64 * 8.0 / secs.max(1e-3) / 1e3
}

// ----- sender ---------------------------------------------------------------------

#[derive(Debug, Clone, Serialize)]
pub struct SendStreamRow {
    pub id: u32,
    pub name: String,
    /// ADUs queued in the interval.
    pub sent: u64,
    pub acked: u64,
    /// Sent and declared lost.
    pub lost: u64,
    /// Never sent: dropped from a full queue or withdrawn.
    pub dropped: u64,
    /// Still queued, or in flight and unresolved, when the connection closed. Over a
    /// whole run, `sent = acked + lost + dropped + abandoned`.
    pub abandoned: u64,
    /// Payload bytes acked over the interval, in kbit/s.
    pub goodput_kbps: f64,
    /// Insertion-to-ack latency of the ADUs acked in the interval.
    pub latency_ms: Quantiles,
}

#[derive(Debug, Clone, Serialize)]
pub struct SendChannelRow {
    pub id: u8,
    pub name: String,
    pub acked: u64,
    /// Payload bytes acked on the channel over the interval, in kbit/s.
    pub goodput_kbps: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SendInterval {
    pub start_s: f64,
    pub end_s: f64,
    pub streams: Vec<SendStreamRow>,
    pub channels: Vec<SendChannelRow>,
}

/// One stream's cumulative counters at the start of an interval.
#[derive(Debug, Default, Clone, Copy)]
struct StreamMark {
    queued: u64,
    acked: u64,
    lost: u64,
    dropped: u64,
    abandoned: u64,
    acked_bytes: u64,
}

impl StreamMark {
    fn of(s: &crate::live::StreamLive) -> Self {
        Self {
            queued: s.queued,
            acked: s.acked,
            lost: s.lost,
            dropped: s.dropped,
            abandoned: s.abandoned,
            acked_bytes: s.acked_bytes,
        }
    }
}

/// Cumulative counters at the start of the current interval.
#[derive(Debug, Default, Clone)]
struct SendMark {
    at: Duration,
    streams: BTreeMap<u32, StreamMark>,
    channels: BTreeMap<u8, u64>,
    channel_acks: BTreeMap<u8, u64>,
}

/// Turns the sender's cumulative [`Live`] counters into interval rows.
#[derive(Debug, Default)]
pub struct SendReport {
    names: BTreeMap<u32, String>,
    channel_names: Vec<String>,
    mark: SendMark,
    pub intervals: Recent<SendInterval>,
}

impl SendReport {
    pub fn new(names: BTreeMap<u32, String>, channel_names: Vec<String>) -> Self {
        Self {
            names,
            channel_names,
            ..Self::default()
        }
    }

    /// The rows from `from` to `to`; `latency` gives each stream's latencies over that
    /// span.
    fn rows(
        &self,
        live: &Live,
        from: &SendMark,
        to: Duration,
        latency: impl Fn(u32, &crate::live::StreamLive) -> Quantiles,
    ) -> SendInterval {
        let secs = (to.saturating_sub(from.at)).as_secs_f64();
        let streams = live
            .streams
            .iter()
            .map(|(id, s)| {
                let m = from.streams.get(id).copied().unwrap_or_default();
                SendStreamRow {
                    id: *id,
                    name: self
                        .names
                        .get(id)
                        .cloned()
                        .unwrap_or_else(|| id.to_string()),
                    sent: s.queued - m.queued,
                    acked: s.acked - m.acked,
                    lost: s.lost - m.lost,
                    dropped: s.dropped - m.dropped,
                    abandoned: s.abandoned - m.abandoned,
                    goodput_kbps: kbps(s.acked_bytes - m.acked_bytes, secs),
                    latency_ms: latency(*id, s),
                }
            })
            .collect();
        let acks: BTreeMap<u8, u64> = live.by_channel_acks();
        let channels = live
            .channel_acked_bytes
            .iter()
            .map(|(c, bytes)| SendChannelRow {
                id: *c,
                name: channel_name(&self.channel_names, *c),
                acked: acks.get(c).copied().unwrap_or(0)
                    - from.channel_acks.get(c).copied().unwrap_or(0),
                goodput_kbps: kbps(bytes - from.channels.get(c).copied().unwrap_or(0), secs),
            })
            .collect();
        SendInterval {
            start_s: from.at.as_secs_f64(),
            end_s: to.as_secs_f64(),
            streams,
            channels,
        }
    }

    /// Close the interval ending at `t` (time since the run started) and return it.
    pub fn interval(&mut self, live: &mut Live, t: Duration) -> &SendInterval {
        let row = self.rows(live, &self.mark, t, |_, s| {
            Quantiles::of_latencies(&s.latency_window)
        });
        live.clear_interval_latencies();
        self.mark = SendMark {
            at: t,
            streams: live
                .streams
                .iter()
                .map(|(id, s)| (*id, StreamMark::of(s)))
                .collect(),
            channels: live.channel_acked_bytes.clone(),
            channel_acks: live.by_channel_acks(),
        };
        self.intervals.push(row);
        self.intervals.last().expect("just pushed")
    }

    /// The whole run, from 0 to `t`.
    pub fn summary(&self, live: &Live, t: Duration) -> SendInterval {
        self.rows(live, &SendMark::default(), t, |_, s| {
            Quantiles::of_latencies(&s.latency)
        })
    }
}

/// Where every ADU of a stream went over the whole run, with the reasons:
/// `sent = acked + lost + dropped + abandoned`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct StreamBooks {
    pub id: u32,
    pub name: String,
    pub sent: u64,
    pub acked: u64,
    /// Sent and declared lost (a late ack still counts it here, and in `late_acked`).
    pub lost: u64,
    /// Sent, declared lost, and acknowledged later after all.
    pub late_acked: u64,
    pub dropped: u64,
    /// Of `dropped`: pushed out of a full queue (the stream's queue limit).
    pub dropped_queue_full: u64,
    /// Of `dropped`: withdrawn by the application.
    pub dropped_removed: u64,
    /// Of `dropped`: offered after the connection had ended, before the sender heard.
    pub dropped_after_end: u64,
    pub abandoned: u64,
    /// Of `abandoned`: still queued, never sent, when the connection ended.
    pub abandoned_queued: u64,
    /// Of `abandoned`: sent, with no ack or loss known when the connection ended.
    pub abandoned_in_flight: u64,
}

impl StreamBooks {
    fn of(id: u32, name: String, s: &crate::live::StreamLive) -> Self {
        Self {
            id,
            name,
            sent: s.queued,
            acked: s.acked,
            lost: s.lost,
            late_acked: s.late_acked,
            dropped: s.dropped,
            dropped_queue_full: s.dropped_queue_full,
            dropped_removed: s.dropped_removed,
            dropped_after_end: s.dropped_after_end,
            abandoned: s.abandoned,
            abandoned_queued: s.unsent_at_close,
            abandoned_in_flight: s.abandoned - s.unsent_at_close,
        }
    }

    /// ADUs in none of the four.
    pub fn unaccounted(&self) -> u64 {
        self.sent
            .saturating_sub(self.acked + self.lost + self.dropped + self.abandoned)
    }

    /// One line: the four counts, each with its reasons.
    pub fn describe(&self) -> String {
        let parts = |items: &[(u64, &str)]| {
            let v: Vec<String> = items
                .iter()
                .filter(|(n, _)| *n > 0)
                .map(|(n, what)| format!("{n} {what}"))
                .collect();
            if v.is_empty() {
                String::new()
            } else {
                format!(" ({})", v.join(", "))
            }
        };
        let mut line = format!(
            "{}: {} sent = {} acked + {} lost{} + {} dropped{} + {} abandoned{}",
            self.name,
            self.sent,
            self.acked,
            self.lost,
            parts(&[(self.late_acked, "acked late")]),
            self.dropped,
            parts(&[
                (self.dropped_queue_full, "queue full"),
                (self.dropped_removed, "withdrawn"),
                (self.dropped_after_end, "offered after the connection ended"),
            ]),
            self.abandoned,
            parts(&[
                (self.abandoned_queued, "queued at the end"),
                (self.abandoned_in_flight, "in flight at the end"),
            ]),
        );
        if self.unaccounted() > 0 {
            line.push_str(&format!("; {} unaccounted", self.unaccounted()));
        }
        line
    }
}

/// Every stream's books, in stream order.
pub fn books(live: &Live, names: &BTreeMap<u32, String>) -> Vec<StreamBooks> {
    live.streams
        .iter()
        .map(|(id, s)| {
            let name = names.get(id).cloned().unwrap_or_else(|| id.to_string());
            StreamBooks::of(*id, name, s)
        })
        .collect()
}

pub fn channel_name(names: &[String], id: u8) -> String {
    names
        .get(usize::from(id))
        .cloned()
        .unwrap_or_else(|| format!("ch{id}"))
}

// ----- receiver -------------------------------------------------------------------

#[derive(Debug, Clone, Serialize)]
pub struct RecvStreamRow {
    pub id: u32,
    pub received: u64,
    pub bytes: u64,
    /// Payload bytes received over the interval, in kbit/s.
    pub goodput_kbps: f64,
    /// Sender's stamp to arrival.
    pub one_way_delay_ms: Quantiles,
    /// Sender's stamp to in-order release (see `inorder`).
    pub in_order_delay_ms: Quantiles,
    /// Arrived after their gap was given up.
    pub late: u64,
    /// Sequence numbers given up on (never arrived within the hold).
    pub skipped: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RecvChannelRow {
    pub id: u8,
    pub name: String,
    pub received: u64,
    pub goodput_kbps: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RecvInterval {
    pub start_s: f64,
    pub end_s: f64,
    pub streams: Vec<RecvStreamRow>,
    pub channels: Vec<RecvChannelRow>,
    /// Messages received whole, per priority (empty in a sender's own summary).
    pub messages: Vec<PriorityInterval>,
}

#[derive(Debug, Default, Clone)]
struct Window {
    adus: u64,
    bytes: u64,
    owd: Histogram,
    in_order: Histogram,
    late: u64,
    skipped: u64,
}

impl Window {
    fn merge(&mut self, o: &Window) {
        self.adus += o.adus;
        self.bytes += o.bytes;
        self.owd.merge(&o.owd);
        self.in_order.merge(&o.in_order);
        self.late += o.late;
        self.skipped += o.skipped;
    }
}

#[derive(Debug)]
struct StreamRx {
    in_order: InOrder,
    now: Window,
    total: Window,
}

/// What `horde recv` measures: per stream goodput, one-way delay and in-order delay, per
/// channel goodput, per interval and in total. Times are unix-epoch µs, the clock the
/// sender stamps its ADUs with.
#[derive(Debug)]
pub struct RecvReport {
    hold_us: u64,
    start_us: u64,
    interval_start_us: u64,
    first_arrival_us: Option<u64>,
    last_arrival_us: Option<u64>,
    streams: ById<u32, StreamRx>,
    channels: ById<u8, (Window, Window)>,
    released: Vec<u64>,
    pub intervals: Recent<RecvInterval>,
}

impl RecvReport {
    pub fn new(hold: Duration, start_us: u64) -> Self {
        Self {
            hold_us: hold.as_micros() as u64,
            start_us,
            interval_start_us: start_us,
            first_arrival_us: None,
            last_arrival_us: None,
            streams: ById::default(),
            channels: ById::default(),
            released: Vec::new(),
            intervals: Recent::default(),
        }
    }

    /// Counts a message-layer ADU on its channel: its message is counted whole, by
    /// priority, in [`crate::messages::recv::MessageStats`].
    pub fn on_message_adu(&mut self, channel: u8, bytes: usize, now_us: u64) {
        self.arrived(now_us);
        let c = &mut self
            .channels
            .get_or_insert_with(channel, Default::default)
            .0;
        c.adus += 1;
        c.bytes += bytes as u64;
    }

    fn arrived(&mut self, now_us: u64) {
        self.first_arrival_us.get_or_insert(now_us);
        self.last_arrival_us = Some(now_us);
    }

    pub fn on_received(&mut self, stream: u32, channel: u8, payload: &[u8], now_us: u64) {
        self.arrived(now_us);
        let hold = self.hold_us;
        let s = self.streams.get_or_insert_with(stream, || StreamRx {
            in_order: InOrder::new(hold),
            now: Window::default(),
            total: Window::default(),
        });
        s.now.adus += 1;
        s.now.bytes += payload.len() as u64;
        let c = &mut self
            .channels
            .get_or_insert_with(channel, Default::default)
            .0;
        c.adus += 1;
        c.bytes += payload.len() as u64;
        if let Some((seq, sent_us)) = stamp::read(payload) {
            s.now
                .owd
                .record(Duration::from_micros(now_us.saturating_sub(sent_us)));
            let (late, skipped) = (s.in_order.late, s.in_order.skipped);
            s.in_order.arrive(seq, sent_us, now_us, &mut self.released);
            s.now.late += s.in_order.late - late;
            s.now.skipped += s.in_order.skipped - skipped;
            for d in self.released.drain(..) {
                s.now.in_order.record(Duration::from_micros(d));
            }
        }
    }

    /// Give up the gaps whose hold has run out by `now_us`.
    pub fn expire(&mut self, now_us: u64) {
        for s in self.streams.values_mut() {
            let skipped = s.in_order.skipped;
            s.in_order.expire(now_us, &mut self.released);
            s.now.skipped += s.in_order.skipped - skipped;
            for d in self.released.drain(..) {
                s.now.in_order.record(Duration::from_micros(d));
            }
        }
    }

    /// When the first ADU arrived (unix µs).
    pub fn first_arrival_us(&self) -> Option<u64> {
        self.first_arrival_us
    }

    /// Seconds from the start of the report to `us`.
    pub fn secs(&self, us: u64) -> f64 {
        us.saturating_sub(self.start_us) as f64 / 1e6
    }

    fn rows(
        &self,
        pick: impl Fn(&StreamRx) -> &Window,
        channel: impl Fn(&(Window, Window)) -> &Window,
        from_us: u64,
        to_us: u64,
    ) -> RecvInterval {
        let secs = to_us.saturating_sub(from_us) as f64 / 1e6;
        RecvInterval {
            start_s: self.secs(from_us),
            end_s: self.secs(to_us),
            streams: self
                .streams
                .iter()
                .map(|(id, s)| {
                    let w = pick(s);
                    RecvStreamRow {
                        id: *id,
                        received: w.adus,
                        bytes: w.bytes,
                        goodput_kbps: kbps(w.bytes, secs),
                        one_way_delay_ms: Quantiles::of_histogram(&w.owd),
                        in_order_delay_ms: Quantiles::of_histogram(&w.in_order),
                        late: w.late,
                        skipped: w.skipped,
                    }
                })
                .collect(),
            channels: self
                .channels
                .iter()
                .map(|(id, c)| {
                    let w = channel(c);
                    RecvChannelRow {
                        id: *id,
                        name: format!("ch{id}"),
                        received: w.adus,
                        goodput_kbps: kbps(w.bytes, secs),
                    }
                })
                .collect(),
            messages: Vec::new(),
        }
    }

    /// Close the interval ending at `now_us` and return it; `messages` gives the
    /// messages' rows of an interval so many seconds long.
    pub fn interval(
        &mut self,
        now_us: u64,
        messages: impl FnOnce(f64) -> Vec<PriorityInterval>,
    ) -> &RecvInterval {
        self.expire(now_us);
        let mut row = self.rows(|s| &s.now, |c| &c.0, self.interval_start_us, now_us);
        row.messages = messages(row.end_s - row.start_s);
        for s in self.streams.values_mut() {
            let w = std::mem::take(&mut s.now);
            s.total.merge(&w);
        }
        for (now, total) in self.channels.values_mut() {
            total.merge(&std::mem::take(now));
        }
        self.interval_start_us = now_us;
        self.intervals.push(row);
        self.intervals.last().expect("just pushed")
    }

    /// The whole run: from the start to the last arrival (so that waiting for an idle
    /// timeout does not dilute the rate). Call after the last [`RecvReport::interval`].
    pub fn summary(&mut self) -> RecvInterval {
        // Release what still waits behind gaps, at the end of its hold.
        self.expire(u64::MAX);
        for s in self.streams.values_mut() {
            let w = std::mem::take(&mut s.now);
            s.total.merge(&w);
        }
        // A report that never closed an interval (each sender's own) has its channels'
        // counts in the open window still.
        for (now, total) in self.channels.values_mut() {
            total.merge(&std::mem::take(now));
        }
        let end = self.last_arrival_us.unwrap_or(self.start_us);
        self.rows(|s| &s.total, |c| &c.1, self.start_us, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each sender's report closes no interval of its own: its summary alone must
    /// count the channels (they showed 0).
    #[test]
    fn a_summary_without_intervals_counts_every_channel() {
        let mut r = RecvReport::new(Duration::from_millis(100), 1_000_000);
        for i in 0..30u64 {
            let at = 1_000_000 + i * 10_000;
            r.on_received(1, (i % 3) as u8, &stamp::payload(500, i, at - 1_000), at);
        }
        let total = r.summary();
        let per_channel: Vec<u64> = total.channels.iter().map(|c| c.received).collect();
        assert_eq!(per_channel, vec![10, 10, 10]);
        assert!(total.channels.iter().all(|c| c.goodput_kbps > 0.0));
    }

    #[test]
    fn receiver_rates_are_per_interval_not_lifetime() {
        let mut r = RecvReport::new(Duration::from_millis(100), 1_000_000);
        // 100 ADUs of 1250 bytes in the first second, none in the second.
        for i in 0..100u64 {
            let at = 1_000_000 + i * 10_000;
            let p = stamp::payload(1250, i, at - 20_000);
            r.on_received(1, 0, &p, at);
        }
        let first = r.interval(2_000_000, |_| Vec::new()).clone();
        assert_eq!(first.streams[0].received, 100);
        assert!((first.streams[0].goodput_kbps - 1000.0).abs() < 1e-6);
        let owd = first.streams[0].one_way_delay_ms.p50.unwrap();
        assert!((owd - 20.0).abs() < 1.0, "{owd}");
        let second = r.interval(3_000_000, |_| Vec::new()).clone();
        assert_eq!(second.streams[0].received, 0);
        assert_eq!(second.streams[0].goodput_kbps, 0.0);
        let total = r.summary();
        assert_eq!(total.streams[0].received, 100);
        assert_eq!(total.channels[0].received, 100);
        // Over the span of the arrivals (0.99 s), not the receiver's lifetime.
        assert!(total.streams[0].goodput_kbps > 1000.0);
    }
}
