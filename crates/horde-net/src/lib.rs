//! Horde's real-time runtime: the sans-IO protocol core driven by real UDP sockets and
//! real time, with every datagram authenticated and encrypted.
//!
//! See `examples/telemetry.rs` for a runnable sender and receiver.

mod api;
pub mod config;
mod driver;
pub mod handshake;
mod pool;
mod socket;
pub mod tunnel;

pub use api::{
    ChannelStatus, Connection, ConnectionHandle, EventReceiver, Host, Listener, NetError, Reconnect,
};
pub use config::{
    ChannelTarget, ConfigError, ConnectConfig, HostConfig, InterfaceConfig, SchedulerFactory,
    DEFAULT_ACCEPT_BACKLOG, DEFAULT_INTERFACE_POLL, DEFAULT_RECV_BUFFER, MTU_RANGE,
};
pub use driver::HostStats;
pub use handshake::HandshakeSettings;
