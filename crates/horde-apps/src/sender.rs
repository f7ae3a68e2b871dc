//! Running streams in real time over a connection: workloads emit ADUs on their own
//! clocks, events feed live statistics, and the run drains before it reports.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use horde_net::{Connection, ConnectionHandle};
use horde_policy::{Fields, Objective, Value};
use horde_proto::{CloseReason, Event, StreamConfig};
use horde_workload::{stream_seed, AduSpec, Workload, WorkloadSpec};
use tokio::time::Instant;

use crate::live::Live;
use crate::payloads::PayloadChunks;
use crate::shared_conn::{EventSource, RunConn};
use crate::stamp;

/// One stream the sender runs.
#[derive(Clone)]
pub struct StreamPlan {
    pub id: u32,
    pub name: String,
    pub config: StreamConfig,
    pub workload: WorkloadSpec,
    pub objectives: Vec<Arc<dyn Objective>>,
}

/// A bulk source is topped up this many ADUs at a time while its stream is writable,
/// so the application asks about back-pressure once per burst rather than per ADU.
const BULK_BURST: usize = 8;
/// How long the sender waits after the run for outstanding ADUs to resolve.
const DRAIN: Duration = Duration::from_secs(3);
/// How long it waits for its close to finish (the session's close timeout is 2 s).
const CLOSE_WAIT: Duration = Duration::from_secs(3);
/// How long a call that failed as the connection ended waits for the end's event.
const END_WAIT: Duration = Duration::from_secs(1);
/// How often the run checks for Ctrl-C.
const STOP_POLL: Duration = Duration::from_millis(50);

/// How the connection ended, as the sender saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ConnEnd {
    /// Why it ended before this end closed it (the peer closed it, crashed, became
    /// unreachable or refused the service); `None` when this end closed it.
    pub peer_ended: Option<CloseReason>,
    /// A new session was tried for after the peer left, and the attempts gave up.
    pub gave_up: bool,
    /// When this end closed it, its session was down and reconnecting since the peer
    /// left for this reason.
    pub away_at_close: Option<CloseReason>,
    /// Seconds into the run when the peer left for good (or this end closed while it
    /// was away).
    pub at_s: f64,
}

impl ConnEnd {
    /// Why the peer was gone at the end, if it was.
    pub fn peer_left(&self) -> Option<CloseReason> {
        self.peer_ended.or(self.away_at_close)
    }

    /// One line saying how the connection ended.
    pub fn describe(&self) -> String {
        match (self.peer_ended, self.away_at_close) {
            (Some(CloseReason::ServiceRefused), _) => {
                format!("refused by the receiver at {:.1} s", self.at_s)
            }
            (Some(r), _) if self.gave_up => format!(
                "ended at {:.1} s: the session ended ({}) and reconnecting gave up",
                self.at_s,
                r.as_str()
            ),
            (Some(r), _) => format!("ended by the peer at {:.1} s ({})", self.at_s, r.as_str()),
            (None, Some(r)) => format!(
                "closed at {:.1} s while reconnecting: the peer was away since its session ended ({})",
                self.at_s,
                r.as_str()
            ),
            (None, None) => format!("closed by this end at {:.1} s", self.at_s),
        }
    }
}

/// Follows the connection's events for its end: a session that ended and a
/// reconnection, or the final [`Event::Closed`].
#[derive(Debug, Default)]
pub(crate) struct EndWatch {
    /// The session ended for this reason and a new one is being opened.
    reconnecting: Option<CloseReason>,
    pub(crate) end: ConnEnd,
    /// The final `Closed` arrived, or the event stream ended.
    pub(crate) over: bool,
    /// This end has asked for the close.
    closing: bool,
}

impl EndWatch {
    pub(crate) fn see(&mut self, e: &Event, at: Duration) {
        match e {
            Event::Reconnecting { reason, .. } => self.reconnecting = Some(*reason),
            Event::Connected => self.reconnecting = None,
            Event::Closed { reason } => {
                self.over = true;
                if *reason != CloseReason::LocalClose && !self.closing {
                    self.end.peer_ended = Some(*reason);
                    self.end.gave_up = self.reconnecting.is_some();
                    self.end.at_s = at.as_secs_f64();
                }
            }
            _ => {}
        }
    }

    /// The event stream ended (the host let the connection go).
    pub(crate) fn gone(&mut self, at: Duration) {
        if !self.over && !self.closing {
            self.end.peer_ended = Some(self.reconnecting.unwrap_or(CloseReason::Unreachable));
            self.end.at_s = at.as_secs_f64();
        }
        self.over = true;
    }

    /// This end closes the connection now.
    pub(crate) fn close(&mut self, at: Duration) {
        self.closing = true;
        if self.end.peer_ended.is_none() {
            self.end.away_at_close = self.reconnecting;
            self.end.at_s = at.as_secs_f64();
        }
    }
}

