//! Configuration of a host and of the connections it opens.

use std::net::SocketAddr;

use std::time::Duration;

use horde_crypto::{Keypair, PublicKey, RateLimit, RekeyPolicy, ServerId};
use horde_proto::{ChannelConfig, SessionConfig};

/// The connection side of the configuration lives with the host's connection logic.
pub use horde_host::{ChannelTarget, ConfigError, ConnectConfig};

/// Makes the scheduler each new session runs (the endpoint's).
pub use horde_proto::SchedulerFactory;

/// One local network interface: a UDP socket bound to `bind`, and optionally pinned to a
/// device with `SO_BINDTODEVICE` (needs `CAP_NET_RAW`).
///
/// An interface with a `device` is watched by the channel pool manager (see
/// [`HostConfig::interface_poll`]): while the device is gone, down, without carrier or
/// without the bound address, the socket is closed and the channels over it are removed;
/// when it is back, the socket is bound again to the same address and port and the
/// channels this host opened over it are added again.
#[derive(Debug, Clone, PartialEq)]
pub struct InterfaceConfig {
    /// Local address and port to bind (port 0 picks one).
    pub bind: SocketAddr,
    /// Network device to pin the socket to (`SO_BINDTODEVICE`), which the host also watches
    /// to take the interface out of service when the device goes down.
    pub device: Option<String>,
}

impl InterfaceConfig {
    /// An interface bound to `bind`, on no particular device.
    pub fn new(bind: SocketAddr) -> Self {
        Self { bind, device: None }
    }
}

/// Everything a host needs to run.
pub struct HostConfig {
    /// The sockets to send and receive on, one per interface; channels name them by index.
    pub interfaces: Vec<InterfaceConfig>,
    /// This host's static key pair, which authenticates it to peers.
    pub keypair: Keypair,
    /// Peers allowed to open sessions to this host (by static public key).
    pub allowed_peers: Vec<PublicKey>,
    /// Settings of every session this host opens or accepts.
    pub session: SessionConfig,
    /// Settings for channels that peers open to this host.
    pub accepted_channel: ChannelConfig,
    /// Per channel id, settings that replace `accepted_channel` for that channel (e.g.
    /// each link paced at its own rate); ids past the end get `accepted_channel`.
    pub accepted_channel_by_id: Vec<ChannelConfig>,
    /// The scheduler of every session; `None` runs randomized round-robin.
    pub scheduler: Option<SchedulerFactory>,
    /// How often the channel pool manager checks the interfaces that name a `device`;
    /// `None` (or zero) turns it off. Default 250 ms.
    pub interface_poll: Option<Duration>,
    /// Per connection: payload bytes delivered to the application and not yet read
    /// that the host holds (receive-side flow control: the peer never has more data out
    /// toward it than this buffer has room for). Default [`DEFAULT_RECV_BUFFER`].
    pub recv_buffer_bytes: usize,
    /// Accepted connections that may wait for [`Listener::accept`](crate::Listener)
    /// per service; more are closed at once. Default [`DEFAULT_ACCEPT_BACKLOG`].
    pub accept_backlog: usize,
    /// Handshake defences: worker queue, per-source rate limit, when to ask for cookies.
    pub handshakes: HandshakeSettings,
    /// When session keys rotate (WireGuard's thresholds by default).
    pub rekey: RekeyPolicy,
    /// Use UDP segmentation and receive offload (GSO/GRO) where the kernel has them:
    /// many equal-sized datagrams to one destination leave in one send and arrive in
    /// one read. `false` keeps one datagram per message (still batched with `sendmmsg`
    /// and `recvmmsg`). Default `true`.
    pub udp_offload: bool,
    /// Encrypt outgoing datagrams on a worker thread of their own when there are many
    /// to seal, so that one connection's data path uses two cores: the driver thread
    /// runs the sessions and the syscalls and decides every datagram's counter and key,
    /// the worker does the AES-GCM of large batches (small ones, and all of them while
    /// the worker falls behind, stay on the driver). Default [`default_seal_worker`]:
    /// on where the machine has two cores or more; set it to force either way.
    pub seal_worker: bool,
}

/// The default [`HostConfig::seal_worker`]: on when this machine runs two or more
/// threads at once (`std::thread::available_parallelism`), off on one core, where a
/// second thread could only take turns with the driver. Measured on a 2-core machine
/// (`docs/results.md`, "Runtime throughput", the sealing worker): a
/// lightly loaded connection seals on the driver as without a worker (no latency
/// cost), and under bulk load the worker takes the AES-GCM off the driver thread.
pub fn default_seal_worker() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
}

/// The default [`HostConfig::recv_buffer_bytes`]: 4 MiB, a second of 32 Mbit/s.
pub const DEFAULT_RECV_BUFFER: usize = 4 << 20;
/// The default [`HostConfig::accept_backlog`].
pub const DEFAULT_ACCEPT_BACKLOG: usize = 64;

