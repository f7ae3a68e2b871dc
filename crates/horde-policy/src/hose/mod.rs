//! hose, the Horde Objective Specification Environment (thesis ch. 6, App. B).
//!
//! [`compile`] parses, type-checks and compiles one objective into a
//! [`CompiledObjective`], which implements [`crate::Objective`]. The language
//! reference, including every place this implementation decides something the
//! thesis leaves open, is `docs/hose.md`.

mod ast;
mod bounds;
mod check;
mod error;
mod eval;
mod ir;
mod memo;
mod parser;
mod prepare;
mod thesis;
mod typing;
mod window;

use std::path::Path;
use std::sync::Arc;

pub use error::HoseError;
pub use prepare::MAX_CONTEXTS;
pub use thesis::{thesis, THESIS};

use crate::objective::{Objective, PreparedObjective, Reprepare};
use crate::scheduler::{Assignment, ScheduleInput};

/// A checked, compiled objective. Cheap to clone.
#[derive(Debug, Clone)]
pub struct CompiledObjective {
    ir: Arc<ir::ProgramIr>,
}

impl CompiledObjective {
    /// Context variable names, in binding order.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.ir.var_names.iter().map(String::as_str)
    }

    /// Bounds on what one context can contribute, from interval analysis.
    pub fn context_bounds(&self) -> (i64, i64) {
        self.ir.bounds
    }
}

impl Objective for CompiledObjective {
    fn utility(&self, input: &ScheduleInput<'_>, assignment: &Assignment) -> i64 {
        prepare::PreparedHose::new(Arc::clone(&self.ir), input).utility(assignment)
    }

    fn prepare<'a>(&'a self, input: &ScheduleInput<'a>) -> Box<dyn PreparedObjective + 'a> {
        Box::new(prepare::PreparedHose::new(Arc::clone(&self.ir), input))
    }

    fn prepare_owned(&self, input: &ScheduleInput<'_>) -> Option<Box<dyn Reprepare>> {
        Some(Box::new(prepare::PreparedHose::new(
            Arc::clone(&self.ir),
            input,
        )))
    }
}

/// Parse, check and compile one objective. Every problem found is returned, sorted
/// by position.
pub fn compile(source: &str) -> Result<CompiledObjective, Vec<HoseError>> {
    let program = parser::parse(source).map_err(|d| error::resolve(source, d))?;
    let ir = check::check(source, &program).map_err(|d| error::resolve(source, d))?;
    Ok(CompiledObjective { ir: Arc::new(ir) })
}

/// Check `source`, naming it `name` in messages: one `NAME:line:col: message` line
/// per problem, none if it compiles.
pub fn check_source(name: &str, source: &str) -> Vec<String> {
    match compile(source) {
        Ok(_) => Vec::new(),
        Err(errors) => errors.iter().map(|e| format!("{name}:{e}")).collect(),
    }
}

/// Check a `.hose` file: one `FILE:line:col: message` line per problem.
pub fn check_file(path: impl AsRef<Path>) -> Vec<String> {
    let path = path.as_ref();
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(source) => check_source(&name, &source),
        Err(e) => vec![format!("{name}:1:1: cannot read file: {e}")],
    }
}
