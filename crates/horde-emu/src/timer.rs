//! The release thread: sleeps until the earliest delivery time over all links, then sends
//! every due packet.
//!
//! Precision strategy: the thread sets its timer slack to 1 ns, blocks on a condition
//! variable (a futex with an absolute monotonic deadline, i.e. an hrtimer) until `spin`
//! before the deadline, then spins on the clock for the rest. A receive that brings an
//! earlier deadline notifies the condition variable, or sets `kick` while spinning.

use std::net::UdpSocket;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::shared::{Outgoing, Sent, Shared};
use crate::stats::Direction;

/// The two relay sockets of a channel.
pub(crate) struct ChannelSockets {
    /// Receives from the client, sends replies to it.
    pub client_facing: UdpSocket,
    /// Sends to the real destination, receives its replies.
    pub server_facing: UdpSocket,
}

/// Tuning of the release thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerOptions {
    /// Busy-wait this long before each deadline instead of sleeping through it.
    pub spin: Duration,
    /// Payloads older than this are assumed lost by the link model and reclaimed.
    pub max_packet_age: Duration,
    /// Run the release thread under `SCHED_FIFO` at this priority (1..=99) when the
    /// process may (root or `CAP_SYS_NICE`); otherwise it stays a normal thread.
    pub realtime_priority: Option<i32>,
}

impl Default for TimerOptions {
    fn default() -> Self {
        Self {
            spin: Duration::from_micros(DEFAULT_SPIN_US),
            max_packet_age: Duration::from_secs(30),
            realtime_priority: None,
        }
    }
}

/// Default busy-wait before a deadline, chosen from the release-error benchmark.
pub const DEFAULT_SPIN_US: u64 = 100;

const GC_EVERY: Duration = Duration::from_secs(1);

/// Ask the kernel for exact timer expiry on this thread (default slack is 50 µs).
fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only this thread.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        tracing::debug!(
            "PR_SET_TIMERSLACK failed: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Move this thread to `SCHED_FIFO`; failure (no privilege) leaves it as it was.
fn go_realtime(priority: i32) {
    let param = libc::sched_param {
        sched_priority: priority.clamp(1, 99),
    };
    // SAFETY: pid 0 is the calling thread; param is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        tracing::info!(
            "release thread stays SCHED_OTHER: {}",
            std::io::Error::last_os_error()
        );
    }
}

pub(crate) fn run(shared: Arc<Shared>, sockets: Arc<Vec<ChannelSockets>>, opts: TimerOptions) {
    tighten_timer_slack();
    if let Some(priority) = opts.realtime_priority {
        go_realtime(priority);
    }
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
            core.record(&sent);
            sent.clear();
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
            Some(deadline) if deadline > now + opts.spin => {
                let sleep = deadline - opts.spin - now;
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
        let error = match socket.send_to(&o.payload, o.dest) {
            Ok(_) => Some(at.saturating_sub(o.scheduled)),
            Err(e) => {
                tracing::debug!("send to {} failed: {e}", o.dest);
                None
            }
        };
        sent.push(Sent {
            channel: o.channel,
            dir: o.dir,
            bytes: o.payload.len(),
            error,
        });
    }
}
