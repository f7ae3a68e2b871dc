//! Schedulers: valid assignments, how many ADUs they place, and how good their
//! schedules are against random-walk and against the exhaustive optimum.

use std::sync::Arc;

use horde_hose::synth::{self, Instance, Shape};
use horde_policy::scheduler::oracle;
use horde_policy::{
    assignment_is_valid, Assignment, Directed, Objective, ObjectiveSet, PreparedObjective,
    RandomWalk, RandomizedRoundRobin, ScheduleInput, Scheduler, SlotReads,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn schedulers() -> Vec<Box<dyn Scheduler>> {
    vec![
        Box::new(RandomizedRoundRobin::default()),
        Box::new(RandomWalk::default()),
        Box::new(Directed::default()),
    ]
}

fn thesis(names: &[&str]) -> Vec<Arc<dyn Objective>> {
    names
        .iter()
        .map(|n| Arc::new(horde_hose::thesis(n).unwrap()) as Arc<dyn Objective>)
        .collect()
}

/// A medium instance with mixed slot sizes, so some ADUs fit only some slots.
fn mixed_sizes(rng: &mut ChaCha8Rng) -> Instance {
    let shape = Shape {
        channels: 3,
        real: 8,
        phantom: 6,
        adus: 18,
        history: 6,
        streams: vec![0, 1, 3, 17],
    };
    let mut inst = synth::instance(rng, &shape, thesis(&["x1", "x2", "x4", "y1"]));
    for s in &mut inst.slots {
        s.max_size = if rng.gen_bool(0.5) { 600 } else { 1500 };
    }
    inst
}

fn placed(a: &Assignment) -> usize {
    a.iter().flatten().count()
}

#[test]
fn every_scheduler_returns_valid_assignments() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut out = Assignment::new();
    for round in 0..40 {
        let inst = match round % 3 {
            0 => synth::small(&mut rng),
            1 => mixed_sizes(&mut rng),
            _ => synth::instance(
                &mut rng,
                &Shape {
                    channels: 2,
                    real: 3,
                    phantom: 2,
                    adus: 9,
                    history: 2,
                    streams: vec![0, 3],
                },
                thesis(&["x1", "x4", "b-1"]),
            ),
        };
        let input = inst.input();
        for s in &mut schedulers() {
            s.schedule(&input, &mut rng, &mut out);
            assert!(
                assignment_is_valid(&input, &out),
                "{} round {round}",
                s.name()
            );
        }
    }
}

#[test]
fn objective_driven_schedulers_place_as_many_adus_as_possible() {
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let mut out = Assignment::new();
    for _ in 0..20 {
        let inst = mixed_sizes(&mut rng);
        let input = inst.input();
        // Reference: the most ADUs any valid assignment places.
        let most = max_placeable(&input);
        Directed::default().schedule(&input, &mut rng, &mut out);
        assert_eq!(placed(&out), most);
    }
    for _ in 0..40 {
        let inst = synth::small(&mut rng);
        let input = inst.input();
        let want = input.adus.len().min(input.slots.len());
        for s in [
            &mut RandomWalk::default() as &mut dyn Scheduler,
            &mut Directed::default(),
        ] {
            s.schedule(&input, &mut rng, &mut out);
            assert_eq!(placed(&out), want, "{}", s.name());
        }
    }
}

/// Size of a maximum matching of ADUs to slots they fit (augmenting paths).
fn max_placeable(input: &ScheduleInput<'_>) -> usize {
    fn augment(
        input: &ScheduleInput<'_>,
        a: usize,
        own: &mut [Option<usize>],
        seen: &mut [bool],
    ) -> bool {
        for s in 0..input.slots.len() {
            if !seen[s] && input.slots[s].max_size >= input.adus[a].length {
                seen[s] = true;
                let free = match own[s] {
                    None => true,
                    Some(b) => augment(input, b, own, seen),
                };
                if free {
                    own[s] = Some(a);
                    return true;
                }
            }
        }
        false
    }
    let mut own = vec![None; input.slots.len()];
    (0..input.adus.len())
        .filter(|&a| augment(input, a, &mut own, &mut vec![false; input.slots.len()]))
        .count()
}

