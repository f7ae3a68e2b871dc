//! One sending host of the ATP experiments in virtual time: Horde's message core
//! (`horde_proto::message`: the scheduler with admission, priorities, EDF and early
//! expiry, the host bandwidth estimator and its range notifications) over one
//! `horde-links` link whose rate follows a trace, behind a 50-packet send queue.
//!
//! What stands in for the session: pieces go straight into the link's send queue, at
//! most `queue_ahead` of the measured rate ahead (so that a more important message waits
//! behind little), the link loses nothing, the receiver has a message when its last
//! piece arrives one propagation delay after leaving the queue, and its acknowledgement
//! takes one more. The link's rate is measured as in [`super::rate`].

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use anyhow::{Context, Result};
use horde_links::{Delivery, Link};
use horde_proto::message::{
    AdmissionPolicy, BandwidthEstimator, BandwidthEvent, BandwidthNotifier, ChannelEstimate,
    EstimatorConfig, Fate, MessageConfig, MessageError, MessageEvent, MessageId, MessageScheduler,
    MessageSpec, UsageSample,
};
use serde::Serialize;

use super::rate::{RateMeter, SAMPLE_INTERVAL};

/// Settings of a host and its link.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Payload bytes per piece.
    pub piece_size: u32,
    /// Bytes each piece adds on the wire (piece header, UDP and IP).
    pub header_bytes: u32,
    /// The send queue's capacity in bytes (ATP: 50 packets).
    pub buffer_bytes: u64,
    /// One-way propagation delay, each way.
    pub one_way: Duration,
    /// How much of the measured rate may wait in the send queue.
    pub queue_ahead: Duration,
    /// The estimator's poll delay, in ticks of 1 s.
    pub poll_delay: u32,
    /// Whether the advertised estimate is capped by the measured link rate, as Horde's
    /// message endpoint caps it by its channels' rates; without, it probes upwards as
    /// ATP's Fig. 3 does.
    pub cap_estimate: bool,
    /// Which admitted deadlines admission protects.
    pub admission: AdmissionPolicy,
    /// The link-rate estimate before the first measurement, bytes per second.
    pub initial_rate: f64,
    /// When the run stops.
    pub duration: Duration,
}

impl HostConfig {
    /// The experiments' host: 1500-byte packets (1446 bytes of payload behind a 26-byte
    /// piece header and 28 bytes of UDP and IPv4), a 50-packet queue, 10 ms each way,
    /// 100 ms of queue ahead, and a 50 KB/s first guess at the rate.
    pub fn atp(poll_delay: u32, duration: Duration) -> Self {
        Self {
            piece_size: 1446,
            header_bytes: 54,
            buffer_bytes: 50 * 1500,
            one_way: Duration::from_millis(10),
            queue_ahead: Duration::from_millis(100),
            poll_delay,
            cap_estimate: true,
            admission: AdmissionPolicy::ProtectSameLevel,
            initial_rate: 50_000.0,
            duration,
        }
    }

    fn packet(&self) -> u32 {
        self.piece_size + self.header_bytes
    }
}

/// What happened to one class of an application's messages.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClassStats {
    /// Messages offered to the scheduler.
    pub submitted: u64,
    /// Refused by admission control.
    pub refused: u64,
    /// Whole at the receiver by their deadline.
    pub delivered: u64,
    /// Their payload bytes.
    pub delivered_bytes: u64,
    /// Whole at the receiver after their deadline.
    pub late: u64,
    /// Ended after an early callback.
    pub early: u64,
    /// Cancelled without one.
    pub cancelled: u64,
    /// Their deadline passed at the sender.
    pub expired: u64,
}

