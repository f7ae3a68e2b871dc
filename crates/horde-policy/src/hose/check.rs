//! Name resolution, type checking and lowering of a parsed objective to [`ProgramIr`].
//!
//! Two passes over the expressions, in source order: the first only collects what
//! each use says about application-field types; the second resolves names, checks
//! every type and lowers to IR, reporting all problems it finds.

use std::collections::HashMap;
use std::sync::Arc;

use super::ast::{BinOp, Binding, Expr, ExprKind, Func, Ident, Program, Section, UnOp, VarKind};
use super::bounds;
use super::error::{line_col, Diag};
use super::ir::{
    AppField, ArOp, Atom, Bool, CmpOp, Num, PreField, ProgramIr, Scalar, Str, StreamField, Var,
    VarIr, MAX_VARS,
};
use super::typing::FieldTypes;

/// Every reserved token of thesis §B.4 (none may name a variable).
pub(crate) const RESERVED: &[&str] = &[
    "objective",
    "context",
    "goal",
    "utility",
    "adu",
    "stream",
    "true",
    "false",
    "correlated_loss",
    "prob",
    "expected",
    "max",
    "min",
    "abs",
    "lost?",
    "latency",
    "stream_id",
    "stream_seq",
    "length",
    "queue_delay",
    "loss_rate",
    "latency_ave",
    "latency_sdev",
];

const STREAM_FIELDS: &str = "stream_id, latency_ave, latency_sdev, loss_rate";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Inside the filter of the given ADU variable: bare names are its fields.
    Filter(Var),
    /// Goal and utility.
    Body,
}

/// What a name or `var::field` refers to.
#[derive(Debug, Clone, Copy)]
enum Ref {
    Pre(Var, PreField),
    App(Var, usize),
    Stream(Var, StreamField),
    LossPdf(Var),
    LatencyPdf(Var),
    Var(Var),
}

/// The type an expression has, as far as inference can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
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

struct VarInfo {
    name: String,
    pos: u32,
    kind: VarKind,
    stream_id: u32,
}

struct Checker<'s> {
    src: &'s str,
    vars: Vec<VarInfo>,
    by_name: HashMap<String, Var>,
    fields: FieldTypes,
    field_slot: HashMap<usize, u16>,
    ir_fields: Vec<AppField>,
    atoms: Vec<Atom>,
    diags: Vec<Diag>,
    body_reads_fields: bool,
    stream_read: Vec<bool>,
}

pub(crate) fn check(src: &str, program: &Program) -> Result<ProgramIr, Vec<Diag>> {
    let mut c = Checker {
        src,
        vars: Vec::new(),
        by_name: HashMap::new(),
        fields: FieldTypes::default(),
        field_slot: HashMap::new(),
        ir_fields: Vec::new(),
        atoms: Vec::new(),
        diags: Vec::new(),
        body_reads_fields: false,
        stream_read: Vec::new(),
    };
    let (bindings, goal, utility) = c.sections(program);
    let adu_filters = c.bind(&bindings);
    let entries = c.utility_entries(&utility);

    // Pass 1: what each use says about application-field types, in source order.
    for s in &program.sections {
        match s {
            Section::Context { .. } => {
                for (k, f) in &adu_filters {
                    c.constrain(f, Mode::Filter(*k), Some(Scalar::Bool));
                }
            }
            Section::Goal { expr, .. } => c.constrain(expr, Mode::Body, Some(Scalar::Bool)),
            Section::Utility { entries, .. } => {
                for e in entries {
                    c.constrain(&e.expr, Mode::Body, Some(Scalar::Num));
                }
            }
        }
    }

    // Pass 2: check and lower.
    let mut vars: Vec<VarIr> = c
        .vars
        .iter()
        .map(|v| match v.kind {
            VarKind::Adu => VarIr::Adu {
                indep: Vec::new(),
                dep: Vec::new(),
            },
            VarKind::Stream => VarIr::Stream(v.stream_id),
        })
        .collect();
    for (k, filter) in &adu_filters {
        let mut parts = Vec::new();
        conjuncts(filter, &mut parts);
        for part in parts {
            if let Some(b) = c.boolean(part, Mode::Filter(*k)) {
                let mut read = 0u32;
                super::ir::bool_vars(&b, &mut read);
                if let VarIr::Adu { indep, dep } = &mut vars[*k as usize] {
                    if read & !(1u32 << k) == 0 {
                        indep.push(b);
                    } else {
                        dep.push(b);
                    }
                }
            }
        }
    }
    let goal_ir = goal.and_then(|g| {
        if let ExprKind::Bool(false) = g.kind {
            c.diag(g.pos, "`false` is not a valid goal");
            return None;
        }
        c.boolean(g, Mode::Body)
    });
    let mut utility_ir = Vec::new();
    for (v, e) in &entries {
        if let Some(n) = c.num(e, Mode::Body) {
            utility_ir.push((*v, n));
        }
    }

    if !c.diags.is_empty() {
        return Err(c.diags);
    }
    let Some(goal_ir) = goal_ir else {
        return Err(c.diags);
    };
    let mut ir = ProgramIr {
        var_names: c.vars.iter().map(|v| v.name.clone()).collect(),
        vars,
        fields: c.ir_fields,
        atoms: c.atoms,
        goal: goal_ir,
        utility: utility_ir,
        body_reads_fields: c.body_reads_fields,
        reads_streams: c.stream_read.iter().any(|&r| r),
        stream_read: c.stream_read,
        bounds: (0, 0),
    };
    if bounds::goal(&ir) == bounds::Tri::False {
        let at = goal.map_or(program.pos, |g| g.pos);
        return Err(vec![Diag::new(at, "the goal can never be true")]);
    }
    ir.bounds = bounds::term(&ir);
    Ok(ir)
}

