//! The latency bound an objective's goal implies for a stream (docs/hose.md, "Latency
//! bounds"): what `StreamConfig::latency_bound_ms` takes when a stream asks for the
//! bound of its objectives instead of a number of its own.
//!
//! A goal implies a bound only when it is a clear upper bound on the stream's latency:
//! one of its top-level `&&` conjuncts compares, against an integer literal,
//! - `expected(x::latency)` where `x`'s filter is only `stream_id == N` tests that admit
//!   the stream (every ADU of it binds `x`, so every ADU is held to the bound), or
//! - `s::latency_ave` where `s` is bound to the stream,
//!
//! as `<= N` or `< N` (or mirrored, `N >= ...`). A utility that merely prefers less
//! latency, a bound inside `||` or `!`, a bound on something computed from the
//! latency (`expected(x::latency) - x::queue_delay`) or on only some of the stream's
//! ADUs implies none: then the objective trades latency against other things, and
//! bounding the channels would override that trade.

use crate::ir::{Atom, Bool, CmpOp, Num, ProgramIr, StreamField, VarIr};
use crate::prepare::stream_id_set;
use crate::CompiledObjective;

impl CompiledObjective {
    /// The upper bound, in ms, this objective's goal puts on the latency of stream
    /// `stream`'s ADUs, if it puts one (see the module's rule); the tightest if several
    /// conjuncts do.
    pub fn latency_bound_ms(&self, stream: u32) -> Option<f64> {
        let mut conjuncts = Vec::new();
        top_conjuncts(&self.ir.goal, &mut conjuncts);
        conjuncts
            .into_iter()
            .filter_map(|c| bound_of(&self.ir, c, stream))
            .min()
            .map(|ms| ms as f64)
    }
}

/// The tightest latency bound any of `objectives` implies for `stream`.
pub fn latency_bound_ms<'a>(
    objectives: impl IntoIterator<Item = &'a CompiledObjective>,
    stream: u32,
) -> Option<f64> {
    objectives
        .into_iter()
        .filter_map(|o| o.latency_bound_ms(stream))
        .min_by(f64::total_cmp)
}

fn top_conjuncts<'a>(b: &'a Bool, out: &mut Vec<&'a Bool>) {
    match b {
        Bool::And(x, y) => {
            top_conjuncts(x, out);
            top_conjuncts(y, out);
        }
        other => out.push(other),
    }
}

/// The bound in ms one conjunct of the goal puts on `stream`, if it is of the form.
fn bound_of(ir: &ProgramIr, b: &Bool, stream: u32) -> Option<i64> {
    let Bool::Cmp(op, l, r) = b else {
        return None;
    };
    // Put the latency on the left: `N >= lat` is `lat <= N`.
    let (op, lat, limit) = match (op, &**l, &**r) {
        (CmpOp::Le | CmpOp::Lt, lat, Num::Lit(n)) => (*op, lat, *n),
        (CmpOp::Ge, Num::Lit(n), lat) => (CmpOp::Le, lat, *n),
        (CmpOp::Gt, Num::Lit(n), lat) => (CmpOp::Lt, lat, *n),
        _ => return None,
    };
    if !is_latency_of(ir, lat, stream) {
        return None;
    }
    // Latencies are whole ms: `< N` is `<= N - 1`.
    Some(if op == CmpOp::Lt {
        limit.saturating_sub(1)
    } else {
        limit
    })
}

