//! The harness's books: every ADU the client's application queued, every outcome the
//! sessions reported for it, and every ADU the server's application was handed. The
//! invariants about ADUs are checked against these books.
//!
//! An ADU is named by the client incarnation that queued it (a restarted client starts
//! its streams again from sequence 0), its stream and its stream sequence number. The
//! client writes that name at the front of each payload, so the server side can tell
//! exactly which ADU it was handed.

use std::collections::BTreeMap;
use std::time::Duration;

use horde_proto::{Event, NackReason};

use super::violation::Violation;

/// Bytes of the name at the front of every payload.
pub const TAG_LEN: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AduKey {
    pub incarnation: u32,
    pub stream: u32,
    pub seq: u64,
}

impl AduKey {
    pub fn write_tag(&self, payload: &mut [u8]) {
        payload[..4].copy_from_slice(&self.incarnation.to_be_bytes());
        payload[4..8].copy_from_slice(&self.stream.to_be_bytes());
        payload[8..16].copy_from_slice(&self.seq.to_be_bytes());
    }

    pub fn read_tag(payload: &[u8]) -> Option<AduKey> {
        let b = payload.get(..TAG_LEN)?;
        Some(AduKey {
            incarnation: u32::from_be_bytes(b[..4].try_into().ok()?),
            stream: u32::from_be_bytes(b[4..8].try_into().ok()?),
            seq: u64::from_be_bytes(b[8..16].try_into().ok()?),
        })
    }
}

/// What became of an ADU, as far as the sender knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Pending,
    Acked,
    Lost,
    /// Never sent: queue overflow, removed, or still queued at the close.
    Dropped,
    Abandoned,
    /// The client process died while the ADU was unresolved: nobody is left to tell.
    Crashed,
}

#[derive(Debug, Clone, Copy)]
struct Record {
    size: u32,
    outcome: Outcome,
    /// Whether its stream resends in-flight ADUs on a new session (so the receiver may
    /// legitimately get it once per session).
    resend: bool,
    acked_at: Option<Duration>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Delivery {
    count: u32,
    /// The receiving session of the last delivery.
    session: u64,
}

/// Totals for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    pub queued: u64,
    pub acked: u64,
    pub lost: u64,
    pub dropped: u64,
    pub abandoned: u64,
    pub crashed: u64,
    pub delivered: u64,
    /// Deliveries of a resending stream's ADU a second time, on a new session (allowed).
    pub redelivered: u64,
}

#[derive(Default)]
pub struct Ledger {
    adus: BTreeMap<AduKey, Record>,
    delivered: BTreeMap<AduKey, Delivery>,
    pub violations: Vec<Violation>,
    pub tally: Tally,
    /// Server crash times: an ADU acked but still held in the receiver's reorder buffer
    /// when the receiver process died never reaches its application, and that is not a
    /// transport fault.
    server_crashes: Vec<Duration>,
    /// Delivery times, per stream, kept only after `watch_from` (a short tail).
    pub deliveries_after: BTreeMap<u32, Vec<(Duration, u32)>>,
    pub watch_from: Duration,
    /// The client has closed its connection: from now on its queued ADUs may be nacked
    /// as closed. Before, the persistent connection carries them to its next session.
    pub client_closed: bool,
}

impl Ledger {
    pub fn queued(&mut self, key: AduKey, size: u32, resend: bool) {
        self.tally.queued += 1;
        let old = self.adus.insert(
            key,
            Record {
                size,
                outcome: Outcome::Pending,
                resend,
                acked_at: None,
            },
        );
        if old.is_some() {
            self.violations.push(Violation::new(
                "adu_reused",
                format!("{key:?} queued twice: the session reused a sequence number"),
            ));
        }
    }

    fn resolve(&mut self, now: Duration, key: AduKey, to: Outcome, what: &str) {
        let Some(r) = self.adus.get_mut(&key) else {
            self.violations.push(Violation::new(
                "unknown_adu",
                format!("{what} for {key:?}, which was never queued"),
            ));
            return;
        };
        let from = r.outcome;
        let allowed = from == Outcome::Pending || (from == Outcome::Lost && to == Outcome::Acked);
        if !allowed {
            self.violations.push(Violation::new(
                "accounted_twice",
                format!(
                    "{key:?} was {from:?}, then {what} at {:.3} s",
                    now.as_secs_f64()
                ),
            ));
            return;
        }
        match from {
            Outcome::Lost => self.tally.lost -= 1,
            Outcome::Pending => {}
            _ => unreachable!("only pending and lost ADUs change"),
        }
        r.outcome = to;
        match to {
            Outcome::Acked => {
                r.acked_at = Some(now);
                self.tally.acked += 1;
            }
            Outcome::Lost => self.tally.lost += 1,
            Outcome::Dropped => self.tally.dropped += 1,
            Outcome::Abandoned => self.tally.abandoned += 1,
            Outcome::Crashed => self.tally.crashed += 1,
            Outcome::Pending => {}
        }
    }

