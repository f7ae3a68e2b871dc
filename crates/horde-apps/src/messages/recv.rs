//! What `horde recv` counts of the messages its senders send: it reassembles each
//! sender's pieces (`horde_proto::message::Reassembly`) and, per priority, counts the
//! whole messages and their bytes, their delay from submission and their lateness against
//! the deadline in their header (in bounded memory), and the cancels that freed a
//! partial message.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use horde_proto::message::codec::{self, Item};
use horde_proto::message::{ControlItem, MessageId, Reassembly};
use serde::Serialize;

use super::header::Header;
use crate::latency::Latencies;

/// Most bytes of partial messages held per sender.
const RECEIVE_LIMIT: u64 = 256 << 20;
/// Cancelled or finished message ids remembered per sender, so that their late pieces
/// are dropped rather than starting a new partial message.
const REMEMBERED: usize = 65_536;

/// One sender's partial messages.
pub struct MessageRx {
    reassembly: Reassembly,
    /// The priority of each partial message, from its pieces.
    priority_of: HashMap<MessageId, u8>,
}

impl Default for MessageRx {
    fn default() -> Self {
        Self {
            reassembly: Reassembly::new(RECEIVE_LIMIT, REMEMBERED),
            priority_of: HashMap::new(),
        }
    }
}

impl MessageRx {
    /// Takes a message-layer ADU that arrived at `now_us` (unix µs) and counts what it
    /// completes or cancels in `stats`.
    pub fn on_adu(&mut self, payload: Bytes, now_us: u64, stats: &mut MessageStats) {
        stats.seen = true;
        match codec::decode(payload) {
            Ok(Item::Piece(header, slice)) => {
                let (id, priority) = (header.message, header.priority);
                let held = self.reassembly.held_bytes();
                match self.reassembly.on_piece(header, slice) {
                    Ok(Some(m)) => {
                        self.priority_of.remove(&id);
                        stats.received(m.priority, &m.payload, now_us);
                    }
                    // Only a piece now held (not a duplicate, nor a late piece of a
                    // cancelled message) marks its message as partly held.
                    Ok(None) if self.reassembly.held_bytes() > held => {
                        self.priority_of.entry(id).or_insert(priority);
                    }
                    Ok(None) => {}
                    Err(_) => {
                        // Its message may be held no longer: forget it, so that the
                        // map stays within the partial messages held.
                        self.priority_of.remove(&id);
                        stats.dropped += 1;
                    }
                }
            }
            Ok(Item::Control(ControlItem::Cancel(id))) => {
                let freed = self.reassembly.on_control(ControlItem::Cancel(id));
                match self.priority_of.remove(&id) {
                    Some(p) => {
                        let row = stats.row(p);
                        row.cancelled += 1;
                        row.freed_bytes += freed;
                    }
                    None => stats.cancels_of_nothing_held += 1,
                }
            }
            Err(_) => stats.dropped += 1,
        }
    }

    /// Bytes held for partial messages.
    pub fn held_bytes(&self) -> u64 {
        self.reassembly.held_bytes()
    }
}

/// The messages received at one priority.
#[derive(Debug, Default, Clone)]
pub struct PriorityRx {
    pub received: u64,
    pub bytes: u64,
    /// Received messages that had a deadline, and those that arrived after it.
    pub with_deadline: u64,
    pub late: u64,
    /// Submission to arrival of the whole message.
    pub delay: Latencies,
    /// Arrival after the deadline (0 for one on time), for messages with a deadline.
    pub lateness: Latencies,
    /// Cancels that freed a partial message of this priority, and the bytes freed.
    pub cancelled: u64,
    pub freed_bytes: u64,
}

/// The messages received at one priority since the last interval.
#[derive(Debug, Default, Clone)]
struct IntervalRx {
    received: u64,
    bytes: u64,
    late: u64,
    delay: Latencies,
}

/// The messages received from every sender, per priority.
#[derive(Debug, Default, Clone)]
pub struct MessageStats {
    /// Whether any message-layer ADU arrived.
    pub seen: bool,
    pub by_priority: BTreeMap<u8, PriorityRx>,
    /// What arrived since the last [`MessageStats::interval`].
    interval: BTreeMap<u8, IntervalRx>,
    /// Cancels of messages of which nothing was held: none of their pieces had arrived,
    /// or the message had arrived whole before its sender cancelled it.
    pub cancels_of_nothing_held: u64,
    /// Message-layer ADUs that were not valid items, or pieces the reassembly refused.
    pub dropped: u64,
}

