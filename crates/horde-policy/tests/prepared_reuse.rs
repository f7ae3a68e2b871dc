//! Preparations kept across cycles (`ObjectiveSet::prepare_reusing`) are the same as
//! fresh ones, and a scheduler that keeps them schedules exactly as a fresh one would.

use std::sync::Arc;

use horde_hose::synth::{self, Instance, Shape};
use horde_policy::{
    Assignment, Directed, Objective, ObjectiveSet, PreparedCache, PreparedObjective, RandomWalk,
    ScheduleInput, Scheduler,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Every thesis objective: string fields (y1), stream windows, correlation (X4),
/// consecutive ADUs (b-1).
fn all_thesis() -> ObjectiveSet {
    let mut set = ObjectiveSet::new();
    for (name, _, _) in horde_hose::THESIS {
        set.inject(Arc::new(horde_hose::thesis(name).unwrap()));
    }
    set
}

/// Instances of varying size over the streams the thesis objectives select, so
/// term counts grow and shrink from one cycle to the next.
fn instance(rng: &mut ChaCha8Rng) -> Instance {
    let shape = Shape {
        channels: rng.gen_range(1..=4),
        real: rng.gen_range(1..=12),
        phantom: rng.gen_range(0..=8),
        adus: rng.gen_range(1..=20),
        history: rng.gen_range(0..=8),
        streams: vec![0, 2, 3, 4, 7, 17, 937],
    };
    synth::instance(rng, &shape, Vec::new())
}

fn with<'a>(inst: &'a Instance, set: &'a ObjectiveSet) -> ScheduleInput<'a> {
    ScheduleInput {
        objectives: set,
        ..inst.input()
    }
}

fn random_assignment(rng: &mut ChaCha8Rng, n: usize, m: usize) -> Assignment {
    let mut slots: Vec<usize> = (0..m).collect();
    for i in (1..m).rev() {
        slots.swap(i, rng.gen_range(0..=i));
    }
    (0..n)
        .map(|a| slots.get(a).copied().filter(|_| rng.gen_bool(0.8)))
        .collect()
}

/// Everything a scheduler can read of a prepared objective, and its values.
fn describe(p: &mut dyn PreparedObjective, assignment: &Assignment) -> Vec<String> {
    let mut rows = Vec::new();
    for t in 0..p.terms() {
        let fixed = format!(
            "{t}: {:?} {:?} {:?} {:?}",
            p.members(t),
            p.reads(t),
            p.bounds(t),
            p.pair_kernel(t)
        );
        let cached = p.value(t, assignment, true);
        let exact = p.value(t, assignment, false);
        rows.push(format!("{fixed} {cached} {exact}"));
    }
    rows.push(format!("evaluations {}", p.evaluations()));
    rows
}

#[test]
fn reused_preparations_equal_fresh_ones() {
    let set = all_thesis();
    let mut cache = PreparedCache::default();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut terms = 0;
    for _ in 0..40 {
        let inst = instance(&mut rng);
        let input = with(&inst, &set);
        let assignment = random_assignment(&mut rng, inst.adus.len(), inst.slots.len());
        let mut fresh = set.prepare(&input);
        let mut reused = set.prepare_reusing(&input, &mut cache);
        assert_eq!(fresh.len(), set.len());
        assert_eq!(reused.len(), set.len());
        for o in 0..set.len() {
            let a = describe(fresh.get(o), &assignment);
            let b = describe(reused.get(o), &assignment);
            terms += a.len() - 1;
            assert_eq!(a, b, "objective {o}");
        }
        let whole = set.utility(&input, &assignment);
        assert_eq!(reused.utility(&assignment), whole);
    }
    assert!(terms > 100, "the instances have terms to compare ({terms})");
}

/// A hand-written objective: it has no owned preparation.
#[derive(Debug)]
struct PlacedCount;

impl Objective for PlacedCount {
    fn utility(&self, _input: &ScheduleInput<'_>, assignment: &Assignment) -> i64 {
        assignment.iter().flatten().count() as i64
    }
}

#[test]
fn the_cache_follows_the_objective_set() {
    let mut set = ObjectiveSet::new();
    let mut cache = PreparedCache::default();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let x1 = set.inject(Arc::new(horde_hose::thesis("x1").unwrap()));
    let mut ids = vec![x1];
    for round in 0..24 {
        match round % 4 {
            // Objectives come and go, including one without an owned preparation.
            0 => ids.push(set.inject(Arc::new(horde_hose::thesis("x4").unwrap()))),
            1 => ids.push(set.inject(Arc::new(PlacedCount))),
            2 => assert!(set.remove(ids.remove(0))),
            _ => {}
        }
        let inst = instance(&mut rng);
        let input = with(&inst, &set);
        let assignment = random_assignment(&mut rng, inst.adus.len(), inst.slots.len());
        let mut fresh = set.prepare(&input);
        let mut reused = set.prepare_reusing(&input, &mut cache);
        assert_eq!(reused.len(), set.len(), "round {round}");
        for o in 0..set.len() {
            assert_eq!(
                describe(fresh.get(o), &assignment),
                describe(reused.get(o), &assignment),
                "round {round}, objective {o}"
            );
        }
        assert_eq!(
            reused.utility(&assignment),
            set.utility(&input, &assignment)
        );
    }
}

#[test]
fn a_kept_scheduler_schedules_like_a_fresh_one() {
    let set = all_thesis();
    let makers: [fn() -> Box<dyn Scheduler>; 2] = [
        || Box::new(Directed::default()),
        || Box::new(RandomWalk::default()),
    ];
    for make in makers {
        let mut kept = make();
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        let (mut a, mut b) = (Assignment::new(), Assignment::new());
        let mut placed = 0;
        for cycle in 0..30u64 {
            let inst = instance(&mut rng);
            let input = with(&inst, &set);
            let s1 = kept.schedule(&input, &mut ChaCha8Rng::seed_from_u64(cycle), &mut a);
            let s2 = make().schedule(&input, &mut ChaCha8Rng::seed_from_u64(cycle), &mut b);
            assert_eq!(a, b, "{} cycle {cycle}", kept.name());
            assert_eq!(s1, s2, "{} cycle {cycle}", kept.name());
            placed += a.iter().flatten().count();
        }
        assert!(placed > 0);
    }
}
