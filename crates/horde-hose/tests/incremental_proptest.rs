//! Contexts kept across cycles give what a full rebuild gives: the same prepared
//! terms and the same schedules, on queues that change between cycles (ADUs sent
//! and arriving, the history shifting, slots and channels redrawn).

use std::collections::VecDeque;
use std::sync::Arc;

use horde_hose::synth::{self, Shape};
use horde_policy::{
    AduView, Assignment, Directed, Fields, HistoryEntry, Objective, ObjectiveSet, PreparedCache,
    PreparedObjective, ScheduleInput, Scheduler,
};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The streams the thesis objectives select, and one none selects.
const STREAMS: [u32; 8] = [0, 2, 3, 4, 7, 17, 937, 1];

/// What happens between two cycles.
#[derive(Debug, Clone)]
struct Step {
    /// ADUs sent from the head of the queue (they join the history).
    sent: usize,
    /// Arrivals, by index into the streams in play; with `same_streams`, one
    /// arrival per ADU sent, of its stream, instead (the usual steady state, which
    /// keeps the candidates' shape).
    arrivals: Vec<usize>,
    same_streams: bool,
    /// Rotate the queue by this much (a different stream collected first).
    rotate: usize,
    /// Slots and channels of the cycle.
    channels: usize,
    real: usize,
    phantom: usize,
    /// Draws the slots, the history's slots and outcomes, and queueing delays.
    seed: u64,
}

fn step(streams: usize) -> impl Strategy<Value = Step> {
    (
        0usize..6,
        prop::collection::vec(0..streams, 0..6),
        prop::bool::weighted(0.6),
        prop::sample::select(vec![0usize, 0, 0, 1, 2]),
        1usize..=4,
        1usize..=12,
        0usize..=8,
        any::<u64>(),
    )
        .prop_map(
            |(sent, arrivals, same_streams, rotate, channels, real, phantom, seed)| Step {
                sent,
                arrivals,
                same_streams,
                rotate,
                channels,
                real,
                phantom,
                seed,
            },
        )
}

/// A sender's queue and history in the scheduler's terms.
struct Queue {
    streams: Vec<u32>,
    adus: Vec<AduView>,
    sent: VecDeque<AduView>,
    history_len: usize,
    next_id: u64,
    seq: Vec<u64>,
}

impl Queue {
    fn new(streams: Vec<u32>, queued: usize, history_len: usize, rng: &mut ChaCha8Rng) -> Self {
        let mut q = Queue {
            seq: vec![0; streams.len()],
            streams,
            adus: Vec::new(),
            sent: VecDeque::new(),
            history_len,
            next_id: 0,
        };
        for _ in 0..queued {
            let k = rng.gen_range(0..q.streams.len());
            q.arrive(k, rng);
        }
        q
    }

    fn arrive(&mut self, k: usize, rng: &mut ChaCha8Rng) {
        let mut fields = Fields::new();
        let frame = ["I", "P", "B"][rng.gen_range(0..3)];
        fields.set("frame_type", frame.into());
        self.adus.push(AduView {
            id: self.next_id,
            stream_id: self.streams[k],
            stream_seq: self.seq[k],
            length: rng.gen_range(200..1400),
            queue_delay_ms: 0,
            fields,
        });
        self.next_id += 1;
        self.seq[k] += 1;
    }

    fn advance(&mut self, s: &Step, rng: &mut ChaCha8Rng) {
        let sent = s.sent.min(self.adus.len());
        let gone: Vec<AduView> = self.adus.drain(..sent).collect();
        for a in &gone {
            let k = self.streams.iter().position(|&x| x == a.stream_id).unwrap();
            if s.same_streams {
                self.arrive(k, rng);
            }
        }
        if !s.same_streams {
            for &k in &s.arrivals {
                self.arrive(k, rng);
            }
        }
        for a in gone {
            self.sent.push_back(a);
            if self.sent.len() > self.history_len {
                self.sent.pop_front();
            }
        }
        if !self.adus.is_empty() {
            let r = s.rotate % self.adus.len();
            self.adus.rotate_left(r);
        }
        for a in &mut self.adus {
            a.queue_delay_ms += rng.gen_range(0..30);
        }
    }

