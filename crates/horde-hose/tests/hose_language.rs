//! Semantics of the language itself: precedence, arithmetic rules, application
//! fields, missing fields and context binding.

mod common;

use common::*;
use horde_policy::Outcome;

/// Value of `expr` as the utility of a one-ADU objective whose ADU sits in a slot
/// with 4% loss and 300 ms RTT, after 20 ms of queueing.
fn value(expr: &str) -> i64 {
    let src = format!(
        "objective {{ context {{ adu:a {{ true }} }} goal {{ true }} utility {{ a {{ {expr} }} }} }}"
    );
    let o = horde_hose::compile(&src).unwrap_or_else(|e| panic!("{expr}: {e:?}"));
    let c = Case::new(
        vec![slot(1, 0, 0.04, 300.0, 0.0)],
        vec![with(with(adu(0, 5, 9, 20), "prio", 3i64), "urgent", true)],
    )
    .objective(o);
    c.utility(&[Some(0)])
}

/// Whether `goal` holds for that same ADU (utility 1 when it does).
fn holds(goal: &str) -> bool {
    let src = format!(
        "objective {{ context {{ adu:a {{ true }} }} goal {{ {goal} }} utility {{ a {{ 1 }} }} }}"
    );
    let o = horde_hose::compile(&src).unwrap_or_else(|e| panic!("{goal}: {e:?}"));
    let c = Case::new(
        vec![slot(1, 0, 0.04, 300.0, 0.0)],
        vec![with(
            with(with(adu(0, 5, 9, 20), "prio", 3i64), "urgent", true),
            "kind",
            "video",
        )],
    )
    .objective(o);
    c.utility(&[Some(0)]) == 1
}

#[test]
fn arithmetic_precedence_is_c_like() {
    assert_eq!(value("1 + 2 * 3"), 7);
    assert_eq!(value("(1 + 2) * 3"), 9);
    assert_eq!(value("10 - 2 - 3"), 5);
    assert_eq!(value("100 / 10 / 5"), 2);
    assert_eq!(value("-2 * 3"), -6);
    assert_eq!(value("- -4"), 4);
    assert_eq!(value("+4 - -4"), 8);
    assert_eq!(value("a::stream_seq+1"), 10);
    assert_eq!(value("7 / 2"), 3);
    assert_eq!(value("-7 / 2"), -3);
}

#[test]
fn logical_precedence_is_c_like() {
    // && binds tighter than ||, comparisons tighter than both, ! tightest.
    // `a::urgent` is true; a goal that is false for every input is rejected, so
    // these read a field.
    assert!(holds("a::urgent || a::urgent && !a::urgent"));
    assert!(!holds("(a::urgent || a::urgent) && !a::urgent"));
    assert!(holds("1 < 2 && 3 < 4"));
    assert!(holds("!false == true"));
    assert!(holds("!(1 > 2)"));
    assert!(holds("1 + 1 == 2"));
}

#[test]
fn builtins() {
    assert_eq!(value("min(3, -4)"), -4);
    assert_eq!(value("max(3, -4)"), 3);
    assert_eq!(value("abs(-12)"), 12);
    assert_eq!(value("prob(a::lost?)"), 4);
    assert_eq!(value("expected(a::latency)"), 320);
    assert_eq!(
        value("a::queue_delay + a::length + a::stream_id"),
        20 + 1000 + 5
    );
}

#[test]
fn division_by_zero_is_zero_and_arithmetic_saturates() {
    assert_eq!(value("5 / 0"), 0);
    assert_eq!(value("5 / (a::stream_id - 5)"), 0);
    assert_eq!(value("9223372036854775807 + 1"), i64::MAX);
    assert_eq!(value("-9223372036854775808 - 1"), i64::MIN);
    assert_eq!(value("-9223372036854775808 / -1"), i64::MAX);
    assert_eq!(value("abs(-9223372036854775808)"), i64::MAX);
    assert_eq!(value("- -9223372036854775808"), i64::MAX);
    assert_eq!(value("4611686018427387904 * 4"), i64::MAX);
}

#[test]
fn application_fields_are_typed_by_use() {
    assert_eq!(value("a::prio * 2"), 6);
    assert!(holds("a::urgent"));
    assert!(holds("a::urgent == true"));
    assert!(holds("a::kind == \"video\""));
    assert!(holds("a::kind != \"audio\""));
    // A field compared only with another field takes its type from elsewhere.
    assert!(holds("a::prio == a::prio && a::prio > 2"));
}

#[test]
fn missing_fields_make_predicates_false() {
    // `absent` is numeric by use but no ADU has it.
    assert!(!holds("a::absent > 0"));
    assert!(!holds("a::absent <= 0"));
    assert!(!holds("a::absent != 1"));
    // The predicate is false, so its negation holds.
    assert!(holds("!(a::absent == 1)"));
    assert!(!holds("a::flag"));
    assert!(holds("!a::flag"));
    // A utility reading a missing field contributes nothing.
    assert_eq!(value("a::absent + 5"), 0);
    // A field holding another type than its use counts as missing.
    assert!(!holds(
        "a::kind == a::kind && a::kind == \"video\" && a::prio == \"3\""
    ));
}

