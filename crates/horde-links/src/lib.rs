//! Link models shared by the simulator (virtual time) and the emulator (real time).
//!
//! A [`Link`] is one direction of one channel. It is driven from outside: the caller
//! offers packets with [`Link::enqueue`] at a time `now`, asks [`Link::next_delivery`]
//! when the next packet leaves, and collects packets with [`Link::deliver`]. Time is a
//! [`Duration`] since the start of the run, so the same model runs unchanged under a
//! virtual clock and a wall clock. All randomness comes from a seeded RNG owned by the
//! link, so a link built from the same spec and seed behaves identically.
//!
//! Links are described by a [`LinkSpec`] (serde, TOML-friendly) and built with
//! [`LinkSpec::build`]. A built link is a pipeline:
//!
//! 1. a **bottleneck**: a FIFO served at a rate (unlimited, constant, or a Mahimahi
//!    [`Trace`]) behind an optional drop-tail byte buffer ([`Verdict::QueueFull`]), or
//!    another queue discipline ([`QdiscKind`]: strict priority, CHAP, fq_codel) at a
//!    constant or stepped rate, or served by an 802.11 sender ([`WifiRate`]) whose
//!    frames' airtime is both the service time and what the discipline is charged;
//! 2. a **loss process** (none, Bernoulli, Gilbert-Elliott, or the thesis's burst-loss
//!    Markov chain) applied to packets as they leave the bottleneck, so lost packets still
//!    used capacity;
//! 3. a **delay process** (constant or Gaussian clipped at 0) added to the survivors,
//!    which are delivered in delivery-time order, ties in arrival order.
//!
//! [`cellular`] generates cellular-like traces and [`TraceStats`] summarises any trace;
//! see `docs/traces.md`. [`wifi`] models the airtime of 802.11 frames, retries included;
//! see `docs/quality.md`.
//!
//! See `docs/links.md` for the models, the TOML format and how they are tested.

#![warn(missing_docs)]

mod bottleneck;
pub mod cdma;
pub mod cellular;
mod delay;
mod error;
mod limits;
mod link;
mod loss;
mod qdisc_link;
mod rate_steps;
mod spec;
mod trace;
mod trace_stats;
pub mod wifi;
mod wifi_rate;

pub use error::{CellularError, LinkError, TraceError};
pub use horde_qdisc::{FlowKey, QdiscError, QdiscKind};
pub use limits::{MAX_DELAY_MS, MAX_RATE_KBPS};
pub use rate_steps::RateStep;
pub use spec::{DelaySpec, LinkSpec, LossSpec, RateSpec};
pub use trace::{Trace, OPPORTUNITY_BYTES};
pub use trace_stats::{TraceStats, BIN_MS, GAP_MS};
pub use wifi_rate::{WifiPhy, WifiRate, WifiStation};

use std::time::Duration;

/// What the link did with an offered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted; it will be delivered or lost by the loss process later.
    Queued,
    /// Dropped at the tail because the buffer was full.
    QueueFull,
}

/// A packet leaving the link at `at`. `id` is the caller's handle for the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// The id given to [`Link::enqueue`].
    pub id: u64,
    /// When the packet comes out of the link.
    pub at: Duration,
}

/// Counters every link keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets given to [`Link::enqueue`].
    pub offered: u64,
    /// Packets refused with [`Verdict::QueueFull`].
    pub queue_drops: u64,
    /// Packets dropped by the loss process (counted once the link is polled at or after
    /// the time they left the bottleneck).
    pub lost: u64,
    /// Packets handed out by [`Link::deliver`].
    pub delivered: u64,
    /// Their total size in bytes.
    pub bytes_delivered: u64,
}

/// One direction of one emulated or simulated channel.
pub trait Link: Send {
    /// Offer a packet of `size` bytes at time `now` (monotonically non-decreasing).
    fn enqueue(&mut self, now: Duration, id: u64, size: u32) -> Verdict;
    /// [`Link::enqueue`] for a packet of `flow`. Only a link whose queue tells flows
    /// apart (a `qdisc` other than FIFO) looks at `flow`; the others ignore it.
    fn enqueue_flow(&mut self, now: Duration, id: u64, size: u32, flow: &FlowKey) -> Verdict {
        let _ = flow;
        self.enqueue(now, id, size)
    }
    /// The earliest time at which a packet will come out, if any is pending.
    fn next_delivery(&self) -> Option<Duration>;
    /// Move every packet whose delivery time is `<= now` into `out`, in delivery order.
    fn deliver(&mut self, now: Duration, out: &mut Vec<Delivery>);
    /// [`Link::deliver`], and also push into `lost` the ids of packets the loss process
    /// dropped that have left the bottleneck by `now` (those counted in
    /// [`LinkStats::lost`] by this call), so a caller holding their payloads can let go.
    /// Links that never lose a queued packet need not override it.
    fn deliver_and_report_losses(
        &mut self,
        now: Duration,
        out: &mut Vec<Delivery>,
        lost: &mut Vec<u64>,
    ) {
        let _ = lost;
        self.deliver(now, out);
    }
    /// Counters so far.
    fn stats(&self) -> LinkStats;
    /// For links whose rate is set by a scheduler during the run (the CDMA model), the
    /// mean rate assigned so far in kbit/s; `None` for links with a rate fixed in
    /// advance.
    fn mean_assigned_kbps(&self) -> Option<f64> {
        None
    }
}
