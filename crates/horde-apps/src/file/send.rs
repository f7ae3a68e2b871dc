//! The sending end of `send --file`: pieces of the source go out over every channel,
//! each kept until the receiver confirms it written (an ack only says it reached the
//! receiving host); what is nacked is sent again; after a reconnection the receiver says
//! where it stands and the sender sends the rest from there.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use horde_net::{Connection, ConnectionHandle, EventReceiver, NetError};
use horde_policy::Fields;
use horde_proto::{CloseReason, Event, StreamConfig};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::books::Books;
use super::source::Reading;
use super::wire::{hex, Digest, Msg, STREAM};

/// How far past what the receiver confirmed the sender may read and send.
pub const WINDOW: u64 = 32 << 20;
/// The file stream's queue limit: a fast path takes a few hundred kilobytes at once.
const QUEUE_BYTES: usize = 2 << 20;
/// Pieces queued per back-pressure check.
const BURST: usize = 32;
/// How often an unanswered offer, or the end while no verdict came, is sent again.
const REPEAT: Duration = Duration::from_secs(1);
/// How often the loop looks at Ctrl-C and the clock when nothing else happens.
const TICK: Duration = Duration::from_millis(100);
/// How long an offer may go unanswered in a session before the sender gives up: the
/// peer is up (its host acks) but is not a file receiver.
const NO_ANSWER: Duration = Duration::from_secs(10);
/// How long the sender waits for its abort to be acked before it closes. The abort
/// queues behind up to [`QUEUE_BYTES`] of pieces, and a close drops what is queued:
/// on a busy host a second was not always enough for the receiver to hear why.
const ABORT_WAIT: Duration = Duration::from_secs(3);
/// How long the sender waits for its close to finish.
const CLOSE_WAIT: Duration = Duration::from_secs(3);

/// How a file transfer ended, as the sender saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum FileEnd {
    /// The receiver holds the same bytes.
    Verified,
    /// The receiver holds other bytes.
    Mismatch { total: u64, sha256: String },
    /// The receiver left and did not come back, cannot resume, or gave up.
    ReceiverLeft { why: String },
    /// Reading the source failed, or Ctrl-C.
    Failed { why: String },
}

/// What `send --file` reports.
#[derive(Debug, Clone, Serialize)]
pub struct FileSent {
    pub end: FileEnd,
    /// Bytes read from the source (all of it once it ended).
    pub bytes: u64,
    /// SHA-256 of the source, once read to its end.
    pub sha256: Option<String>,
    /// Bytes the receiver confirmed written.
    pub confirmed: u64,
    pub seconds: f64,
    /// Goodput over the run: confirmed bytes over its length.
    pub mbit_s: f64,
    /// Pieces sent, and of those sent again (nacked, or lost with a receiver).
    pub pieces_sent: u64,
    pub pieces_resent: u64,
    /// Times the receiver said where to go on (the first, and one per reconnection).
    pub resumes: u64,
}

/// Progress once a second.
pub struct Progress {
    pub at: Duration,
    pub read: u64,
    pub confirmed: u64,
}

type Writable = Pin<Box<dyn Future<Output = Result<(), NetError>> + Send>>;

/// The sender's books of one transfer.
struct Transfer {
    id: u64,
    handle: ConnectionHandle,
    /// The stream sequence number the next ADU gets.
    next_seq: u64,
    books: Books,
    /// Source pieces not yet given an offset.
    fresh: VecDeque<Bytes>,
    source_end: Option<(u64, Digest)>,
    /// The receiver said where to go on in this session.
    resumed: bool,
    offer_due: Instant,
    /// The first unanswered offer of this session.
    offered_at: Option<Instant>,
    end_due: Instant,
    sent: u64,
    resent: u64,
    resumes: u64,
}

impl Transfer {
    fn queue(&mut self, msg: &Msg) -> Result<u64, NetError> {
        self.queue_payload(msg.encode())
    }

    /// Offer the transfer, and learn the stream's sequence number from the handle: the
    /// books follow acks by it.
    async fn offer(&mut self) -> Result<(), NetError> {
        let h = self
            .handle
            .send_adu(
                STREAM,
                Msg::Offer { transfer: self.id }.encode(),
                Fields::new(),
            )
            .await?;
        if h.seq != self.next_seq {
            // Not expected; if it happens, what is in flight can no longer be followed,
            // so it is all sent again.
            eprintln!(
                "warning: the file stream's numbering moved ({} expected, {} given): \
                 sending what is in flight again",
                self.next_seq, h.seq
            );
            self.books.resend_in_flight();
        }
        self.next_seq = h.seq + 1;
        self.offer_due = Instant::now() + REPEAT;
        self.offered_at.get_or_insert_with(Instant::now);
        Ok(())
    }

    fn window_open(&self) -> bool {
        self.books.unconfirmed() < WINDOW
    }

    fn has_sendable(&self) -> bool {
        self.resumed && (self.books.has_resend() || (!self.fresh.is_empty() && self.window_open()))
    }

