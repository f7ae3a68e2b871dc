//! hose programs from untrusted bytes: parsing, checking and, when a program
//! compiles, evaluating it must never panic.
//!
//! Seed it with `objectives/*.hose` so that it starts from programs that compile, and
//! run it without AddressSanitizer (`cargo fuzz run -O -s none hose_compile`):
//! horde-hose forbids unsafe code, and under ASan the pest parser dominates the cost
//! of every input (`docs/fuzzing.md`).
#![no_main]

use std::sync::Arc;

use horde_policy::{
    AduView, ChannelId, Fields, HistoryEntry, Objective, ObjectiveSet, Outcome, ScheduleInput, TxSlot,
};
use libfuzzer_sys::fuzz_target;

fn slot(channel: u8, sequence: u64, loss: f64, rtt: f64) -> TxSlot {
    TxSlot {
        channel: ChannelId::new(channel),
        sequence,
        loss_probability: loss,
        expected_rtt_ms: rtt,
        wait_ms: 0.0,
        max_size: 1500,
        cost_per_kb: 0.0,
        phantom: None,
        burst_correlation: [0.9, 0.5, 0.2, 0.1, 0.0, 0.0, 0.0, 0.0],
    }
}

fn adu(id: u64, stream: u32) -> AduView {
    let mut fields = Fields::new();
    fields.set("frame_type", "I".into());
    fields.set("prio", 3i64.into());
    AduView {
        id,
        stream_id: stream,
        stream_seq: id,
        length: 500,
        queue_delay_ms: 10,
        fields,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(objective) = horde_hose::compile(src) else {
        return;
    };
    let slots = [slot(1, 5, 0.05, 300.0), slot(2, 0, 0.2, 800.0)];
    let adus = [adu(0, 0), adu(1, 3)];
    let history = [HistoryEntry {
        adu: adu(2, 0),
        slot: slot(1, 4, 0.05, 300.0),
        outcome: Outcome::Lost,
    }];
    let mut set = ObjectiveSet::new();
    set.inject(Arc::new(objective.clone()));
    let input = ScheduleInput {
        slots: &slots,
        adus: &adus,
        history: &history,
        streams: &[],
        objectives: &set,
    };
    for a in [vec![Some(0), Some(1)], vec![Some(1), None]] {
        let _ = objective.utility(&input, &a);
    }
});
