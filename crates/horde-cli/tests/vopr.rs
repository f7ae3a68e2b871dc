//! `horde vopr` end to end: a run of seeds, a replay, a shrunk replay, a failing seed's
//! exit code and replay line, and bad input.

mod common;

use common::{horde, text};

#[test]
fn seeds_run_and_report_one_json_line_each() {
    let out = horde(&["vopr", "--seeds", "3", "--from", "10", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON report per line"))
        .collect();
    assert_eq!(lines.len(), 3);
    for (i, r) in lines.iter().enumerate() {
        assert_eq!(r["seed"], 10 + i as u64);
        assert_eq!(r["violations"].as_array().map(Vec::len), Some(0));
        assert_eq!(r["digest"].as_str().map(str::len), Some(16));
    }
}

#[test]
fn a_seed_replays_with_the_same_digest_and_a_fault_subset_replays_too() {
    let digest = |args: &[&str]| {
        let out = horde(args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let s = text(&out.stdout);
        let d = s.split("digest ").nth(1).expect("digest printed");
        d.split_whitespace().next().expect("digest").to_string()
    };
    let a = digest(&["vopr", "--seed", "129"]);
    assert_eq!(a, digest(&["vopr", "--seed", "129"]));
    let subset = digest(&["vopr", "--seed", "129", "--keep-faults", "0,3"]);
    assert_ne!(a, subset);
}

/// Seed 10223 duplicates datagrams on a link; the secure layer's replay window refuses
/// every copy, so the seed holds and the command exits 0.
#[test]
fn a_seed_with_duplicates_holds_behind_the_replay_window() {
    let out = horde(&["vopr", "--seed", "10223"]);
    let s = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{s}");
    assert!(s.contains("all invariants hold"), "{s}");
}

#[test]
fn a_fault_index_the_seed_does_not_have_is_a_clear_error() {
    let out = horde(&["vopr", "--seed", "129", "--keep-faults", "0,99"]);
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(
        e.contains("seed 129 draws 5 faults") && e.contains("no fault 99"),
        "{e}"
    );
}

/// `--seeds 0` ran nothing and reported "0 failing" with success, as if it had checked.
#[test]
fn zero_seeds_is_a_usage_error() {
    let out = horde(&["vopr", "--seeds", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("--seeds"),
        "{}",
        text(&out.stderr)
    );
}

/// `--from u64::MAX --seeds 3` reported "3 seeds ... 0 failing" although none ran.
#[test]
fn a_seed_range_past_the_last_seed_is_refused_and_the_last_seed_runs() {
    let out = horde(&["vopr", "--from", "18446744073709551615", "--seeds", "3"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let e = text(&out.stderr);
    assert!(
        e.contains("runs past the last seed") && e.contains("at most 1 seeds"),
        "{e}"
    );
    let out = horde(&["vopr", "--from", "18446744073709551615", "--seeds", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("1 seeds from 18446744073709551615"),
        "{}",
        text(&out.stdout)
    );
}
