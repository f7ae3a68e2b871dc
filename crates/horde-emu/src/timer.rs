//! The release thread: sleeps until the earliest delivery time over all links, then sends
//! every due packet.
//!
//! Precision strategy (measured with `benches/release_error.rs`, see docs/emulator.md):
//! the thread sets its timer slack to 1 ns and, when permitted, runs `SCHED_FIFO`. It
//! blocks on a condition variable (a futex with an absolute monotonic deadline, i.e. an
//! hrtimer) until `spin` before the deadline, then spins on the clock for the rest. A
//! receive that brings an earlier deadline notifies the condition variable, or sets
//! `kick` while the thread spins. Without real-time priority the thread does not spin.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::port::PacketPort;
use crate::realtime;
use crate::shared::{Outgoing, Sent, Shared};
use crate::stats::Direction;

/// The two ports of a channel.
pub(crate) struct ChannelSockets {
    /// Receives from the client, sends replies to it.
    pub client_facing: Box<dyn PacketPort>,
    /// Sends to the real destination, receives its replies.
    pub server_facing: Box<dyn PacketPort>,
}

/// Tuning of the release thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerOptions {
    /// Busy-wait this long before each deadline instead of sleeping through it. Only
    /// used when the release thread runs real-time, or when `realtime_priority` is `None`.
    pub spin: Duration,
    /// Payloads older than this are assumed lost by the link model and reclaimed.
    pub max_packet_age: Duration,
    /// Run the release thread under `SCHED_FIFO` at this priority (1..=99), and the
    /// receive thread one below, when the process may (root or `CAP_SYS_NICE`);
    /// otherwise they stay normal threads and the release thread does not spin.
    pub realtime_priority: Option<i32>,
}

impl Default for TimerOptions {
    fn default() -> Self {
        Self {
            spin: Duration::from_micros(DEFAULT_SPIN_US),
            max_packet_age: Duration::from_secs(30),
            realtime_priority: Some(DEFAULT_REALTIME_PRIORITY),
        }
    }
}

/// Default busy-wait before a deadline, chosen from the release-error benchmark.
pub const DEFAULT_SPIN_US: u64 = 50;
/// Default `SCHED_FIFO` priority of the release thread.
pub const DEFAULT_REALTIME_PRIORITY: i32 = 10;

const GC_EVERY: Duration = Duration::from_secs(1);

pub(crate) fn run(shared: Arc<Shared>, sockets: Arc<Vec<ChannelSockets>>, opts: TimerOptions) {
    realtime::tighten_timer_slack();
    let realtime = opts.realtime_priority.is_some_and(realtime::go_realtime);
    // Spinning without real-time priority backfires on a busy machine: the scheduler
    // preempts the spinning thread and the release comes milliseconds late.
    let spin = if opts.realtime_priority.is_some() && !realtime {
        Duration::ZERO
    } else {
        opts.spin
    };
    let clock = shared.clock;
    let mut out: Vec<Outgoing> = Vec::new();
    let mut sent: Vec<Sent> = Vec::new();
    let mut next_gc = GC_EVERY;
    let mut core = shared.lock();
    loop {
        if shared.is_shutdown() {
            break;
        }
        let now = clock.now();
        core.collect_due(now, &mut out);
        if !out.is_empty() {
            core.armed = Some(Duration::ZERO);
            drop(core);
            send_all(&sockets, &clock, &mut out, &mut sent);
            core = shared.lock();
            core.record(&mut sent);
            continue;
        }
        if now >= next_gc {
            core.evict_older_than(now.saturating_sub(opts.max_packet_age));
            next_gc = now + GC_EVERY;
        }
        let next = core.next_deadline();
        core.armed = next;
        shared.kick.store(false, Ordering::Release);
        match next {
            None => {
                core = shared.wake.wait(core).unwrap_or_else(|p| p.into_inner());
            }
            Some(deadline) if deadline <= now => {
                // The link says a packet is due but delivered none: a model bug. Back off
                // rather than spin hot (possibly at real-time priority).
                tracing::warn!("a link reports a due delivery it does not make");
                core = shared
                    .wake
                    .wait_timeout(core, Duration::from_millis(1))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            Some(deadline) if deadline > now + spin => {
                let sleep = deadline.saturating_sub(spin + clock.now());
                core = shared
                    .wake
                    .wait_timeout(core, sleep)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            Some(deadline) => {
                drop(core);
                while clock.now() < deadline
                    && !shared.kick.load(Ordering::Acquire)
                    && !shared.is_shutdown()
                {
                    std::hint::spin_loop();
                }
                core = shared.lock();
            }
        }
    }
}

fn send_all(
    sockets: &[ChannelSockets],
    clock: &crate::shared::Clock,
    out: &mut Vec<Outgoing>,
    sent: &mut Vec<Sent>,
) {
    for o in out.drain(..) {
        let s = &sockets[o.channel];
        let socket = match o.dir {
            Direction::Up => &s.server_facing,
            Direction::Down => &s.client_facing,
        };
        let at = clock.now();
        let error = match socket.send(&o.payload, o.dest) {
            Ok(()) => Some(at.saturating_sub(o.scheduled)),
            Err(e) => {
                tracing::debug!("send to {:?} failed: {e}", o.dest);
                None
            }
        };
        sent.push(Sent {
            channel: o.channel,
            dir: o.dir,
            arrived: o.arrived,
            scheduled: o.scheduled,
            error,
            payload: o.payload,
        });
    }
}
