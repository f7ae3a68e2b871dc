//! Horde's real-time runtime: the sans-IO protocol core driven by real UDP sockets and
//! real time, with every datagram authenticated and encrypted.
//!
//! See `examples/telemetry.rs` for a runnable sender and receiver.

mod api;
pub mod config;
mod driver;
mod pool;
mod socket;

pub use api::{Connection, ConnectionHandle, Host, Listener, NetError};
pub use config::{
    ChannelTarget, ConfigError, ConnectConfig, HostConfig, InterfaceConfig, SchedulerFactory,
    DEFAULT_INTERFACE_POLL, MTU_RANGE,
};
pub use driver::HostStats;
