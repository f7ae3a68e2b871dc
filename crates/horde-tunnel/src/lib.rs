//! Horde's IP tunnel: whole IP traffic between a vehicle (the client) and a server
//! through TUN devices, each packet an ADU on one unordered Horde stream per direction,
//! over every channel, encrypted, packed several to a datagram when small
//! (docs/tunnel.md).
//!
//! - The packet logic, with no sockets and no devices: [`ip`] reads and checks the IP
//!   headers, [`mss`] clamps the TCP MSS of SYNs to the tunnel MTU, [`offload`] cuts
//!   the TUN device's super packets into segments and [`gro`] coalesces segments before
//!   the TUN write, and [`prefix`] is the server's table from tunnel prefixes to clients.
//! - The files: [`config`] (with [`rekey`] and the connecting end's [`channels`]).
//! - The runs: [`client::run`] and [`server::run`] over a [`device::Tun`], forwarding
//!   with [`forward`] and counting in [`counters`]. What a run shows the user goes
//!   through an [`Observer`]; what it ends with is an [`Outcome`].

pub mod channels;
pub mod client;
pub mod config;
pub mod counters;
pub mod deploy;
pub mod device;
pub mod forward;
pub mod gro;
pub mod ingress;
pub mod ip;
mod live_channels;
pub mod mss;
pub mod offload;
pub mod prefix;
pub mod rekey;
mod roster;
pub mod server;

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use config::ClientChannel;
use horde_crypto::{Keypair, PublicKey};
use horde_net::{ConnectionHandle, Host, HostStats, NetError, SchedulerFactory};
use tokio::time::Instant;

pub use counters::{Counters, Snapshot};
pub use ip::{parse, IpHeader, PacketError};
pub use mss::{clamp_mss, max_mss};
pub use prefix::{Prefix, PrefixError, PrefixTable};

/// The tunnel stream's id, the same both ways.
pub const STREAM: u32 = 1;
/// How often a run checks for its end.
const POLL: Duration = Duration::from_millis(50);

/// What a run needs besides its file: the host's key, the scheduler, when to stop and
/// whom to tell.
pub struct Run {
    pub keypair: Keypair,
    /// Randomized round-robin when `None`.
    pub scheduler: Option<SchedulerFactory>,
    pub until: Until,
    pub observer: Arc<dyn Observer>,
}

/// What a run tells its front end as it goes.
pub trait Observer: Send + Sync + 'static {
    /// The TUN device is up.
    fn up(&self, up: &Up);
    /// The host is running (the client: once connected), e.g. to start a status file.
    fn started(&self, host: &Host);
    /// A connection to watch: the client's to its server, or a server's to the client
    /// `name`.
    fn track(&self, name: Option<&str>, key: &PublicKey, handle: &ConnectionHandle);
    /// A line of progress (a connection came, went or is being set up again).
    fn notice(&self, line: &str);
    /// The client could not connect: the error to return, worded for the user.
    fn connect_failed(&self, e: NetError) -> anyhow::Error;
    /// The run is ending; the host is still up.
    fn ending(&self);
}

/// The tunnel is up: its device, its MTU and the host's sockets.
pub struct Up<'a> {
    pub role: &'static str,
    pub device: &'a str,
    pub mtu: u32,
    /// Whether the TUN device runs with offloads.
    pub offloads: bool,
    pub local_addrs: &'a [SocketAddr],
}

impl fmt::Display for Up<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let addrs: Vec<String> = self.local_addrs.iter().map(|a| a.to_string()).collect();
        write!(
            f,
            "tunnel {}: device {} up, mtu {} (TCP MSS clamped to {} over IPv4, {} over IPv6), offloads {}, channels on {}",
            self.role,
            self.device,
            self.mtu,
            max_mss(self.mtu, false),
            max_mss(self.mtu, true),
            if self.offloads { "on" } else { "off" },
            addrs.join(", ")
        )
    }
}

/// When a run ends: at the deadline, when `interrupted` says so, or when its
/// connections do; and when it reloads its file.
pub struct Until {
    pub deadline: Option<Instant>,
    pub interrupted: Box<dyn Fn() -> bool>,
    /// Polled with the others: `Some` once a reload was asked for (SIGHUP), with what
    /// the file says now or why it could not be read.
    pub reload: Box<dyn FnMut() -> Option<Result<Reload, String>>>,
}

/// What a reload re-read from the tunnel's file: the part a running tunnel takes without
/// dropping its sessions (docs/tunnel.md, "Reload").
pub enum Reload {
    /// A client's `[[channels]]`.
    Channels(Vec<ClientChannel>),
    /// A server's `[[clients]]`.
    Clients(Vec<server::Client>),
}

/// What [`Until::next`] returns.
enum Next {
    /// The run ends, for this reason.
    End(&'static str),
    /// Apply this, then wait again.
    Reload(Reload),
}

impl Until {
    /// Wait for an interruption, the deadline, `done()`, or a reload.
    async fn next(&mut self, done: impl Fn() -> bool, observer: &dyn Observer) -> Next {
        loop {
            if (self.interrupted)() {
                return Next::End("interrupted");
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                return Next::End("duration reached");
            }
            if done() {
                return Next::End("session closed");
            }
            match (self.reload)() {
                Some(Ok(reload)) => return Next::Reload(reload),
                Some(Err(e)) => {
                    observer.notice(&format!("reload refused, nothing changed: {e}"));
                }
                None => {}
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// What a run ends with.
pub struct Outcome {
    /// Why it ended: `interrupted`, `duration reached` or `session closed`.
    pub end: &'static str,
    pub mtu: u32,
    pub counters: Snapshot,
    pub host: HostStats,
    /// Server: each client's name and whether it had a session at the end.
    pub clients: Vec<(String, bool)>,
}