#[test]
fn without_objectives_directed_and_random_walk_spread_over_all_slots() {
    // Randomized round-robin over real and phantom slots: each of 6 slots gets
    // one of 3 ADUs half the time.
    let inst = synth::instance(
        &mut ChaCha8Rng::seed_from_u64(3),
        &Shape {
            channels: 2,
            real: 3,
            phantom: 3,
            adus: 3,
            history: 0,
            streams: vec![1],
        },
        Vec::new(),
    );
    let input = inst.input();
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut out = Assignment::new();
    for s in [
        &mut RandomWalk::default() as &mut dyn Scheduler,
        &mut Directed::default(),
    ] {
        let mut used = [0u32; 6];
        let runs = 3000;
        for _ in 0..runs {
            let stats = s.schedule(&input, &mut rng, &mut out);
            assert_eq!(stats.evaluations, 0);
            for slot in out.iter().flatten() {
                used[*slot] += 1;
            }
        }
        for u in used {
            let share = f64::from(u) / f64::from(runs);
            assert!((share - 0.5).abs() < 0.06, "{}: {used:?}", s.name());
        }
    }
}

#[test]
fn prepared_terms_add_up_to_the_objective_utility() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut out = Assignment::new();
    for _ in 0..30 {
        let inst = synth::small(&mut rng);
        let input = inst.input();
        let mut prepared = inst.objectives.prepare(&input);
        for _ in 0..5 {
            RandomWalk::new(1).schedule(&input, &mut rng, &mut out);
            assert_eq!(
                prepared.utility(&out),
                inst.objectives.utility(&input, &out)
            );
        }
    }
}

#[test]
fn caching_changes_evaluations_not_results() {
    let inst = synth::bench(&mut ChaCha8Rng::seed_from_u64(1));
    let input = inst.input();
    let (mut a, mut b) = (Assignment::new(), Assignment::new());
    let plain = RandomWalk::new(5).schedule(&input, &mut ChaCha8Rng::seed_from_u64(9), &mut a);
    let mut cached = RandomWalk::new(5);
    cached.cached = true;
    let fast = cached.schedule(&input, &mut ChaCha8Rng::seed_from_u64(9), &mut b);
    assert_eq!(a, b);
    assert!(fast.evaluations < plain.evaluations);
}

#[test]
fn single_adu_objectives_are_scheduled_optimally() {
    // Objectives over one ADU each decompose into the utility matrix, which the
    // assignment solver optimises exactly.
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let mut out = Assignment::new();
    let mut d = Directed::default();
    for round in 0..40 {
        let pick = ["x1", "x2", "x3", "fig7-4", "y3"];
        let k = rng.gen_range(1..=3);
        let names: Vec<&str> = (0..k).map(|_| pick[rng.gen_range(0..pick.len())]).collect();
        let m = rng.gen_range(2..=6);
        let real = rng.gen_range(1..=m);
        let shape = Shape {
            channels: rng.gen_range(1..=3),
            real,
            phantom: m - real,
            adus: rng.gen_range(1..=6),
            history: rng.gen_range(0..3),
            streams: vec![0, 1, 2, 3, 4, 937],
        };
        let inst = synth::instance(&mut rng, &shape, thesis(&names));
        let input = inst.input();
        let opt = oracle::exhaustive(&input).unwrap();
        d.schedule(&input, &mut rng, &mut out);
        let u = inst.objectives.utility(&input, &out);
        assert_eq!(u, opt.best, "round {round}: {names:?}");
    }
}

#[test]
fn directed_is_near_optimal_on_small_instances() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut out = Assignment::new();
    let (mut ours, mut walk) = (Vec::new(), Vec::new());
    let (mut our_evals, mut walk_evals) = (0, 0);
    let mut d = Directed::default();
    let mut rw = RandomWalk::default();
    for _ in 0..120 {
        let inst = synth::small(&mut rng);
        let input = inst.input();
        let opt = oracle::exhaustive(&input).unwrap();
        our_evals += d.schedule(&input, &mut rng, &mut out).evaluations;
        let u = inst.objectives.utility(&input, &out);
        assert!(u <= opt.best && u >= opt.worst);
        ours.push(opt.fraction(u));
        walk_evals += rw.schedule(&input, &mut rng, &mut out).evaluations;
        let u = inst.objectives.utility(&input, &out);
        assert!(u <= opt.best && u >= opt.worst);
        walk.push(opt.fraction(u));
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert!(mean(&ours) >= 0.98, "directed mean {}", mean(&ours));
    assert!(
        mean(&ours) >= mean(&walk),
        "{} < {}",
        mean(&ours),
        mean(&walk)
    );
    assert!(our_evals < walk_evals, "{our_evals} >= {walk_evals}");
}

