//! Synthetic scheduling instances for tests, benchmarks and reports: channels with
//! thesis-like latency, loss and burst correlation, real slots now and phantom
//! slots to come, ADUs of several streams, and a recent transmission history.
//! Built with the `testing` feature; instances with the thesis objectives are
//! `horde_hose::synth`.

use std::sync::Arc;

use rand::seq::SliceRandom;
use rand::Rng;

use crate::adu::{AduView, Fields, HistoryEntry, Outcome, StreamStats};
use crate::objective::{Objective, ObjectiveSet, ScheduleInput};
use crate::slot::{TxSlot, CORRELATION_SPAN};
use crate::ChannelId;

/// An owned scheduling input.
#[derive(Debug)]
pub struct Instance {
    /// Real slots first, then phantoms.
    pub slots: Vec<TxSlot>,
    /// The candidate ADUs.
    pub adus: Vec<AduView>,
    /// Past transmissions the objectives see.
    pub history: Vec<HistoryEntry>,
    /// One entry per stream.
    pub streams: Vec<StreamStats>,
    /// The objectives to schedule for.
    pub objectives: ObjectiveSet,
}

impl Instance {
    /// Slots and ADUs with no history, stream statistics or objectives yet.
    pub fn new(slots: Vec<TxSlot>, adus: Vec<AduView>) -> Self {
        Instance {
            slots,
            adus,
            history: Vec::new(),
            streams: Vec::new(),
            objectives: ObjectiveSet::new(),
        }
    }

    /// Replace the history.
    pub fn history(mut self, h: Vec<HistoryEntry>) -> Self {
        self.history = h;
        self
    }

    /// Add an objective.
    pub fn objective(mut self, o: impl Objective + 'static) -> Self {
        self.objectives.inject(Arc::new(o));
        self
    }

    /// The instance as a scheduler's input, borrowing from it.
    pub fn input(&self) -> ScheduleInput<'_> {
        ScheduleInput {
            slots: &self.slots,
            adus: &self.adus,
            history: &self.history,
            streams: &self.streams,
            objectives: &self.objectives,
        }
    }
}

/// How big an instance is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// How many channels the slots are spread over (at most 256).
    pub channels: usize,
    /// Real slots.
    pub real: usize,
    /// Phantom slots.
    pub phantom: usize,
    /// Candidate ADUs.
    pub adus: usize,
    /// History entries.
    pub history: usize,
    /// Streams the ADUs belong to.
    pub streams: Vec<u32>,
}

impl Shape {
    /// The benchmark cycle: 4 channels, 32 real and 32 phantom slots, 64 ADUs of
    /// streams 0 to 3, 16 history entries.
    pub fn bench() -> Shape {
        Shape {
            channels: 4,
            real: 32,
            phantom: 32,
            adus: 64,
            history: 16,
            streams: vec![0, 1, 2, 3],
        }
    }
}

struct Channel {
    rtt: f64,
    loss: f64,
    period: f64,
    burst: [f32; CORRELATION_SPAN],
    next_seq: u64,
    past_seq: u64,
    phantoms: u32,
}

fn channel<R: Rng + ?Sized>(rng: &mut R) -> Channel {
    let base: f32 = rng.gen_range(0.3..1.0);
    let decay: f32 = rng.gen_range(0.3..0.8);
    let mut burst = [0.0; CORRELATION_SPAN];
    let mut c = base;
    for b in &mut burst {
        *b = if c < 0.02 { 0.0 } else { c };
        c *= decay;
    }
    let seq = rng.gen_range(100..1000);
    Channel {
        rtt: rng.gen_range(150.0..1000.0),
        loss: rng.gen_range(0.0..0.2),
        period: rng.gen_range(20.0..200.0),
        burst,
        next_seq: seq,
        past_seq: seq,
        phantoms: 0,
    }
}

fn slot(c: &mut Channel, channel: ChannelId, phantom: bool) -> TxSlot {
    let seq = c.next_seq;
    c.next_seq += 1;
    let (wait, confidence) = if phantom {
        c.phantoms += 1;
        let k = f64::from(c.phantoms);
        (k * c.period, Some(0.9f32.powi(c.phantoms as i32)))
    } else {
        (0.0, None)
    };
    TxSlot {
        channel,
        sequence: seq,
        loss_probability: c.loss,
        expected_rtt_ms: c.rtt,
        wait_ms: wait,
        max_size: 1500,
        cost_per_kb: 0.0,
        phantom: confidence,
        burst_correlation: c.burst,
    }
}

/// A random instance of the given shape with the given objectives.
pub fn instance<R: Rng + ?Sized>(
    rng: &mut R,
    shape: &Shape,
    objectives: Vec<Arc<dyn Objective>>,
) -> Instance {
    // One channel per id, so at most `ChannelId::COUNT`.
    let nc = shape.channels.clamp(1, ChannelId::COUNT);
    let ids: Vec<ChannelId> = ChannelId::all().take(nc).collect();
    let mut channels: Vec<Channel> = (0..nc).map(|_| channel(rng)).collect();
    let mut slots = Vec::with_capacity(shape.real + shape.phantom);
    for i in 0..shape.real {
        slots.push(slot(&mut channels[i % nc], ids[i % nc], false));
    }
    for i in 0..shape.phantom {
        slots.push(slot(&mut channels[i % nc], ids[i % nc], true));
    }
    let streams = if shape.streams.is_empty() {
        vec![0]
    } else {
        shape.streams.clone()
    };
    let mut seq = vec![0u64; streams.len()];
    let mut next_adu = |rng: &mut R, id: u64| {
        let k = rng.gen_range(0..streams.len());
        let mut fields = Fields::new();
        let frame = *["I", "P", "P", "B", "B"].choose(rng).unwrap_or(&"P");
        fields.set("frame_type", frame.into());
        let a = AduView {
            id,
            stream_id: streams[k],
            stream_seq: seq[k],
            length: rng.gen_range(200..1400),
            queue_delay_ms: rng.gen_range(0..200),
            fields,
        };
        seq[k] += 1;
        a
    };
    let mut history = Vec::with_capacity(shape.history);
    for i in 0..shape.history {
        let adu = next_adu(rng, 1_000_000 + i as u64);
        let ci = rng.gen_range(0..nc);
        let c = &mut channels[ci];
        c.past_seq = c.past_seq.saturating_sub(1);
        let mut s = slot(c, ids[ci], false);
        c.next_seq -= 1;
        s.sequence = c.past_seq;
        let outcome = match rng.gen_range(0..20) {
            0..=9 => Outcome::Acked {
                latency_ms: c.rtt * rng.gen_range(0.8..1.2) + adu.queue_delay_ms as f64,
            },
            10..=12 => Outcome::Lost,
            _ => Outcome::Pending,
        };
        history.push(HistoryEntry {
            adu,
            slot: s,
            outcome,
        });
    }
    let adus = (0..shape.adus).map(|i| next_adu(rng, i as u64)).collect();
    let stats = shape
        .streams
        .iter()
        .map(|&id| StreamStats {
            stream_id: id,
            latency_ave_ms: rng.gen_range(200.0..900.0),
            latency_sdev_ms: rng.gen_range(10.0..200.0),
            loss_rate_pct: rng.gen_range(0.0..15.0),
        })
        .collect();
    let mut set = ObjectiveSet::new();
    for o in objectives {
        set.inject(o);
    }
    Instance {
        slots,
        adus,
        history,
        streams: stats,
        objectives: set,
    }
}
