//! The checked, resolved form of an objective that the evaluator runs: variables are
//! indices, application fields are slots in a per-cycle table, and every
//! slot-dependent quantity (`prob(x::lost?)`, `expected(x::latency)`,
//! `prob(correlated_loss(x, y))`) is an *atom* computed once per context evaluation.

use std::sync::Arc;

/// Index of a context variable, in binding order.
pub(crate) type Var = u8;

/// Most context variables in one objective.
pub(crate) const MAX_VARS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scalar {
    Num,
    Bool,
    Str,
}

impl Scalar {
    pub fn article(self) -> &'static str {
        match self {
            Scalar::Num => "a number",
            Scalar::Bool => "a boolean",
            Scalar::Str => "a string",
        }
    }
}

/// Numeric ADU fields Horde defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PreField {
    StreamId,
    StreamSeq,
    Length,
    QueueDelay,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamField {
    Id,
    LatencyAve,
    LatencySdev,
    LossRate,
}

/// A slot-dependent number, named by the variables it is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Atom {
    /// `prob(v::lost?)`, percent.
    Prob(Var),
    /// `expected(v::latency)`, ms.
    Latency(Var),
    /// `prob(correlated_loss(a, b))`, percent.
    Corr(Var, Var),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArOp {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Num {
    Lit(i64),
    Pre(Var, PreField),
    /// Application field (index into [`ProgramIr::fields`]); may be missing.
    App(Var, u16),
    Atom(u16),
    Stream(Var, StreamField),
    Neg(Box<Num>),
    Abs(Box<Num>),
    Bin(ArOp, Box<Num>, Box<Num>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Bool {
    Lit(bool),
    App(Var, u16),
    Not(Box<Bool>),
    And(Box<Bool>, Box<Bool>),
    Or(Box<Bool>, Box<Bool>),
    Cmp(CmpOp, Box<Num>, Box<Num>),
    /// `l == r` (or `!=` when the flag is set) on booleans.
    Same(bool, Box<Bool>, Box<Bool>),
    /// `l == r` (or `!=` when the flag is set) on strings.
    StrEq(bool, Str, Str),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Str {
    Lit(Arc<str>),
    App(Var, u16),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum VarIr {
    /// An ADU variable. Its filter is split into top-level `&&` conjuncts that read
    /// only the candidate (`indep`, evaluated once per ADU per cycle) and those that
    /// also read earlier variables (`dep`, evaluated per partial binding).
    Adu {
        indep: Vec<Bool>,
        dep: Vec<Bool>,
    },
    Stream(u32),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AppField {
    pub name: Arc<str>,
    pub ty: Scalar,
}

/// One compiled objective.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProgramIr {
    pub var_names: Vec<String>,
    pub vars: Vec<VarIr>,
    pub fields: Vec<AppField>,
    pub atoms: Vec<Atom>,
    pub goal: Bool,
    pub utility: Vec<(Var, Num)>,
    /// Goal or utility read ADU fields directly (not only through atoms).
    pub body_reads_fields: bool,
    /// Per variable: the goal or utility reads this stream variable's fields.
    pub stream_read: Vec<bool>,
    /// Any entry of `stream_read` is set.
    pub reads_streams: bool,
    /// Bounds on one context's contribution, from interval analysis.
    pub bounds: (i64, i64),
}

/// Saturating integer arithmetic: hose numbers never wrap, and `x / 0` is 0.
pub(crate) fn arith(op: ArOp, a: i64, b: i64) -> i64 {
    match op {
        ArOp::Add => a.saturating_add(b),
        ArOp::Sub => a.saturating_sub(b),
        ArOp::Mul => a.saturating_mul(b),
        ArOp::Div => {
            if b == 0 {
                0
            } else {
                a.checked_div(b).unwrap_or(i64::MAX)
            }
        }
        ArOp::Min => a.min(b),
        ArOp::Max => a.max(b),
    }
}

pub(crate) fn compare(op: CmpOp, a: i64, b: i64) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    }
}

/// Bit set of the variables an expression reads.
pub(crate) fn bool_vars(b: &Bool, out: &mut u32) {
    match b {
        Bool::Lit(_) => {}
        Bool::App(v, _) => *out |= 1 << v,
        Bool::Not(x) => bool_vars(x, out),
        Bool::And(x, y) | Bool::Or(x, y) | Bool::Same(_, x, y) => {
            bool_vars(x, out);
            bool_vars(y, out);
        }
        Bool::Cmp(_, x, y) => {
            num_vars(x, out);
            num_vars(y, out);
        }
        Bool::StrEq(_, x, y) => {
            for s in [x, y] {
                if let Str::App(v, _) = s {
                    *out |= 1 << v;
                }
            }
        }
    }
}

pub(crate) fn num_vars(n: &Num, out: &mut u32) {
    match n {
        Num::Lit(_) | Num::Atom(_) => {}
        Num::Pre(v, _) | Num::App(v, _) | Num::Stream(v, _) => *out |= 1 << v,
        Num::Neg(x) | Num::Abs(x) => num_vars(x, out),
        Num::Bin(_, x, y) => {
            num_vars(x, out);
            num_vars(y, out);
        }
    }
}