#[test]
fn directed_beats_random_walk_with_fewer_evaluations_on_bench_cycles() {
    let mut out = Assignment::new();
    for seed in 0..3 {
        let inst = synth::bench(&mut ChaCha8Rng::seed_from_u64(seed));
        let input = inst.input();
        let mut rng = ChaCha8Rng::seed_from_u64(100 + seed);
        let walk = RandomWalk::default().schedule(&input, &mut rng, &mut out);
        let walk_u = inst.objectives.utility(&input, &out);
        let ours = Directed::default().schedule(&input, &mut rng, &mut out);
        let ours_u = inst.objectives.utility(&input, &out);
        assert!(ours_u > walk_u, "seed {seed}: {ours_u} <= {walk_u}");
        assert!(
            ours.evaluations < walk.evaluations,
            "seed {seed}: {} >= {}",
            ours.evaluations,
            walk.evaluations
        );
    }
}

#[test]
fn hand_written_objectives_work_with_every_scheduler() {
    /// Wants ADU 0 in the slot with the lowest expected RTT; no structure given.
    #[derive(Debug)]
    struct Fastest;
    impl Objective for Fastest {
        fn utility(&self, input: &ScheduleInput<'_>, a: &Assignment) -> i64 {
            let best = input
                .slots
                .iter()
                .map(|s| s.latency_ms())
                .min()
                .unwrap_or(0);
            match a.first().copied().flatten() {
                Some(s) if input.slots[s].latency_ms() == best => 10,
                _ => 0,
            }
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let mut out = Assignment::new();
    for _ in 0..20 {
        let mut inst = synth::small(&mut rng);
        inst.objectives = Default::default();
        inst.objectives.inject(Arc::new(Fastest));
        let input = inst.input();
        let opt = oracle::exhaustive(&input).unwrap();
        let stats = Directed::default().schedule(&input, &mut rng, &mut out);
        assert!(assignment_is_valid(&input, &out));
        assert_eq!(inst.objectives.utility(&input, &out), opt.best);
        assert!(stats.evaluations > 0);
    }
}

#[test]
fn oracle_counts_every_schedule() {
    // 3 ADUs, 4 slots, all fit: 4 * 3 * 2 = 24 schedules place all three.
    let inst = synth::instance(
        &mut ChaCha8Rng::seed_from_u64(2),
        &Shape {
            channels: 2,
            real: 2,
            phantom: 2,
            adus: 3,
            history: 0,
            streams: vec![0],
        },
        thesis(&["x4"]),
    );
    let opt = oracle::exhaustive(&inst.input()).unwrap();
    assert_eq!(opt.schedules, 24);
    assert!(opt.best >= opt.worst);
    assert_eq!(
        inst.objectives.utility(&inst.input(), &opt.assignment),
        opt.best
    );
    // Too big for exhaustive search.
    let big = synth::bench(&mut ChaCha8Rng::seed_from_u64(0));
    assert!(oracle::exhaustive(&big.input()).is_none());
}

mod hostile {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// NaN and infinite expectations, zero-sized slots and extreme queueing
        /// delays: every scheduler still returns a valid assignment.
        #[test]
        fn schedulers_survive_hostile_slots(
            seed in any::<u64>(),
            losses in prop::collection::vec(any::<f64>(), 8),
            rtts in prop::collection::vec(any::<f64>(), 8),
            sizes in prop::collection::vec(0u32..2000, 8),
            delays in prop::collection::vec(any::<i64>(), 8),
        ) {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut inst = synth::small(&mut rng);
            for (k, s) in inst.slots.iter_mut().enumerate() {
                s.loss_probability = losses[k % 8];
                s.expected_rtt_ms = rtts[k % 8];
                s.wait_ms = rtts[(k + 3) % 8];
                s.max_size = sizes[k % 8];
                s.burst_correlation[0] = losses[(k + 1) % 8] as f32;
            }
            for (k, a) in inst.adus.iter_mut().enumerate() {
                a.queue_delay_ms = delays[k % 8];
            }
            let input = inst.input();
            let mut out = Assignment::new();
            for s in &mut schedulers() {
                s.schedule(&input, &mut rng, &mut out);
                prop_assert!(assignment_is_valid(&input, &out), "{}", s.name());
            }
            if let Some(opt) = oracle::exhaustive(&input) {
                prop_assert!(opt.best >= opt.worst);
            }
        }
    }
}

#[test]
fn a_budget_per_open_member_only_improves_on_the_placement() {
    let mut out = Assignment::new();
    for seed in 0..3 {
        let inst = synth::bench(&mut ChaCha8Rng::seed_from_u64(seed));
        let input = inst.input();
        let utility_with = |per_member: Option<usize>, budget: usize, out: &mut Assignment| {
            let mut d = Directed::default();
            d.search_per_member = per_member;
            d.search_budget = budget;
            d.schedule(&input, &mut ChaCha8Rng::seed_from_u64(9), out);
            assert!(assignment_is_valid(&input, out));
            inst.objectives.utility(&input, out)
        };
        let placed = utility_with(None, 0, &mut out);
        let zero_share = utility_with(Some(0), 6_000, &mut out);
        let open = utility_with(Some(12), 6_000, &mut out);
        let full = utility_with(None, 6_000, &mut out);
        assert_eq!(zero_share, placed, "seed {seed}: no share, no search");
        assert!(open > placed, "seed {seed}: {open} <= {placed}");
        assert!(full >= open, "seed {seed}: {full} < {open}");
    }
}

/// The fast search (a budget of 1500, the ADUs with the most open utility first)
/// improves on the bare placement, stays within 5% of the default search's utility
/// (6000, random order) on the benchmark cycles, and repeats exactly for a seed.
#[test]
fn the_fast_search_keeps_near_the_default_utility_and_repeats() {
    let mut out = Assignment::new();
    let (mut placed, mut fast, mut default) = (0i64, 0i64, 0i64);
    for seed in 0..4 {
        let inst = synth::bench(&mut ChaCha8Rng::seed_from_u64(seed));
        let input = inst.input();
        let run = |mut d: Directed, out: &mut Assignment| {
            d.schedule(&input, &mut ChaCha8Rng::seed_from_u64(11), out);
            assert!(assignment_is_valid(&input, out));
            inst.objectives.utility(&input, out)
        };
        let mut off = Directed::fast();
        off.search_budget = 0;
        placed += run(off, &mut out);
        fast += run(Directed::fast(), &mut out);
        let first = out.clone();
        run(Directed::fast(), &mut out);
        assert_eq!(
            out, first,
            "seed {seed}: the same seed gives the same schedule"
        );
        default += run(Directed::default(), &mut out);
    }
    assert!(fast > placed, "{fast} <= {placed} (search off)");
    assert!(
        fast * 100 >= default * 95,
        "{fast} against {default} with the default search"
    );
}

/// Forwards everything to a hose objective except its solo kernels, so the
/// search scores those terms by calling the objective instead of from its table.
#[derive(Debug)]
struct WithoutSoloKernels(Arc<dyn Objective>);

struct PreparedWithoutSolo<'a>(Box<dyn PreparedObjective + 'a>);

