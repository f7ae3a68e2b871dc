//! Every thesis objective shipped in `objectives/`: it compiles, and evaluates to
//! hand-computed values on small hand-built schedules.

mod common;

use common::*;
use horde_hose::CompiledObjective;
use horde_policy::Outcome;

fn load(name: &str) -> CompiledObjective {
    let path = format!(
        "{}/../../objectives/{name}.hose",
        env!("CARGO_MANIFEST_DIR")
    );
    let src = std::fs::read_to_string(&path).expect("objective file");
    assert!(
        horde_hose::check_file(&path).is_empty(),
        "{name} has errors"
    );
    horde_hose::compile(&src).unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

#[test]
fn every_shipped_objective_checks() {
    let dir = format!("{}/../../objectives", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "b-1.hose",
            "fig7-4.hose",
            "x1.hose",
            "x2.hose",
            "x3.hose",
            "x4.hose",
            "y1.hose",
            "y2.hose",
            "y3.hose"
        ]
    );
    for n in names {
        assert_eq!(
            horde_hose::check_file(format!("{dir}/{n}")),
            Vec::<String>::new()
        );
    }
}

#[test]
fn x1_rewards_low_latency_for_streams_0_and_3() {
    let c = Case::new(
        vec![
            slot(1, 0, 0.0, 300.0, 0.0),
            slot(2, 0, 0.0, 500.0, 200.0),
            slot(3, 0, 0.0, 900.0, 0.0),
        ],
        vec![adu(0, 0, 0, 100), adu(1, 3, 0, 0), adu(2, 1, 0, 0)],
    )
    .objective(load("x1"));
    // a0: 100 + 300 = 400 -> 300; a1: 0 + 700 = 700 -> goal holds, 0; a2 not bound.
    assert_eq!(c.utility(&[Some(0), Some(1), Some(2)]), 300);
    // a0: 1000 > 700 -> 0; a1: 300 -> 400.
    assert_eq!(c.utility(&[Some(2), Some(0), Some(1)]), 400);
    // An ADU left out of the schedule is in no context.
    assert_eq!(c.utility(&[None, Some(0), None]), 400);
    assert_eq!(c.utility(&[None, None, None]), 0);
}

#[test]
fn x2_rewards_low_loss_for_stream_3() {
    let c = Case::new(
        vec![
            slot(1, 0, 0.04, 300.0, 0.0),
            slot(2, 0, 0.10, 300.0, 0.0),
            slot(3, 0, 0.004, 300.0, 0.0),
            slot(4, 0, 0.07, 300.0, 0.0),
        ],
        vec![adu(0, 3, 0, 0), adu(1, 0, 0, 0)],
    )
    .objective(load("x2"));
    assert_eq!(c.utility(&[Some(0), Some(1)]), 600); // 4% -> 100 * (10 - 4)
    assert_eq!(c.utility(&[Some(1), Some(0)]), 0); // 10% fails the goal
    assert_eq!(c.utility(&[Some(2), Some(0)]), 1000); // round(0.4) = 0%
    assert_eq!(c.utility(&[Some(3), Some(0)]), 300);
}

#[test]
fn x3_is_x1_for_stream_3_only() {
    let c = Case::new(
        vec![slot(1, 0, 0.0, 300.0, 0.0), slot(2, 0, 0.0, 650.0, 0.0)],
        vec![adu(0, 0, 0, 0), adu(1, 3, 0, 20)],
    )
    .objective(load("x3"));
    assert_eq!(c.utility(&[Some(0), Some(1)]), 30); // 700 - (20 + 650)
    assert_eq!(c.utility(&[Some(1), Some(0)]), 380); // 700 - (20 + 300)
}

