//! The evaluator: runs a compiled goal and utility against one context binding.
//! Everything it reads is already resolved to indices (variables, field slots,
//! atoms), so an evaluation does no lookups by name and no allocation.

use horde_policy::adu::AduView;

use crate::ir::{arith, compare, Bool, Num, PreField, ProgramIr, Str, StreamField, Var};

/// One application field of one ADU, already checked against the field's type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum FieldVal {
    /// The ADU lacks the field or holds another type: predicates on it are false.
    Missing,
    Int(i64),
    Bool(bool),
    /// Start and length of the text in [`Env::strings`].
    Str(u32, u32),
}

/// The predefined fields of one ADU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PreVals {
    pub stream_id: u32,
    pub stream_seq: u64,
    pub length: u32,
    pub queue_delay_ms: i64,
}

impl PreVals {
    pub fn of(a: &AduView) -> Self {
        PreVals {
            stream_id: a.stream_id,
            stream_seq: a.stream_seq,
            length: a.length,
            queue_delay_ms: a.queue_delay_ms,
        }
    }
}

/// Stream-variable field values for one evaluation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StreamVals {
    pub id: i64,
    pub latency_ave: i64,
    pub latency_sdev: i64,
    pub loss_rate: i64,
}

/// What one evaluation reads.
pub(crate) struct Env<'e> {
    /// Row (ADU) bound to each variable; unused for stream variables.
    pub rows: &'e [u32],
    pub pre: &'e [PreVals],
    /// Row-major `rows x fields` application-field table.
    pub app: &'e [FieldVal],
    /// The text of the string fields in `app`.
    pub strings: &'e str,
    pub n_fields: usize,
    pub atoms: &'e [i64],
    /// Per variable; only stream variables' entries are meaningful.
    pub streams: &'e [StreamVals],
}

impl Env<'_> {
    fn row(&self, v: Var) -> usize {
        self.rows[v as usize] as usize
    }

    fn app(&self, v: Var, slot: u16) -> FieldVal {
        self.app[self.row(v) * self.n_fields + slot as usize]
    }
}

/// A context's contribution: the sum of the utility entries when the goal holds.
pub(crate) fn contribution(ir: &ProgramIr, env: &Env<'_>) -> i64 {
    if !boolean(&ir.goal, env) {
        return 0;
    }
    ir.utility
        .iter()
        .map(|(_, u)| num(u, env).unwrap_or(0))
        .fold(0i64, i64::saturating_add)
}

/// A number, or `None` when it reads a missing application field.
pub(crate) fn num(n: &Num, env: &Env<'_>) -> Option<i64> {
    Some(match n {
        Num::Lit(v) => *v,
        Num::Pre(v, f) => {
            let a = &env.pre[env.row(*v)];
            match f {
                PreField::StreamId => i64::from(a.stream_id),
                PreField::StreamSeq => i64::try_from(a.stream_seq).unwrap_or(i64::MAX),
                PreField::Length => i64::from(a.length),
                PreField::QueueDelay => a.queue_delay_ms,
            }
        }
        Num::App(v, s) => match env.app(*v, *s) {
            FieldVal::Int(i) => i,
            _ => return None,
        },
        Num::Atom(i) => env.atoms[*i as usize],
        Num::Stream(v, f) => {
            let s = &env.streams[*v as usize];
            match f {
                StreamField::Id => s.id,
                StreamField::LatencyAve => s.latency_ave,
                StreamField::LatencySdev => s.latency_sdev,
                StreamField::LossRate => s.loss_rate,
            }
        }
        Num::Neg(x) => num(x, env)?.saturating_neg(),
        Num::Abs(x) => num(x, env)?.saturating_abs(),
        Num::Bin(op, x, y) => arith(*op, num(x, env)?, num(y, env)?),
    })
}

/// A truth value. A comparison or boolean field that reads a missing application
/// field is false; `!` and the connectives then apply as usual.
pub(crate) fn boolean(b: &Bool, env: &Env<'_>) -> bool {
    match b {
        Bool::Lit(v) => *v,
        Bool::App(..) => bool_field(b, env).unwrap_or(false),
        Bool::Not(x) => !boolean(x, env),
        Bool::And(x, y) => boolean(x, env) && boolean(y, env),
        Bool::Or(x, y) => boolean(x, env) || boolean(y, env),
        Bool::Cmp(op, x, y) => match (num(x, env), num(y, env)) {
            (Some(a), Some(b)) => compare(*op, a, b),
            _ => false,
        },
        Bool::Same(ne, x, y) => match (bool_field(x, env), bool_field(y, env)) {
            (Some(a), Some(b)) => (a == b) != *ne,
            _ => false,
        },
        Bool::StrEq(ne, x, y) => match (string(x, env), string(y, env)) {
            (Some(a), Some(b)) => (a == b) != *ne,
            _ => false,
        },
    }
}

/// Like [`boolean`], but a bare boolean field that is missing gives `None`.
fn bool_field(b: &Bool, env: &Env<'_>) -> Option<bool> {
    match b {
        Bool::App(v, s) => match env.app(*v, *s) {
            FieldVal::Bool(x) => Some(x),
            _ => None,
        },
        other => Some(boolean(other, env)),
    }
}

fn string<'x>(s: &'x Str, env: &Env<'x>) -> Option<&'x str> {
    match s {
        Str::Lit(x) => Some(x),
        Str::App(v, slot) => match env.app(*v, *slot) {
            FieldVal::Str(start, len) => env
                .strings
                .get(start as usize..start as usize + len as usize),
            _ => None,
        },
    }
}
