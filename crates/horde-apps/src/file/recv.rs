//! The receiving end of `recv --out`: pieces are written where they belong, the prefix
//! written without a hole is flushed to disk and recorded in the resume file before the
//! sender is told it may forget it, and once the end has come the output is hashed and
//! the verdict sent back.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use horde_net::{ConnectionHandle, Listener};
use horde_policy::Fields;
use horde_proto::{CloseReason, Event, StreamConfig};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::resume::{self, ResumeState};
use super::sink::Sink;
use super::wire::{hex, Digest, Msg, STREAM};

/// How often the written prefix is flushed and confirmed.
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// How long the receiver stays after its verdict for the sender to close.
const LINGER: Duration = Duration::from_secs(5);
/// How long the receiver waits for its abort to leave before it stops.
const ABORT_WAIT: Duration = Duration::from_secs(1);
/// How often the loop looks at Ctrl-C and the clock.
const TICK: Duration = Duration::from_millis(50);

/// When the receiver stops waiting.
pub struct FileLimits {
    pub deadline: Option<Instant>,
    /// Once a sender came: how long without a message before giving up.
    pub idle: Option<Duration>,
}

/// How a file transfer ended, as the receiver saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum RecvEnd {
    /// The output holds what the sender read, checksum and length.
    Verified,
    /// It holds something else.
    Mismatch {
        expected_sha256: String,
        expected_bytes: u64,
    },
    /// The transfer did not complete.
    Incomplete { why: String },
}

/// What `recv --out` reports.
#[derive(Debug, Clone, Serialize)]
pub struct FileReceived {
    pub end: RecvEnd,
    /// Bytes written without a hole from the start.
    pub bytes: u64,
    pub sha256: Option<String>,
    /// Bytes a previous receiver had written, taken up from the resume file.
    pub resumed_from: Option<u64>,
    pub seconds: f64,
    /// Goodput: bytes written in this run over its length.
    pub mbit_s: f64,
}

/// What the loop reports as it goes.
pub enum Note<'a> {
    Connected(usize),
    Resuming(u64),
    StartingOver,
    Progress { at: Duration, written: u64 },
    Text(&'a str),
}

type FromSender = (usize, Option<Event>);

struct Rx {
    sink: Sink,
    resume_path: Option<PathBuf>,
    transfer: Option<u64>,
    /// Bytes from the start flushed and recorded.
    durable: u64,
    expected: Option<(u64, Digest)>,
    verdict: Option<(u64, Digest)>,
    flushing: Option<JoinHandle<std::io::Result<u64>>>,
    /// The connection that spoke last: answers go there.
    current: Option<usize>,
    conns: HashMap<usize, ConnectionHandle>,
    warned_foreign: bool,
}

impl Rx {
    fn reply(&self, conn: usize, msg: &Msg) {
        if let Some(h) = self.conns.get(&conn) {
            let _ = h.send_adu_nowait(STREAM, msg.encode(), Fields::new());
        }
    }

    fn record(&self, written: u64) -> std::io::Result<()> {
        match (&self.resume_path, self.transfer) {
            (Some(p), Some(transfer)) => resume::store(p, ResumeState { transfer, written }),
            _ => Ok(()),
        }
    }

    /// Wait for a flush in flight: it writes the resume file of the transfer it began
    /// under, so it must land before that file is replaced or removed.
    fn settle_flush(&mut self) -> Option<u64> {
        let flush = self.flushing.take()?;
        let handle = tokio::runtime::Handle::current();
        match tokio::task::block_in_place(|| handle.block_on(flush)) {
            Ok(Ok(upto)) => Some(upto),
            _ => None,
        }
    }

