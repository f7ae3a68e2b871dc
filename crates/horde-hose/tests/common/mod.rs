//! Builders for small hand-made scheduling inputs.
#![allow(dead_code)]

use horde_policy::{
    AduView, ChannelId, Fields, HistoryEntry, Outcome, TxSlot, Value, CORRELATION_SPAN,
};

/// Burst correlation used by the hand-made slots: 1.0 for adjacent slots, decaying.
pub const BURST: [f32; CORRELATION_SPAN] = [1.0, 0.8, 0.5, 0.3, 0.2, 0.1, 0.05, 0.0];

pub fn slot(channel: u8, sequence: u64, loss: f64, rtt: f64, wait: f64) -> TxSlot {
    TxSlot {
        channel: ChannelId::new(channel),
        sequence,
        loss_probability: loss,
        expected_rtt_ms: rtt,
        wait_ms: wait,
        max_size: 1500,
        cost_per_kb: 0.0,
        phantom: if wait > 0.0 { Some(0.5) } else { None },
        burst_correlation: BURST,
    }
}

pub fn adu(id: u64, stream: u32, seq: u64, queue_delay_ms: i64) -> AduView {
    AduView {
        id,
        stream_id: stream,
        stream_seq: seq,
        length: 1000,
        queue_delay_ms,
        fields: Fields::new(),
    }
}

pub fn with(mut a: AduView, name: &str, v: impl Into<Value>) -> AduView {
    a.fields.set(name, v.into());
    a
}

pub fn sent(a: AduView, slot: TxSlot, outcome: Outcome) -> HistoryEntry {
    HistoryEntry {
        adu: a,
        slot,
        outcome,
    }
}

/// An owned scheduling input (the library's synthetic-instance type).
pub type Case = horde_policy::synth::Instance;

/// Test-only checks on a [`Case`].
pub trait CaseExt {
    /// Utility of `assignment` under every objective, computed both ways (whole and
    /// prepared term by term), which must agree.
    fn utility(&self, assignment: &[Option<usize>]) -> i64;
}

impl CaseExt for Case {
    fn utility(&self, assignment: &[Option<usize>]) -> i64 {
        let input = self.input();
        let whole = self.objectives.utility(&input, &assignment.to_vec());
        let mut prepared = self.objectives.prepare(&input);
        assert_eq!(prepared.utility(assignment), whole, "prepared != whole");
        whole
    }
}