#[test]
fn x4_counts_ordered_pairs_of_distinct_adus() {
    let slots = vec![
        slot(1, 10, 0.05, 300.0, 0.0),
        slot(1, 11, 0.05, 300.0, 0.0),
        slot(2, 10, 0.05, 300.0, 0.0),
        slot(1, 15, 0.05, 300.0, 0.0),
        slot(1, 14, 0.05, 300.0, 0.0),
    ];
    let adus = vec![
        adu(0, 0, 0, 0),
        adu(1, 0, 1, 0),
        adu(2, 0, 2, 0),
        adu(3, 1, 0, 0),
    ];
    let c = Case::new(slots.clone(), adus.clone()).objective(load("x4"));
    // a,b adjacent on channel 1 (correlation 100%): both orders fail; the other
    // four ordered pairs are on different channels (0%).
    assert_eq!(c.utility(&[Some(0), Some(1), Some(2), None]), 4 * 125);
    // Five apart: 20% <= 25, all six ordered pairs pass.
    assert_eq!(c.utility(&[Some(0), Some(3), Some(2), None]), 6 * 125);
    // Four apart: 30% > 25.
    assert_eq!(c.utility(&[Some(0), Some(4), Some(2), None]), 4 * 125);
    // Stream 1 is not bound.
    assert_eq!(c.utility(&[None, None, Some(2), Some(0)]), 0);

    // History: a pending ADU of stream 0 sent in slot (1, 9) pairs with schedule
    // ADUs (both orders); it fails only with the ADU next to it.
    let h = sent(
        adu(9, 0, 9, 0),
        slot(1, 9, 0.05, 300.0, 0.0),
        Outcome::Pending,
    );
    let c = Case::new(slots.clone(), adus.clone())
        .history(vec![h.clone()])
        .objective(load("x4"));
    // Schedule pairs: 6 pass. History pairs: with a (gap 1) fail, with b (gap 6,
    // 10%) and c (other channel) pass, two orders each.
    assert_eq!(
        c.utility(&[Some(0), Some(3), Some(2), None]),
        6 * 125 + 4 * 125
    );
    // Once acked, the history ADU cannot be lost, so nothing correlates with it.
    let acked = sent(h.adu, h.slot, Outcome::Acked { latency_ms: 350.0 });
    let c = Case::new(slots, adus)
        .history(vec![acked])
        .objective(load("x4"));
    assert_eq!(
        c.utility(&[Some(0), Some(3), Some(2), None]),
        6 * 125 + 6 * 125
    );
}

#[test]
fn y1_prefers_safer_slots_for_i_frames() {
    let c = Case::new(
        vec![
            slot(1, 0, 0.01, 300.0, 0.0),
            slot(2, 0, 0.05, 300.0, 0.0),
            slot(3, 0, 0.01, 300.0, 0.0),
            slot(4, 0, 0.00, 300.0, 0.0),
        ],
        vec![
            with(adu(0, 17, 0, 0), "frame_type", "I"),
            with(adu(1, 17, 1, 0), "frame_type", "P"),
            with(adu(2, 17, 2, 0), "frame_type", "B"),
            adu(3, 17, 3, 0), // no frame_type: bound to neither variable
        ],
    )
    .objective(load("y1"));
    // (I, P): 1 < 5 -> 100; (I, B): 1 < 1 fails.
    assert_eq!(c.utility(&[Some(0), Some(1), Some(2), Some(3)]), 100);
    // I-frame at 5%: beats neither.
    assert_eq!(c.utility(&[Some(1), Some(0), Some(2), Some(3)]), 0);
    // I-frame at 0%: beats both.
    assert_eq!(c.utility(&[Some(3), Some(1), Some(2), Some(0)]), 200);
}

#[test]
fn y2_reads_the_stream_window_under_the_candidate() {
    let history = vec![
        sent(
            adu(10, 7, 0, 0),
            slot(1, 0, 0.0, 800.0, 0.0),
            Outcome::Acked { latency_ms: 800.0 },
        ),
        sent(
            adu(11, 7, 1, 0),
            slot(1, 1, 0.0, 800.0, 0.0),
            Outcome::Acked { latency_ms: 1000.0 },
        ),
    ];
    let c = Case::new(
        vec![slot(1, 2, 0.0, 300.0, 0.0), slot(2, 0, 0.0, 1500.0, 0.0)],
        vec![adu(0, 7, 2, 100)],
    )
    .history(history)
    .objective(load("y2"));
    // (800 + 1000 + 400) / 3 = 733 < 1000.
    assert_eq!(c.utility(&[Some(0)]), 100);
    // (800 + 1000 + 1600) / 3 = 1133.
    assert_eq!(c.utility(&[Some(1)]), 0);
    // No ADU of stream 7 placed: the context depends on no schedule ADU.
    assert_eq!(c.utility(&[None]), 0);
}

