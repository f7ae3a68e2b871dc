//! Interval analysis of a compiled objective: what one context can contribute, and
//! whether the goal can ever hold. Sound over every input: schedulers use the bounds
//! to skip moves that cannot pay off, and the checker rejects goals that can never
//! be true.

use crate::ir::{
    arith, ArOp, Atom, Bool, CmpOp, Num, PreField, ProgramIr, Str, StreamField, VarIr,
};

/// A three-valued truth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tri {
    False,
    True,
    Unknown,
}

/// Closed integer interval; `missing` means the value may be absent (an
/// application field an ADU lacks), which makes any comparison on it false.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Iv {
    lo: i64,
    hi: i64,
    missing: bool,
}

const FULL: Iv = Iv {
    lo: i64::MIN,
    hi: i64::MAX,
    missing: false,
};

fn iv(lo: i64, hi: i64) -> Iv {
    Iv {
        lo,
        hi,
        missing: false,
    }
}

pub(crate) fn goal(ir: &ProgramIr) -> Tri {
    tri(&ir.goal, ir)
}

/// Bounds on one context's contribution (0 when the goal fails or the context's
/// ADUs are not all placed).
pub(crate) fn term(ir: &ProgramIr) -> (i64, i64) {
    let mut sum = iv(0, 0);
    for (_, u) in &ir.utility {
        let x = num(u, ir);
        // A utility that reads a missing field contributes 0.
        let x = if x.missing { hull(x, iv(0, 0)) } else { x };
        sum = iv(sum.lo.saturating_add(x.lo), sum.hi.saturating_add(x.hi));
    }
    let b = match goal(ir) {
        Tri::False => iv(0, 0),
        // A context whose ADUs are not all placed contributes 0 as well.
        Tri::True | Tri::Unknown => hull(sum, iv(0, 0)),
    };
    (b.lo, b.hi)
}

fn hull(a: Iv, b: Iv) -> Iv {
    Iv {
        lo: a.lo.min(b.lo),
        hi: a.hi.max(b.hi),
        missing: a.missing || b.missing,
    }
}

fn num(n: &Num, ir: &ProgramIr) -> Iv {
    match n {
        Num::Lit(v) => iv(*v, *v),
        Num::Pre(_, f) => match f {
            PreField::StreamId | PreField::Length => iv(0, i64::from(u32::MAX)),
            PreField::StreamSeq => iv(0, i64::MAX),
            PreField::QueueDelay => FULL,
        },
        Num::App(..) => Iv {
            missing: true,
            ..FULL
        },
        Num::Atom(i) => match ir.atoms.get(*i as usize) {
            Some(Atom::Prob(_) | Atom::Corr(..)) => iv(0, 100),
            _ => FULL,
        },
        Num::Stream(v, f) => match f {
            StreamField::Id => match ir.vars.get(*v as usize) {
                Some(VarIr::Stream(id)) => iv(i64::from(*id), i64::from(*id)),
                _ => FULL,
            },
            StreamField::LatencyAve => FULL,
            StreamField::LatencySdev => iv(0, i64::MAX),
            StreamField::LossRate => iv(0, 100),
        },
        Num::Neg(x) => {
            let x = num(x, ir);
            Iv {
                lo: x.hi.saturating_neg(),
                hi: x.lo.saturating_neg(),
                missing: x.missing,
            }
        }
        Num::Abs(x) => {
            let x = num(x, ir);
            let (lo, hi) = if x.lo >= 0 {
                (x.lo, x.hi)
            } else if x.hi <= 0 {
                (x.hi.saturating_neg(), x.lo.saturating_neg())
            } else {
                (0, x.hi.max(x.lo.saturating_neg()))
            };
            Iv {
                lo,
                hi,
                missing: x.missing,
            }
        }
        Num::Bin(op, a, b) => {
            let (a, b) = (num(a, ir), num(b, ir));
            let missing = a.missing || b.missing;
            let r = match op {
                ArOp::Add | ArOp::Min | ArOp::Max => {
                    iv(arith(*op, a.lo, b.lo), arith(*op, a.hi, b.hi))
                }
                ArOp::Sub => iv(a.lo.saturating_sub(b.hi), a.hi.saturating_sub(b.lo)),
                ArOp::Mul => corners(*op, a, b),
                ArOp::Div => {
                    if b.lo > 0 || b.hi < 0 {
                        corners(*op, a, b)
                    } else {
                        // |a / b| <= |a| for b != 0, and a / 0 == 0.
                        let m = a.lo.saturating_neg().max(a.hi).max(0);
                        iv(m.saturating_neg(), m)
                    }
                }
            };
            Iv { missing, ..r }
        }
    }
}