    /// Queue up to a burst of pieces: those to send again first, then new ones.
    fn send_burst(&mut self) -> Result<(), NetError> {
        if !self.resumed {
            return Ok(());
        }
        for _ in 0..BURST {
            if let Some((offset, payload)) = self.books.take_resend() {
                let seq = self.queue_payload(payload)?;
                self.books.resent(offset, seq);
                self.resent += 1;
            } else if self.window_open() {
                let Some(bytes) = self.fresh.pop_front() else {
                    break;
                };
                let (offset, len) = (self.books.next_offset(), bytes.len());
                let payload = Msg::Data {
                    transfer: self.id,
                    offset,
                    bytes,
                }
                .encode();
                let seq = self.queue_payload(payload.clone())?;
                self.books.add(offset, len, payload, seq);
            } else {
                break;
            }
            self.sent += 1;
        }
        Ok(())
    }

    fn queue_payload(&mut self, payload: Bytes) -> Result<u64, NetError> {
        let seq = self.next_seq;
        self.handle
            .send_adu_nowait(STREAM, payload, Fields::new())?;
        self.next_seq += 1;
        Ok(seq)
    }

    /// The receiver says where it stands (at the start, and after each reconnection).
    fn resume(&mut self, from: u64) -> Result<(), String> {
        self.books.resume(from)?;
        self.resumed = true;
        self.offered_at = None;
        self.resumes += 1;
        self.end_due = Instant::now();
        Ok(())
    }
}

/// Send what `source` reads over `conn` as transfer `id`, in pieces of at most
/// `max_adu` bytes with their header, until the receiver's verdict, or until the
/// receiver leaves for good; `tick` gets progress once a second.
pub async fn send_file(
    conn: Connection,
    mut source: mpsc::Receiver<Reading>,
    id: u64,
    mut tick: impl FnMut(&Progress),
) -> Result<FileSent> {
    let start = Instant::now();
    let (handle, mut events) = conn.split();
    let config = StreamConfig {
        max_queue_bytes: QUEUE_BYTES,
        ..StreamConfig::default()
    };
    let mut t = Transfer {
        id,
        handle: handle.clone(),
        next_seq: 0,
        books: Books::default(),
        fresh: VecDeque::new(),
        source_end: None,
        resumed: false,
        offer_due: start,
        offered_at: None,
        end_due: start,
        sent: 0,
        resent: 0,
        resumes: 0,
    };
    let report = |t: &Transfer, end: FileEnd| {
        let seconds = start.elapsed().as_secs_f64();
        FileSent {
            end,
            bytes: t.books.read_end(),
            sha256: t.source_end.map(|(_, d)| hex(&d)),
            confirmed: t.books.confirmed(),
            seconds,
            mbit_s: t.books.confirmed() as f64 * 8.0 / seconds.max(1e-9) / 1e6,
            pieces_sent: t.sent,
            pieces_resent: t.resent,
            resumes: t.resumes,
        }
    };
    let opened = async {
        handle.open_stream(STREAM, config).await?;
        t.offer().await
    }
    .await;
    if let Err(e) = opened {
        let why = left_why(&mut events).await.unwrap_or_else(|| e.to_string());
        return Ok(report(&t, FileEnd::ReceiverLeft { why }));
    }
    let mut writable: Option<Writable> = None;
    let mut source_open = true;
    let mut connected = true;
    let mut next_tick = start + Duration::from_secs(1);
    let end = loop {
        if horde_emu::sys::interrupted() {
            break FileEnd::Failed {
                why: "interrupted".into(),
            };
        }
        let now = Instant::now();
        if now >= next_tick {
            next_tick += Duration::from_secs(1);
            tick(&Progress {
                at: now - start,
                read: t.books.read_end(),
                confirmed: t.books.confirmed(),
            });
        }
        if connected && !t.resumed && now >= t.offer_due && t.offer().await.is_err() {
            // Between sessions: the next `Connected` offers again.
            t.offer_due = now + REPEAT;
        }
        if t.offered_at.is_some_and(|at| now >= at + NO_ANSWER) {
            break FileEnd::ReceiverLeft {
                why: format!(
                    "the receiver does not answer the transfer's offer after {} s: is it \
                     `horde recv --out`?",
                    NO_ANSWER.as_secs()
                ),
            };
        }
        if let Some((total, sha256)) = t.source_end {
            if t.resumed && t.books.read_end() == total && t.fresh.is_empty() && now >= t.end_due {
                t.queue(&Msg::End {
                    transfer: id,
                    total,
                    sha256,
                })?;
                t.end_due = now + REPEAT;
            }
        }
        if t.has_sendable() && writable.is_none() {
            let h = handle.clone();
            writable = Some(Box::pin(async move { h.writable(STREAM).await }));
        }
        let want_source = source_open && t.fresh.is_empty() && t.window_open();
        let wake = (now + TICK).min(next_tick);
        tokio::select! {
            e = events.recv() => {
                let Some(e) = e else {
                    break FileEnd::ReceiverLeft { why: "the connection ended".into() };
                };
                match on_event(&mut t, e, &mut connected) {
                    Step::Go => {}
                    Step::End(end) => break end,
                }
                // Take what else has come in one go: acks come one per piece.
                let mut ended = None;
                while let Ok(e) = events.try_recv() {
                    if let Step::End(end) = on_event(&mut t, e, &mut connected) {
                        ended = Some(end);
                        break;
                    }
                }
                if let Some(end) = ended {
                    break end;
                }
            }
            r = async { writable.as_mut().expect("armed").await }, if writable.is_some() => {
                writable = None;
                // An error: the session ended, and the connection's events say how.
                if r.is_ok() {
                    t.send_burst()?;
                }
            }
            r = source.recv(), if want_source => match r {
                Some(Reading::Pieces(p)) => t.fresh.extend(p),
                Some(Reading::End { total, sha256 }) => {
                    t.source_end = Some((total, sha256));
                    source_open = false;
                }
                Some(Reading::Failed(why)) => break FileEnd::Failed { why },
                None => break FileEnd::Failed { why: "the reader stopped".into() },
            },
            _ = tokio::time::sleep_until(wake) => {}
        }
    };
    if let FileEnd::Failed { why } | FileEnd::ReceiverLeft { why } = &end {
        // Tell the receiver, so it does not wait for more; the close would drop the
        // message were it still queued.
        if let Ok(seq) = t.queue(&Msg::Abort {
            transfer: id,
            reason: why.clone(),
        }) {
            let until = Instant::now() + ABORT_WAIT;
            while let Ok(Some(e)) = tokio::time::timeout_at(until, events.recv()).await {
                match e {
                    Event::Ack {
                        stream: STREAM,
                        stream_seq,
                        ..
                    }
                    | Event::Nack {
                        stream: STREAM,
                        stream_seq,
                        ..
                    } if stream_seq == seq => break,
                    Event::Closed { .. } => break,
                    _ => {}
                }
            }
        }
    }
    let _ = handle.close();
    let close_end = Instant::now() + CLOSE_WAIT;
    while let Ok(Some(e)) = tokio::time::timeout_at(close_end, events.recv()).await {
        if matches!(e, Event::Closed { .. }) {
            break;
        }
    }
    Ok(report(&t, end))
}

