//! Configuration of a host and of the connections it opens.

use std::net::SocketAddr;

use horde_crypto::{Keypair, PublicKey};
use horde_proto::{ChannelConfig, SessionConfig};

/// One local network interface: a UDP socket bound to `bind`, and optionally pinned to a
/// device with `SO_BINDTODEVICE` (needs `CAP_NET_RAW`).
#[derive(Debug, Clone, PartialEq)]
pub struct InterfaceConfig {
    pub bind: SocketAddr,
    pub device: Option<String>,
}

impl InterfaceConfig {
    pub fn new(bind: SocketAddr) -> Self {
        Self { bind, device: None }
    }
}

/// Everything a host needs to run.
#[derive(Debug)]
pub struct HostConfig {
    pub interfaces: Vec<InterfaceConfig>,
    pub keypair: Keypair,
    /// Peers allowed to open sessions to this host (by static public key).
    pub allowed_peers: Vec<PublicKey>,
    pub session: SessionConfig,
    /// Settings for channels that peers open to this host.
    pub accepted_channel: ChannelConfig,
}

/// One channel of an outgoing connection: which local interface, to which peer address.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelTarget {
    /// Index into [`HostConfig::interfaces`].
    pub interface: usize,
    pub remote: SocketAddr,
    pub config: ChannelConfig,
}

/// How to reach a peer.
#[derive(Debug, Clone)]
pub struct ConnectConfig {
    pub peer: PublicKey,
    pub service: u32,
    pub channels: Vec<ChannelTarget>,
    /// Give up if the handshake has not finished after this long.
    pub handshake_timeout: std::time::Duration,
}