/// Whether `n` is the expected latency of every ADU of `stream`, or its average.
fn is_latency_of(ir: &ProgramIr, n: &Num, stream: u32) -> bool {
    match n {
        Num::Atom(i) => match ir.atoms.get(usize::from(*i)) {
            Some(Atom::Latency(v)) => match ir.vars.get(usize::from(*v)) {
                Some(VarIr::Adu { indep, dep }) => {
                    dep.is_empty()
                        && !indep.is_empty()
                        && stream_id_set(indep, *v)
                            .is_some_and(|ids| ids.contains(&i64::from(stream)))
                }
                _ => false,
            },
            _ => false,
        },
        Num::Stream(v, StreamField::LatencyAve) => {
            ir.vars.get(usize::from(*v)) == Some(&VarIr::Stream(stream))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use crate::compile;

    fn bound(src: &str, stream: u32) -> Option<f64> {
        compile(src)
            .unwrap_or_else(|e| panic!("{e:?}"))
            .latency_bound_ms(stream)
    }

    #[test]
    fn a_goal_on_every_adus_expected_latency_bounds_the_stream() {
        let voice = "objective {
            context { adu:voice { stream_id == 2 } }
            goal { expected(voice::latency) <= 130 }
            utility { voice { 200 - expected(voice::latency) } }
        }";
        assert_eq!(bound(voice, 2), Some(130.0));
        // Not about stream 1.
        assert_eq!(bound(voice, 1), None);
        // Strict, mirrored, one conjunct of several, the tightest of two.
        let strict = "objective {
            context { adu:x { (stream_id == 1) || (stream_id == 2) } }
            goal { (prob(x::lost?) < 10) && (150 > expected(x::latency)) && (expected(x::latency) <= 400) }
            utility { x { 1 } }
        }";
        assert_eq!(bound(strict, 1), Some(149.0));
        assert_eq!(bound(strict, 2), Some(149.0));
        assert_eq!(bound(strict, 3), None);
    }

    #[test]
    fn a_goal_on_the_streams_average_latency_bounds_it() {
        let y2 = include_str!("../../../objectives/y2.hose");
        assert_eq!(bound(y2, 7), Some(999.0));
        assert_eq!(bound(y2, 8), None);
    }

    #[test]
    fn preferences_and_partial_or_indirect_bounds_imply_none() {
        let cases = [
            // A utility that prefers less latency, with no goal on it (Fig. 7-4).
            include_str!("../../../objectives/fig7-4.hose"),
            // A goal on loss only.
            include_str!("../../../objectives/x2.hose"),
            // Latency inside `||`: either may hold.
            "objective {
                context { adu:x { stream_id == 3 } }
                goal { (expected(x::latency) <= 100) || (prob(x::lost?) < 5) }
                utility { x { 1 } }
            }",
            // A lower bound.
            "objective {
                context { adu:x { stream_id == 3 } }
                goal { expected(x::latency) >= 100 }
                utility { x { 1 } }
            }",
            // Only the I-frames of the stream.
            "objective {
                context { adu:x { (stream_id == 3) && (frame_type == \"I\") } }
                goal { expected(x::latency) <= 100 }
                utility { x { 1 } }
            }",
            // The round trip without the ADU's queueing, not its latency.
            "objective {
                context { adu:x { stream_id == 3 } }
                goal { expected(x::latency) - x::queue_delay <= 700 }
                utility { x { 1 } }
            }",
            // Against another quantity, not a literal.
            "objective {
                context { adu:x { stream_id == 3 } }
                goal { expected(x::latency) <= x::length }
                utility { x { 1 } }
            }",
        ];
        for src in cases {
            assert_eq!(bound(src, 3), None, "{src}");
        }
    }

    #[test]
    fn the_tightest_of_several_objectives_wins() {
        let a = compile(
            "objective { context { adu:x { stream_id == 1 } } goal { expected(x::latency) <= 300 } utility { x { 1 } } }",
        )
        .unwrap();
        let b = compile(
            "objective { context { stream:s { stream_id == 1 } } goal { s::latency_ave <= 120 } utility { s { 1 } } }",
        )
        .unwrap();
        let none = compile(include_str!("../../../objectives/x2.hose")).unwrap();
        assert_eq!(super::latency_bound_ms([&a, &b, &none], 1), Some(120.0));
        assert_eq!(super::latency_bound_ms([&a, &none], 1), Some(300.0));
        assert_eq!(super::latency_bound_ms([&none], 1), None);
    }
}
