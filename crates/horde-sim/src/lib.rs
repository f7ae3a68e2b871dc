//! placeholder

pub mod build;
pub mod engine;
pub mod fairness;
pub mod faults;
pub mod flows;
pub mod metrics;
pub mod scenario;
pub mod workload;