    /// A client session's event; `incarnation` names the client process.
    pub fn client_event(&mut self, now: Duration, incarnation: u32, e: &Event) {
        let key = |stream, seq| AduKey {
            incarnation,
            stream,
            seq,
        };
        match *e {
            Event::Ack {
                stream, stream_seq, ..
            } => self.resolve(now, key(stream, stream_seq), Outcome::Acked, "ack"),
            Event::LateAck {
                stream, stream_seq, ..
            } => self.resolve(now, key(stream, stream_seq), Outcome::Acked, "late ack"),
            Event::Nack {
                stream,
                stream_seq,
                reason,
                ..
            } => {
                if reason == NackReason::Closed
                    && !self.client_closed
                    && !self.violations.iter().any(|v| v.kind == "released")
                {
                    self.violations.push(Violation::new(
                        "released",
                        format!(
                            "{:?} nacked as closed at {:.3} s, before the client closed: a persistent connection carries its queued ADUs to its next session",
                            key(stream, stream_seq),
                            now.as_secs_f64()
                        ),
                    ));
                }
                let to = match reason {
                    NackReason::Lost => Outcome::Lost,
                    NackReason::Abandoned => Outcome::Abandoned,
                    NackReason::QueueOverflow | NackReason::Removed | NackReason::Closed => {
                        Outcome::Dropped
                    }
                };
                self.resolve(
                    now,
                    key(stream, stream_seq),
                    to,
                    &format!("nack ({reason:?})"),
                );
            }
            _ => {}
        }
    }

    /// The client process died: what it had not resolved is gone with it.
    pub fn client_crashed(&mut self, now: Duration, incarnation: u32) {
        let pending: Vec<AduKey> = self
            .adus
            .range(
                AduKey {
                    incarnation,
                    stream: 0,
                    seq: 0,
                }..=AduKey {
                    incarnation,
                    stream: u32::MAX,
                    seq: u64::MAX,
                },
            )
            .filter(|(_, r)| r.outcome == Outcome::Pending)
            .map(|(k, _)| *k)
            .collect();
        for k in pending {
            self.resolve(now, k, Outcome::Crashed, "client crash");
        }
    }

    pub fn server_crashed(&mut self, now: Duration) {
        self.server_crashes.push(now);
    }

    /// The server's application was handed an ADU by session `session`.
    pub fn server_received(
        &mut self,
        now: Duration,
        session: u64,
        stream: u32,
        stream_seq: u64,
        payload: &[u8],
    ) {
        let Some(key) =
            AduKey::read_tag(payload).filter(|k| k.stream == stream && k.seq == stream_seq)
        else {
            self.violations.push(Violation::new(
                "misdelivered",
                format!(
                    "stream {stream} seq {stream_seq} delivered with a payload naming another ADU"
                ),
            ));
            return;
        };
        let Some(r) = self.adus.get(&key).copied() else {
            self.violations.push(Violation::new(
                "phantom",
                format!("{key:?} delivered but never queued"),
            ));
            return;
        };
        if payload.len() != r.size as usize {
            self.violations.push(Violation::new(
                "misdelivered",
                format!(
                    "{key:?} delivered with {} bytes, queued with {}",
                    payload.len(),
                    r.size
                ),
            ));
        }
        let d = self.delivered.entry(key).or_default();
        if d.count > 0 && (!r.resend || d.session == session) {
            self.violations.push(Violation::new(
                "delivered_twice",
                format!(
                    "{key:?} delivered again at {:.3} s (session {session:x})",
                    now.as_secs_f64()
                ),
            ));
        } else if d.count > 0 {
            self.tally.redelivered += 1;
        } else {
            self.tally.delivered += 1;
        }
        d.count += 1;
        d.session = session;
        if now >= self.watch_from {
            self.deliveries_after
                .entry(stream)
                .or_default()
                .push((now, payload.len() as u32));
        }
    }

    /// The payload size an ADU was queued with.
    pub fn size_of(&self, key: AduKey) -> Option<u32> {
        self.adus.get(&key).map(|r| r.size)
    }