#[test]
fn y3_is_flat_then_falls_through_zero_at_one_second() {
    let c = Case::new(
        vec![
            slot(1, 0, 0.10, 800.0, 0.0),
            slot(2, 0, 0.10, 950.0, 0.0),
            slot(3, 0, 0.10, 1100.0, 0.0),
            slot(4, 0, 0.25, 300.0, 0.0),
        ],
        vec![adu(0, 937, 0, 0)],
    )
    .objective(load("y3"));
    assert_eq!(c.utility(&[Some(0)]), 500); // 5 * min(200, 100)
    assert_eq!(c.utility(&[Some(1)]), 250); // 5 * 50
    assert_eq!(c.utility(&[Some(2)]), -500); // 5 * -100: negative above 1000 ms
    assert_eq!(c.utility(&[Some(3)]), 0); // 25% loss fails the goal
}

#[test]
fn fig7_4_is_linear_around_one_second() {
    let c = Case::new(
        vec![slot(1, 0, 0.0, 600.0, 0.0), slot(2, 0, 0.0, 1200.0, 0.0)],
        vec![adu(0, 2, 0, 50), adu(1, 4, 0, 0), adu(2, 1, 0, 0)],
    )
    .objective(load("fig7-4"));
    // 5 * (1000 - 650) + 5 * (1000 - 1200)
    assert_eq!(c.utility(&[Some(0), Some(1), None]), 1750 - 1000);
    assert_eq!(c.utility(&[None, None, Some(0)]), 0);
}

#[test]
fn b1_binds_consecutive_adus_including_history() {
    let h = sent(
        adu(9, 0, 4, 0),
        slot(1, 0, 0.0, 500.0, 0.0),
        Outcome::Acked { latency_ms: 500.0 },
    );
    let c = Case::new(
        vec![
            slot(1, 1, 0.0, 600.0, 0.0),
            slot(2, 0, 0.0, 700.0, 0.0),
            slot(3, 0, 0.0, 100.0, 0.0),
        ],
        vec![adu(0, 0, 5, 0), adu(1, 0, 6, 0), adu(2, 0, 8, 0)],
    )
    .history(vec![h])
    .objective(load("b-1"));
    // (h=4, 5): 600 >= 500 -> 2; (5, 6): 700 >= 600 -> 2; 8 has no neighbour.
    assert_eq!(c.utility(&[Some(0), Some(1), Some(2)]), 4);
    // (h, 5): 700 >= 500 -> 2; (5, 6): 600 >= 700 fails.
    assert_eq!(c.utility(&[Some(1), Some(0), Some(2)]), 2);
    // Seq 5 in the 100 ms slot: (h, 5) fails, (5, 6) holds.
    assert_eq!(c.utility(&[Some(2), Some(1), Some(0)]), 2);
}

#[test]
fn objectives_add_up() {
    let c = Case::new(vec![slot(1, 0, 0.04, 300.0, 0.0)], vec![adu(0, 3, 0, 0)])
        .objective(load("x1"))
        .objective(load("x2"))
        .objective(load("x3"));
    // X1 and X3: 700 - 300 each; X2: 100 * (10 - 4).
    assert_eq!(c.utility(&[Some(0)]), 400 + 400 + 600);
}

#[test]
fn x4_schedule_pairs_are_pair_kernels_and_history_pairs_are_not() {
    let slots = vec![
        slot(1, 10, 0.05, 300.0, 0.0),
        slot(1, 11, 0.05, 300.0, 0.0),
        slot(2, 10, 0.05, 300.0, 0.0),
        slot(1, 14, 0.05, 300.0, 0.0),
    ];
    let adus = vec![adu(0, 0, 0, 0), adu(1, 0, 1, 0), adu(2, 0, 2, 0)];
    let h = sent(
        adu(9, 0, 9, 0),
        slot(1, 9, 0.05, 300.0, 0.0),
        Outcome::Pending,
    );
    let c = Case::new(slots, adus)
        .history(vec![h])
        .objective(load("x4"));
    let input = c.input();
    let mut set = c.objectives.prepare(&input);
    let p = set.get(0);
    let (mut kernels, mut others) = (Vec::new(), 0);
    for t in 0..p.terms() {
        match p.pair_kernel(t) {
            Some(_) => kernels.push(t),
            None => {
                // A pair with the history ADU: one schedule member.
                assert_eq!(p.members(t).len(), 1);
                others += 1;
            }
        }
    }
    assert_eq!((kernels.len(), others), (6, 6));
    // A kernel's value depends only on its members' slots, the same for every term.
    for &(sa, sb) in &[(0usize, 1usize), (0, 2), (1, 3), (3, 0)] {
        let mut values = Vec::new();
        for &t in &kernels {
            let m = p.members(t).to_vec();
            let mut a = vec![None; 3];
            a[m[0] as usize] = Some(sa);
            a[m[1] as usize] = Some(sb);
            values.push(p.value(t, &a, false));
        }
        assert!(values.windows(2).all(|w| w[0] == w[1]), "{values:?}");
    }
}