impl PreparedObjective for PreparedWithoutSolo<'_> {
    fn terms(&self) -> usize {
        self.0.terms()
    }
    fn members(&self, term: usize) -> &[u32] {
        self.0.members(term)
    }
    fn reads(&self, term: usize) -> SlotReads {
        self.0.reads(term)
    }
    fn bounds(&self, term: usize) -> (i64, i64) {
        self.0.bounds(term)
    }
    fn pair_kernel(&self, term: usize) -> Option<u32> {
        self.0.pair_kernel(term)
    }
    fn value(&mut self, term: usize, assignment: &[Option<usize>], cached: bool) -> i64 {
        self.0.value(term, assignment, cached)
    }
    fn evaluations(&self) -> u64 {
        self.0.evaluations()
    }
}

impl Objective for WithoutSoloKernels {
    fn utility(&self, input: &ScheduleInput<'_>, assignment: &Assignment) -> i64 {
        self.0.utility(input, assignment)
    }
    fn prepare<'a>(&'a self, input: &ScheduleInput<'a>) -> Box<dyn PreparedObjective + 'a> {
        Box::new(PreparedWithoutSolo(self.0.prepare(input)))
    }
}

/// X4's pairs of a schedule ADU with a history ADU are solo kernels, which the
/// search reads from a per-slot table: the schedules must be exactly those of the
/// same search asking the objective every time (same moves, same budget spent).
#[test]
fn solo_kernel_tables_give_the_schedules_of_asking_the_objective() {
    let (mut a, mut b) = (Assignment::new(), Assignment::new());
    let mut solo_terms = 0;
    for seed in 0..6 {
        let inst = synth::bench(&mut ChaCha8Rng::seed_from_u64(seed));
        let input = inst.input();
        let mut plain = ObjectiveSet::new();
        for o in inst.objectives.iter() {
            plain.inject(Arc::new(WithoutSoloKernels(Arc::clone(o))));
        }
        let plain_input = ScheduleInput {
            objectives: &plain,
            ..input
        };
        let mut set = inst.objectives.prepare(&input);
        for p in set.iter_mut() {
            solo_terms += (0..p.terms())
                .filter(|&t| p.solo_kernel(t).is_some())
                .count();
        }
        Directed::default().schedule(&input, &mut ChaCha8Rng::seed_from_u64(seed), &mut a);
        Directed::default().schedule(&plain_input, &mut ChaCha8Rng::seed_from_u64(seed), &mut b);
        assert_eq!(a, b, "seed {seed}");
    }
    assert!(solo_terms > 0, "the bench cycles have solo-kernel terms");
}

