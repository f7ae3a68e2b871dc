//! State shared by the receive thread, the timer thread and the handle: the links, their
//! payloads and counters, behind one mutex, plus the condition variable that wakes the
//! timer thread when an earlier deadline appears.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use horde_links::{Delivery, FlowKey, Link, Verdict};

use crate::packet_log::{Fate, PacketLogging, PacketRecord};
use crate::schedule::LinkState;
use crate::slab::PayloadSlab;
use crate::stats::{ChannelStats, Direction, DirectionStats};

/// Monotonic time since the emulator started.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    origin: Instant,
}

impl Clock {
    pub fn start() -> Self {
        Self {
            origin: Instant::now(),
        }
    }

    pub fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// One direction of one channel: the link model, the payloads inside it, counters.
pub(crate) struct DirState {
    link: Box<dyn Link>,
    slab: PayloadSlab,
    stats: DirectionStats,
}

impl DirState {
    fn new(link: Box<dyn Link>) -> Self {
        Self {
            link,
            slab: PayloadSlab::new(),
            stats: DirectionStats::default(),
        }
    }

    fn snapshot(&mut self, now: Duration, scratch: &mut Vec<Delivery>) -> DirectionStats {
        if self.link.next_delivery().is_none() {
            // Nothing can come out, but polling lets the model count losses that are due.
            scratch.clear();
            self.link.deliver(now, scratch);
            for d in scratch.drain(..) {
                self.slab.take(d.id);
                self.stats.dropped_other += 1;
            }
        }
        let link = self.link.stats();
        let mut s = self.stats.clone();
        s.dropped_loss = link.lost;
        s.assigned_kbps = self.link.mean_assigned_kbps();
        s.in_flight = link
            .offered
            .saturating_sub(link.queue_drops + link.lost + link.delivered);
        s
    }
}

pub(crate) struct ChannelState {
    pub name: String,
    pub client_facing: SocketAddr,
    /// The real receiver of a UDP relay channel; `None` for a point-to-point channel
    /// (TUN ports), whose packets need no address.
    pub forward_to: Option<SocketAddr>,
    /// The most recent source address seen on the client-facing socket.
    pub client: Option<SocketAddr>,
    pub state: LinkState,
    dirs: [DirState; 2],
}

impl ChannelState {
    pub fn new(
        name: String,
        client_facing: SocketAddr,
        forward_to: Option<SocketAddr>,
        state: LinkState,
        up: Box<dyn Link>,
        down: Box<dyn Link>,
    ) -> Self {
        Self {
            name,
            client_facing,
            forward_to,
            client: None,
            state,
            dirs: [DirState::new(up), DirState::new(down)],
        }
    }

    fn dir(&mut self, dir: Direction) -> &mut DirState {
        &mut self.dirs[dir.index()]
    }

    /// Where a packet leaving in `dir` goes: `Ok(None)` on a point-to-point channel,
    /// `Err(())` for a reply before any client address was seen.
    fn destination(&self, dir: Direction) -> Result<Option<SocketAddr>, ()> {
        match (self.forward_to, dir) {
            (None, _) => Ok(None),
            (Some(to), Direction::Up) => Ok(Some(to)),
            (Some(_), Direction::Down) => self.client.map(Some).ok_or(()),
        }
    }
}

/// A packet due for release, taken out of its link.
pub(crate) struct Outgoing {
    pub channel: usize,
    pub dir: Direction,
    pub dest: Option<SocketAddr>,
    pub arrived: Duration,
    pub scheduled: Duration,
    pub payload: Vec<u8>,
}

/// The outcome of sending an [`Outgoing`] packet.
pub(crate) struct Sent {
    pub channel: usize,
    pub dir: Direction,
    pub arrived: Duration,
    /// The scheduled release time.
    pub scheduled: Duration,
    /// Actual send time minus scheduled time, or `None` if the send failed.
    pub error: Option<Duration>,
    pub payload: Vec<u8>,
}

/// Everything behind the mutex.
pub(crate) struct Core {
    pub channels: Vec<ChannelState>,
    /// The deadline the timer thread is waiting for: `None` while it waits with nothing
    /// pending, `Some(ZERO)` while it is busy and will look again anyway.
    pub armed: Option<Duration>,
    scratch: Vec<Delivery>,
    /// Ids of packets the links lost or dropped after taking them, per collection.
    lost_scratch: Vec<u64>,
    log: PacketLog,
}

/// The per-packet records kept when logging is on.
#[derive(Debug)]
struct PacketLog {
    logging: PacketLogging,
    records: Vec<PacketRecord>,
}

impl PacketLog {
    /// Record a packet that never left the emulator.
    fn drop(&mut self, channel: usize, dir: Direction, arrival: Duration, size: usize, fate: Fate) {
        if self.logging != PacketLogging::Off {
            self.records.push(PacketRecord {
                channel,
                dir,
                arrival,
                departure: None,
                size,
                fate,
                payload: None,
            });
        }
    }
}

impl Core {
    pub fn new(channels: Vec<ChannelState>, logging: PacketLogging) -> Self {
        Self {
            channels,
            armed: Some(Duration::ZERO),
            scratch: Vec::new(),
            lost_scratch: Vec::new(),
            log: PacketLog {
                logging,
                records: Vec::new(),
            },
        }
    }