/// One second of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Second {
    /// Bytes that left the send queue in the second.
    pub sent_bytes: u64,
    /// The estimator's advertised value after it, bytes per second.
    pub available: f64,
    /// The link-rate estimate, bytes per second.
    pub rate: f64,
    /// The application's mode in the second ([`App::mode`]).
    pub mode: u8,
}

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct RunStats {
    /// Per class of the application.
    pub classes: Vec<ClassStats>,
    /// Every byte that left the send queue: pieces with their headers, of delivered
    /// messages or not, and the rate probes.
    pub wire_bytes: u64,
    /// Of which packet-pair probes.
    pub probe_bytes: u64,
    /// Bandwidth notifications the application heard.
    pub notifications: u64,
    /// Per second.
    pub seconds: Vec<Second>,
}

/// An application on the host.
pub trait App {
    /// When it next wants to run, if ever.
    fn next_wake(&self) -> Option<Duration>;
    /// Its time has come: it submits its messages.
    fn wake(&mut self, now: Duration, host: &mut Ctx<'_>);
    /// A registered bandwidth range fired.
    fn on_bandwidth(&mut self, now: Duration, event: BandwidthEvent, host: &mut Ctx<'_>);
    /// A message's early callback: by default it is cancelled, as in the paper's runs.
    fn on_early(&mut self, now: Duration, id: MessageId, host: &mut Ctx<'_>) {
        host.cancel(now, id);
    }
    /// Its mode, for the per-second record (0 if it has none).
    fn mode(&self) -> u8 {
        0
    }
}

/// A message the host follows until it arrives or ends.
struct Track {
    class: usize,
    size: u64,
    deadline: Option<Duration>,
    arrived: u64,
    /// Queue position (bytes ever enqueued) just after its latest piece.
    last_position: u64,
}

/// What an application may do.
pub struct Ctx<'a> {
    scheduler: &'a mut MessageScheduler,
    notifier: &'a mut BandwidthNotifier,
    tracks: &'a mut HashMap<MessageId, Track>,
    classes: &'a mut Vec<ClassStats>,
    error: &'a mut Option<MessageError>,
}

impl Ctx<'_> {
    /// Submits a message of class `class` (for the statistics), `size` bytes at
    /// `priority`, useful only if it arrives `within` from now; `None` if admission
    /// refused it (or the call was invalid: the run then ends with that error). With
    /// `timer`, the scheduler knows the deadline (admission, early callback); without, it
    /// does not, and only the statistics do.
    pub fn submit(
        &mut self,
        now: Duration,
        class: usize,
        priority: u8,
        size: u64,
        within: Duration,
        timer: bool,
    ) -> Option<MessageId> {
        if self.classes.len() <= class {
            self.classes.resize(class + 1, ClassStats::default());
        }
        self.classes[class].submitted += 1;
        let deadline = now + within;
        let mut spec = MessageSpec::new(priority, size);
        if timer {
            spec = spec.with_deadline(deadline);
        }
        match self.scheduler.submit(now, spec) {
            Ok(id) => {
                self.tracks.insert(
                    id,
                    Track {
                        class,
                        size,
                        deadline: Some(deadline),
                        arrived: 0,
                        last_position: 0,
                    },
                );
                Some(id)
            }
            Err(MessageError::Refused(_)) => {
                self.classes[class].refused += 1;
                None
            }
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        }
    }

    /// Registers a one-shot bandwidth range, bytes per second.
    pub fn register(&mut self, min: f64, max: f64) {
        if let Err(e) = self.notifier.register(min, max) {
            self.error.get_or_insert(e);
        }
    }

    /// Cancels a message.
    pub fn cancel(&mut self, now: Duration, id: MessageId) {
        if let Err(e) = self.scheduler.cancel(now, id) {
            self.error.get_or_insert(e);
        }
    }
}

/// What a packet in the link carries.
#[derive(Debug, Clone, Copy)]
enum Cargo {
    Piece { message: MessageId, len: u32 },
    Probe,
}

