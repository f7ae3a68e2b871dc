//! Name resolution, type checking and lowering of a parsed objective to [`ProgramIr`].
//!
//! Two passes over the expressions, in source order: the first only collects what
//! each use says about application-field types; the second resolves names, checks
//! every type and lowers to IR, reporting all problems it finds.

mod infer;
mod lower;
mod resolve;

use std::collections::HashMap;

use horde_config::line_col;

use crate::ast::{BinOp, Binding, Expr, ExprKind, Program, Section, VarKind};
use crate::bounds;
use crate::error::Diag;
use crate::ir::{AppField, Atom, ProgramIr, Scalar, Var, VarIr, MAX_VARS};
use crate::typing::FieldTypes;

/// Every reserved word of thesis §B.4: keywords, functions and field names, none of
/// which may name a variable.
pub const RESERVED: &[&str] = &[
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

pub(super) const STREAM_FIELDS: &str = "stream_id, latency_ave, latency_sdev, loss_rate";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Inside the filter of the given ADU variable: bare names are its fields.
    Filter(Var),
    /// Goal and utility.
    Body,
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
                crate::ir::bool_vars(&b, &mut read);
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
        Vec<&'p crate::ast::UtilityEntry>,
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
        entries: &[&'p crate::ast::UtilityEntry],
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
}