    /// Records kept since the last call (empty unless logging is on).
    pub fn take_records(&mut self) -> Vec<PacketRecord> {
        std::mem::take(&mut self.log.records)
    }

    /// Offer a received packet to a channel direction at `now`. Returns the link's
    /// next delivery time afterwards.
    pub fn offer(
        &mut self,
        channel: usize,
        dir: Direction,
        now: Duration,
        payload: Vec<u8>,
    ) -> Option<Duration> {
        let ch = &mut self.channels[channel];
        let down = ch.state.is_down(now);
        let d = ch.dir(dir);
        let len = payload.len();
        d.stats.offered += 1;
        d.stats.offered_bytes += len as u64;
        if down {
            d.stats.dropped_down += 1;
            self.log.drop(channel, dir, now, len, Fate::DroppedDown);
            return None;
        }
        let size = u32::try_from(len).unwrap_or(u32::MAX);
        // A link whose queue tells flows apart (`qdisc`) sees each IP packet's 5-tuple.
        let flow = FlowKey::from_ip(&payload);
        let id = d.slab.insert(now, payload);
        let verdict = match flow {
            Some(flow) => d.link.enqueue_flow(now, id, size, &flow),
            None => d.link.enqueue(now, id, size),
        };
        if verdict == Verdict::QueueFull {
            d.slab.take(id);
            d.stats.dropped_queue += 1;
            let next = d.link.next_delivery();
            self.log.drop(channel, dir, now, len, Fate::DroppedQueue);
            return next;
        }
        d.link.next_delivery()
    }

    /// Take every packet due at `now` out of the links into `out`. Packets due while
    /// their channel is down, or replies with no client address yet, are dropped here.
    pub fn collect_due(&mut self, now: Duration, out: &mut Vec<Outgoing>) {
        let mut due = std::mem::take(&mut self.scratch);
        let mut lost = std::mem::take(&mut self.lost_scratch);
        let log = &mut self.log;
        for (ci, ch) in self.channels.iter_mut().enumerate() {
            let down = ch.state.is_down(now);
            for dir in Direction::BOTH {
                let dest = ch.destination(dir);
                let d = &mut ch.dirs[dir.index()];
                match d.link.next_delivery() {
                    Some(t) if t <= now => {}
                    _ => continue,
                }
                due.clear();
                lost.clear();
                d.link.deliver_and_report_losses(now, &mut due, &mut lost);
                // Lost on the link, or dropped by its queue after it took them.
                for id in &lost {
                    if let Some((at, p)) = d.slab.take_stored(*id) {
                        log.drop(ci, dir, at, p.len(), Fate::DroppedLoss);
                    }
                }
                for del in &due {
                    let Some((arrived, payload)) = d.slab.take_stored(del.id) else {
                        d.stats.dropped_other += 1;
                        continue;
                    };
                    d.stats.transit.record(del.at.saturating_sub(arrived));
                    if down {
                        d.stats.dropped_down += 1;
                        log.drop(ci, dir, arrived, payload.len(), Fate::DroppedDown);
                        continue;
                    }
                    let Ok(dest) = dest else {
                        d.stats.dropped_other += 1;
                        log.drop(ci, dir, arrived, payload.len(), Fate::DroppedOther);
                        continue;
                    };
                    out.push(Outgoing {
                        channel: ci,
                        dir,
                        dest,
                        arrived,
                        scheduled: del.at,
                        payload,
                    });
                }
                if d.link.next_delivery().is_none() {
                    // Nothing left inside the link: what the slab still holds was lost.
                    d.slab
                        .clear_with(|at, p| log.drop(ci, dir, at, p.len(), Fate::DroppedLoss));
                }
            }
        }
        due.clear();
        self.scratch = due;
        lost.clear();
        self.lost_scratch = lost;
    }