/// The host and its link.
pub struct Host {
    config: HostConfig,
    now: Duration,
    scheduler: MessageScheduler,
    estimator: BandwidthEstimator,
    notifier: BandwidthNotifier,
    link: Box<dyn Link>,
    rate: RateMeter,
    packets: HashMap<u64, (Cargo, u32)>,
    next_packet: u64,
    queued: u64,
    enqueued_total: u64,
    served_total: u64,
    tick_sent: u64,
    next_tick: Duration,
    next_interval: Duration,
    /// Pieces on their way to the receiver: (arrival, message, len).
    arrivals: VecDeque<(Duration, MessageId, u32)>,
    /// Acknowledgements of whole messages on their way back: (arrival, message).
    acks: VecDeque<(Duration, MessageId)>,
    tracks: HashMap<MessageId, Track>,
    classes: Vec<ClassStats>,
    wire_bytes: u64,
    probe_bytes: u64,
    notifications: u64,
    seconds: Vec<Second>,
    deliveries: Vec<Delivery>,
    app_error: Option<MessageError>,
}

impl Host {
    /// A host sending over `link`.
    pub fn new(config: HostConfig, link: Box<dyn Link>) -> Result<Self> {
        let scheduler = MessageScheduler::new(MessageConfig {
            piece_size: config.piece_size,
            admission: config.admission,
            ..MessageConfig::default()
        })
        .context("message scheduler")?;
        let estimator = BandwidthEstimator::new(EstimatorConfig {
            poll_delay: config.poll_delay,
            queue_capacity_bytes: config.buffer_bytes,
            ..EstimatorConfig::default()
        })
        .context("bandwidth estimator")?;
        let rate = RateMeter::new(config.initial_rate);
        Ok(Self {
            config,
            now: Duration::ZERO,
            scheduler,
            estimator,
            notifier: BandwidthNotifier::new(),
            link,
            rate,
            packets: HashMap::new(),
            next_packet: 0,
            queued: 0,
            enqueued_total: 0,
            served_total: 0,
            tick_sent: 0,
            next_tick: Duration::from_secs(1),
            next_interval: SAMPLE_INTERVAL,
            arrivals: VecDeque::new(),
            acks: VecDeque::new(),
            tracks: HashMap::new(),
            classes: Vec::new(),
            wire_bytes: 0,
            probe_bytes: 0,
            notifications: 0,
            seconds: Vec::new(),
            deliveries: Vec::new(),
            app_error: None,
        })
    }

    /// Runs `app` until the configured duration and returns what was measured.
    pub fn run(mut self, app: &mut dyn App) -> Result<RunStats> {
        let end = self.config.duration;
        // The application starts before anything else.
        self.with_app(app, |app, now, ctx| app.wake(now, ctx));
        self.settle(app)?;
        loop {
            let next = [
                app.next_wake(),
                self.link.next_delivery(),
                self.arrivals.front().map(|a| a.0),
                self.acks.front().map(|a| a.0),
                self.scheduler.poll_timeout(),
                Some(self.next_tick),
                Some(self.next_interval),
            ]
            .into_iter()
            .flatten()
            .min()
            .expect("the tick is always due");
            if next > end {
                break;
            }
            self.now = self.now.max(next);
            self.step(app)?;
        }
        Ok(RunStats {
            classes: self.classes,
            wire_bytes: self.wire_bytes,
            probe_bytes: self.probe_bytes,
            notifications: self.notifications,
            seconds: self.seconds,
        })
    }

    fn step(&mut self, app: &mut dyn App) -> Result<()> {
        let now = self.now;
        self.take_deliveries();
        while self.arrivals.front().is_some_and(|a| a.0 <= now) {
            let (at, id, len) = self.arrivals.pop_front().expect("checked");
            self.arrive(at, id, len);
        }
        while self.acks.front().is_some_and(|a| a.0 <= now) {
            let (_, id) = self.acks.pop_front().expect("checked");
            // A message cancelled after it arrived is already finished: nothing to confirm.
            let _ = self.scheduler.confirm_delivered(now, id);
        }
        if now >= self.next_interval {
            self.next_interval += SAMPLE_INTERVAL;
            if self.rate.on_interval(now, self.served_total, self.queued) {
                self.send_pair();
            }
            self.refresh_arrivals();
        }
        if now >= self.next_tick {
            self.next_tick += Duration::from_secs(1);
            self.tick(app);
        }
        if self.scheduler.poll_timeout().is_some_and(|t| t <= now) {
            self.scheduler.handle_timeout(now);
        }
        if app.next_wake().is_some_and(|t| t <= now) {
            self.with_app(app, |app, now, ctx| app.wake(now, ctx));
        }
        self.settle(app)
    }

