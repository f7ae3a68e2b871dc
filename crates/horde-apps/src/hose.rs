//! Hose objectives and schedulers by name, as the send file names them.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use horde_net::SchedulerFactory;
use horde_policy::Objective;

/// Compile a hose file into an objective.
pub fn load(path: &Path) -> Result<Arc<dyn Objective>> {
    Ok(horde_hose::load(path)?)
}

/// A scheduler by name, as scenarios name them.
pub fn scheduler(name: &str) -> Result<SchedulerFactory> {
    Ok(horde_policy::registry::scheduler(name, None)?)
}
