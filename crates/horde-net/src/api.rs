//! The application API: hosts and listeners ([`Connection`]s are in `connection`).
//!
//! A [`Host`] owns its sockets and runs one driver task on the current tokio runtime.
//! Handles talk to it over a command channel; events come back on a per-connection
//! channel, readable as an async stream ([`Connection::next_event`]) or through a
//! callback ([`Connection::on_event`]).

use std::net::SocketAddr;

use horde_crypto::PublicKey;
use horde_host::{ConnectConfig, Reconnect};
use horde_proto::message::EstimatorConfig;
use tokio::sync::{mpsc, oneshot};

use crate::command::Command;
use crate::config::{HostConfig, InterfaceConfig};
use crate::connection::Connection;
use crate::driver;
use crate::error::NetError;
use crate::messages::HostBandwidth;
use crate::stats::HostStats;

/// A running Horde host.
pub struct Host {
    cmd: mpsc::UnboundedSender<Command>,
    local_addrs: Vec<SocketAddr>,
    public: PublicKey,
    backlog: usize,
    task: tokio::task::JoinHandle<()>,
    bandwidth: HostBandwidth,
}

impl Host {
    /// Bind every interface and start the driver on the current tokio runtime.
    pub async fn bind(config: HostConfig) -> Result<Host, NetError> {
        config.validate()?;
        let public = *config.keypair.public();
        let backlog = config.accept_backlog.max(1);
        let bandwidth = HostBandwidth::new(EstimatorConfig::default())
            .expect("the default estimator settings are valid");
        let (cmd, local_addrs, task) = driver::spawn(config, bandwidth.clone())?;
        Ok(Host {
            cmd,
            local_addrs,
            public,
            backlog,
            task,
            bandwidth,
        })
    }

    /// The bound address of each interface, in configuration order.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// The bandwidth estimate over every channel of this host's connections: the one
    /// their message endpoints report to and judge their applications' ranges on
    /// (`docs/messages.md`, "Per host").
    pub fn bandwidth(&self) -> &HostBandwidth {
        &self.bandwidth
    }

    /// This host's static public key, the one peers must allow.
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }

    /// Open a connection to a peer (active open). Returns once the secure handshake is
    /// done; ADUs sent before the Horde handshake completes are queued.
    pub async fn connect(&self, config: ConnectConfig) -> Result<Connection, NetError> {
        self.open(config, None).await
    }

    /// As [`Host::connect`], and when the session dies later the host opens a new one
    /// to the same peer by itself, as `reconnect` says. The first handshake must succeed
    /// within `config.handshake_timeout`, as with `connect`.
    pub async fn connect_persistent(
        &self,
        config: ConnectConfig,
        reconnect: Reconnect,
    ) -> Result<Connection, NetError> {
        self.open(config, Some(reconnect)).await
    }

    async fn open(
        &self,
        config: ConnectConfig,
        reconnect: Option<Reconnect>,
    ) -> Result<Connection, NetError> {
        config.validate()?;
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(Command::Connect(config, reconnect, tx))
            .map_err(|_| NetError::HostGone)?;
        rx.await.map_err(|_| NetError::HostGone)?
    }

    /// Accept connections for `service` (passive open). At most
    /// [`HostConfig::accept_backlog`] accepted connections wait for [`Listener::accept`];
    /// the host closes any more at once.
    pub fn listen(&self, service: u32) -> Listener {
        let (tx, rx) = mpsc::channel(self.backlog);
        let _ = self.cmd.send(Command::Listen(service, tx));
        Listener { rx }
    }

    /// Bring up another interface at run time; returns its index and bound address.
    pub async fn add_interface(
        &self,
        iface: InterfaceConfig,
    ) -> Result<(usize, SocketAddr), NetError> {
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(Command::AddInterface(iface, tx))
            .map_err(|_| NetError::HostGone)?;
        rx.await.map_err(|_| NetError::HostGone)?
    }

    /// Take an interface out for good: its socket closes and the channels over it are
    /// removed (and, unlike when the pool manager sees its device go down, never re-added).
    pub fn remove_interface(&self, index: usize) {
        let _ = self.cmd.send(Command::RemoveInterface(index));
    }

    /// Let `peer` connect from now on, as if it had been in
    /// [`HostConfig::allowed_peers`] from the start (a server taking a new client on a
    /// reload).
    pub fn allow_peer(&self, peer: PublicKey) {
        let _ = self.cmd.send(Command::AllowPeer(peer, true));
    }

    /// Refuse `peer`'s handshakes from now on. Its established sessions go on; close
    /// them through their handles.
    pub fn revoke_peer(&self, peer: PublicKey) {
        let _ = self.cmd.send(Command::AllowPeer(peer, false));
    }

    /// Host-wide counters (datagrams, drops, interfaces coming and going, sessions).
    pub async fn stats(&self) -> Result<HostStats, NetError> {
        self.stats_handle().get().await
    }

    /// A cheap handle that reads [`Host::stats`] from another task (a metrics exporter).
    pub fn stats_handle(&self) -> HostStatsHandle {
        HostStatsHandle {
            cmd: self.cmd.clone(),
        }
    }

    /// Close every connection (waiting, at most its `close_timeout_ms`, for the peers to
    /// acknowledge), then stop the driver and close every socket.
    pub async fn shutdown(self) {
        let _ = self.cmd.send(Command::Shutdown);
        let _ = self.task.await;
    }
}

/// Incoming connections for one service.
pub struct Listener {
    rx: mpsc::Receiver<Connection>,
}

impl Listener {
    /// The next connection a peer opened to this service; `None` once the host is gone.
    pub async fn accept(&mut self) -> Option<Connection> {
        self.rx.recv().await
    }
}

/// Reads a host's counters from any task; see [`Host::stats_handle`].
#[derive(Clone)]
pub struct HostStatsHandle {
    cmd: mpsc::UnboundedSender<Command>,
}

impl HostStatsHandle {
    /// The host's counters now; [`NetError::HostGone`] once it has shut down.
    pub async fn get(&self) -> Result<HostStats, NetError> {
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(Command::Stats(tx))
            .map_err(|_| NetError::HostGone)?;
        rx.await.map_err(|_| NetError::HostGone)
    }
}
