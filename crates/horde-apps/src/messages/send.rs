//! The message workload of `horde send`: each `[[messages]]` class submits messages at
//! its pace through a [`MessageEndpoint`], answers their early callbacks, cancels those
//! still live after `cancel_after_ms`, and counts, per priority, what was offered,
//! refused by admission (and why), and each admitted message's one fate.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use anyhow::{Context, Result};
use horde_net::{MessageHandle, MessageNotice};
use horde_proto::message::{
    Fate, MessageError, MessageEvent, MessageId, MessageSpec, QueueId, Refusal,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::conn::MessageConn;
use super::header::{Header, Synthetic};
use crate::config::messages::{MessageClass, MessageSize, OnEarly, DEFAULT_QUEUE};
use crate::recent::Recent;
use crate::sender::{ConnEnd, EndWatch};
use crate::stamp;

/// How long the sender waits for the channels' first rate estimates, which admission
/// needs, before it starts submitting.
const ESTIMATE_WAIT: Duration = Duration::from_secs(3);
/// After the run, how long beyond the longest deadline (or cancel-after) the sender
/// waits for the messages still live to meet their fates.
const DRAIN: Duration = Duration::from_secs(3);
/// How long it waits for the fates of the messages it cancels at the end, and for its
/// close to finish.
const END_WAIT: Duration = Duration::from_secs(3);
/// How often the run checks for Ctrl-C.
const STOP_POLL: Duration = Duration::from_millis(50);
/// How often the run reports an interval's rows.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// One `[[messages]]` class, ready to run.
#[derive(Debug, Clone)]
pub struct ClassPlan {
    pub name: String,
    pub queue: String,
    pub priority: u8,
    pub size: MessageSize,
    pub interval: Duration,
    pub deadline: Option<Duration>,
    pub cancel_after: Option<Duration>,
    pub on_early: OnEarly,
}

impl ClassPlan {
    /// The plan of class `index` of a checked file.
    pub fn new(index: usize, c: &MessageClass) -> Self {
        let ms = |v: f64| Duration::from_secs_f64(v / 1e3);
        Self {
            name: c
                .name
                .clone()
                .unwrap_or_else(|| format!("messages {index}")),
            queue: c.queue.clone().unwrap_or_else(|| DEFAULT_QUEUE.into()),
            priority: c.priority as u8,
            size: c.size,
            interval: Duration::from_secs_f64(c.interval_s()),
            deadline: c.deadline_ms.map(ms),
            cancel_after: c.cancel_after_ms.map(ms),
            on_early: c.on_early,
        }
    }
}

/// One priority's books: every message offered is refused or admitted (`sent`), and
/// every admitted one ends in exactly one of `delivered`, `early`, `cancelled`,
/// `expired`, or `abandoned` (the connection ended before it met a fate).
#[derive(Debug, Clone, Default, Serialize)]
pub struct PriorityBooks {
    pub priority: u8,
    /// Offered to the message API.
    pub offered: u64,
    /// Refused by admission control, and why: the message could not meet its own
    /// deadline, or it would have made an admitted one miss its deadline.
    pub refused: u64,
    pub refused_unreachable: u64,
    pub refused_endangers: u64,
    /// The last refusal's reason, as the message layer words it.
    pub last_refusal: Option<String>,
    /// Admitted.
    pub sent: u64,
    pub delivered: u64,
    pub delivered_bytes: u64,
    /// Their early callback fired, and they then ended undelivered.
    pub early: u64,
    pub cancelled: u64,
    pub expired: u64,
    pub abandoned: u64,
    /// Early callbacks that fired (a message that continued may still be delivered).
    pub early_callbacks: u64,
    /// Cancels the sender made: after `cancel_after_ms`, in answer to an early callback
    /// (`on_early = "cancel"`), and of messages still live when the run ended.
    pub cancels_after: u64,
    pub cancels_on_early: u64,
    pub cancels_at_end: u64,
}

impl PriorityBooks {
    /// Admitted messages in no fate: 0 when the books balance.
    pub fn unaccounted(&self) -> u64 {
        self.sent.saturating_sub(
            self.delivered + self.early + self.cancelled + self.expired + self.abandoned,
        )
    }

    /// One line: the books with their reasons.
    pub fn describe(&self) -> String {
        let mut line = format!(
            "priority {}: {} offered = {} refused ({} unreachable, {} endangering an admitted deadline) + {} sent; \
             {} sent = {} delivered + {} early + {} cancelled + {} expired + {} abandoned; \
             {} early callbacks",
            self.priority,
            self.offered,
            self.refused,
            self.refused_unreachable,
            self.refused_endangers,
            self.sent,
            self.sent,
            self.delivered,
            self.early,
            self.cancelled,
            self.expired,
            self.abandoned,
            self.early_callbacks,
        );
        if let Some(r) = &self.last_refusal {
            line += &format!("; last refusal: {r}");
        }
        line
    }
}

/// One priority's messages in one interval of the run: what was offered and refused in
/// it, and the fates met in it.
#[derive(Debug, Clone, Serialize)]
pub struct PriorityInterval {
    pub priority: u8,
    pub offered: u64,
    pub refused: u64,
    pub delivered: u64,
    /// Bytes of the messages delivered in the interval, in kbit/s.
    pub goodput_kbps: f64,
    pub early_callbacks: u64,
    /// Ended undelivered: early, cancelled or expired.
    pub undelivered: u64,
}

/// One interval of a message run, about a second long.
#[derive(Debug, Clone, Serialize)]
pub struct MessageInterval {
    pub start_s: f64,
    pub end_s: f64,
    /// One row per priority used, most important first.
    pub priorities: Vec<PriorityInterval>,
}

/// What a message run reports.
#[derive(Debug, Clone)]
pub struct MessageOutcome {
    /// One row per priority used, most important first.
    pub books: Vec<PriorityBooks>,
    /// The last intervals' rows.
    pub intervals: Recent<MessageInterval>,
    pub unaccounted: u64,
    pub end: ConnEnd,
    /// Seconds from the first submission to the end of the run.
    pub seconds: f64,
}

impl MessageOutcome {
    pub fn delivered(&self) -> u64 {
        self.books.iter().map(|b| b.delivered).sum()
    }

    pub fn abandoned(&self) -> u64 {
        self.books.iter().map(|b| b.abandoned).sum()
    }

    /// The report as text: a row per priority, then each priority's books.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "messages sent\n  prio   offered   refused      sent  delivered     early  cancelled   expired  abandoned  early callbacks\n",
        );
        for b in &self.books {
            out += &format!(
                "  {:>4}  {:>8}  {:>8}  {:>8}  {:>9}  {:>8}  {:>9}  {:>8}  {:>9}  {:>15}\n",
                b.priority,
                b.offered,
                b.refused,
                b.sent,
                b.delivered,
                b.early,
                b.cancelled,
                b.expired,
                b.abandoned,
                b.early_callbacks
            );
        }
        for b in &self.books {
            out += &b.describe();
            out.push('\n');
        }
        out
    }
}