enum Step {
    Go,
    End(FileEnd),
}

fn on_event(t: &mut Transfer, e: Event, connected: &mut bool) -> Step {
    match e {
        Event::Ack {
            stream: STREAM,
            stream_seq,
            ..
        } => t.books.acked(stream_seq),
        Event::Nack {
            stream: STREAM,
            stream_seq,
            ..
        } => t.books.nacked(stream_seq),
        Event::Received { payload, .. } => return on_message(t, &payload),
        Event::Reconnecting { reason, attempt } => {
            if attempt == 1 {
                eprintln!("the receiver left ({}); reconnecting", reason.as_str());
            }
            *connected = false;
            t.resumed = false;
            t.offered_at = None;
        }
        Event::Connected => {
            *connected = true;
            t.resumed = false;
            t.offer_due = Instant::now();
        }
        Event::Closed { reason } => {
            return Step::End(FileEnd::ReceiverLeft {
                why: closed_why(reason),
            })
        }
        _ => {}
    }
    Step::Go
}

fn on_message(t: &mut Transfer, payload: &Bytes) -> Step {
    let Ok(msg) = Msg::decode(payload) else {
        return Step::Go;
    };
    if msg.transfer() != t.id {
        return Step::Go;
    }
    match msg {
        Msg::Resume { from, .. } => {
            if let Err(why) = t.resume(from) {
                return Step::End(FileEnd::ReceiverLeft { why });
            }
        }
        Msg::Confirm { upto, .. } => t.books.confirm(upto),
        Msg::Verdict { total, sha256, .. } => {
            let Some((ours, digest)) = t.source_end else {
                return Step::Go; // cannot be: the end was not sent
            };
            t.books.confirm(total.min(ours));
            return Step::End(if (total, sha256) == (ours, digest) {
                FileEnd::Verified
            } else {
                FileEnd::Mismatch {
                    total,
                    sha256: hex(&sha256),
                }
            });
        }
        Msg::Abort { reason, .. } => {
            return Step::End(FileEnd::ReceiverLeft {
                why: format!("the receiver gave up: {reason}"),
            })
        }
        Msg::Offer { .. } | Msg::Data { .. } | Msg::End { .. } => {}
    }
    Step::Go
}

fn closed_why(reason: CloseReason) -> String {
    match reason {
        CloseReason::ServiceRefused => "the receiver refused the service".into(),
        r if r.reconnects() => format!("the receiver left ({}) and did not come back", r.as_str()),
        r => format!("the connection ended ({})", r.as_str()),
    }
}

/// The connection failed at its start: wait a moment for its end's reason.
async fn left_why(events: &mut EventReceiver) -> Option<String> {
    let until = Instant::now() + Duration::from_secs(1);
    while let Ok(Some(e)) = tokio::time::timeout_at(until, events.recv()).await {
        if let Event::Closed { reason } = e {
            return Some(closed_why(reason));
        }
    }
    None
}