/// Top-level `&&` operands of a filter.
fn conjuncts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match &e.kind {
        ExprKind::Binary {
            op: BinOp::And,
            lhs,
            rhs,
            ..
        } => {
            conjuncts(lhs, out);
            conjuncts(rhs, out);
        }
        _ => out.push(e),
    }
}

fn is_reserved(name: &str) -> bool {
    RESERVED.contains(&name)
}

impl<'s> Checker<'s> {
    fn diag(&mut self, at: u32, message: impl Into<String>) {
        self.diags.push(Diag::new(at, message));
    }

    fn at(&self, offset: u32) -> String {
        let (l, c) = line_col(self.src, offset as usize);
        format!("{l}:{c}")
    }

    /// Split the sections, reporting duplicates and missing ones.
    fn sections<'p>(
        &mut self,
        program: &'p Program,
    ) -> (
        Vec<&'p Binding>,
        Option<&'p Expr>,
        Vec<&'p super::ast::UtilityEntry>,
    ) {
        let (mut ctx, mut goal, mut util) = (None::<u32>, None::<u32>, None::<u32>);
        let mut bindings = Vec::new();
        let mut goal_expr = None;
        let mut entries = Vec::new();
        for s in &program.sections {
            let (slot, name, pos) = match s {
                Section::Context { pos, .. } => (&mut ctx, "context", *pos),
                Section::Goal { pos, .. } => (&mut goal, "goal", *pos),
                Section::Utility { pos, .. } => (&mut util, "utility", *pos),
            };
            if let Some(first) = *slot {
                let first = self.at(first);
                self.diag(
                    pos,
                    format!("duplicate `{name}` section (first at {first})"),
                );
                continue;
            }
            *slot = Some(pos);
            match s {
                Section::Context { bindings: b, .. } => bindings.extend(b.iter()),
                Section::Goal { expr, .. } => goal_expr = Some(expr),
                Section::Utility { entries: e, pos } => {
                    if e.is_empty() {
                        self.diag(
                            *pos,
                            "the utility section must give at least one `variable { expression }`",
                        );
                    }
                    entries.extend(e.iter());
                }
            }
        }
        for (slot, name) in [(ctx, "context"), (goal, "goal"), (util, "utility")] {
            if slot.is_none() {
                self.diag(program.pos, format!("missing `{name}` section"));
            }
        }
        (bindings, goal_expr, entries)
    }

    /// Declare the context variables; returns the ADU filters to check.
    fn bind<'p>(&mut self, bindings: &[&'p Binding]) -> Vec<(Var, &'p Expr)> {
        let mut filters = Vec::new();
        for b in bindings {
            let name = &b.name;
            if let Some(&v) = self.by_name.get(&name.name) {
                let first = self.at(self.vars[v as usize].pos);
                self.diag(
                    name.pos,
                    format!("variable `{}` is already bound at {first}", name.name),
                );
                continue;
            }
            if is_reserved(&name.name) {
                self.diag(
                    name.pos,
                    format!(
                        "`{}` is a reserved word and cannot name a variable",
                        name.name
                    ),
                );
            }
            if self.vars.len() >= MAX_VARS {
                self.diag(
                    name.pos,
                    format!("too many context variables (at most {MAX_VARS})"),
                );
                continue;
            }
            let stream_id = match b.kind {
                VarKind::Adu => 0,
                VarKind::Stream => self.stream_binding(&b.filter).unwrap_or(0),
            };
            let v = self.vars.len() as Var;
            self.vars.push(VarInfo {
                name: name.name.clone(),
                pos: name.pos,
                kind: b.kind,
                stream_id,
            });
            self.stream_read.push(false);
            self.by_name.insert(name.name.clone(), v);
            if b.kind == VarKind::Adu {
                filters.push((v, &b.filter));
            }
        }
        filters
    }

    /// A stream binding is exactly `stream_id == N` (thesis §B.2.2).
    fn stream_binding(&mut self, e: &Expr) -> Option<u32> {
        if let ExprKind::Binary {
            op: BinOp::Eq,
            lhs,
            rhs,
            ..
        } = &e.kind
        {
            if let (ExprKind::Name(n), ExprKind::Int(id)) = (&lhs.kind, &rhs.kind) {
                if n == "stream_id" {
                    if let Ok(id) = u32::try_from(*id) {
                        return Some(id);
                    }
                    self.diag(rhs.pos, "a stream id must be between 0 and 4294967295");
                    return None;
                }
            }
        }
        self.diag(e.pos, "a stream binding must be `stream_id == N`");
        None
    }

    fn utility_entries<'p>(
        &mut self,
        entries: &[&'p super::ast::UtilityEntry],
    ) -> Vec<(Var, &'p Expr)> {
        let mut seen: HashMap<Var, u32> = HashMap::new();
        let mut out = Vec::new();
        for e in entries {
            let Some(&v) = self.by_name.get(&e.var.name) else {
                self.diag(e.var.pos, format!("unknown variable `{}`", e.var.name));
                continue;
            };
            if let Some(&first) = seen.get(&v) {
                let first = self.at(first);
                self.diag(
                    e.var.pos,
                    format!("utility for `{}` is already given at {first}", e.var.name),
                );
                continue;
            }
            seen.insert(v, e.var.pos);
            out.push((v, &e.expr));
        }
        out
    }

    // ---- name resolution -------------------------------------------------------

    fn resolve_name(&mut self, name: &str, at: u32, mode: Mode) -> Result<Ref, Diag> {
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

    fn resolve_field(&mut self, var: &Ident, field: &Ident, mode: Mode) -> Result<Ref, Diag> {
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

    fn adu_field(&mut self, v: Var, name: &str, at: u32, mode: Mode) -> Result<Ref, Diag> {
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

    fn resolve(&mut self, e: &Expr, mode: Mode) -> Option<Result<Ref, Diag>> {
        match &e.kind {
            ExprKind::Name(n) => Some(self.resolve_name(n, e.pos, mode)),
            ExprKind::Field { var, field } => Some(self.resolve_field(var, field, mode)),
            _ => None,
        }
    }

    // ---- inference (no diagnostics) -------------------------------------------

    fn ref_ty(&self, r: Ref) -> Ty {
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

    fn infer(&mut self, e: &Expr, mode: Mode) -> Ty {
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
    fn constrain(&mut self, e: &Expr, mode: Mode, want: Option<Scalar>) {
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

    // ---- lowering (pass 2) -----------------------------------------------------

    fn describe(&self, e: &Expr, ty: Ty) -> String {
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

    fn mismatch(&mut self, e: &Expr, mode: Mode, want: Scalar) {
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

    fn resolve_or_report(&mut self, e: &Expr, mode: Mode) -> Option<Ref> {
        match self.resolve(e, mode)? {
            Ok(r) => Some(r),
            Err(d) => {
                self.diags.push(d);
                None
            }
        }
    }

    /// The IR slot of an application field whose use has type `want`.
    fn app_field(&mut self, e: &Expr, f: usize, want: Scalar) -> Option<u16> {
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

    fn note_read(&mut self, r: Ref, mode: Mode) {
        if mode == Mode::Body {
            match r {
                Ref::Pre(..) | Ref::App(..) => self.body_reads_fields = true,
                Ref::Stream(v, _) => self.stream_read[v as usize] = true,
                _ => {}
            }
        }
    }

    fn atom(&mut self, a: Atom) -> Num {
        let i = match self.atoms.iter().position(|&x| x == a) {
            Some(i) => i,
            None => {
                self.atoms.push(a);
                self.atoms.len() - 1
            }
        };
        Num::Atom(i as u16)
    }

    fn num(&mut self, e: &Expr, mode: Mode) -> Option<Num> {
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

    fn arity(&mut self, e: &Expr, func: Func, args: &[Expr], n: usize) -> bool {
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

    fn num_call(&mut self, e: &Expr, func: Func, args: &[Expr], mode: Mode) -> Option<Num> {
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
    fn corr_args(&mut self, call: &Expr, args: &[Expr]) -> Option<(Var, Var)> {
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

    fn boolean(&mut self, e: &Expr, mode: Mode) -> Option<Bool> {
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

    fn comparison(
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

    fn string(&mut self, e: &Expr, mode: Mode) -> Option<Str> {
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
