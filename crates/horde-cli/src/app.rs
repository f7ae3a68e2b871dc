//! Running streams in real time over a connection: workloads emit ADUs on their own
//! clocks, events feed live statistics, and the run drains before it reports.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use horde_net::Connection;
use horde_policy::{Fields, Objective, Value};
use horde_proto::{Event, StreamConfig};
use horde_sim::workload::{stream_seed, AduSpec, Workload, WorkloadSpec};
use tokio::time::Instant;

use crate::live::Live;

/// One stream the sender runs.
#[derive(Clone)]
pub struct StreamPlan {
    pub id: u32,
    pub name: String,
    pub config: StreamConfig,
    pub workload: WorkloadSpec,
    pub objectives: Vec<Arc<dyn Objective>>,
}

/// Bulk sources keep at most this many ADUs unresolved inside Horde.
const BULK_WINDOW: u64 = 64;
/// How long the sender waits after the run for outstanding ADUs to resolve.
const DRAIN: Duration = Duration::from_secs(3);

/// Run `plans` for `duration`, then drain. `tick` is called about once a second.
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
    let mut workloads: Vec<(u32, Box<dyn Workload>)> = Vec::new();
    for p in plans {
        handle.open_stream(p.id, p.config.clone()).await?;
        for o in &p.objectives {
            handle.inject_objective(o.clone()).await?;
        }
        workloads.push((p.id, p.workload.build(stream_seed(seed, p.id), max_adu)?));
    }
    let start = Instant::now();
    let end = start + duration;
    let mut next_tick = start + Duration::from_secs(1);
    let mut out: Vec<AduSpec> = Vec::new();
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        let t = now - start;
        for (id, w) in workloads.iter_mut() {
            out.clear();
            if w.is_bulk() {
                let outstanding = {
                    let l = live.lock().expect("live stats lock");
                    l.streams
                        .get(id)
                        .map_or(0, |s| s.queued - s.acked - s.lost - s.dropped)
                };
                if outstanding < BULK_WINDOW {
                    w.emit(t, &mut out);
                }
            } else if w.next_at().is_some_and(|d| d <= t) {
                w.emit(t, &mut out);
            }
            for spec in out.drain(..) {
                let class = tag_of(plans, *id, &spec.fields);
                let mut l = live.lock().expect("live stats lock");
                let seq = l.streams.get(id).map_or(0, |s| s.queued);
                if let Some(c) = class {
                    l.tag(*id, seq, &c);
                }
                l.on_queued(*id);
                drop(l);
                handle.send_adu_nowait(
                    *id,
                    Bytes::from(vec![0u8; spec.size as usize]),
                    spec.fields,
                )?;
            }
        }
        if now >= next_tick {
            tick(now - start);
            next_tick += Duration::from_secs(1);
        }
        let next_due = workloads
            .iter()
            .filter_map(|(_, w)| w.next_at())
            .min()
            .map_or(end, |d| (start + d).min(end))
            .min(next_tick)
            // Bulk sources are re-checked as acks come in, and at least every 5 ms.
            .min(now + Duration::from_millis(5));
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
    // Drain: let what was sent resolve (ack or nack) before reporting.
    let drain_end = Instant::now() + DRAIN;
    while !all_resolved(&live) {
        match tokio::time::timeout_at(drain_end, events.recv()).await {
            Ok(Some(e)) => record(&live, &e),
            _ => break,
        }
    }
    tick(duration);
    handle.close()?;
    Ok(())
}

/// Video I-frames are tracked as a class of their own, since objectives single them out.
fn tag_of(plans: &[StreamPlan], stream: u32, fields: &Fields) -> Option<String> {
    let is_i = fields.get("frame_type") == Some(&Value::Str("I".into()));
    let name = &plans.iter().find(|p| p.id == stream)?.name;
    is_i.then(|| format!("{name} I-frames"))
}

fn record(live: &Mutex<Live>, e: &Event) {
    live.lock().expect("live stats lock").on_sender_event(e);
}

fn all_resolved(live: &Mutex<Live>) -> bool {
    let l = live.lock().expect("live stats lock");
    l.streams
        .values()
        .all(|s| s.acked + s.lost + s.dropped >= s.queued)
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
            Some(Event::Closed) | None => break,
            Some(e) => live.lock().expect("live stats lock").on_receiver_event(&e),
        }
    }
}

/// Stream names by id, for tables.
pub fn names(plans: &[StreamPlan]) -> BTreeMap<u32, String> {
    plans.iter().map(|p| (p.id, p.name.clone())).collect()
}
