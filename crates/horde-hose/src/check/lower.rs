//! Type checking and lowering to IR (second pass), with the diagnostics.

use std::sync::Arc;

use super::infer::Ty;
use super::resolve::Ref;
use super::{Checker, Mode, STREAM_FIELDS};
use crate::ast::{BinOp, Expr, ExprKind, Func, UnOp, VarKind};
use crate::ir::{AppField, ArOp, Atom, Bool, CmpOp, Num, Scalar, Str, Var};

impl Checker<'_> {
    pub(super) fn describe(&self, e: &Expr, ty: Ty) -> String {
        match (ty, &e.kind) {
            (Ty::Scalar(s), _) => s.article().to_string(),
            (Ty::Unknown(_), _) => "a field of unknown type".to_string(),
            (Ty::LossPdf, ExprKind::Field { var, field }) => format!(
                "`{0}::{1}`, a loss distribution (use `prob({0}::{1})`)",
                var.name, field.name
            ),
            (Ty::LossPdf, ExprKind::Call { args, .. }) => {
                let names: Vec<String> = args.iter().map(short).collect();
                let call = format!("correlated_loss({})", names.join(", "));
                format!("`{call}`, a loss distribution (use `prob({call})`)")
            }
            (Ty::LatencyPdf, ExprKind::Field { var, field }) => format!(
                "`{0}::{1}`, a latency distribution (use `expected({0}::{1})`)",
                var.name, field.name
            ),
            (Ty::AduVar, _) => format!(
                "the ADU variable `{}` (use one of its fields, as in `{}::length`)",
                short(e),
                short(e)
            ),
            (Ty::StreamVar, _) => format!(
                "the stream variable `{}` (use one of its fields: {STREAM_FIELDS})",
                short(e)
            ),
            _ => "a distribution".to_string(),
        }
    }

    pub(super) fn mismatch(&mut self, e: &Expr, mode: Mode, want: Scalar) {
        let ty = self.infer(e, mode);
        if ty == Ty::Bad {
            // The reference itself is wrong; report that instead.
            if let Some(Err(d)) = self.resolve(e, mode) {
                self.diags.push(d);
            }
            return;
        }
        let found = self.describe(e, ty);
        self.diag(e.pos, format!("expected {}, found {found}", want.article()));
    }

    pub(super) fn resolve_or_report(&mut self, e: &Expr, mode: Mode) -> Option<Ref> {
        match self.resolve(e, mode)? {
            Ok(r) => Some(r),
            Err(d) => {
                self.diags.push(d);
                None
            }
        }
    }

    /// The IR slot of an application field whose use has type `want`.
    pub(super) fn app_field(&mut self, e: &Expr, f: usize, want: Scalar) -> Option<u16> {
        let name = self.fields.name(f).to_string();
        match self.fields.ty(f) {
            Some(t) if t == want => {}
            Some(t) => {
                let first = self.at(self.fields.fixed_at(f));
                self.diag(
                    e.pos,
                    format!(
                        "field `{name}` is {} (from its use at {first}), not {}",
                        t.article(),
                        want.article()
                    ),
                );
                return None;
            }
            None => {
                self.diag(
                    e.pos,
                    format!(
                        "cannot tell the type of field `{name}`: compare it with a literal somewhere"
                    ),
                );
                return None;
            }
        }
        if let Some(&slot) = self.field_slot.get(&f) {
            return Some(slot);
        }
        let slot = u16::try_from(self.ir_fields.len()).ok()?;
        self.ir_fields.push(AppField {
            name: Arc::from(name.as_str()),
            ty: want,
        });
        self.field_slot.insert(f, slot);
        Some(slot)
    }

    pub(super) fn note_read(&mut self, r: Ref, mode: Mode) {
        if mode == Mode::Body {
            match r {
                Ref::Pre(..) | Ref::App(..) => self.body_reads_fields = true,
                Ref::Stream(v, _) => self.stream_read[v as usize] = true,
                _ => {}
            }
        }
    }

    pub(super) fn atom(&mut self, a: Atom) -> Num {
        let i = match self.atoms.iter().position(|&x| x == a) {
            Some(i) => i,
            None => {
                self.atoms.push(a);
                self.atoms.len() - 1
            }
        };
        Num::Atom(i as u16)
    }

    pub(super) fn num(&mut self, e: &Expr, mode: Mode) -> Option<Num> {
        match &e.kind {
            ExprKind::Int(v) => Some(Num::Lit(*v)),
            ExprKind::Name(_) | ExprKind::Field { .. } => {
                let r = self.resolve_or_report(e, mode)?;
                self.note_read(r, mode);
                match r {
                    Ref::Pre(v, f) => Some(Num::Pre(v, f)),
                    Ref::Stream(v, f) => Some(Num::Stream(v, f)),
                    Ref::App(v, f) => Some(Num::App(v, self.app_field(e, f, Scalar::Num)?)),
                    _ => {
                        self.mismatch(e, mode, Scalar::Num);
                        None
                    }
                }
            }
            ExprKind::Unary(UnOp::Neg, x) => Some(Num::Neg(Box::new(self.num(x, mode)?))),
            ExprKind::Unary(UnOp::Plus, x) => self.num(x, mode),
            ExprKind::Binary { op, lhs, rhs, .. } if !op.is_comparison() && !is_logic(*op) => {
                let l = self.num(lhs, mode);
                let r = self.num(rhs, mode);
                let op = match op {
                    BinOp::Add => ArOp::Add,
                    BinOp::Sub => ArOp::Sub,
                    BinOp::Mul => ArOp::Mul,
                    _ => ArOp::Div,
                };
                Some(Num::Bin(op, Box::new(l?), Box::new(r?)))
            }
            ExprKind::Call { func, args } => self.num_call(e, *func, args, mode),
            _ => {
                self.mismatch(e, mode, Scalar::Num);
                None
            }
        }
    }

    pub(super) fn arity(&mut self, e: &Expr, func: Func, args: &[Expr], n: usize) -> bool {
        if args.len() == n {
            return true;
        }
        let s = if n == 1 { "" } else { "s" };
        self.diag(
            e.pos,
            format!(
                "`{}` takes {n} argument{s}, found {}",
                func.name(),
                args.len()
            ),
        );
        false
    }

    pub(super) fn num_call(
        &mut self,
        e: &Expr,
        func: Func,
        args: &[Expr],
        mode: Mode,
    ) -> Option<Num> {
        let dist = matches!(func, Func::Prob | Func::Expected | Func::CorrelatedLoss);
        if dist && matches!(mode, Mode::Filter(_)) {
            self.diag(
                e.pos,
                format!("`{}` cannot be used in a context filter", func.name()),
            );
            return None;
        }
        match func {
            Func::Prob => {
                if !self.arity(e, func, args, 1) {
                    return None;
                }
                let a = &args[0];
                match &a.kind {
                    ExprKind::Call {
                        func: Func::CorrelatedLoss,
                        args: pair,
                    } => {
                        let (x, y) = self.corr_args(a, pair)?;
                        Some(self.atom(Atom::Corr(x, y)))
                    }
                    ExprKind::Field { .. } => match self.resolve_or_report(a, mode)? {
                        Ref::LossPdf(v) => Some(self.atom(Atom::Prob(v))),
                        _ => {
                            self.diag(a.pos, "`prob` needs a loss distribution: `x::lost?` or `correlated_loss(x, y)`");
                            None
                        }
                    },
                    _ => {
                        self.diag(a.pos, "`prob` needs a loss distribution: `x::lost?` or `correlated_loss(x, y)`");
                        None
                    }
                }
            }
            Func::Expected => {
                if !self.arity(e, func, args, 1) {
                    return None;
                }
                let a = &args[0];
                let r = match &a.kind {
                    ExprKind::Field { .. } => self.resolve_or_report(a, mode)?,
                    _ => Ref::Var(0),
                };
                match (r, &a.kind) {
                    (Ref::LatencyPdf(v), ExprKind::Field { .. }) => {
                        Some(self.atom(Atom::Latency(v)))
                    }
                    _ => {
                        self.diag(
                            a.pos,
                            "`expected` needs a latency distribution: `x::latency`",
                        );
                        None
                    }
                }
            }
            Func::CorrelatedLoss => {
                self.mismatch(e, mode, Scalar::Num);
                None
            }
            Func::Min | Func::Max => {
                if !self.arity(e, func, args, 2) {
                    return None;
                }
                let a = self.num(&args[0], mode);
                let b = self.num(&args[1], mode);
                let op = if func == Func::Min {
                    ArOp::Min
                } else {
                    ArOp::Max
                };
                Some(Num::Bin(op, Box::new(a?), Box::new(b?)))
            }
            Func::Abs => {
                if !self.arity(e, func, args, 1) {
                    return None;
                }
                Some(Num::Abs(Box::new(self.num(&args[0], mode)?)))
            }
        }
    }

    /// The two ADU variables of `correlated_loss(x, y)`.
    pub(super) fn corr_args(&mut self, call: &Expr, args: &[Expr]) -> Option<(Var, Var)> {
        if !self.arity(call, Func::CorrelatedLoss, args, 2) {
            return None;
        }
        let mut vs = [0 as Var; 2];
        let mut ok = true;
        for (i, a) in args.iter().enumerate() {
            let ExprKind::Name(n) = &a.kind else {
                self.diag(a.pos, "`correlated_loss` takes two ADU variables");
                ok = false;
                continue;
            };
            match self.by_name.get(n).copied() {
                None => {
                    self.diag(a.pos, format!("unknown variable `{n}`"));
                    ok = false;
                }
                Some(v) if self.vars[v as usize].kind == VarKind::Stream => {
                    self.diag(
                        a.pos,
                        format!(
                            "`{n}` is a stream variable; `correlated_loss` takes ADU variables"
                        ),
                    );
                    ok = false;
                }
                Some(v) => vs[i] = v,
            }
        }
        if ok && vs[0] == vs[1] {
            self.diag(call.pos, "`correlated_loss` needs two different variables");
            ok = false;
        }
        ok.then_some((vs[0], vs[1]))
    }

    pub(super) fn boolean(&mut self, e: &Expr, mode: Mode) -> Option<Bool> {
        match &e.kind {
            ExprKind::Bool(b) => Some(Bool::Lit(*b)),
            ExprKind::Name(_) | ExprKind::Field { .. } => {
                let r = self.resolve_or_report(e, mode)?;
                self.note_read(r, mode);
                match r {
                    Ref::App(v, f) => Some(Bool::App(v, self.app_field(e, f, Scalar::Bool)?)),
                    _ => {
                        self.mismatch(e, mode, Scalar::Bool);
                        None
                    }
                }
            }
            ExprKind::Unary(UnOp::Not, x) => Some(Bool::Not(Box::new(self.boolean(x, mode)?))),
            ExprKind::Binary {
                op: op @ (BinOp::And | BinOp::Or),
                lhs,
                rhs,
                ..
            } => {
                let l = self.boolean(lhs, mode);
                let r = self.boolean(rhs, mode);
                let (l, r) = (Box::new(l?), Box::new(r?));
                Some(if *op == BinOp::And {
                    Bool::And(l, r)
                } else {
                    Bool::Or(l, r)
                })
            }
            ExprKind::Binary {
                op,
                op_pos,
                lhs,
                rhs,
            } if op.is_comparison() => self.comparison(*op, *op_pos, lhs, rhs, mode),
            _ => {
                self.mismatch(e, mode, Scalar::Bool);
                None
            }
        }
    }

    pub(super) fn comparison(
        &mut self,
        op: BinOp,
        op_pos: u32,
        lhs: &Expr,
        rhs: &Expr,
        mode: Mode,
    ) -> Option<Bool> {
        let kind = |t: Ty| match t {
            Ty::Scalar(s) => Some(s),
            Ty::LossPdf | Ty::LatencyPdf => Some(Scalar::Num),
            _ => None,
        };
        let (lt, rt) = (self.infer(lhs, mode), self.infer(rhs, mode));
        let k = match (kind(lt), kind(rt)) {
            (Some(a), Some(b)) if a != b => {
                self.diag(
                    op_pos,
                    format!("cannot compare {} with {}", a.article(), b.article()),
                );
                return None;
            }
            (Some(a), _) | (_, Some(a)) => a,
            (None, None) => Scalar::Num,
        };
        let ordering = !matches!(op, BinOp::Eq | BinOp::Ne);
        if ordering && k != Scalar::Num {
            let what = if k == Scalar::Str {
                "strings"
            } else {
                "booleans"
            };
            self.diag(
                op_pos,
                format!(
                    "{what} can only be compared with `==` and `!=`, not `{}`",
                    op.symbol()
                ),
            );
            return None;
        }
        let ne = op == BinOp::Ne;
        match k {
            Scalar::Num => {
                let l = self.num(lhs, mode);
                let r = self.num(rhs, mode);
                let op = match op {
                    BinOp::Eq => CmpOp::Eq,
                    BinOp::Ne => CmpOp::Ne,
                    BinOp::Lt => CmpOp::Lt,
                    BinOp::Le => CmpOp::Le,
                    BinOp::Gt => CmpOp::Gt,
                    _ => CmpOp::Ge,
                };
                Some(Bool::Cmp(op, Box::new(l?), Box::new(r?)))
            }
            Scalar::Bool => {
                let l = self.boolean(lhs, mode);
                let r = self.boolean(rhs, mode);
                Some(Bool::Same(ne, Box::new(l?), Box::new(r?)))
            }
            Scalar::Str => {
                let l = self.string(lhs, mode);
                let r = self.string(rhs, mode);
                Some(Bool::StrEq(ne, l?, r?))
            }
        }
    }

    pub(super) fn string(&mut self, e: &Expr, mode: Mode) -> Option<Str> {
        match &e.kind {
            ExprKind::Str(s) => Some(Str::Lit(Arc::from(s.as_str()))),
            ExprKind::Name(_) | ExprKind::Field { .. } => {
                let r = self.resolve_or_report(e, mode)?;
                self.note_read(r, mode);
                match r {
                    Ref::App(v, f) => Some(Str::App(v, self.app_field(e, f, Scalar::Str)?)),
                    _ => {
                        self.mismatch(e, mode, Scalar::Str);
                        None
                    }
                }
            }
            _ => {
                self.mismatch(e, mode, Scalar::Str);
                None
            }
        }
    }
}

fn is_logic(op: BinOp) -> bool {
    matches!(op, BinOp::And | BinOp::Or)
}

/// A short rendering of a simple expression for messages.
fn short(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Name(n) => n.clone(),
        ExprKind::Field { var, field } => format!("{}::{}", var.name, field.name),
        _ => "…".to_string(),
    }
}