impl MessageStats {
    fn row(&mut self, priority: u8) -> &mut PriorityRx {
        self.by_priority.entry(priority).or_default()
    }

    fn received(&mut self, priority: u8, payload: &[u8], now_us: u64) {
        let now = self.interval.entry(priority).or_default();
        now.received += 1;
        now.bytes += payload.len() as u64;
        let row = self.row(priority);
        row.received += 1;
        row.bytes += payload.len() as u64;
        let Some(h) = Header::read(payload) else {
            return;
        };
        let delay = Duration::from_micros(now_us.saturating_sub(h.sent_us));
        row.delay.record(delay);
        let mut late = false;
        if let Some(deadline) = h.deadline_us {
            row.with_deadline += 1;
            let lateness = delay.saturating_sub(Duration::from_micros(deadline));
            late = !lateness.is_zero();
            row.late += u64::from(late);
            row.lateness.record(lateness);
        }
        let now = self.interval.get_mut(&priority).expect("entered above");
        now.delay.record(delay);
        now.late += u64::from(late);
    }

    /// What arrived since the last call, `secs` long, one row per priority that received
    /// a message in it; the counts start again.
    pub fn interval(&mut self, secs: f64) -> Vec<PriorityInterval> {
        std::mem::take(&mut self.interval)
            .into_iter()
            .map(|(priority, r)| PriorityInterval {
                priority,
                received: r.received,
                goodput_kbps: crate::report::kbps(r.bytes, secs),
                late: r.late,
                delay_ms: Percentiles::of(&r.delay),
            })
            .collect()
    }

    /// The report: one row per priority seen, and the totals.
    pub fn report(&self) -> MessagesReceived {
        let rows: Vec<PriorityReceived> = self
            .by_priority
            .iter()
            .map(|(&priority, r)| PriorityReceived {
                priority,
                received: r.received,
                bytes: r.bytes,
                with_deadline: r.with_deadline,
                late: r.late,
                delay_ms: Percentiles::of(&r.delay),
                lateness_ms: Percentiles::of(&r.lateness),
                cancelled: r.cancelled,
                freed_bytes: r.freed_bytes,
            })
            .collect();
        MessagesReceived {
            received: rows.iter().map(|r| r.received).sum(),
            cancelled: rows.iter().map(|r| r.cancelled).sum::<u64>() + self.cancels_of_nothing_held,
            priorities: rows,
            cancels_of_nothing_held: self.cancels_of_nothing_held,
            dropped: self.dropped,
        }
    }
}

/// p50 and p95 in ms, `null` without samples.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Percentiles {
    pub p50: Option<f64>,
    pub p95: Option<f64>,
}

impl Percentiles {
    fn of(l: &Latencies) -> Self {
        Self {
            p50: l.percentile_ms(50.0),
            p95: l.percentile_ms(95.0),
        }
    }
}

/// One priority's messages received whole in one interval of `horde recv`'s report.
#[derive(Debug, Clone, Serialize)]
pub struct PriorityInterval {
    pub priority: u8,
    pub received: u64,
    /// Their bytes over the interval, in kbit/s.
    pub goodput_kbps: f64,
    /// Those that arrived after their deadline.
    pub late: u64,
    /// Submission to arrival.
    pub delay_ms: Percentiles,
}

/// One priority's row of the receiver's message report.
#[derive(Debug, Clone, Serialize)]
pub struct PriorityReceived {
    pub priority: u8,
    pub received: u64,
    pub bytes: u64,
    pub with_deadline: u64,
    pub late: u64,
    pub delay_ms: Percentiles,
    pub lateness_ms: Percentiles,
    pub cancelled: u64,
    pub freed_bytes: u64,
}

/// The receiver's message report.
#[derive(Debug, Clone, Serialize)]
pub struct MessagesReceived {
    pub received: u64,
    /// Every cancel seen: those in `priorities` and `cancels_of_nothing_held`.
    pub cancelled: u64,
    pub priorities: Vec<PriorityReceived>,
    pub cancels_of_nothing_held: u64,
    pub dropped: u64,
}