/// Extremes of a function monotone in each argument over a box lie at its corners.
fn corners(op: ArOp, a: Iv, b: Iv) -> Iv {
    let c = [
        arith(op, a.lo, b.lo),
        arith(op, a.lo, b.hi),
        arith(op, a.hi, b.lo),
        arith(op, a.hi, b.hi),
    ];
    iv(
        c.iter().copied().min().unwrap_or(i64::MIN),
        c.iter().copied().max().unwrap_or(i64::MAX),
    )
}

fn not(t: Tri) -> Tri {
    match t {
        Tri::False => Tri::True,
        Tri::True => Tri::False,
        Tri::Unknown => Tri::Unknown,
    }
}

fn tri(b: &Bool, ir: &ProgramIr) -> Tri {
    match b {
        Bool::Lit(v) => {
            if *v {
                Tri::True
            } else {
                Tri::False
            }
        }
        Bool::App(..) => Tri::Unknown,
        Bool::Not(x) => not(tri(x, ir)),
        Bool::And(x, y) => match (tri(x, ir), tri(y, ir)) {
            (Tri::False, _) | (_, Tri::False) => Tri::False,
            (Tri::True, Tri::True) => Tri::True,
            _ => Tri::Unknown,
        },
        Bool::Or(x, y) => match (tri(x, ir), tri(y, ir)) {
            (Tri::True, _) | (_, Tri::True) => Tri::True,
            (Tri::False, Tri::False) => Tri::False,
            _ => Tri::Unknown,
        },
        Bool::Cmp(op, x, y) => {
            let (a, b) = (num(x, ir), num(y, ir));
            let t = compare(*op, a, b);
            if (a.missing || b.missing) && t == Tri::True {
                Tri::Unknown
            } else {
                t
            }
        }
        Bool::Same(ne, x, y) => match (tri(x, ir), tri(y, ir)) {
            (Tri::Unknown, _) | (_, Tri::Unknown) => Tri::Unknown,
            (p, q) => {
                if (p == q) != *ne {
                    Tri::True
                } else {
                    Tri::False
                }
            }
        },
        Bool::StrEq(ne, Str::Lit(x), Str::Lit(y)) => {
            if (x == y) != *ne {
                Tri::True
            } else {
                Tri::False
            }
        }
        Bool::StrEq(..) => Tri::Unknown,
    }
}

fn compare(op: CmpOp, a: Iv, b: Iv) -> Tri {
    let lt = |a: Iv, b: Iv| {
        if a.hi < b.lo {
            Tri::True
        } else if a.lo >= b.hi {
            Tri::False
        } else {
            Tri::Unknown
        }
    };
    let eq = if a.lo == a.hi && b.lo == b.hi && a.lo == b.lo {
        Tri::True
    } else if a.hi < b.lo || b.hi < a.lo {
        Tri::False
    } else {
        Tri::Unknown
    };
    match op {
        CmpOp::Lt => lt(a, b),
        CmpOp::Gt => lt(b, a),
        CmpOp::Ge => not(lt(a, b)),
        CmpOp::Le => not(lt(b, a)),
        CmpOp::Eq => eq,
        CmpOp::Ne => not(eq),
    }
}
