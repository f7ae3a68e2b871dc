//! Queue disciplines behind one trait, for wherever packets wait: a link's bottleneck, an
//! access point's downstream queue, a tunnel's ingress.
//!
//! - [`Fifo`]: drop-tail, the baseline;
//! - [`Spq`]: strict priority over configured classes, FIFO within a class;
//! - [`Chap`]: credit-based queueing (a credit per 5-tuple flow in channel time, served
//!   most-credits-first, charged after the send, boosted by `α' = α/2 + I`);
//! - [`FqCodel`]: RFC 8290, deficit round robin over hashed flow queues with CoDel on each.
//!
//! A [`Qdisc`] is sans-IO and clock-free: the caller passes the time, and collects dropped
//! packets in a buffer it reuses, so a queue in steady state allocates nothing per packet.
//! See `docs/qdisc.md` for the disciplines and the decisions taken where the CHAP
//! dissertation leaves a choice open.

#![warn(missing_docs)]

mod chap;
mod codel;
mod error;
mod fifo;
mod flow;
mod fq_codel;
mod heap;
mod kind;
mod limit;
mod spq;

pub use chap::{Chap, ChapConfig, FlowKeyMode};
pub use codel::CodelParams;
pub use error::QdiscError;
pub use fifo::Fifo;
pub use flow::{FlowKey, Packet, PROTO_TCP, PROTO_UDP};
pub use fq_codel::{FqCodel, FqCodelConfig};
pub use kind::QdiscKind;
pub use limit::Limit;
pub use spq::{Spq, SpqConfig, SpqRule};

use std::time::Duration;

/// A queue discipline: where packets wait and in which order they leave.
///
/// Times are [`Duration`]s since an arbitrary origin and must not decrease from one call to
/// the next. A packet's arrival time is its enqueue time.
pub trait Qdisc<T> {
    /// Queue `packet` at `packet.arrival`. Packets dropped to make room (the arriving one
    /// or others, depending on the discipline) are pushed into `drops`.
    fn enqueue(&mut self, packet: Packet<T>, drops: &mut Vec<Packet<T>>);

    /// The next packet to send at `now`, if any. Packets the discipline drops on the way
    /// (CoDel) are pushed into `drops`.
    fn dequeue(&mut self, now: Duration, drops: &mut Vec<Packet<T>>) -> Option<Packet<T>>;

    /// Report that a packet of `flow` that was dequeued took `airtime` of channel time,
    /// retries and failed attempts included. Only credit-based disciplines use it.
    fn charge(&mut self, flow: &FlowKey, airtime: Duration) {
        let _ = (flow, airtime);
    }

    /// Packets queued.
    fn len(&self) -> usize;

    /// Bytes queued.
    fn bytes(&self) -> u64;

    /// Whether nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