    /// Answers the scheduler's events and fills the send queue, until neither has more.
    fn settle(&mut self, app: &mut dyn App) -> Result<()> {
        loop {
            if let Some(e) = self.app_error.take() {
                return Err(e).context("the application's call");
            }
            self.set_channel()?;
            let mut any = false;
            while let Some(event) = self.scheduler.poll_event() {
                any = true;
                match event {
                    MessageEvent::Early { id, .. } => {
                        self.with_app(app, |app, now, ctx| app.on_early(now, id, ctx));
                    }
                    MessageEvent::Finished { id, fate, .. } => self.finish(id, fate),
                }
            }
            // Cancels free the receiver; it needs nothing else from them here.
            while self.scheduler.poll_control().is_some() {}
            any |= self.fill()?;
            if !any {
                return Ok(());
            }
        }
    }

    /// Tells the scheduler what the link can do now: the measured rate, in payload
    /// bytes, after the propagation delay and the queue ahead.
    fn set_channel(&mut self) -> Result<()> {
        let wire_rate = self.rate.estimate();
        let payload = f64::from(self.config.piece_size) / f64::from(self.config.packet());
        let queue_wait = if wire_rate > 0.0 {
            Duration::from_secs_f64((self.queued as f64 / wire_rate).min(3600.0))
        } else {
            Duration::ZERO
        };
        self.scheduler
            .set_channels(
                self.now,
                &[ChannelEstimate {
                    rate: wire_rate * payload,
                    delay: self.config.one_way + queue_wait,
                    startup: None,
                }],
            )
            .context("channel estimate")
    }

    /// Hands pieces to the link while the queue is under its limit; true if it did.
    fn fill(&mut self) -> Result<bool> {
        let packet = u64::from(self.config.packet());
        let ahead = (self.rate.estimate() * self.config.queue_ahead.as_secs_f64()) as u64;
        let limit = ahead.max(3 * packet).min(self.config.buffer_bytes);
        let mut any = false;
        while self.queued + packet <= limit {
            let Some(piece) = self.scheduler.poll_piece(self.now, 0)? else {
                break;
            };
            any = true;
            let size = piece.len + self.config.header_bytes;
            self.enqueue(
                Cargo::Piece {
                    message: piece.message,
                    len: piece.len,
                },
                size,
            );
            let position = self.enqueued_total;
            if let Some(track) = self.tracks.get_mut(&piece.message) {
                track.last_position = position;
            }
            let arrival = self.expected_arrival(position);
            self.scheduler
                .expect_arrival(self.now, piece.message, arrival)?;
        }
        Ok(any)
    }

    /// When a piece ending at queue position `position` should reach the receiver.
    fn expected_arrival(&self, position: u64) -> Duration {
        let ahead = position.saturating_sub(self.served_total) as f64;
        let rate = self.rate.estimate();
        let wait = if rate > 0.0 {
            (ahead / rate).min(3600.0)
        } else {
            3600.0
        };
        self.now + Duration::from_secs_f64(wait) + self.config.one_way
    }

    /// Re-estimates the arrival of every message with pieces still queued.
    fn refresh_arrivals(&mut self) {
        let waiting: Vec<(MessageId, u64)> = self
            .tracks
            .iter()
            .filter(|(_, t)| t.last_position > self.served_total)
            .map(|(id, t)| (*id, t.last_position))
            .collect();
        for (id, position) in waiting {
            let arrival = self.expected_arrival(position);
            let _ = self.scheduler.expect_arrival(self.now, id, arrival);
        }
    }