    /// A message of transfer `id` came: a new transfer replaces what was there.
    fn adopt(&mut self, id: u64, note: &mut impl FnMut(Note<'_>)) -> Result<(), String> {
        if self.transfer == Some(id) {
            return Ok(());
        }
        if !self.sink.resumable() && self.sink.prefix() > 0 {
            return Err(format!(
                "a new transfer came after {} bytes of another went to standard output",
                self.sink.prefix()
            ));
        }
        if self.transfer.is_some() || self.sink.prefix() > 0 {
            note(Note::StartingOver);
        }
        self.settle_flush();
        self.sink
            .reset()
            .map_err(|e| format!("emptying the output: {e}"))?;
        self.transfer = Some(id);
        self.durable = 0;
        self.expected = None;
        self.verdict = None;
        self.record(0)
            .map_err(|e| format!("writing the resume file: {e}"))?;
        Ok(())
    }
}

/// Receive one file into `sink` from the senders `listener` accepts, until it is
/// verified, it fails, a limit passes or Ctrl-C (`interrupted`).
pub async fn receive_file(
    mut listener: Listener,
    mut sink: Sink,
    limits: &FileLimits,
    interrupted: impl Fn() -> bool,
    mut note: impl FnMut(Note<'_>),
) -> Result<FileReceived> {
    let mut start = Instant::now();
    let resume_path = sink.path().map(|p| resume::path_for(p));
    let mut transfer = None;
    let mut resumed_from = None;
    if let Some(path) = &resume_path {
        if let Some(state) = resume::load(path)? {
            // The bytes it names must be there still.
            if state.written <= sink.len_on_disk() {
                sink.resume_at(state.written);
                transfer = Some(state.transfer);
                resumed_from = Some(state.written);
                note(Note::Resuming(state.written));
            }
        }
    }
    let mut rx = Rx {
        durable: sink.prefix(),
        sink,
        resume_path,
        transfer,
        expected: None,
        verdict: None,
        flushing: None,
        current: None,
        conns: HashMap::new(),
        warned_foreign: false,
    };
    let base = rx.durable;
    let (tx, mut from_senders) = mpsc::unbounded_channel::<FromSender>();
    let mut accepted = 0usize;
    let mut heard_at: Option<Instant> = None;
    let mut linger_until: Option<Instant> = None;
    let mut next_flush = start + FLUSH_EVERY;
    let mut next_progress = start + Duration::from_secs(1);
    let end = loop {
        let now = Instant::now();
        if interrupted() {
            break incomplete("interrupted");
        }
        if limits.deadline.is_some_and(|d| now >= d) {
            break incomplete("the run length passed");
        }
        if let (Some(idle), Some(at), None) = (limits.idle, heard_at, rx.verdict) {
            if now >= at + idle {
                break incomplete(&format!(
                    "nothing came from the sender for {} s",
                    idle.as_secs_f64()
                ));
            }
        }
        if linger_until.is_some_and(|t| now >= t) {
            break verdict_end(&rx);
        }
        if now >= next_progress && accepted > 0 {
            next_progress += Duration::from_secs(1);
            note(Note::Progress {
                at: now - start,
                written: rx.sink.prefix(),
            });
        }
        if rx.flushing.is_none() && now >= next_flush && rx.sink.prefix() > rx.durable {
            next_flush = now + FLUSH_EVERY;
            let upto = rx.sink.prefix();
            match rx.sink.flusher() {
                Ok(Some(file)) => {
                    let (path, transfer) = (rx.resume_path.clone(), rx.transfer);
                    rx.flushing = Some(tokio::task::spawn_blocking(move || {
                        file.sync_data()?;
                        if let (Some(p), Some(transfer)) = (path, transfer) {
                            resume::store(
                                &p,
                                ResumeState {
                                    transfer,
                                    written: upto,
                                },
                            )?;
                        }
                        Ok(upto)
                    }));
                }
                Ok(None) => confirmed(&mut rx, upto),
                Err(e) => break incomplete(&format!("writing the output: {e}")),
            }
        }
        let wake = (now + TICK).min(next_flush);
        tokio::select! {
            c = listener.accept() => {
                let Some(conn) = c else {
                    break incomplete("the host stopped");
                };
                let id = accepted;
                accepted += 1;
                if id == 0 {
                    // Time and rates count from the first sender.
                    start = Instant::now();
                    next_progress = start + Duration::from_secs(1);
                }
                note(Note::Connected(id));
                heard_at = Some(Instant::now());
                let (handle, mut events) = conn.split();
                // The replies' stream; a session that is already gone says so in its events.
                let _ = handle.open_stream(STREAM, StreamConfig::default()).await;
                rx.conns.insert(id, handle);
                let tx = tx.clone();
                tokio::spawn(async move {
                    while let Some(e) = events.recv().await {
                        let last = matches!(e, Event::Closed { .. });
                        let _ = tx.send((id, Some(e)));
                        if last {
                            break;
                        }
                    }
                    let _ = tx.send((id, None));
                });
            }
            m = from_senders.recv() => match m {
                Some((id, Some(Event::Received { payload, .. }))) => {
                    heard_at = Some(Instant::now());
                    if let Err(end) = on_message(&mut rx, id, &payload, &mut note) {
                        break end;
                    }
                    if rx.verdict.is_some() && linger_until.is_none() {
                        linger_until = Some(Instant::now() + LINGER);
                    }
                }
                Some((id, Some(Event::Closed { reason }))) => {
                    rx.conns.remove(&id);
                    if rx.verdict.is_some() {
                        break verdict_end(&rx);
                    }
                    if reason == CloseReason::PeerClosed {
                        break incomplete("the sender closed before the end");
                    }
                }
                Some(_) | None => {}
            },
            r = async { rx.flushing.as_mut().expect("armed").await }, if rx.flushing.is_some() => {
                rx.flushing = None;
                match r {
                    Ok(Ok(upto)) => confirmed(&mut rx, upto),
                    Ok(Err(e)) => break incomplete(&format!("flushing the output: {e}")),
                    Err(e) => break incomplete(&format!("flushing the output: {e}")),
                }
            }
            _ = tokio::time::sleep_until(wake) => {}
        }
    };
    if let (RecvEnd::Incomplete { why }, Some(id), Some(conn)) = (&end, rx.transfer, rx.current) {
        rx.reply(
            conn,
            &Msg::Abort {
                transfer: id,
                reason: why.clone(),
            },
        );
        // Give it a moment to leave before the host shuts down (an ack of this
        // connection's stream, likely the abort's, or its end).
        let until = Instant::now() + ABORT_WAIT;
        while let Ok(Some((from, e))) = tokio::time::timeout_at(until, from_senders.recv()).await {
            if from == conn
                && matches!(
                    e,
                    None | Some(Event::Ack { stream: STREAM, .. } | Event::Closed { .. })
                )
            {
                break;
            }
        }
    }
    if let Some(f) = rx.flushing.take() {
        if let Ok(Ok(upto)) = f.await {
            rx.durable = upto;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let bytes = rx.sink.prefix();
    Ok(FileReceived {
        sha256: rx.verdict.map(|(_, d)| hex(&d)),
        end,
        bytes,
        resumed_from,
        seconds,
        mbit_s: (bytes - base.min(bytes)) as f64 * 8.0 / seconds.max(1e-9) / 1e6,
    })
}

fn incomplete(why: &str) -> RecvEnd {
    RecvEnd::Incomplete { why: why.into() }
}

fn verdict_end(rx: &Rx) -> RecvEnd {
    match (rx.verdict, rx.expected) {
        (Some(got), Some(want)) if got == want => RecvEnd::Verified,
        (_, Some((total, sha256))) => RecvEnd::Mismatch {
            expected_sha256: hex(&sha256),
            expected_bytes: total,
        },
        _ => incomplete("no end came"),
    }
}

/// Every byte below `upto` is on disk: tell the sender it may forget them.
fn confirmed(rx: &mut Rx, upto: u64) {
    rx.durable = rx.durable.max(upto);
    if let (Some(id), Some(conn)) = (rx.transfer, rx.current) {
        rx.reply(
            conn,
            &Msg::Confirm {
                transfer: id,
                upto: rx.durable,
            },
        );
    }
}

fn on_message(
    rx: &mut Rx,
    conn: usize,
    payload: &Bytes,
    note: &mut impl FnMut(Note<'_>),
) -> Result<(), RecvEnd> {
    let Ok(msg) = Msg::decode(payload) else {
        if !rx.warned_foreign {
            rx.warned_foreign = true;
            note(Note::Text(
                "the sender sends ADUs that are not a file transfer's (is it `horde send` \
                 without --file?); they are ignored",
            ));
        }
        return Ok(());
    };
    let id = msg.transfer();
    if matches!(msg, Msg::Abort { .. }) && rx.transfer != Some(id) {
        return Ok(()); // another transfer's
    }
    if matches!(msg, Msg::Offer { .. } | Msg::Data { .. } | Msg::End { .. }) {
        let new = rx.transfer != Some(id);
        if let Err(why) = rx.adopt(id, note) {
            rx.reply(
                conn,
                &Msg::Abort {
                    transfer: id,
                    reason: why.clone(),
                },
            );
            return Err(incomplete(&why));
        }
        rx.current = Some(conn);
        if new && !matches!(msg, Msg::Offer { .. }) {
            rx.reply(
                conn,
                &Msg::Resume {
                    transfer: id,
                    from: rx.durable,
                },
            );
        }
    }
    match msg {
        Msg::Offer { transfer } => rx.reply(
            conn,
            &Msg::Resume {
                transfer,
                from: rx.durable,
            },
        ),
        Msg::Data { offset, bytes, .. } => {
            if let Err(e) = rx.sink.put(offset, bytes) {
                let why = format!("writing the output: {e}");
                rx.reply(
                    conn,
                    &Msg::Abort {
                        transfer: id,
                        reason: why.clone(),
                    },
                );
                return Err(incomplete(&why));
            }
            finish_if_complete(rx, conn, note)?;
        }
        Msg::End { total, sha256, .. } => {
            rx.expected = Some((total, sha256));
            finish_if_complete(rx, conn, note)?;
        }
        Msg::Abort { reason, .. } => {
            return Err(incomplete(&format!("the sender gave up: {reason}")));
        }
        Msg::Resume { .. } | Msg::Confirm { .. } | Msg::Verdict { .. } => {}
    }
    Ok(())
}

/// Once every byte up to the end is written: cut, flush and hash the output, send the
/// verdict (again, for a repeated end) and forget the resume state.
fn finish_if_complete(
    rx: &mut Rx,
    conn: usize,
    note: &mut impl FnMut(Note<'_>),
) -> Result<(), RecvEnd> {
    let (Some((total, _)), Some(id)) = (rx.expected, rx.transfer) else {
        return Ok(());
    };
    if rx.verdict.is_none() {
        if rx.sink.prefix() < total {
            return Ok(());
        }
        rx.settle_flush();
        let done = tokio::task::block_in_place(|| rx.sink.finish(total));
        let (n, digest) = done.map_err(|e| incomplete(&format!("finishing the output: {e}")))?;
        rx.verdict = Some((n, digest));
        rx.durable = n;
        if let Some(p) = &rx.resume_path {
            resume::remove(p);
        }
        note(Note::Text("the end came; output checked"));
    }
    if let Some((n, digest)) = rx.verdict {
        rx.reply(
            conn,
            &Msg::Verdict {
                transfer: id,
                total: n,
                sha256: digest,
            },
        );
    }
    Ok(())
}
