//! What the application's handles ask of the driver task.

use std::net::SocketAddr;

use horde_host::{ConnOp, ConnectConfig, Reconnect};
use tokio::sync::{mpsc, oneshot};

use crate::config::InterfaceConfig;
use crate::connection::Connection;
use crate::error::NetError;
use crate::stats::HostStats;

/// Where the answer to a command that can fail goes.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, NetError>>;

pub(crate) enum Command {
    Connect(ConnectConfig, Option<Reconnect>, Reply<Connection>),
    Listen(u32, mpsc::Sender<Connection>),
    AddInterface(InterfaceConfig, Reply<(usize, SocketAddr)>),
    RemoveInterface(usize),
    /// Allow a peer's key to connect (`true`) or no longer (`false`).
    AllowPeer(horde_crypto::PublicKey, bool),
    Stats(oneshot::Sender<HostStats>),
    Conn(u64, ConnOp),
    Shutdown,
}
