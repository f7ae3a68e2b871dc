//! hose, the Horde Objective Specification Environment (thesis ch. 6, App. B): the
//! compiler from objective source to an objective the schedulers of `horde-policy` use.
//!
//! [`compile`] parses, type-checks and compiles one objective into a
//! [`CompiledObjective`], which implements [`horde_policy::Objective`]. The language
//! reference, including every place this implementation decides something the
//! thesis leaves open, is `docs/hose.md`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod ast;
mod bounds;
mod check;
mod error;
mod eval;
mod file;
mod ir;
mod latency_bound;
mod memo;
mod parser;
mod prepare;
#[cfg(feature = "testing")]
pub mod synth;
mod thesis;
mod typing;
mod window;

use std::sync::Arc;

pub use check::RESERVED;
pub use error::HoseError;
pub use file::{check_file, check_source, compile_named, load, load_compiled, FileError};
pub use latency_bound::latency_bound_ms;
pub use prepare::MAX_CONTEXTS;
pub use thesis::{thesis, THESIS};

use horde_policy::{Assignment, Objective, PreparedObjective, Reprepare, ScheduleInput};

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
