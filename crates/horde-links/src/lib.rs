//! Link models shared by the simulator (virtual time) and the emulator (real time).
//!
//! A [`Link`] is one direction of one channel. It is driven from outside: the caller
//! offers packets with [`Link::enqueue`] at a time `now`, asks [`Link::next_delivery`]
//! when the next packet leaves, and collects packets with [`Link::deliver`]. Time is a
//! [`Duration`] since the start of the run, so the same model runs unchanged under a
//! virtual clock and a wall clock. All randomness comes from a seeded RNG owned by the
//! link, so a link built from the same spec and seed behaves identically.

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
    pub id: u64,
    pub at: Duration,
}

/// Counters every link keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub offered: u64,
    pub queue_drops: u64,
    pub lost: u64,
    pub delivered: u64,
    pub bytes_delivered: u64,
}

/// One direction of one emulated or simulated channel.
pub trait Link: Send {
    /// Offer a packet of `size` bytes at time `now` (monotonically non-decreasing).
    fn enqueue(&mut self, now: Duration, id: u64, size: u32) -> Verdict;
    /// The earliest time at which a packet will come out, if any is pending.
    fn next_delivery(&self) -> Option<Duration>;
    /// Move every packet whose delivery time is `<= now` into `out`, in delivery order.
    fn deliver(&mut self, now: Duration, out: &mut Vec<Delivery>);
    /// Counters so far.
    fn stats(&self) -> LinkStats;
}