    /// At the end: every ADU resolved exactly once, and every acked ADU delivered.
    pub fn check_final(&mut self) {
        let mut gone = 0u64;
        let mut first_gone = None;
        let mut undelivered = 0u64;
        let mut first_undelivered = None;
        for (k, r) in &self.adus {
            if r.outcome == Outcome::Pending {
                gone += 1;
                first_gone.get_or_insert(*k);
            }
            if r.outcome == Outcome::Acked && !self.delivered.contains_key(k) {
                let excused = r.acked_at.is_some_and(|a| {
                    self.server_crashes.iter().any(|&c| {
                        c <= a + Duration::from_millis(100) && a <= c + Duration::from_secs(5)
                    })
                });
                if !excused {
                    undelivered += 1;
                    first_undelivered.get_or_insert(*k);
                }
            }
        }
        if let Some(k) = first_gone {
            self.violations.push(Violation::new(
                "silently_gone",
                format!("{gone} ADUs never acked, nacked or dropped (first {k:?})"),
            ));
        }
        if let Some(k) = first_undelivered {
            self.violations.push(Violation::new(
                "acked_not_delivered",
                format!("{undelivered} ADUs acked but never handed to the receiver (first {k:?})"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_proto::ChannelId;

    fn key(seq: u64) -> AduKey {
        AduKey {
            incarnation: 0,
            stream: 1,
            seq,
        }
    }

    fn ack(seq: u64) -> Event {
        Event::Ack {
            stream: 1,
            adu: seq,
            stream_seq: seq,
            channel: ChannelId::new(0),
            rtt: Duration::ZERO,
            latency: Duration::ZERO,
        }
    }

    fn nack(seq: u64, reason: NackReason) -> Event {
        Event::Nack {
            stream: 1,
            adu: seq,
            stream_seq: seq,
            channel: None,
            reason,
        }
    }

    fn payload(k: AduKey, len: usize) -> Vec<u8> {
        let mut p = vec![0; len];
        k.write_tag(&mut p);
        p
    }

    #[test]
    fn a_second_outcome_and_a_silent_adu_are_violations() {
        let mut l = Ledger::default();
        let t = Duration::from_secs(1);
        for s in 0..3 {
            l.queued(key(s), 100, false);
        }
        l.client_event(t, 0, &ack(0));
        l.server_received(t, 9, 1, 0, &payload(key(0), 100));
        l.client_event(t, 0, &nack(0, NackReason::Abandoned));
        // A loss later found spurious is one ADU acked, not two outcomes.
        l.client_event(t, 0, &nack(1, NackReason::Lost));
        l.client_event(
            t,
            0,
            &Event::LateAck {
                stream: 1,
                adu: 1,
                stream_seq: 1,
                channel: ChannelId::new(0),
                rtt: Duration::ZERO,
                latency: Duration::ZERO,
            },
        );
        l.server_received(t, 9, 1, 1, &payload(key(1), 100));
        l.check_final();
        let kinds: Vec<&str> = l.violations.iter().map(|v| v.kind).collect();
        assert_eq!(kinds, ["accounted_twice", "silently_gone"]);
        assert_eq!((l.tally.acked, l.tally.lost), (2, 0));
    }

    #[test]
    fn duplicates_are_allowed_only_across_sessions_of_a_resending_stream() {
        let mut l = Ledger::default();
        let t = Duration::from_secs(1);
        let resend = AduKey {
            stream: 2,
            ..key(0)
        };
        l.queued(key(0), 50, false);
        l.queued(resend, 50, true);
        l.server_received(t, 1, 2, 0, &payload(resend, 50));
        l.server_received(t, 2, 2, 0, &payload(resend, 50));
        assert!(l.violations.is_empty());
        l.server_received(t, 2, 2, 0, &payload(resend, 50));
        l.server_received(t, 1, 1, 0, &payload(key(0), 50));
        l.server_received(t, 2, 1, 0, &payload(key(0), 50));
        l.server_received(t, 2, 1, 3, &payload(key(0), 50));
        let kinds: Vec<&str> = l.violations.iter().map(|v| v.kind).collect();
        assert_eq!(
            kinds,
            ["delivered_twice", "delivered_twice", "misdelivered"]
        );
    }

    #[test]
    fn acked_but_never_delivered_is_caught_unless_the_receiver_crashed() {
        let mut l = Ledger::default();
        l.queued(key(0), 20, false);
        l.queued(key(1), 20, false);
        l.client_event(Duration::from_secs(1), 0, &ack(0));
        l.server_crashed(Duration::from_secs(9));
        l.client_event(Duration::from_secs(9), 0, &ack(1));
        l.check_final();
        assert_eq!(l.violations.len(), 1);
        assert_eq!(l.violations[0].kind, "acked_not_delivered");
        assert!(l.violations[0].detail.contains("1 ADUs"));
    }
}