#[test]
fn x4_history_pairs_are_solo_kernels_shared_by_every_adu() {
    let slots = vec![
        slot(1, 10, 0.05, 300.0, 0.0),
        slot(1, 11, 0.05, 300.0, 0.0),
        slot(2, 10, 0.05, 300.0, 0.0),
        slot(1, 12, 0.05, 300.0, 0.0),
    ];
    let adus = vec![adu(0, 0, 0, 0), adu(1, 0, 1, 5), adu(2, 0, 2, 9)];
    let history = vec![
        sent(
            adu(8, 0, 8, 0),
            slot(1, 9, 0.05, 300.0, 0.0),
            Outcome::Pending,
        ),
        sent(adu(9, 0, 9, 0), slot(2, 9, 0.05, 300.0, 0.0), Outcome::Lost),
    ];
    let c = Case::new(slots, adus)
        .history(history)
        .objective(load("x4"));
    let input = c.input();
    let mut set = c.objectives.prepare(&input);
    let p = set.get(0);
    let mut by_kernel: Vec<Vec<usize>> = vec![Vec::new(); p.solo_kernels()];
    for t in 0..p.terms() {
        match (p.pair_kernel(t), p.solo_kernel(t)) {
            (Some(_), None) => {}
            (None, Some(k)) => {
                assert_eq!(p.members(t).len(), 1);
                by_kernel[k as usize].push(t);
            }
            other => panic!("term {t}: {other:?}"),
        }
    }
    // Each ADU pairs with each history ADU as either variable: 3 * 2 * 2 terms,
    // in 2 * 2 kernels (variable, history ADU), each shared by the 3 ADUs.
    let used: Vec<usize> = by_kernel.iter().map(Vec::len).filter(|&n| n > 0).collect();
    assert_eq!(used, vec![3; 4]);
    let mut seen = Vec::new();
    for terms in by_kernel.iter().filter(|t| !t.is_empty()) {
        for s in 0..4 {
            let mut values = Vec::new();
            for &t in terms {
                let mut a = vec![None; 3];
                a[p.members(t)[0] as usize] = Some(s);
                values.push(p.value(t, &a, false));
                // Unplaced, the term is 0.
                assert_eq!(p.value(t, &[None, None, None], false), 0);
            }
            assert!(values.windows(2).all(|w| w[0] == w[1]), "{values:?}");
            seen.push(values[0]);
        }
    }
    // The slot next to a pending history slot on its channel is correlated with it.
    assert!(seen.contains(&0) && seen.contains(&125), "{seen:?}");
}

