//! The scheduling cycle's working space, kept by the sender between cycles so that a
//! cycle at steady state does not touch the heap.

use horde_policy::{AduView, Allocator, Assignment, Demand, StreamStats, TxSlot};

use super::PendingAdu;
use crate::channel::SentAdu;
use crate::packing::Packer;

/// Working space of the scheduling cycle, reused so that a cycle at steady state does
/// not touch the heap.
#[derive(Debug, Default)]
pub(super) struct CycleScratch {
    pub(super) slots: Vec<TxSlot>,
    pub(super) adus: Vec<AduView>,
    pub(super) assignment: Assignment,
    /// Per collected ADU: whether the fairness pass lets it wait for a phantom slot.
    pub(super) may_wait: Vec<bool>,
    /// Per channel: real slots offered this cycle.
    pub(super) real_counts: Vec<usize>,
    /// Per channel: how many of its real slots are open now (the rest are due later in
    /// a periodic cycle's period).
    pub(super) open_counts: Vec<usize>,
    /// Per real slot: whether only latency-bound streams' ADUs may take it (one of a
    /// bounded channel's reserved slots).
    pub(super) reserved: Vec<bool>,
    /// Per channel: the wait, in seconds, after its last slot of a periodic cycle's
    /// period, where its phantom slots begin.
    pub(super) phantom_starts: Vec<Option<f64>>,
    /// Per packet of a periodic cycle: (channel, first collected ADU, packet), sorted
    /// to rank each channel's packets.
    pub(super) order: Vec<(usize, usize, usize)>,
    /// Per packet of a periodic cycle, in the packer's order: which of its channel's
    /// slot times it takes.
    pub(super) ranks: Vec<usize>,
    /// The fairness pass over a periodic cycle's slots: the slots in the order it sees
    /// them (open now first), where each original slot went, and the assignment in that
    /// order.
    pub(super) fair_order: Vec<usize>,
    pub(super) fair_position: Vec<usize>,
    pub(super) fair_slots: Vec<TxSlot>,
    pub(super) fair_assignment: Assignment,
    pub(super) streams: Vec<StreamStats>,
    pub(super) demands: Vec<Demand>,
    pub(super) allocations: Vec<f64>,
    pub(super) allocator: Allocator,
    /// Per stream with ADUs waiting, in collection priority order.
    pub(super) cursors: Vec<StreamCursor>,
    pub(super) packer: Packer,
    /// The ADUs of the packet being sent.
    pub(super) sent_adus: Vec<SentAdu>,
    pub(super) packet_adus: Vec<PendingAdu>,
}

/// A stream's place in [`Sender::collect_adus`].
#[derive(Debug, Clone, Copy)]
pub(super) struct StreamCursor {
    pub(super) id: u32,
    /// Position among the streams with ADUs waiting, by id.
    pub(super) index: usize,
    pub(super) owed_secs: f64,
    /// ADUs taken from the front of its queue so far.
    pub(super) taken: usize,
    pub(super) credit: f64,
    pub(super) owed: bool,
    pub(super) patient: bool,
}
