//! Bad programs and the exact `line:col: message` each produces.

fn errors(src: &str) -> Vec<String> {
    match horde_hose::compile(src) {
        Ok(_) => Vec::new(),
        Err(e) => e.iter().map(|e| e.to_string()).collect(),
    }
}

/// An objective with one ADU variable `foo` (stream 0) and the given goal.
fn with_goal(goal: &str) -> String {
    format!(
        "objective {{\n  context {{ adu:foo {{ stream_id == 0 }} adu:bar {{ stream_id == 0 }} }}\n  goal {{ {goal} }}\n  utility {{ foo {{ 1 }} }}\n}}\n"
    )
}

fn goal_errors(goal: &str) -> Vec<String> {
    errors(&with_goal(goal))
}

#[test]
fn syntax_errors() {
    assert_eq!(
        errors("objective {\n  context { adu:foo { stream_id == 0 }\n  goal { true }\n  utility { foo { 1 } }\n}"),
        ["3:3: syntax error: expected `adu:`, `stream:` or `}`, found `goal`"]
    );
    assert_eq!(
        errors(""),
        ["1:1: syntax error: expected `objective`, found end of input"]
    );
    assert_eq!(
        errors("objective { context { adu:a { true } } goal { true } utility { a { 1 } } } extra"),
        ["1:76: syntax error: expected end of input, found `extra`"]
    );
    assert_eq!(
        goal_errors("1 < 2 < 3"),
        ["3:16: comparisons cannot be chained; combine them with `&&` or `||`"]
    );
    assert_eq!(
        goal_errors("foo::length = 3"),
        ["3:22: `=` is not a hose operator; compare with `==`"]
    );
    assert_eq!(
        goal_errors("99999999999999999999 > 0"),
        ["3:10: integer literal `99999999999999999999` is out of range"]
    );
}

#[test]
fn unknown_names() {
    assert_eq!(
        goal_errors("baz::length > 3"),
        ["3:10: unknown variable `baz`"]
    );
    assert_eq!(
        goal_errors("stream_id == 3"),
        ["3:10: field `stream_id` needs a variable, as in `foo::stream_id`"]
    );
    assert_eq!(
        errors("objective { context { stream:s { stream_id == 7 } } goal { s::latency_avg < 1000 } utility { s { 100 } } }"),
        ["1:63: unknown stream field `latency_avg` (stream fields are stream_id, latency_ave, latency_sdev, loss_rate)"]
    );
    assert_eq!(
        goal_errors("foo::loss_rate > 3"),
        ["3:15: `loss_rate` is a stream field, not an ADU field"]
    );
    assert_eq!(
        goal_errors("foo::dropped? == true"),
        ["3:15: unknown field `dropped?` (the only `?` field is `lost?`)"]
    );
    assert_eq!(
        errors("objective { context { adu:a { true } } goal { true } utility { b { 1 } } }"),
        ["1:64: unknown variable `b`"]
    );
}

#[test]
fn type_errors() {
    assert_eq!(
        goal_errors("correlated_loss(foo, bar) <= 25"),
        ["3:10: expected a number, found `correlated_loss(foo, bar)`, a loss distribution (use `prob(correlated_loss(foo, bar))`)"]
    );
    assert_eq!(
        goal_errors("foo::latency < 100"),
        ["3:10: expected a number, found `foo::latency`, a latency distribution (use `expected(foo::latency)`)"]
    );
    assert_eq!(
        goal_errors("foo::lost?"),
        ["3:10: expected a boolean, found `foo::lost?`, a loss distribution (use `prob(foo::lost?)`)"]
    );
    assert_eq!(
        goal_errors("foo::kind < \"I\""),
        ["3:20: strings can only be compared with `==` and `!=`, not `<`"]
    );
    assert_eq!(
        goal_errors("foo::kind == \"I\" && foo::kind > 3"),
        ["3:40: cannot compare a string with a number"]
    );
    assert_eq!(
        goal_errors("foo::kind == \"I\" && foo::kind + 1 > 3"),
        ["3:30: field `kind` is a string (from its use at 3:10), not a number"]
    );
    assert_eq!(
        goal_errors("1 + true > 0"),
        ["3:14: expected a number, found a boolean"]
    );
    assert_eq!(
        goal_errors("3"),
        ["3:10: expected a boolean, found a number"]
    );
    assert_eq!(
        goal_errors("foo"),
        ["3:10: expected a boolean, found the ADU variable `foo` (use one of its fields, as in `foo::length`)"]
    );
    assert_eq!(
        goal_errors("foo::a == foo::b"),
        [
            "3:10: cannot tell the type of field `a`: compare it with a literal somewhere",
            "3:20: cannot tell the type of field `b`: compare it with a literal somewhere"
        ]
    );
    assert_eq!(
        goal_errors("min(1) > 0"),
        ["3:10: `min` takes 2 arguments, found 1"]
    );
    assert_eq!(
        goal_errors("prob(foo::length) > 0"),
        ["3:15: `prob` needs a loss distribution: `x::lost?` or `correlated_loss(x, y)`"]
    );
    assert_eq!(
        goal_errors("expected(foo::lost?) > 0"),
        ["3:19: `expected` needs a latency distribution: `x::latency`"]
    );
    assert_eq!(
        goal_errors("prob(correlated_loss(foo, foo)) < 5"),
        ["3:15: `correlated_loss` needs two different variables"]
    );
}

