//! Type inference without diagnostics: the type an expression has, and (first
//! pass) what each use says about application-field types.

use super::resolve::Ref;
use super::{Checker, Mode};
use crate::ast::{BinOp, Expr, ExprKind, Func, UnOp, VarKind};
use crate::ir::Scalar;

/// The type an expression has, as far as inference can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ty {
    Scalar(Scalar),
    /// An application field whose type is not known (yet).
    Unknown(usize),
    LossPdf,
    LatencyPdf,
    AduVar,
    StreamVar,
    /// Does not resolve; the error is reported where it is lowered.
    Bad,
}

impl Checker<'_> {
    pub(super) fn ref_ty(&self, r: Ref) -> Ty {
        match r {
            Ref::Pre(..) | Ref::Stream(..) => Ty::Scalar(Scalar::Num),
            Ref::App(_, f) => self
                .fields
                .ty(f)
                .map_or(Ty::Unknown(self.fields.root(f)), Ty::Scalar),
            Ref::LossPdf(_) => Ty::LossPdf,
            Ref::LatencyPdf(_) => Ty::LatencyPdf,
            Ref::Var(v) => match self.vars[v as usize].kind {
                VarKind::Adu => Ty::AduVar,
                VarKind::Stream => Ty::StreamVar,
            },
        }
    }

    pub(super) fn infer(&mut self, e: &Expr, mode: Mode) -> Ty {
        match &e.kind {
            ExprKind::Int(_) => Ty::Scalar(Scalar::Num),
            ExprKind::Bool(_) => Ty::Scalar(Scalar::Bool),
            ExprKind::Str(_) => Ty::Scalar(Scalar::Str),
            ExprKind::Name(_) | ExprKind::Field { .. } => match self.resolve(e, mode) {
                Some(Ok(r)) => self.ref_ty(r),
                _ => Ty::Bad,
            },
            ExprKind::Unary(UnOp::Not, _) => Ty::Scalar(Scalar::Bool),
            ExprKind::Unary(_, _) => Ty::Scalar(Scalar::Num),
            ExprKind::Binary { op, .. } => match op {
                BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => Ty::Scalar(Scalar::Num),
                _ => Ty::Scalar(Scalar::Bool),
            },
            ExprKind::Call { func, .. } => match func {
                Func::CorrelatedLoss => Ty::LossPdf,
                _ => Ty::Scalar(Scalar::Num),
            },
        }
    }

    /// Pass 1: record what this use says about application-field types.
    pub(super) fn constrain(&mut self, e: &Expr, mode: Mode, want: Option<Scalar>) {
        match &e.kind {
            ExprKind::Name(_) | ExprKind::Field { .. } => {
                if let (Some(Ok(Ref::App(_, f))), Some(t)) = (self.resolve(e, mode), want) {
                    self.fields.assign(f, t, e.pos);
                }
            }
            ExprKind::Unary(UnOp::Not, x) => self.constrain(x, mode, Some(Scalar::Bool)),
            ExprKind::Unary(_, x) => self.constrain(x, mode, Some(Scalar::Num)),
            ExprKind::Binary { op, lhs, rhs, .. } => match op {
                BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => {
                    self.constrain(lhs, mode, Some(Scalar::Num));
                    self.constrain(rhs, mode, Some(Scalar::Num));
                }
                BinOp::And | BinOp::Or => {
                    self.constrain(lhs, mode, Some(Scalar::Bool));
                    self.constrain(rhs, mode, Some(Scalar::Bool));
                }
                BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                    // Ordering is numeric, unless a side is plainly a string or a
                    // boolean: then the error should say ordering is the problem.
                    let side = match (self.infer(lhs, mode), self.infer(rhs, mode)) {
                        (Ty::Scalar(s @ (Scalar::Str | Scalar::Bool)), _)
                        | (_, Ty::Scalar(s @ (Scalar::Str | Scalar::Bool))) => s,
                        _ => Scalar::Num,
                    };
                    self.constrain(lhs, mode, Some(side));
                    self.constrain(rhs, mode, Some(side));
                }
                BinOp::Eq | BinOp::Ne => {
                    let (lt, rt) = (self.infer(lhs, mode), self.infer(rhs, mode));
                    let side = match (lt, rt) {
                        (Ty::Scalar(s), _) | (_, Ty::Scalar(s)) => Some(s),
                        (Ty::LossPdf | Ty::LatencyPdf, _) | (_, Ty::LossPdf | Ty::LatencyPdf) => {
                            Some(Scalar::Num)
                        }
                        (Ty::Unknown(a), Ty::Unknown(b)) => {
                            self.fields.unify(a, b);
                            None
                        }
                        _ => None,
                    };
                    self.constrain(lhs, mode, side);
                    self.constrain(rhs, mode, side);
                }
            },
            ExprKind::Call { func, args } => {
                if matches!(func, Func::Min | Func::Max | Func::Abs) {
                    for a in args {
                        self.constrain(a, mode, Some(Scalar::Num));
                    }
                }
            }
            ExprKind::Int(_) | ExprKind::Bool(_) | ExprKind::Str(_) => {}
        }
    }
}