/// Forwards everything to a hose objective except where its kernels are
/// constant, so the search computes every kernel value by asking the objective.
#[derive(Debug)]
struct WithoutOffChannelValues(Arc<dyn Objective>);

struct PreparedWithoutOffChannel<'a>(Box<dyn PreparedObjective + 'a>);

impl PreparedObjective for PreparedWithoutOffChannel<'_> {
    fn terms(&self) -> usize {
        self.0.terms()
    }
    fn members(&self, term: usize) -> &[u32] {
        self.0.members(term)
    }
    fn reads(&self, term: usize) -> SlotReads {
        self.0.reads(term)
    }
    fn bounds(&self, term: usize) -> (i64, i64) {
        self.0.bounds(term)
    }
    fn pair_kernel(&self, term: usize) -> Option<u32> {
        self.0.pair_kernel(term)
    }
    fn solo_kernel(&self, term: usize) -> Option<u32> {
        self.0.solo_kernel(term)
    }
    fn solo_kernels(&self) -> usize {
        self.0.solo_kernels()
    }
    fn value(&mut self, term: usize, assignment: &[Option<usize>], cached: bool) -> i64 {
        self.0.value(term, assignment, cached)
    }
    fn evaluations(&self) -> u64 {
        self.0.evaluations()
    }
}

impl Objective for WithoutOffChannelValues {
    fn utility(&self, input: &ScheduleInput<'_>, assignment: &Assignment) -> i64 {
        self.0.utility(input, assignment)
    }
    fn prepare<'a>(&'a self, input: &ScheduleInput<'a>) -> Box<dyn PreparedObjective + 'a> {
        Box::new(PreparedWithoutOffChannel(self.0.prepare(input)))
    }
}

/// X4's kernels are computed once for all slots off their channel (pairs on
/// different channels, history pairs off the history slot's channel): the
/// schedules must be exactly those of the same search computing each value.
#[test]
fn off_channel_kernel_values_give_the_schedules_of_asking_the_objective() {
    let (mut a, mut b) = (Assignment::new(), Assignment::new());
    let mut off_channel = (0, 0);
    for seed in 0..6 {
        let inst = synth::bench(&mut ChaCha8Rng::seed_from_u64(seed));
        let input = inst.input();
        let mut plain = ObjectiveSet::new();
        for o in inst.objectives.iter() {
            plain.inject(Arc::new(WithoutOffChannelValues(Arc::clone(o))));
        }
        let plain_input = ScheduleInput {
            objectives: &plain,
            ..input
        };
        let mut set = inst.objectives.prepare(&input);
        for p in set.iter_mut() {
            for t in 0..p.terms() {
                if p.pair_kernel(t)
                    .is_some_and(|k| p.pair_kernel_by_correlation(k))
                {
                    off_channel.0 += 1;
                }
                if p.solo_kernel(t)
                    .is_some_and(|k| p.solo_kernel_off_channel(k).is_some())
                {
                    off_channel.1 += 1;
                }
            }
        }
        let mut rng_a = ChaCha8Rng::seed_from_u64(seed);
        let mut rng_b = ChaCha8Rng::seed_from_u64(seed);
        let mut with = Directed::default();
        let mut without = Directed::default();
        // Several cycles of one scheduler each, so the kept buffers are exercised.
        for _ in 0..3 {
            let sa = with.schedule(&input, &mut rng_a, &mut a);
            let sb = without.schedule(&plain_input, &mut rng_b, &mut b);
            assert_eq!(a, b, "seed {seed}");
            assert!(sa.evaluations <= sb.evaluations, "seed {seed}");
        }
    }
    assert!(
        off_channel.0 > 0 && off_channel.1 > 0,
        "the bench cycles have such kernels: {off_channel:?}"
    );
}