/// A message the run is waiting on.
struct Live {
    class: usize,
    size: u64,
}

/// The run's state between notices.
struct Run<'a> {
    plans: &'a [ClassPlan],
    endpoint: MessageHandle,
    notices: mpsc::UnboundedReceiver<MessageNotice>,
    books: BTreeMap<u8, PriorityBooks>,
    live: HashMap<MessageId, Live>,
    /// When to cancel each message with a cancel-after.
    cancels: BTreeSet<(Instant, MessageId)>,
    watch: EndWatch,
    start: Instant,
    /// The books at the end of the last interval, when it ended (s from the start) and
    /// when the next one ends.
    books_then: BTreeMap<u8, PriorityBooks>,
    row_start_s: f64,
    next_row: Instant,
    intervals: Recent<MessageInterval>,
}

/// Runs `plans` over `conn` for `duration` or until Ctrl-C, lets the live messages meet
/// their fates, cancels what is left, and closes (once a stream run beside it is done
/// too). `queues` are the queues besides the default one, with their weights; `tick`
/// gets each interval's rows, about once a second.
pub async fn run_messages(
    conn: MessageConn,
    plans: &[ClassPlan],
    queues: &[(String, u32)],
    duration: Duration,
    seed: u64,
    mut tick: impl FnMut(&MessageInterval),
) -> Result<MessageOutcome> {
    let MessageConn {
        api: endpoint,
        notices,
        close,
    } = conn;
    let mut done = close.guard();
    let mut queue_ids = HashMap::from([(DEFAULT_QUEUE.to_string(), QueueId(0))]);
    for (name, weight) in queues {
        let id = endpoint
            .create_queue(*weight)
            .with_context(|| format!("creating message queue {name:?}"))?;
        queue_ids.insert(name.clone(), id);
    }
    // Admission needs the channels' rates.
    let waited = Instant::now() + ESTIMATE_WAIT;
    while endpoint.estimates().iter().all(|e| e.rate <= 0.0) && Instant::now() < waited {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let books: BTreeMap<u8, PriorityBooks> = plans
        .iter()
        .map(|p| {
            let books = PriorityBooks {
                priority: p.priority,
                ..PriorityBooks::default()
            };
            (p.priority, books)
        })
        .collect();
    let start = Instant::now();
    let mut run = Run {
        plans,
        endpoint,
        notices,
        books_then: books.clone(),
        books,
        live: HashMap::new(),
        cancels: BTreeSet::new(),
        watch: EndWatch::default(),
        start,
        row_start_s: 0.0,
        next_row: start + REPORT_EVERY,
        intervals: Recent::default(),
    };
    let mut rngs: Vec<StdRng> = (0..plans.len() as u64)
        .map(|i| StdRng::seed_from_u64(seed ^ (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)))
        .collect();
    let mut next: Vec<Instant> = vec![run.start; plans.len()];
    let end = run.start + duration;
    loop {
        let now = Instant::now();
        if now >= end || horde_emu::sys::interrupted() || run.watch.over {
            break;
        }
        for (class, plan) in plans.iter().enumerate() {
            if next[class] <= now {
                run.submit(class, &queue_ids[&plan.queue], &mut rngs[class])?;
                // After a stall, go on from now rather than submit a burst.
                let floor = now.checked_sub(plan.interval).unwrap_or(now);
                next[class] = (next[class] + plan.interval).max(floor);
            }
        }
        run.cancel_due(now);
        run.report_due(now, &mut tick);
        let wake = next
            .iter()
            .copied()
            .chain(run.cancels.first().map(|(t, _)| *t))
            .fold(end.min(now + STOP_POLL).min(run.next_row), Instant::min);
        run.wait(wake).await;
    }
    // Let the live messages meet their fates: by their deadlines or cancel-afters.
    let longest = plans
        .iter()
        .flat_map(|p| [p.deadline, p.cancel_after])
        .flatten()
        .max()
        .unwrap_or_default();
    let drain_end = Instant::now() + longest + DRAIN;
    while !run.live.is_empty() && !run.watch.over && !horde_emu::sys::interrupted() {
        let now = Instant::now();
        if now >= drain_end {
            break;
        }
        run.cancel_due(now);
        run.report_due(now, &mut tick);
        let wake = run
            .cancels
            .first()
            .map_or(drain_end, |(t, _)| (*t).min(drain_end))
            .min(now + STOP_POLL)
            .min(run.next_row);
        run.wait(wake).await;
    }
    let seconds = run.start.elapsed().as_secs_f64();
    // The last, partial interval, unless it is too short to rate.
    if seconds - run.row_start_s >= 0.01 {
        run.report(Instant::now(), &mut tick);
    }
    if !run.watch.over {
        // What is still live is cancelled, and its fate awaited.
        let ids: Vec<(MessageId, u8)> = run
            .live
            .iter()
            .map(|(id, l)| (*id, plans[l.class].priority))
            .collect();
        for (id, priority) in ids {
            if run.cancel(id) {
                run.row(priority).cancels_at_end += 1;
            }
        }
        let until = Instant::now() + END_WAIT;
        while !run.live.is_empty() && !run.watch.over && Instant::now() < until {
            run.wait(until).await;
        }
        run.watch.close(run.start.elapsed());
        done.done();
        // A stream run beside this one may still be draining: the connection closes
        // when it is done too.
        close.all_done().await;
        let until = Instant::now() + END_WAIT;
        while !run.watch.over && Instant::now() < until {
            run.wait(until).await;
        }
    }
    // Those that met no fate were abandoned with the connection.
    let live: Vec<u8> = run.live.values().map(|l| plans[l.class].priority).collect();
    for priority in live {
        run.row(priority).abandoned += 1;
    }
    let books: Vec<PriorityBooks> = run.books.into_values().collect();
    let unaccounted = books.iter().map(PriorityBooks::unaccounted).sum();
    Ok(MessageOutcome {
        books,
        intervals: run.intervals,
        unaccounted,
        end: run.watch.end,
        seconds,
    })
}

impl Run<'_> {
    fn row(&mut self, priority: u8) -> &mut PriorityBooks {
        self.books.entry(priority).or_insert_with(|| PriorityBooks {
            priority,
            ..PriorityBooks::default()
        })
    }

    /// Closes the interval if it is due, and hands its rows to `tick`.
    fn report_due(&mut self, now: Instant, tick: &mut impl FnMut(&MessageInterval)) {
        if now >= self.next_row {
            self.report(now, tick);
        }
    }

    /// Closes the interval at `now` and hands its rows to `tick`.
    fn report(&mut self, now: Instant, tick: &mut impl FnMut(&MessageInterval)) {
        let start_s = self.row_start_s;
        let end_s = (now - self.start).as_secs_f64();
        self.row_start_s = end_s;
        self.next_row = (self.next_row + REPORT_EVERY).max(now);
        let priorities = self
            .books
            .values()
            .map(|b| {
                let then = self
                    .books_then
                    .get(&b.priority)
                    .cloned()
                    .unwrap_or_default();
                let undelivered = |b: &PriorityBooks| b.early + b.cancelled + b.expired;
                PriorityInterval {
                    priority: b.priority,
                    offered: b.offered - then.offered,
                    refused: b.refused - then.refused,
                    delivered: b.delivered - then.delivered,
                    goodput_kbps: crate::report::kbps(
                        b.delivered_bytes - then.delivered_bytes,
                        end_s - start_s,
                    ),
                    early_callbacks: b.early_callbacks - then.early_callbacks,
                    undelivered: undelivered(b) - undelivered(&then),
                }
            })
            .collect();
        self.books_then = self.books.clone();
        self.intervals.push(MessageInterval {
            start_s,
            end_s,
            priorities,
        });
        tick(self.intervals.last().expect("just pushed"));
    }

    /// Submits one message of `class`.
    fn submit(&mut self, class: usize, queue: &QueueId, rng: &mut StdRng) -> Result<()> {
        let plan = &self.plans[class];
        let size = match plan.size {
            MessageSize::Fixed(n) => n,
            MessageSize::Uniform { min, max } => rng.gen_range(min..=max),
        } as u64;
        let mut spec = MessageSpec::new(plan.priority, size).on_queue(*queue);
        if let Some(d) = plan.deadline {
            spec = spec.with_deadline(self.endpoint.now() + d);
        }
        let header = Header {
            sent_us: stamp::unix_micros(),
            deadline_us: plan.deadline.map(|d| d.as_micros() as u64),
        };
        let answer = self
            .endpoint
            .submit_source(spec, Box::new(Synthetic::new(header, size)));
        let (priority, cancel_after) = (plan.priority, plan.cancel_after);
        let row = self.row(priority);
        row.offered += 1;
        match answer {
            Ok(id) => {
                row.sent += 1;
                self.live.insert(id, Live { class, size });
                if let Some(after) = cancel_after {
                    self.cancels.insert((Instant::now() + after, id));
                }
                Ok(())
            }
            Err(MessageError::Refused(why)) => {
                row.refused += 1;
                // The deadlines are on the endpoint's clock, which means nothing to a
                // reader: the counts say why.
                let reason = match why {
                    Refusal::Unreachable {
                        needed, capacity, ..
                    } => {
                        row.refused_unreachable += 1;
                        format!(
                            "it cannot meet its own deadline: {needed} pieces needed, {capacity} can arrive in time"
                        )
                    }
                    Refusal::Endangers {
                        endangered,
                        needed,
                        capacity,
                        ..
                    } => {
                        row.refused_endangers += 1;
                        format!(
                            "it would make message {endangered} miss its deadline: {needed} pieces needed, {capacity} can arrive in time"
                        )
                    }
                };
                row.last_refusal = Some(reason);
                Ok(())
            }
            // A deadline shorter than the time between taking the clock and the
            // submission: it cannot be met either.
            Err(MessageError::DeadlineInPast { .. }) => {
                row.refused += 1;
                row.refused_unreachable += 1;
                row.last_refusal =
                    Some("it cannot meet its own deadline: it passed as it was submitted".into());
                Ok(())
            }
            Err(e) => {
                let name = &self.plans[class].name;
                Err(anyhow::anyhow!("submitting a message of {name:?}: {e}"))
            }
        }
    }

    /// Cancels the messages whose cancel-after has come.
    fn cancel_due(&mut self, now: Instant) {
        while let Some(&(at, id)) = self.cancels.first() {
            if at > now {
                break;
            }
            self.cancels.remove(&(at, id));
            if let Some(priority) = self.priority_of(id) {
                if self.cancel(id) {
                    self.row(priority).cancels_after += 1;
                }
            }
        }
    }

    fn priority_of(&self, id: MessageId) -> Option<u8> {
        self.live.get(&id).map(|l| self.plans[l.class].priority)
    }

    /// Cancels a live message; `false` if it had met its fate already (its `Finished`
    /// is on its way).
    fn cancel(&mut self, id: MessageId) -> bool {
        self.endpoint.cancel(id).is_ok()
    }

    /// Waits for a notice until `wake`, and takes every notice then ready.
    async fn wait(&mut self, wake: Instant) {
        let notice = tokio::select! {
            n = self.notices.recv() => n,
            _ = tokio::time::sleep_until(wake) => return,
        };
        self.take(notice);
    }

    fn take(&mut self, notice: Option<MessageNotice>) {
        let at = self.start.elapsed();
        match notice {
            None => self.watch.gone(at),
            Some(MessageNotice::Connection(e)) => self.watch.see(&e, at),
            Some(MessageNotice::Sender(MessageEvent::Early { id, .. })) => {
                let Some(live) = self.live.get(&id) else {
                    return;
                };
                let plan = &self.plans[live.class];
                let (priority, on_early) = (plan.priority, plan.on_early);
                self.row(priority).early_callbacks += 1;
                match on_early {
                    // It may have met its fate since: then there is nothing to answer.
                    OnEarly::Continue => {
                        let _ = self.endpoint.resume(id);
                    }
                    OnEarly::Cancel => {
                        if self.cancel(id) {
                            self.row(priority).cancels_on_early += 1;
                        }
                    }
                }
            }
            Some(MessageNotice::Sender(MessageEvent::Finished { id, fate, .. })) => {
                let Some(live) = self.live.remove(&id) else {
                    return;
                };
                let priority = self.plans[live.class].priority;
                let row = self.row(priority);
                match fate {
                    Fate::Delivered => {
                        row.delivered += 1;
                        row.delivered_bytes += live.size;
                    }
                    Fate::Early => row.early += 1,
                    Fate::Cancelled => row.cancelled += 1,
                    Fate::Expired => row.expired += 1,
                }
            }
            Some(MessageNotice::SendFailed { id, error }) => {
                eprintln!(
                    "warning: message {id}: the session refused a piece ({error}); it is cancelled"
                );
            }
            Some(_) => {}
        }
    }
}