    fn enqueue(&mut self, cargo: Cargo, size: u32) {
        let id = self.next_packet;
        self.next_packet += 1;
        // The fill limit keeps the queue under the link's buffer, so nothing is dropped.
        let _ = self.link.enqueue(self.now, id, size);
        self.packets.insert(id, (cargo, size));
        self.queued += u64::from(size);
        self.enqueued_total += u64::from(size);
    }

    /// Two full-size packets back to back; the gap between their departures is a rate
    /// sample.
    fn send_pair(&mut self) {
        for _ in 0..2 {
            self.enqueue(Cargo::Probe, self.config.packet());
        }
    }

    fn take_deliveries(&mut self) {
        let mut out = std::mem::take(&mut self.deliveries);
        self.link.deliver(self.now, &mut out);
        for d in out.drain(..) {
            let Some((cargo, size)) = self.packets.remove(&d.id) else {
                continue;
            };
            self.queued -= u64::from(size);
            self.served_total += u64::from(size);
            self.tick_sent += u64::from(size);
            self.wire_bytes += u64::from(size);
            if self.queued == 0 {
                self.rate.queue_emptied();
            }
            match cargo {
                Cargo::Piece { message, len } => {
                    self.arrivals
                        .push_back((d.at + self.config.one_way, message, len));
                }
                Cargo::Probe => {
                    self.probe_bytes += u64::from(size);
                    self.rate.pair_out(d.at, size);
                }
            }
        }
        self.deliveries = out;
    }

    /// A piece reached the receiver at `at`.
    fn arrive(&mut self, at: Duration, id: MessageId, len: u32) {
        let Some(track) = self.tracks.get_mut(&id) else {
            // Cancelled: the receiver drops it.
            return;
        };
        track.arrived += u64::from(len);
        if track.arrived < track.size {
            return;
        }
        let track = self.tracks.remove(&id).expect("present");
        let stats = &mut self.classes[track.class];
        if track.deadline.is_none_or(|d| at <= d) {
            stats.delivered += 1;
            stats.delivered_bytes += track.size;
        } else {
            stats.late += 1;
        }
        self.acks.push_back((at + self.config.one_way, id));
    }

    fn finish(&mut self, id: MessageId, fate: Fate) {
        // Delivered messages were counted when they arrived.
        let Some(track) = self.tracks.remove(&id) else {
            return;
        };
        let stats = &mut self.classes[track.class];
        match fate {
            Fate::Early => stats.early += 1,
            Fate::Cancelled => stats.cancelled += 1,
            Fate::Expired => stats.expired += 1,
            Fate::Delivered => {}
        }
    }

    /// The estimator's second: a usage sample, notifications, the record.
    fn tick(&mut self, app: &mut dyn App) {
        let estimate = self.estimator.on_tick(UsageSample {
            sent_bytes: self.tick_sent,
            backlog_bytes: self.queued,
            capacity: self.config.cap_estimate.then(|| self.rate.estimate()),
        });
        self.seconds.push(Second {
            sent_bytes: self.tick_sent,
            available: estimate.available,
            rate: self.rate.estimate(),
            mode: app.mode(),
        });
        self.tick_sent = 0;
        self.notifier.on_estimate(&estimate);
        while let Some(event) = self.notifier.poll_event() {
            self.notifications += 1;
            self.with_app(app, |app, now, ctx| app.on_bandwidth(now, event, ctx));
        }
    }

    fn with_app(
        &mut self,
        app: &mut dyn App,
        f: impl FnOnce(&mut dyn App, Duration, &mut Ctx<'_>),
    ) {
        let mut ctx = Ctx {
            scheduler: &mut self.scheduler,
            notifier: &mut self.notifier,
            tracks: &mut self.tracks,
            classes: &mut self.classes,
            error: &mut self.app_error,
        };
        f(app, self.now, &mut ctx);
    }
}