/// X4 reads slots only through their loss correlation, which is 0 across
/// channels: its pair kernel has one value for every pair of slots on different
/// channels, and each history pair's solo kernel one value off the history slot's
/// channel (everywhere, once that slot's ADU is acked). The scheduler computes
/// such values once; here every one of them is checked against the objective.
#[test]
fn x4_kernels_are_constant_off_their_channel() {
    let slots = vec![
        slot(1, 10, 0.05, 300.0, 0.0),
        slot(1, 11, 0.05, 300.0, 0.0),
        slot(2, 10, 0.05, 300.0, 0.0),
        slot(2, 11, 0.05, 300.0, 0.0),
        slot(3, 10, 0.05, 300.0, 0.0),
    ];
    let adus = vec![adu(0, 0, 0, 0), adu(1, 0, 1, 5), adu(2, 0, 2, 9)];
    let history = vec![
        sent(
            adu(8, 0, 8, 0),
            slot(1, 9, 0.05, 300.0, 0.0),
            Outcome::Pending,
        ),
        sent(adu(9, 0, 9, 0), slot(2, 9, 0.05, 300.0, 0.0), Outcome::Lost),
        sent(
            adu(7, 0, 7, 0),
            slot(3, 9, 0.05, 300.0, 0.0),
            Outcome::Acked { latency_ms: 300.0 },
        ),
    ];
    let c = Case::new(slots.clone(), adus)
        .history(history.clone())
        .objective(load("x4"));
    let input = c.input();
    let mut set = c.objectives.prepare(&input);
    let p = set.get(0);
    let m = slots.len();
    let (mut pairs, mut solos) = (0, [0; 3]);
    for t in 0..p.terms() {
        let members = p.members(t).to_vec();
        let mut a = vec![None; 3];
        if let Some(k) = p.pair_kernel(t) {
            assert!(p.pair_kernel_by_correlation(k), "term {t}");
            let mut off = Vec::new();
            for s in 0..m {
                for u in (0..m).filter(|&u| slots[u].channel != slots[s].channel) {
                    a[members[0] as usize] = Some(s);
                    a[members[1] as usize] = Some(u);
                    off.push(p.value(t, &a, false));
                }
            }
            assert!(off.windows(2).all(|w| w[0] == w[1]), "term {t}: {off:?}");
            pairs += 1;
            continue;
        }
        let k = p.solo_kernel(t).expect("X4's other terms are solo kernels");
        let values: Vec<(usize, i64)> = (0..m)
            .map(|s| {
                a[members[0] as usize] = Some(s);
                (s, p.value(t, &a, false))
            })
            .collect();
        let (constant, kind) = match p.solo_kernel_off_channel(k) {
            Some(None) => (values.clone(), 0),
            Some(Some(ch)) => (
                values
                    .iter()
                    .copied()
                    .filter(|&(s, _)| slots[s].channel != ch)
                    .collect(),
                1,
            ),
            None => panic!("term {t}: X4's history pairs read only correlation"),
        };
        assert!(
            constant.windows(2).all(|w| w[0].1 == w[1].1),
            "term {t}: {values:?}"
        );
        // Somewhere on the history slot's own channel the value differs.
        if kind == 1 {
            assert!(values.iter().any(|v| v.1 != constant[0].1), "term {t}");
        }
        solos[kind] += 1;
    }
    // 3 * 2 ordered pairs; 3 ADUs with 3 history ADUs as either variable, the
    // acked one's 6 terms constant everywhere.
    assert_eq!((pairs, solos), (6, [6, 12, 0]));
}

/// A pair kernel that reads its members' loss is not read through correlation
/// alone, nor is a solo kernel that reads its member's loss constant anywhere.
#[test]
fn kernels_that_read_loss_are_not_constant_off_channel() {
    let src = "objective { context { adu:foo { stream_id == 0 } adu:bar { stream_id == 0 } }
        goal { prob(foo::lost?) + prob(bar::lost?) < 20 } utility { foo { 10 } } }";
    let c = Case::new(
        vec![slot(1, 10, 0.05, 300.0, 0.0), slot(2, 10, 0.15, 300.0, 0.0)],
        vec![adu(0, 0, 0, 0), adu(1, 0, 1, 0)],
    )
    .history(vec![sent(
        adu(9, 0, 9, 0),
        slot(1, 9, 0.05, 300.0, 0.0),
        Outcome::Pending,
    )])
    .objective(horde_hose::compile(src).unwrap());
    let input = c.input();
    let mut set = c.objectives.prepare(&input);
    let p = set.get(0);
    let (mut pairs, mut solos) = (0, 0);
    for t in 0..p.terms() {
        if let Some(k) = p.pair_kernel(t) {
            assert!(!p.pair_kernel_by_correlation(k), "term {t}");
            pairs += 1;
        }
        if let Some(k) = p.solo_kernel(t) {
            assert_eq!(p.solo_kernel_off_channel(k), None, "term {t}");
            solos += 1;
        }
    }
    assert_eq!((pairs, solos), (2, 4));
}
