//! placeholder

pub mod metrics;
pub mod scenario;
pub mod workload;
