//! Objective files: compiling a `.hose` file or named source, with errors that name it.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use horde_config::input::Kind;
use horde_policy::Objective;

use crate::{compile, CompiledObjective};

/// A hose file that cannot be read or does not compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    /// The file, as given.
    pub file: String,
    /// `line:col: message` for each problem, joined by `; `.
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.message)
    }
}

impl std::error::Error for FileError {}

/// Read and compile one hose file. Errors name the file and the line:col inside it.
pub fn load(path: &Path) -> Result<Arc<dyn Objective>, FileError> {
    load_compiled(path).map(|o| Arc::new(o) as Arc<dyn Objective>)
}

/// [`load`], keeping the compiled form (for [`CompiledObjective::latency_bound_ms`]).
pub fn load_compiled(path: &Path) -> Result<CompiledObjective, FileError> {
    let file = path.display().to_string();
    let source =
        horde_config::input::read_to_string(path, Kind::OBJECTIVE).map_err(|e| FileError {
            file: file.clone(),
            message: format!("1:1: cannot read: {e}"),
        })?;
    compile_named_compiled(&file, &source)
}

/// Compile hose `source`, naming it `file` in errors.
pub fn compile_named(file: &str, source: &str) -> Result<Arc<dyn Objective>, FileError> {
    compile_named_compiled(file, source).map(|o| Arc::new(o) as Arc<dyn Objective>)
}

fn compile_named_compiled(file: &str, source: &str) -> Result<CompiledObjective, FileError> {
    compile(source).map_err(|errors| FileError {
        file: file.to_string(),
        message: errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
    })
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
    match horde_config::input::read_to_string(path, Kind::OBJECTIVE) {
        Ok(source) => check_source(&name, &source),
        Err(e) => vec![format!("{name}:1:1: cannot read file: {e}")],
    }
}