#[test]
fn context_errors() {
    assert_eq!(
        errors("objective { context { adu:foo { lost? == true } } goal { true } utility { foo { 1 } } }"),
        ["1:33: `lost?` cannot be used in a context filter"]
    );
    assert_eq!(
        errors("objective { context { adu:foo { prob(foo::lost?) < 3 } } goal { true } utility { foo { 1 } } }"),
        ["1:33: `prob` cannot be used in a context filter"]
    );
    assert_eq!(
        errors("objective {\n context {\n  adu:foo { bar::x == 1 }\n  adu:bar { true }\n }\n goal { true }\n utility { foo { 1 } }\n}"),
        ["3:13: `bar` is not bound yet: a filter can only use variables bound before it"]
    );
    assert_eq!(
        errors("objective { context { stream:s { stream_seq == 1 } } goal { true } utility { s { 1 } } }"),
        ["1:34: a stream binding must be `stream_id == N`"]
    );
    assert_eq!(
        errors("objective { context { adu:prob { true } } goal { true } utility { prob { 1 } } }"),
        ["1:27: `prob` is a reserved word and cannot name a variable"]
    );
}

#[test]
fn goal_and_structure_errors() {
    assert_eq!(goal_errors("false"), ["3:10: `false` is not a valid goal"]);
    assert_eq!(
        goal_errors("prob(foo::lost?) > 100"),
        ["3:10: the goal can never be true"]
    );
    assert_eq!(
        errors("objective {\n context { adu:foo { true } adu:foo { true } }\n goal { true }\n utility { foo { 1 } foo { 2 } }\n}"),
        [
            "2:33: variable `foo` is already bound at 2:16",
            "4:22: utility for `foo` is already given at 4:12"
        ]
    );
    assert_eq!(
        errors("objective {\n context { adu:a { true } }\n goal { true }\n goal { true }\n utility { a { 1 } }\n}"),
        ["4:2: duplicate `goal` section (first at 3:2)"]
    );
    assert_eq!(
        errors("objective { context { adu:a { true } } goal { true } }"),
        ["1:1: missing `utility` section"]
    );
    assert_eq!(
        errors("objective { context { adu:a { true } } goal { true } utility { } }"),
        ["1:54: the utility section must give at least one `variable { expression }`"]
    );
}

#[test]
fn check_file_prefixes_the_file_name() {
    let dir = std::env::temp_dir().join(format!("hose-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.hose");
    std::fs::write(&bad, with_goal("baz::length > 3")).unwrap();
    assert_eq!(
        horde_hose::check_file(&bad),
        [format!("{}:3:10: unknown variable `baz`", bad.display())]
    );
    let missing = dir.join("missing.hose");
    let out = horde_hose::check_file(&missing);
    assert_eq!(out.len(), 1);
    assert!(out[0].starts_with(&format!("{}:1:1: cannot read file", missing.display())));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn resource_limits_are_errors_not_crashes() {
    let deep = format!("{}1{}", "(".repeat(200), ")".repeat(200));
    let e = goal_errors(&format!("{deep} > 0"));
    assert_eq!(e, ["3:72: brackets are nested more than 64 deep"]);
    let long = vec!["1"; 5000].join(" + ");
    let e = goal_errors(&format!("{long} > 0"));
    assert_eq!(e.len(), 1);
    assert!(
        e[0].ends_with("expression is nested more than 256 levels deep"),
        "{e:?}"
    );
    let nots = "!".repeat(10_000);
    let e = goal_errors(&format!("{nots}true"));
    assert!(
        e[0].ends_with("expression is nested more than 256 levels deep"),
        "{e:?}"
    );
}