    /// Record the outcome of sends.
    pub fn record(&mut self, sent: &mut Vec<Sent>) {
        for s in sent.drain(..) {
            let d = self.channels[s.channel].dir(s.dir);
            let size = s.payload.len();
            match s.error {
                Some(err) => {
                    d.stats.delivered += 1;
                    d.stats.delivered_bytes += size as u64;
                    d.stats.release_error.record(err);
                }
                None => d.stats.dropped_other += 1,
            }
            if self.log.logging == PacketLogging::Off {
                continue;
            }
            let delivered = s.error.is_some();
            self.log.records.push(PacketRecord {
                channel: s.channel,
                dir: s.dir,
                arrival: s.arrived,
                departure: s.error.map(|e| s.scheduled + e),
                size,
                fate: if delivered {
                    Fate::Delivered
                } else {
                    Fate::DroppedOther
                },
                payload: (delivered && self.log.logging == PacketLogging::RecordsWithPayload)
                    .then_some(s.payload),
            });
        }
    }

    /// The earliest pending delivery over all links.
    pub fn next_deadline(&self) -> Option<Duration> {
        self.channels
            .iter()
            .flat_map(|c| c.dirs.iter())
            .filter_map(|d| d.link.next_delivery())
            .min()
    }

    /// Forget payloads stored before `cutoff`: packets the loss process removed while
    /// the link never ran empty.
    pub fn evict_older_than(&mut self, cutoff: Duration) {
        let log = &mut self.log;
        for (ci, ch) in self.channels.iter_mut().enumerate() {
            for dir in Direction::BOTH {
                ch.dirs[dir.index()]
                    .slab
                    .evict_older_than_with(cutoff, |at, p| {
                        log.drop(ci, dir, at, p.len(), Fate::DroppedLoss)
                    });
            }
        }
    }

    pub fn snapshot(&mut self, now: Duration) -> Vec<ChannelStats> {
        let scratch = &mut self.scratch;
        self.channels
            .iter_mut()
            .map(|c| ChannelStats {
                name: c.name.clone(),
                client_addr: c.client_facing,
                link_down: c.state.is_down(now),
                up: c.dirs[0].snapshot(now, scratch),
                down: c.dirs[1].snapshot(now, scratch),
            })
            .collect()
    }
}

/// The mutex-protected core plus the signals between threads.
pub(crate) struct Shared {
    core: Mutex<Core>,
    /// Wakes the timer thread (new earlier deadline, or shutdown).
    pub wake: Condvar,
    /// Set when an earlier deadline appears while the timer thread spins unlocked.
    pub kick: AtomicBool,
    pub shutdown: AtomicBool,
    pub clock: Clock,
}

impl Shared {
    pub fn new(core: Core, clock: Clock) -> Self {
        Self {
            core: Mutex::new(core),
            wake: Condvar::new(),
            kick: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            clock,
        }
    }

    /// Lock the core. A panic in another thread while holding the lock leaves counters
    /// that are still meaningful, so poisoning is ignored.
    pub fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Called with the lock held after new packets entered links: wake the timer thread
    /// if `deadline` is earlier than what it waits for.
    pub fn deadline_added(&self, core: &Core, deadline: Duration) {
        let earlier = match core.armed {
            None => true,
            Some(armed) => deadline < armed,
        };
        if earlier {
            self.kick.store(true, Ordering::Release);
            self.wake.notify_one();
        }
    }