/// Run `plans` for `duration` or until Ctrl-C (when the caller catches it with a
/// [`SigintGuard`](horde_emu::sys::SigintGuard)), then drain and close; the
/// events of the close (nacks of what was left, `Closed`) are recorded too. `tick` is
/// called about once a second. A connection that ends for good before (the peer
/// closed it, left and reconnecting gave up, or refused the service) ends the run at
/// once; the answer says how it ended.
///
/// Timed sources emit on their own clocks; bulk sources are fed by a task each that
/// waits for back-pressure ([`ConnectionHandle::writable`]) to release its stream, so
/// they keep every channel busy with no fixed window. Every payload starts with a
/// [`stamp`](crate::stamp) (send time and sequence number) for the receiver.
pub async fn run_sender(
    conn: Connection,
    plans: &[StreamPlan],
    duration: Duration,
    seed: u64,
    max_adu: u32,
    live: Arc<Mutex<Live>>,
    tick: impl FnMut(Duration),
) -> Result<ConnEnd> {
    let conn = RunConn::alone(conn);
    run_streams(conn, plans, duration, seed, max_adu, live, tick).await
}

/// [`run_sender`] on a connection it may share with a message run: it reads `conn`'s
/// events, and at its end the connection closes once the other run is done too.
pub async fn run_streams(
    conn: RunConn<impl EventSource>,
    plans: &[StreamPlan],
    duration: Duration,
    seed: u64,
    max_adu: u32,
    live: Arc<Mutex<Live>>,
    mut tick: impl FnMut(Duration),
) -> Result<ConnEnd> {
    let RunConn {
        handle,
        mut events,
        close,
    } = conn;
    let mut done = close.guard();
    let mut watch = EndWatch::default();
    let mut timed: Vec<(u32, Box<dyn Workload>)> = Vec::new();
    let mut bulk = Vec::new();
    let start = Instant::now();
    let end = start + duration;
    for p in plans {
        // The connection can end before its streams are open (the peer refused the
        // service at once): that end is the answer, not the failed call.
        let opened = async {
            handle.open_stream(p.id, p.config.clone()).await?;
            for o in &p.objectives {
                handle.inject_objective(o.clone()).await?;
            }
            Ok::<_, horde_net::NetError>(())
        }
        .await;
        if let Err(e) = opened {
            wait_for_end(&mut events, &mut watch, &live, start, e.into()).await?;
            return Ok(watch.end);
        }
        let w = p
            .workload
            .build(stream_seed(seed, p.id), p.config.max_adu(max_adu))?;
        if w.is_bulk() {
            let feeder = Feeder::new(handle.clone(), live.clone(), class_namer(p));
            bulk.push(tokio::spawn(feed_bulk(feeder, p.id, w, start, end)));
        } else {
            timed.push((p.id, w));
        }
    }
    let mut next_tick = start + Duration::from_secs(1);
    let mut out: Vec<AduSpec> = Vec::new();
    let mut feeders: Vec<Feeder> = plans
        .iter()
        .map(|p| Feeder::new(handle.clone(), live.clone(), class_namer(p)))
        .collect();
    loop {
        let now = Instant::now();
        if now >= end || horde_emu::sys::interrupted() || watch.over {
            break;
        }
        let t = now - start;
        for (id, w) in timed.iter_mut() {
            out.clear();
            if w.next_at().is_some_and(|d| d <= t) {
                w.emit(t, &mut out);
            }
            let feeder = &mut feeders[plans.iter().position(|p| p.id == *id).expect("planned")];
            for spec in out.drain(..) {
                feeder.queue(*id, spec)?;
            }
        }
        if now >= next_tick {
            tick(now - start);
            next_tick += Duration::from_secs(1);
        }
        let next_due = timed
            .iter()
            .filter_map(|(_, w)| w.next_at())
            .min()
            .map_or(end, |d| (start + d).min(end))
            .min(next_tick)
            .min(now + STOP_POLL);
        tokio::select! {
            e = events.recv() => match e {
                Some(e) => {
                    watch.see(&e, start.elapsed());
                    record(&live, &e);
                }
                None => watch.gone(start.elapsed()),
            },
            _ = tokio::time::sleep_until(next_due) => {}
        }
        while let Some(e) = events.try_recv() {
            watch.see(&e, start.elapsed());
            record(&live, &e);
        }
    }
    let mut feeder_error = None;
    for b in bulk {
        b.abort(); // stopped early: the feeders' own clocks run to `end`
        match b.await {
            Ok(Ok(())) => {}
            // A feeder's stream fails once the connection has ended for good.
            Ok(Err(e)) => feeder_error = Some(e),
            Err(e) if e.is_cancelled() => {}
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(e) = feeder_error {
        wait_for_end(&mut events, &mut watch, &live, start, e).await?;
    }
    if watch.over {
        // Every nack of the ended session came before its `Closed`; take what is left.
        while let Some(e) = events.try_recv() {
            record(&live, &e);
        }
        tick(start.elapsed().min(duration));
        return Ok(watch.end);
    }
    // Drain: let what was sent resolve (ack or nack) before reporting.
    let drain_end = Instant::now() + DRAIN;
    while !all_resolved(&live) && !watch.over {
        match tokio::time::timeout_at(drain_end, events.recv()).await {
            Ok(Some(e)) => {
                watch.see(&e, start.elapsed());
                record(&live, &e);
            }
            Ok(None) => watch.gone(start.elapsed()),
            Err(_) => break,
        }
    }
    tick(start.elapsed().min(duration));
    if !watch.over {
        watch.close(start.elapsed());
        // The connection closes when a message run beside this one is done too; what
        // arrives meanwhile waits in `events`.
        done.done();
        close.all_done().await;
    }
    // Whatever was still queued or in flight is nacked as the close finishes.
    let close_end = Instant::now() + CLOSE_WAIT;
    while !watch.over {
        match tokio::time::timeout_at(close_end, events.recv()).await {
            Ok(Some(e)) => {
                watch.see(&e, start.elapsed());
                record(&live, &e);
            }
            Ok(None) => watch.gone(start.elapsed()),
            Err(_) => break,
        }
    }
    Ok(watch.end)
}

/// A call failed as the connection ended: the end reaches the event stream too, so wait
/// a moment for it (and every event before it). `Err(error)` if it does not come.
async fn wait_for_end(
    events: &mut impl EventSource,
    watch: &mut EndWatch,
    live: &Mutex<Live>,
    start: Instant,
    error: anyhow::Error,
) -> Result<()> {
    let wait_end = Instant::now() + END_WAIT;
    while !watch.over {
        match tokio::time::timeout_at(wait_end, events.recv()).await {
            Ok(Some(e)) => {
                watch.see(&e, start.elapsed());
                record(live, &e);
            }
            Ok(None) => watch.gone(start.elapsed()),
            Err(_) => return Err(error),
        }
    }
    while let Some(e) = events.try_recv() {
        record(live, &e);
    }
    Ok(())
}

/// The class an ADU is also counted under, from its fields.
type ClassOf = Box<dyn Fn(&Fields) -> Option<String> + Send + Sync>;

/// Queues a stream's ADUs: stamps them, counts them, tags the classes tracked apart.
struct Feeder {
    handle: ConnectionHandle,
    live: Arc<Mutex<Live>>,
    class_of: ClassOf,
    payloads: PayloadChunks,
}

impl Feeder {
    fn new(handle: ConnectionHandle, live: Arc<Mutex<Live>>, class_of: ClassOf) -> Self {
        Self {
            handle,
            live,
            class_of,
            payloads: PayloadChunks::default(),
        }
    }

    fn queue(&mut self, stream: u32, spec: AduSpec) -> Result<()> {
        let size = (spec.size as usize).max(stamp::STAMP_LEN);
        let mut l = self.live.lock().expect("live stats lock");
        let seq = l.on_queued(stream, size as u32);
        if let Some(c) = (self.class_of)(&spec.fields) {
            l.tag(stream, seq, &c);
        }
        drop(l);
        let payload = self.payloads.stamped(size, seq, stamp::unix_micros());
        self.handle.send_adu_nowait(stream, payload, spec.fields)?;
        Ok(())
    }
}

/// Keep a bulk stream's queue between its back-pressure marks until `end`.
async fn feed_bulk(
    mut feeder: Feeder,
    id: u32,
    mut w: Box<dyn Workload>,
    start: Instant,
    end: Instant,
) -> Result<()> {
    let mut out = Vec::new();
    loop {
        tokio::select! {
            r = feeder.handle.writable(id) => r?,
            _ = tokio::time::sleep_until(end) => return Ok(()),
        }
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        out.clear();
        while out.len() < BULK_BURST {
            let before = out.len();
            w.emit(now - start, &mut out);
            if out.len() == before {
                break;
            }
        }
        for spec in out.drain(..) {
            feeder.queue(id, spec)?;
        }
    }
}

/// Video I-frames are tracked as a class of their own, since objectives single them out.
fn class_namer(plan: &StreamPlan) -> ClassOf {
    let class = format!("{} I-frames", plan.name);
    Box::new(move |fields| {
        (fields.get("frame_type") == Some(&Value::Str("I".into()))).then(|| class.clone())
    })
}

fn record(live: &Mutex<Live>, e: &Event) {
    live.lock().expect("live stats lock").on_sender_event(e);
}

fn all_resolved(live: &Mutex<Live>) -> bool {
    let l = live.lock().expect("live stats lock");
    l.streams
        .values()
        .all(|s| s.acked + s.lost + s.dropped + s.abandoned >= s.queued)
}

/// Count what a receiving connection delivers until it closes or `until` passes.
pub async fn run_receiver(mut conn: Connection, live: Arc<Mutex<Live>>, until: Option<Instant>) {
    loop {
        let e = match until {
            Some(t) => match tokio::time::timeout_at(t, conn.next_event()).await {
                Ok(e) => e,
                Err(_) => break,
            },
            None => conn.next_event().await,
        };
        match e {
            Some(Event::Closed { .. }) | None => break,
            Some(e) => live.lock().expect("live stats lock").on_receiver_event(&e),
        }
    }
}

/// Stream names by id, for tables.
pub fn names(plans: &[StreamPlan]) -> BTreeMap<u32, String> {
    plans.iter().map(|p| (p.id, p.name.clone())).collect()
}
