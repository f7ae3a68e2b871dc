//! Name resolution: what a bare name or `var::field` refers to, in a filter or in
//! the goal and utility.

use super::{is_reserved, Checker, Mode, STREAM_FIELDS};
use crate::ast::{Expr, ExprKind, Ident, VarKind};
use crate::error::Diag;
use crate::ir::{PreField, StreamField, Var};

/// What a name or `var::field` refers to.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ref {
    Pre(Var, PreField),
    App(Var, usize),
    Stream(Var, StreamField),
    LossPdf(Var),
    LatencyPdf(Var),
    Var(Var),
}

impl Checker<'_> {
    pub(super) fn resolve_name(&mut self, name: &str, at: u32, mode: Mode) -> Result<Ref, Diag> {
        match mode {
            Mode::Filter(k) => self.adu_field(k, name, at, mode),
            Mode::Body => {
                if let Some(&v) = self.by_name.get(name) {
                    return Ok(Ref::Var(v));
                }
                let is_field = matches!(
                    name,
                    "stream_id"
                        | "stream_seq"
                        | "length"
                        | "queue_delay"
                        | "lost?"
                        | "latency"
                        | "latency_ave"
                        | "latency_sdev"
                        | "loss_rate"
                );
                if is_field {
                    Err(Diag::new(
                        at,
                        format!("field `{name}` needs a variable, as in `foo::{name}`"),
                    ))
                } else {
                    Err(Diag::new(at, format!("unknown variable `{name}`")))
                }
            }
        }
    }

    pub(super) fn resolve_field(
        &mut self,
        var: &Ident,
        field: &Ident,
        mode: Mode,
    ) -> Result<Ref, Diag> {
        let Some(&v) = self.by_name.get(&var.name) else {
            return Err(Diag::new(
                var.pos,
                format!("unknown variable `{}`", var.name),
            ));
        };
        if let Mode::Filter(k) = mode {
            if v == k {
                return Err(Diag::new(
                    var.pos,
                    format!(
                        "inside its own filter, write the fields of `{}` bare (e.g. `{}`)",
                        var.name, field.name
                    ),
                ));
            }
            if v > k {
                return Err(Diag::new(
                    var.pos,
                    format!(
                        "`{}` is not bound yet: a filter can only use variables bound before it",
                        var.name
                    ),
                ));
            }
            if self.vars[v as usize].kind == VarKind::Stream {
                return Err(Diag::new(
                    var.pos,
                    "stream variables cannot be used in a context filter",
                ));
            }
        }
        match self.vars[v as usize].kind {
            VarKind::Adu => self.adu_field(v, &field.name, field.pos, mode),
            VarKind::Stream => {
                let f = match field.name.as_str() {
                    "stream_id" => StreamField::Id,
                    "latency_ave" => StreamField::LatencyAve,
                    "latency_sdev" => StreamField::LatencySdev,
                    "loss_rate" => StreamField::LossRate,
                    other => {
                        return Err(Diag::new(
                            field.pos,
                            format!(
                                "unknown stream field `{other}` (stream fields are {STREAM_FIELDS})"
                            ),
                        ))
                    }
                };
                Ok(Ref::Stream(v, f))
            }
        }
    }

    pub(super) fn adu_field(
        &mut self,
        v: Var,
        name: &str,
        at: u32,
        mode: Mode,
    ) -> Result<Ref, Diag> {
        let in_filter = matches!(mode, Mode::Filter(_));
        let pre = |f| Ok(Ref::Pre(v, f));
        match name {
            "stream_id" => pre(PreField::StreamId),
            "stream_seq" => pre(PreField::StreamSeq),
            "length" => pre(PreField::Length),
            "queue_delay" => pre(PreField::QueueDelay),
            "lost?" | "latency" if in_filter => Err(Diag::new(
                at,
                format!("`{name}` cannot be used in a context filter"),
            )),
            "lost?" => Ok(Ref::LossPdf(v)),
            "latency" => Ok(Ref::LatencyPdf(v)),
            "latency_ave" | "latency_sdev" | "loss_rate" => Err(Diag::new(
                at,
                format!("`{name}` is a stream field, not an ADU field"),
            )),
            _ if is_reserved(name) => Err(Diag::new(
                at,
                format!("`{name}` is a reserved word, not a field"),
            )),
            _ if name.ends_with('?') => Err(Diag::new(
                at,
                format!("unknown field `{name}` (the only `?` field is `lost?`)"),
            )),
            _ => Ok(Ref::App(v, self.fields.id(name))),
        }
    }

    pub(super) fn resolve(&mut self, e: &Expr, mode: Mode) -> Option<Result<Ref, Diag>> {
        match &e.kind {
            ExprKind::Name(n) => Some(self.resolve_name(n, e.pos, mode)),
            ExprKind::Field { var, field } => Some(self.resolve_field(var, field, mode)),
            _ => None,
        }
    }
}