#[test]
fn filters_use_missing_fields_as_false_and_may_read_earlier_variables() {
    let src = "objective {
        context {
            adu:x { prio >= 2 }
            adu:y { (stream_id == x::stream_id) && (prio < x::prio) }
        }
        goal { true }
        utility { y { 10 } }
    }";
    let o = horde_hose::compile(src).unwrap();
    let c = Case::new(
        vec![
            slot(1, 0, 0.0, 100.0, 0.0),
            slot(1, 1, 0.0, 100.0, 0.0),
            slot(1, 2, 0.0, 100.0, 0.0),
            slot(1, 3, 0.0, 100.0, 0.0),
        ],
        vec![
            with(adu(0, 1, 0, 0), "prio", 3i64),
            with(adu(1, 1, 1, 0), "prio", 2i64),
            with(adu(2, 1, 2, 0), "prio", 1i64),
            adu(3, 1, 3, 0), // no prio: in no binding
        ],
    )
    .objective(o);
    // Pairs (x, y): (3, 2), (3, 1), (2, 1).
    assert_eq!(c.utility(&[Some(0), Some(1), Some(2), Some(3)]), 30);
}

#[test]
fn history_only_contexts_do_not_count() {
    let o = horde_hose::compile(
        "objective { context { adu:a { stream_id == 1 } } goal { true } utility { a { 7 } } }",
    )
    .unwrap();
    let h = sent(
        adu(5, 1, 0, 0),
        slot(1, 0, 0.0, 100.0, 0.0),
        Outcome::Pending,
    );
    let c = Case::new(vec![slot(1, 1, 0.0, 100.0, 0.0)], vec![adu(0, 1, 1, 0)])
        .history(vec![h])
        .objective(o);
    // Only the schedule ADU's context counts; the history ADU's is constant.
    assert_eq!(c.utility(&[Some(0)]), 7);
    assert_eq!(c.utility(&[None]), 0);
}

#[test]
fn history_distributions_are_definite_once_known() {
    let src = "objective {
        context { adu:h { stream_id == 9 } adu:a { stream_id == 1 } }
        goal { true }
        utility { a { prob(h::lost?) * 10000 + expected(h::latency) } }
    }";
    let o = horde_hose::compile(src).unwrap();
    let run = |outcome| {
        let h = sent(adu(5, 9, 0, 30), slot(2, 0, 0.2, 400.0, 0.0), outcome);
        Case::new(vec![slot(1, 0, 0.0, 100.0, 0.0)], vec![adu(0, 1, 0, 0)])
            .history(vec![h])
            .objective(o.clone())
            .utility(&[Some(0)])
    };
    assert_eq!(run(Outcome::Acked { latency_ms: 512.4 }), 512);
    assert_eq!(run(Outcome::Lost), 100 * 10000 + 430);
    assert_eq!(run(Outcome::Pending), 20 * 10000 + 430);
}

#[test]
fn stream_fields_fall_back_to_the_cores_statistics() {
    let o = horde_hose::compile(
        "objective { context { stream:s { stream_id == 4 } } goal { true }
           utility { s { s::latency_ave * 1000 + s::loss_rate } } }",
    )
    .unwrap();
    let mut c = Case::new(vec![slot(1, 0, 0.1, 200.0, 0.0)], vec![adu(0, 4, 0, 0)]).objective(o);
    c.streams = vec![horde_policy::StreamStats {
        stream_id: 4,
        latency_ave_ms: 900.0,
        latency_sdev_ms: 50.0,
        loss_rate_pct: 3.0,
    }];
    // The placed ADU is the whole window: 200 ms, 10% loss.
    assert_eq!(c.utility(&[Some(0)]), 200 * 1000 + 10);
    // Nothing placed: the context depends on no schedule ADU and does not count.
    assert_eq!(c.utility(&[None]), 0);
}

#[test]
fn stream_sdev_is_over_the_window() {
    let o = horde_hose::compile(
        "objective { context { stream:s { stream_id == 4 } } goal { true }
           utility { s { s::latency_sdev } } }",
    )
    .unwrap();
    let h = |l: f64| {
        sent(
            adu(9, 4, 0, 0),
            slot(1, 0, 0.0, 0.0, 0.0),
            Outcome::Acked { latency_ms: l },
        )
    };
    let c = Case::new(vec![slot(1, 0, 0.0, 400.0, 0.0)], vec![adu(0, 4, 0, 0)])
        .history(vec![h(100.0), h(400.0)])
        .objective(o);
    // Latencies 100, 400, 400: mean 300, population sdev sqrt(20000) = 141.4.
    assert_eq!(c.utility(&[Some(0)]), 141);
}

#[test]
fn comments_and_any_section_order_are_accepted() {
    let src = "// a comment
        objective {
          utility { a { 1 } } // trailing
          goal { true }
          context { adu:a { true } }
        }";
    assert!(horde_hose::compile(src).is_ok());
}
