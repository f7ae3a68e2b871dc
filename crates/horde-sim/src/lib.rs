//! The Horde simulator: the code that ships (`horde-host` hosts with their
//! `horde-proto` sessions and `horde-policy` schedulers, sealed and opened for real) run
//! unchanged over modelled links in virtual time, so that a run is deterministic for its
//! seed.
//!
//! - [`world`] is the one virtual network every simulator below steps: the clock, the
//!   link models and the datagrams inside them.
//! - [`scenario`] reads a scenario file (hosts, channels, streams, scheduler) and
//!   [`build`] turns it into the [`engine`]'s topology; the engine steps sessions and
//!   [`workload`]s over a world and feeds [`metrics`], whose report
//!   `horde sim` prints. [`fairness`] checks streams against their bandwidth allocation.
//! - [`faults`] is the fault-injection simulator behind `horde vopr`: seeded runs with
//!   faults, invariants and replay.
//! - [`flows`] runs real TCP (smoltcp) between simulated hosts, over a direct link or
//!   over Horde as a tunnel carrier, for the flow-completion experiments.
//!
//! [`workload`] is also what the real-time `horde send` runs: the same sources, on the
//! wall clock.

#![forbid(unsafe_code)]

pub mod build;
pub mod engine;
pub mod fairness;
pub mod faults;
pub mod flows;
pub mod metrics;
pub mod scenario;
mod virtual_host;
pub mod world;
pub use horde_workload as workload;