impl MessagesReceived {
    /// The report as text: a row per priority, then the totals.
    pub fn render(&self) -> String {
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        let mut out = String::from(
            "messages received\n  prio  received     bytes  late/with deadline  delay p50/p95 ms  lateness p50/p95 ms  cancelled (freed bytes)\n",
        );
        for r in &self.priorities {
            out += &format!(
                "  {:>4}  {:>8}  {:>8}  {:>18}  {:>16}  {:>19}  {} ({})\n",
                r.priority,
                r.received,
                r.bytes,
                format!("{}/{}", r.late, r.with_deadline),
                format!("{}/{}", ms(r.delay_ms.p50), ms(r.delay_ms.p95)),
                format!("{}/{}", ms(r.lateness_ms.p50), ms(r.lateness_ms.p95)),
                r.cancelled,
                r.freed_bytes,
            );
        }
        out += &format!(
            "messages: {} received, {} cancels seen ({} of messages nothing was held of), {} dropped\n",
            self.received, self.cancelled, self.cancels_of_nothing_held, self.dropped
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_proto::message::codec::PieceHeader;

    fn piece(id: u64, priority: u8, offset: u64, total: u64, bytes: &[u8]) -> Bytes {
        let header = PieceHeader {
            message: MessageId(id),
            offset,
            total,
            priority,
        };
        let mut adu = Vec::new();
        codec::encode_piece_header(&header, &mut adu);
        adu.extend_from_slice(bytes);
        adu.into()
    }

    fn cancel(id: u64) -> Bytes {
        let mut adu = Vec::new();
        codec::encode_control(&ControlItem::Cancel(MessageId(id)), &mut adu);
        adu.into()
    }

    #[test]
    fn whole_messages_are_counted_with_their_lateness_and_cancels_free_partial_ones() {
        let mut rx = MessageRx::default();
        let mut stats = MessageStats::default();
        let sent = 1_000_000_000u64;
        // Message 1, priority 2, 300 ms deadline, arrives whole 500 ms after submission:
        // 200 ms late.
        let mut m1 = [0u8; 40];
        m1[..8].copy_from_slice(&sent.to_be_bytes());
        m1[8..16].copy_from_slice(&300_000u64.to_be_bytes());
        rx.on_adu(piece(1, 2, 0, 40, &m1[..20]), sent + 100_000, &mut stats);
        rx.on_adu(piece(1, 2, 20, 40, &m1[20..]), sent + 500_000, &mut stats);
        // Message 2, priority 2, half of it held, then cancelled.
        rx.on_adu(piece(2, 2, 0, 40, &m1[..20]), sent, &mut stats);
        assert_eq!(rx.held_bytes(), 20);
        rx.on_adu(cancel(2), sent, &mut stats);
        assert_eq!(rx.held_bytes(), 0);
        // A late piece of it starts nothing; a cancel of a message never seen is counted
        // apart.
        rx.on_adu(piece(2, 2, 20, 40, &m1[20..]), sent, &mut stats);
        assert_eq!(rx.held_bytes(), 0);
        rx.on_adu(cancel(9), sent, &mut stats);
        rx.on_adu(Bytes::from_static(&[0xEE, 1, 2]), sent, &mut stats);
        let r = stats.report();
        assert_eq!(r.received, 1);
        let p = &r.priorities[0];
        assert_eq!((p.priority, p.received, p.bytes), (2, 1, 40));
        assert_eq!((p.late, p.with_deadline), (1, 1));
        let near = |v: Option<f64>, want: f64| (v.unwrap() - want).abs() <= want * 1e-3;
        assert!(near(p.lateness_ms.p50, 200.0), "{:?}", p.lateness_ms);
        assert!(near(p.delay_ms.p95, 500.0), "{:?}", p.delay_ms);
        assert_eq!((p.cancelled, p.freed_bytes), (1, 20));
        assert_eq!(
            (r.cancelled, r.cancels_of_nothing_held, r.dropped),
            (2, 1, 1)
        );
        assert!(r.render().contains("messages: 1 received, 2 cancels seen"));
        // The interval holds the one message, late, and then starts again.
        let rows = stats.interval(0.5);
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].priority, rows[0].received, rows[0].late),
            (2, 1, 1)
        );
        assert!((rows[0].goodput_kbps - 40.0 * 8.0 / 1e3 / 0.5).abs() < 1e-9);
        assert!(near(rows[0].delay_ms.p50, 500.0), "{:?}", rows[0].delay_ms);
        assert!(stats.interval(0.5).is_empty());
        assert_eq!(stats.report().received, 1, "the totals stay");
    }
}