    /// This cycle's slots (from the step) with the queue and the history of ADUs sent.
    fn instance(&self, s: &Step) -> synth::Instance {
        let mut rng = ChaCha8Rng::seed_from_u64(s.seed);
        let shape = Shape {
            channels: s.channels,
            real: s.real,
            phantom: s.phantom,
            adus: 0,
            history: self.sent.len(),
            streams: self.streams.clone(),
        };
        let mut inst = synth::instance(&mut rng, &shape, Vec::new());
        inst.adus = self.adus.clone();
        for (h, a) in inst.history.iter_mut().zip(&self.sent) {
            *h = HistoryEntry {
                adu: a.clone(),
                ..h.clone()
            };
        }
        inst
    }
}

fn objectives(names: &[&str]) -> ObjectiveSet {
    let mut set = ObjectiveSet::new();
    for name in names {
        set.inject(Arc::new(horde_hose::thesis(name).unwrap()) as Arc<dyn Objective>);
    }
    set
}

/// The objective sets tried: the benchmark's X1-X4 (every context a product of
/// stream filters, so kept across cycles), and every thesis objective (string
/// fields, stream windows and consecutive ADUs, which are enumerated anew).
fn sets() -> [ObjectiveSet; 2] {
    let all: Vec<&str> = horde_hose::THESIS.iter().map(|(n, _, _)| *n).collect();
    [objectives(&["x1", "x2", "x3", "x4"]), objectives(&all)]
}

/// Everything a scheduler reads of a prepared objective, and its values under
/// `assignment`.
fn describe(p: &mut dyn PreparedObjective, assignment: &Assignment) -> Vec<String> {
    let mut rows = Vec::new();
    for t in 0..p.terms() {
        let value = p.value(t, assignment, true);
        rows.push(format!(
            "{t}: {:?} {:?} {:?} {:?} {:?} {value}",
            p.members(t),
            p.reads(t),
            p.bounds(t),
            p.pair_kernel(t),
            p.solo_kernel(t),
        ));
    }
    rows.push(format!(
        "solo kernels {}, evaluations {}",
        p.solo_kernels(),
        p.evaluations()
    ));
    rows
}

fn run(streams: usize, queued: usize, history: usize, steps: &[Step], set: &ObjectiveSet) {
    let mut rng = ChaCha8Rng::seed_from_u64(queued as u64 * 31 + history as u64);
    let mut queue = Queue::new(STREAMS[..streams].to_vec(), queued, history, &mut rng);
    let (mut incremental, mut full) = (Directed::default(), Directed::full_rebuild());
    let (mut kept, mut rebuilt) = (PreparedCache::default(), PreparedCache::default());
    rebuilt.set_full_rebuild(true);
    let (mut a, mut b) = (Assignment::new(), Assignment::new());
    for (cycle, s) in steps.iter().enumerate() {
        queue.advance(s, &mut rng);
        let inst = queue.instance(s);
        let input = ScheduleInput {
            objectives: set,
            ..inst.input()
        };
        let seed = s.seed ^ cycle as u64;
        let sa = incremental.schedule(&input, &mut ChaCha8Rng::seed_from_u64(seed), &mut a);
        let sb = full.schedule(&input, &mut ChaCha8Rng::seed_from_u64(seed), &mut b);
        assert_eq!(a, b, "cycle {cycle}: the schedules differ");
        assert_eq!(sa, sb, "cycle {cycle}: the evaluations differ");
        let mut p = set.prepare_reusing(&input, &mut kept);
        let mut q = set.prepare_reusing(&input, &mut rebuilt);
        for o in 0..set.len() {
            assert_eq!(
                describe(p.get(o), &a),
                describe(q.get(o), &a),
                "cycle {cycle}, objective {o}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn incremental_and_full_scheduling_agree(
        streams in 1usize..=STREAMS.len(),
        queued in 0usize..24,
        history in 0usize..10,
        steps in prop::collection::vec(step(STREAMS.len()), 1..10),
        which in 0usize..2,
    ) {
        // Arrivals name streams by index; fold them into the streams in play.
        let steps: Vec<Step> = steps
            .into_iter()
            .map(|mut s| {
                for k in &mut s.arrivals {
                    *k %= streams;
                }
                s
            })
            .collect();
        run(streams, queued, history, &steps, &sets()[which]);
    }
}
