//! placeholder

pub mod build;
pub mod checks;
pub mod engine;
pub mod fairness;
pub mod faults;
pub mod flows;
pub mod metrics;
pub mod objectives;
pub mod scenario;
pub use horde_workload as workload;
