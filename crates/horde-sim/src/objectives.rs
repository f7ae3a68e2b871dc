//! Loading hose objective files for a scenario.

use std::path::Path;
use std::sync::Arc;

use horde_policy::{hose, Objective};

use crate::build::BuildError;

/// Read and compile one hose file. Errors name the file and the line:col inside it.
pub fn load(path: &Path) -> Result<Arc<dyn Objective>, BuildError> {
    let file = path.display().to_string();
    let source = std::fs::read_to_string(path).map_err(|e| BuildError::Objective {
        file: file.clone(),
        message: format!("1:1: cannot read: {e}"),
    })?;
    compile(&file, &source)
}

/// Compile hose `source`, naming it `file` in errors.
pub fn compile(file: &str, source: &str) -> Result<Arc<dyn Objective>, BuildError> {
    hose::compile(source)
        .map(|o| Arc::new(o) as Arc<dyn Objective>)
        .map_err(|errors| BuildError::Objective {
            file: file.to_string(),
            message: errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        })
}
