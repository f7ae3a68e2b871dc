//! Running streams in real time over a connection: workloads emit ADUs on their own
//! clocks, events feed live statistics, and the run drains before it reports.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use horde_net::{Connection, ConnectionHandle};
use horde_policy::{Fields, Objective, Value};
use horde_proto::{Event, StreamConfig};
use horde_workload::{stream_seed, AduSpec, Workload, WorkloadSpec};
use tokio::time::Instant;

use crate::live::Live;
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
/// How often the run checks for Ctrl-C.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Run `plans` for `duration` or until Ctrl-C (when the caller catches it with a
/// [`SigintGuard`](horde_emu::sys::SigintGuard)), then drain and close; the
/// events of the close (nacks of what was left, `Closed`) are recorded too. `tick` is
/// called about once a second.
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
    mut tick: impl FnMut(Duration),
) -> Result<()> {
    let (handle, mut events) = conn.split();
    let mut timed: Vec<(u32, Box<dyn Workload>)> = Vec::new();
    let mut bulk = Vec::new();
    let start = Instant::now();
    let end = start + duration;
    for p in plans {
        handle.open_stream(p.id, p.config.clone()).await?;
        for o in &p.objectives {
            handle.inject_objective(o.clone()).await?;
        }
        let w = p.workload.build(stream_seed(seed, p.id), max_adu)?;
        if w.is_bulk() {
            let feeder = Feeder {
                handle: handle.clone(),
                live: live.clone(),
                class_of: class_namer(p),
            };
            bulk.push(tokio::spawn(feed_bulk(feeder, p.id, w, start, end)));
        } else {
            timed.push((p.id, w));
        }
    }
    let mut next_tick = start + Duration::from_secs(1);
    let mut out: Vec<AduSpec> = Vec::new();
    let feeders: Vec<Feeder> = plans
        .iter()
        .map(|p| Feeder {
            handle: handle.clone(),
            live: live.clone(),
            class_of: class_namer(p),
        })
        .collect();
    loop {
        let now = Instant::now();
        if now >= end || horde_emu::sys::interrupted() {
            break;
        }
        let t = now - start;
        for (id, w) in timed.iter_mut() {
            out.clear();
            if w.next_at().is_some_and(|d| d <= t) {
                w.emit(t, &mut out);
            }
            let feeder = &feeders[plans.iter().position(|p| p.id == *id).expect("planned")];
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
                Some(e) => record(&live, &e),
                None => break,
            },
            _ = tokio::time::sleep_until(next_due) => {}
        }
        while let Ok(e) = events.try_recv() {
            record(&live, &e);
        }
    }
    for b in bulk {
        b.abort(); // stopped early: the feeders' own clocks run to `end`
        match b.await {
            Ok(r) => r?,
            Err(e) if e.is_cancelled() => {}
            Err(e) => return Err(e.into()),
        }
    }
    // Drain: let what was sent resolve (ack or nack) before reporting.
    let drain_end = Instant::now() + DRAIN;
    while !all_resolved(&live) {
        match tokio::time::timeout_at(drain_end, events.recv()).await {
            Ok(Some(e)) => record(&live, &e),
            _ => break,
        }
    }
    tick(start.elapsed().min(duration));
    handle.close()?;
    // Whatever was still queued or in flight is nacked as the close finishes.
    let close_end = Instant::now() + CLOSE_WAIT;
    while let Ok(Some(e)) = tokio::time::timeout_at(close_end, events.recv()).await {
        record(&live, &e);
        if matches!(e, Event::Closed { .. }) {
            break;
        }
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
}

impl Feeder {
    fn queue(&self, stream: u32, spec: AduSpec) -> Result<()> {
        let size = (spec.size as usize).max(stamp::STAMP_LEN);
        let mut l = self.live.lock().expect("live stats lock");
        let seq = l.on_queued(stream, size as u32);
        if let Some(c) = (self.class_of)(&spec.fields) {
            l.tag(stream, seq, &c);
        }
        drop(l);
        let payload = stamp::payload(size, seq, stamp::unix_micros());
        self.handle.send_adu_nowait(stream, payload, spec.fields)?;
        Ok(())
    }
}

/// Keep a bulk stream's queue between its back-pressure marks until `end`.
async fn feed_bulk(
    feeder: Feeder,
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
