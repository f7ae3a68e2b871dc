//! How to reach a peer, how to come back after a session dies, and the configuration
//! errors found before any socket is touched.

use std::net::SocketAddr;
use std::time::Duration;

use horde_crypto::PublicKey;
use horde_proto::{ChannelConfig, ChannelSpec, MTU_RANGE};

/// One channel of an outgoing connection: which local interface, to which peer address.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelTarget {
    /// Index of the host interface (socket) the channel sends from.
    pub interface: usize,
    /// The peer's address for this channel.
    pub remote: SocketAddr,
    /// The channel's settings (MTU, congestion control, cost).
    pub config: ChannelConfig,
}

impl ChannelTarget {
    /// The session's description of this channel: the interface is its local end.
    pub fn spec(&self) -> ChannelSpec {
        ChannelSpec {
            local: self.interface as u16,
            remote: self.remote,
            config: self.config.clone(),
        }
    }
}

/// How to reach a peer.
#[derive(Debug, Clone)]
pub struct ConnectConfig {
    /// The peer's static public key; the handshake fails unless the peer proves it holds
    /// the private half.
    pub peer: PublicKey,
    /// The service (listener) to connect to on the peer.
    pub service: u32,
    /// The channels to open, at least one.
    pub channels: Vec<ChannelTarget>,
    /// Give up if the handshake has not finished after this long.
    pub handshake_timeout: Duration,
}

/// What a connection's first session would otherwise draw from the host: a simulator
/// fixes it per connection, so that a run does not depend on the order in which its
/// hosts draw ([`crate::Host::pin_session`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionIdentity {
    /// The connection id.
    pub conn_id: u64,
    /// The session's seed.
    pub seed: u64,
    /// The addresses the session advertises to the peer.
    pub aliases: Vec<SocketAddr>,
}

/// A host or connection configuration that cannot work, found before any socket is
/// touched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("a host needs at least one interface")]
    /// No interface was configured.
    NoInterfaces,
    #[error("a connection needs at least one channel")]
    /// No channel was configured.
    NoChannels,
    #[error("channel {channel}: remote {remote} is not an address packets can be sent to")]
    /// A channel's remote address cannot be sent to (unspecified address or port 0).
    Unreachable {
        /// Index of the channel in the connection's list.
        channel: usize,
        /// The address given.
        remote: SocketAddr,
    },
    #[error("channel {channel}: mtu {mtu} is outside {min}..={max}")]
    /// A channel's MTU is out of range.
    Mtu {
        /// Index of the channel in the connection's list.
        channel: usize,
        /// The MTU given.
        mtu: u32,
        /// The smallest MTU allowed.
        min: u32,
        /// The largest MTU allowed.
        max: u32,
    },
    #[error("the handshake timeout must be above zero")]
    /// A handshake timeout of zero would give up before trying.
    ZeroHandshakeTimeout,
    #[error(
        "keys rotate every {messages} datagrams, but the sealing worker needs more than {min}: \
         raise rekey_after_messages or turn seal_worker off"
    )]
    /// With the sealing worker on, a datagram can leave up to a sealing group's worth
    /// behind later ones, and the receiver tells a key from the next by one phase bit.
    RekeyTooFrequent {
        /// The rotation interval given.
        messages: u64,
        /// The interval must be above this.
        min: u64,
    },
}

impl ConnectConfig {
    /// Check what can be checked without sockets. Interface indices are checked when
    /// the connection is opened, since interfaces can be added at run time.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.channels.is_empty() {
            return Err(ConfigError::NoChannels);
        }
        if self.handshake_timeout.is_zero() {
            return Err(ConfigError::ZeroHandshakeTimeout);
        }
        for (channel, c) in self.channels.iter().enumerate() {
            if c.remote.port() == 0 || c.remote.ip().is_unspecified() {
                return Err(ConfigError::Unreachable {
                    channel,
                    remote: c.remote,
                });
            }
            if !MTU_RANGE.contains(&c.config.mtu) {
                return Err(ConfigError::Mtu {
                    channel,
                    mtu: c.config.mtu,
                    min: *MTU_RANGE.start(),
                    max: *MTU_RANGE.end(),
                });
            }
        }
        Ok(())
    }
}

/// How a persistent connection comes back after its session dies (the peer restarted,
/// timed out or became unreachable, or every channel died): handshakes are tried with
/// exponential backoff from `initial` to `max` between attempts, for at most
/// `give_up_after`. The application hears [`Event::Reconnecting`], then
/// [`Event::Connected`] when the new session is up; its streams, objectives and queued
/// ADUs carry over (in-flight ones per [`StreamConfig::on_reconnect`]).
///
/// [`Event::Reconnecting`]: horde_proto::Event::Reconnecting
/// [`Event::Connected`]: horde_proto::Event::Connected
/// [`StreamConfig::on_reconnect`]: horde_proto::StreamConfig::on_reconnect
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reconnect {
    /// Wait before the first attempt, doubled after each failed one.
    pub initial: Duration,
    /// The longest wait between attempts.
    pub max: Duration,
    /// Give up (and report the connection closed) after this long without a session.
    pub give_up_after: Duration,
}

impl Default for Reconnect {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            give_up_after: Duration::from_secs(60),
        }
    }
}
