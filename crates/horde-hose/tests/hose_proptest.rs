//! No input makes the parser, checker or evaluator panic.

mod common;

use common::*;
use proptest::prelude::*;

/// Everything else a program is made of: punctuation, operators, variable and field
/// names of the frame below, literals and an edge of the integer range.
const OTHER_TOKENS: &[&str] = &[
    ":",
    "::",
    "{",
    "}",
    "(",
    ")",
    ",",
    "a",
    "b",
    "s",
    "kind",
    "prio",
    "\"I\"",
    "0",
    "1",
    "-",
    "+",
    "*",
    "/",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "&&",
    "||",
    "!",
    "=",
    "9223372036854775807",
];

/// The language's reserved words and the tokens around them.
fn tokens() -> Vec<&'static str> {
    horde_hose::RESERVED
        .iter()
        .chain(OTHER_TOKENS)
        .copied()
        .collect()
}

/// Token soup inside a well-formed frame, so the checker sees plenty of it.
fn framed() -> impl Strategy<Value = String> {
    let part = || prop::collection::vec(prop::sample::select(tokens()), 0..12);
    (part(), part(), part()).prop_map(|(f, g, u)| {
        format!(
            "objective {{ context {{ adu:a {{ {} }} adu:b {{ stream_id == 1 }} stream:s {{ stream_id == 2 }} }} goal {{ {} }} utility {{ a {{ {} }} }} }}",
            f.join(" "),
            g.join(" "),
            u.join(" ")
        )
    })
}

fn evaluate(o: horde_hose::CompiledObjective) {
    let h = sent(
        adu(7, 1, 3, 5),
        slot(1, 3, 0.2, 300.0, 0.0),
        horde_policy::Outcome::Lost,
    );
    let c = Case::new(
        vec![slot(1, 4, 0.1, 200.0, 0.0), slot(2, 0, 0.3, 900.0, 50.0)],
        vec![
            with(with(adu(0, 1, 4, 0), "kind", "I"), "prio", 3i64),
            with(adu(1, 2, 0, 10), "kind", 4i64),
        ],
    )
    .history(vec![h])
    .objective(o);
    let input = c.input();
    let mut prepared = c.objectives.prepare(&input);
    for a in [
        [Some(0), Some(1)],
        [Some(1), Some(0)],
        [None, Some(0)],
        [None, None],
    ] {
        c.utility(&a);
        // Interval bounds are sound, and cached values equal fresh ones.
        for p in prepared.iter_mut() {
            for t in 0..p.terms() {
                let (lo, hi) = p.bounds(t);
                let v = p.value(t, &a, false);
                assert!(lo <= v && v <= hi, "{v} outside [{lo}, {hi}]");
                assert_eq!(p.value(t, &a, true), v);
                assert_eq!(p.value(t, &a, true), v);
            }
        }
    }
}

/// Well-typed numeric expressions over variables `a`, `b` (ADUs) and `s` (stream).
fn num_expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(|v| format!("({v})")),
        (-50i64..2000).prop_map(|v| v.to_string()),
        Just("a::prio".to_string()),
        Just("a::stream_seq".to_string()),
        Just("b::queue_delay".to_string()),
        Just("prob(a::lost?)".to_string()),
        Just("expected(b::latency)".to_string()),
        Just("prob(correlated_loss(a, b))".to_string()),
        Just("s::latency_ave".to_string()),
        Just("s::loss_rate".to_string()),
    ];
    leaf.prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(&["+", "-", "*", "/"][..]),
                inner.clone()
            )
                .prop_map(|(x, op, y)| format!("({x} {op} {y})")),
            inner.clone().prop_map(|x| format!("-{x}")),
            inner.clone().prop_map(|x| format!("abs({x})")),
            (inner.clone(), inner).prop_map(|(x, y)| format!("min({x}, max({y}, {x}))")),
        ]
    })
}

fn bool_expr() -> impl Strategy<Value = String> {
    let cmp = (
        num_expr(),
        prop::sample::select(&["==", "!=", "<", "<=", ">", ">="][..]),
        num_expr(),
    )
        .prop_map(|(x, op, y)| format!("{x} {op} {y}"));
    let leaf = prop_oneof![
        cmp,
        Just("a::kind == \"I\"".to_string()),
        Just("a::urgent".to_string()),
        Just("true".to_string()),
    ];
    leaf.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(x, y)| format!("({x} && {y})")),
            (inner.clone(), inner.clone()).prop_map(|(x, y)| format!("({x} || {y})")),
            inner.prop_map(|x| format!("!({x})")),
        ]
    })
}

fn typed_program() -> impl Strategy<Value = String> {
    (bool_expr(), num_expr(), num_expr()).prop_map(|(g, u, v)| {
        format!(
            "objective {{ context {{ adu:a {{ stream_id == 1 }} adu:b {{ true }} stream:s {{ stream_id == 2 }} }} goal {{ {g} }} utility {{ a {{ {u} }} s {{ {v} }} }} }}"
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_text_never_panics(src in any::<String>()) {
        let _ = horde_hose::compile(&src);
    }

    #[test]
    fn token_soup_never_panics(src in framed()) {
        if let Ok(o) = horde_hose::compile(&src) {
            evaluate(o);
        }
    }

    #[test]
    fn well_typed_programs_compile_and_evaluate(src in typed_program()) {
        match horde_hose::compile(&src) {
            Ok(o) => evaluate(o),
            Err(e) => {
                // Only a goal that no input satisfies may be rejected.
                prop_assert_eq!(e.len(), 1, "{:?}", e);
                prop_assert!(e[0].message == "the goal can never be true", "{}", e[0]);
            }
        }
    }

    #[test]
    fn errors_are_inside_the_source(src in framed()) {
        if let Err(errors) = horde_hose::compile(&src) {
            prop_assert!(!errors.is_empty());
            let lines = src.lines().count().max(1) as u32;
            for e in errors {
                prop_assert!(e.line >= 1 && e.line <= lines, "{e}");
                prop_assert!(e.col >= 1, "{e}");
                let prefix = format!("{}:{}: ", e.line, e.col);
                prop_assert!(e.to_string().starts_with(&prefix));
            }
        }
    }
}