/// The default [`HostConfig::interface_poll`].
pub const DEFAULT_INTERFACE_POLL: Duration = Duration::from_millis(250);

impl HostConfig {
    /// A host with default session settings, one interface per address.
    pub fn new(keypair: Keypair, interfaces: Vec<InterfaceConfig>) -> Self {
        Self {
            interfaces,
            keypair,
            allowed_peers: Vec::new(),
            session: SessionConfig::default(),
            accepted_channel: ChannelConfig::default(),
            accepted_channel_by_id: Vec::new(),
            scheduler: None,
            interface_poll: Some(DEFAULT_INTERFACE_POLL),
            recv_buffer_bytes: DEFAULT_RECV_BUFFER,
            accept_backlog: DEFAULT_ACCEPT_BACKLOG,
            handshakes: Default::default(),
            rekey: RekeyPolicy::default(),
            udp_offload: true,
            seal_worker: default_seal_worker(),
        }
    }
}

/// How many datagrams the sealing worker's batches gather before they leave together;
/// a datagram is never sent more than this many behind later-numbered ones.
pub const SEAL_GROUP_DATAGRAMS: usize = 256;

impl HostConfig {
    /// Check what can be checked without sockets.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.interfaces.is_empty() {
            return Err(ConfigError::NoInterfaces);
        }
        let min = SEAL_GROUP_DATAGRAMS as u64;
        if self.seal_worker && self.rekey.rekey_after_messages <= min {
            return Err(ConfigError::RekeyTooFrequent {
                messages: self.rekey.rekey_after_messages,
                min,
            });
        }
        Ok(())
    }
}

/// How the host defends its handshake path.
#[derive(Debug, Clone, PartialEq)]
pub struct HandshakeSettings {
    /// The host's handshake jobs waiting for the worker or running; initiations past
    /// that are dropped (`queue_full`).
    pub queue: usize,
    /// Per-source-address limit on initiations that reach the worker.
    pub rate_limit: RateLimit,
    /// The host is *under load* (and asks for cookies) while at least `queue / 8`
    /// initiations wait, or more than this many arrived with a valid `mac1` in the last
    /// second; it stays so for one second (`horde_host::LOAD_HOLD`) after the last such moment.
    pub load_rate: u32,
    /// Receive initiations on a socket of their own on each interface's port, read by the
    /// handshake worker (when the kernel can steer them there), which drops those with a
    /// bad header or `mac1` before they cost the driver anything and hands the rest to the
    /// host. Off: they arrive with the data and the host checks them all.
    pub separate_socket: bool,
    /// This server's id behind a load balancer: the sessions it accepts get indices that
    /// carry it (`docs/load-balancing.md`). `None`: indices are wholly random.
    pub server_id: Option<ServerId>,
}

impl Default for HandshakeSettings {
    fn default() -> Self {
        Self {
            queue: 256,
            rate_limit: RateLimit::default(),
            load_rate: 100,
            separate_socket: true,
            server_id: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect() -> ConnectConfig {
        ConnectConfig {
            peer: *Keypair::generate().public(),
            service: 1,
            channels: vec![ChannelTarget {
                interface: 0,
                remote: "127.0.0.1:7000".parse().unwrap(),
                config: ChannelConfig::default(),
            }],
            handshake_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn the_sealing_worker_is_on_by_default_only_with_a_second_core() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let host = HostConfig::new(Keypair::generate(), vec![]);
        assert_eq!(host.seal_worker, cores >= 2, "{cores} cores");
    }

    #[test]
    fn configurations_that_cannot_work_are_named() {
        assert_eq!(connect().validate(), Ok(()));
        let mut c = connect();
        c.channels.clear();
        assert_eq!(c.validate(), Err(ConfigError::NoChannels));
        let mut c = connect();
        c.handshake_timeout = Duration::ZERO;
        assert_eq!(c.validate(), Err(ConfigError::ZeroHandshakeTimeout));
        let mut c = connect();
        c.channels[0].remote = "0.0.0.0:7000".parse().unwrap();
        assert!(matches!(
            c.validate(),
            Err(ConfigError::Unreachable { channel: 0, .. })
        ));
        let mut c = connect();
        c.channels[0].config.mtu = 10;
        let e = c.validate().unwrap_err();
        assert_eq!(e.to_string(), "channel 0: mtu 10 is outside 64..=65000");
        let host = HostConfig::new(Keypair::generate(), vec![]);
        assert_eq!(host.validate(), Err(ConfigError::NoInterfaces));
        let mut host = HostConfig::new(
            Keypair::generate(),
            vec![InterfaceConfig::new("127.0.0.1:0".parse().unwrap())],
        );
        host.seal_worker = true;
        host.rekey.rekey_after_messages = 200;
        assert!(matches!(
            host.validate(),
            Err(ConfigError::RekeyTooFrequent { messages: 200, .. })
        ));
        host.seal_worker = false;
        assert_eq!(host.validate(), Ok(()));
    }
}