    pub fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    pub fn request_shutdown(&self) {
        let _guard = self.lock();
        self.shutdown.store(true, Ordering::Release);
        self.kick.store(true, Ordering::Release);
        self.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ideal::IdealLink;
    use crate::schedule::ScheduleStep;

    fn core_with(schedule: Vec<ScheduleStep>) -> Core {
        Core::new(
            vec![ChannelState::new(
                "c".into(),
                "127.0.0.1:1".parse().unwrap(),
                Some("127.0.0.1:2".parse().unwrap()),
                LinkState::new(schedule),
                Box::new(IdealLink::new()),
                Box::new(IdealLink::new()),
            )],
            PacketLogging::Off,
        )
    }

    /// An IPv4 UDP packet of `len` bytes from source port `port`.
    fn udp(port: u16, len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[9] = 17;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p[20..22].copy_from_slice(&port.to_be_bytes());
        p
    }

    /// Through a link with `qdisc`, when a small flow's packet that arrived behind a
    /// bulk flow's backlog comes out: its place among the packets delivered.
    fn small_flow_place(qdisc: horde_links::QdiscKind) -> usize {
        let spec = horde_links::LinkSpec {
            rate: Some(horde_links::RateSpec::Constant { kbps: 8000.0 }),
            buffer_bytes: Some(200_000),
            qdisc: Some(qdisc),
            ..horde_links::LinkSpec::default()
        };
        let link = spec.build(1, std::path::Path::new(".")).unwrap();
        let mut core = Core::new(
            vec![ChannelState::new(
                "c".into(),
                "127.0.0.1:1".parse().unwrap(),
                Some("127.0.0.1:2".parse().unwrap()),
                LinkState::new(vec![]),
                link,
                Box::new(IdealLink::new()),
            )],
            PacketLogging::Off,
        );
        let t = Duration::from_millis(1);
        for _ in 0..60 {
            core.offer(0, Direction::Up, t, udp(5000, 1400));
        }
        core.offer(0, Direction::Up, t, udp(6000, 100));
        let mut out = Vec::new();
        let mut now = t;
        while out.iter().all(|o: &Outgoing| o.payload.len() != 100) {
            now += Duration::from_millis(1);
            assert!(
                now < Duration::from_secs(1),
                "the small packet never came out"
            );
            core.collect_due(now, &mut out);
        }
        out.iter().position(|o| o.payload.len() == 100).unwrap()
    }

    #[test]
    fn a_chap_or_fq_codel_link_serves_a_small_flow_before_a_bulk_backlog() {
        use horde_links::QdiscKind;
        assert_eq!(small_flow_place(QdiscKind::Fifo), 60);
        for qdisc in [QdiscKind::Chap, QdiscKind::FqCodel] {
            let place = small_flow_place(qdisc);
            assert!(place <= 2, "{qdisc}: the small packet came out {place}th");
        }
    }

    #[test]
    fn up_goes_to_forward_address_and_replies_need_a_client() {
        let mut core = core_with(vec![]);
        let t = Duration::from_millis(1);
        assert_eq!(core.offer(0, Direction::Up, t, vec![1, 2]), Some(t));
        assert_eq!(core.offer(0, Direction::Down, t, vec![3]), Some(t));
        let mut out = Vec::new();
        core.collect_due(t, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].dest, Some("127.0.0.1:2".parse().unwrap()));
        assert_eq!(out[0].payload, vec![1, 2]);
        let snap = core.snapshot(t);
        assert_eq!(
            snap[0].down.dropped_other, 1,
            "reply with no client dropped"
        );
        assert_eq!(core.next_deadline(), None);
    }

    #[test]
    fn down_channel_drops_on_arrival_and_at_release() {
        let mut core = core_with(vec![ScheduleStep {
            at: Duration::from_millis(5),
            down: true,
        }]);
        core.channels[0].client = Some("127.0.0.1:3".parse().unwrap());
        core.offer(0, Direction::Down, Duration::from_millis(4), vec![1]);
        core.offer(0, Direction::Up, Duration::from_millis(6), vec![1]);
        let mut out = Vec::new();
        core.collect_due(Duration::from_millis(6), &mut out);
        assert!(out.is_empty());
        let snap = core.snapshot(Duration::from_millis(6));
        assert!(snap[0].link_down);
        assert_eq!(snap[0].up.dropped_down, 1);
        assert_eq!(snap[0].down.dropped_down, 1);
        assert_eq!(snap[0].down.in_flight, 0);
    }

    #[test]
    fn record_counts_delivery_and_failures() {
        let mut core = core_with(vec![]);
        let sent = |error| Sent {
            channel: 0,
            dir: Direction::Up,
            arrived: Duration::ZERO,
            scheduled: Duration::ZERO,
            error,
            payload: vec![0; 100],
        };
        core.record(&mut vec![sent(Some(Duration::from_micros(20))), sent(None)]);
        let snap = core.snapshot(Duration::ZERO);
        assert_eq!(snap[0].up.delivered, 1);
        assert_eq!(snap[0].up.delivered_bytes, 100);
        assert_eq!(snap[0].up.dropped_other, 1);
        assert_eq!(snap[0].up.release_error.count(), 1);
    }
}
