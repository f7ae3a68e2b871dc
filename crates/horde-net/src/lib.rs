//! Horde's real-time runtime: the sans-IO protocol core driven by real UDP sockets and
//! real time, with every datagram authenticated and encrypted.
//!
//! See `examples/telemetry.rs` for a runnable sender and receiver with objectives.
//! See `examples/messages.rs` for messages with priorities and deadlines over several
//! channels ([`MessageEndpoint`]).
//!
//! # Example
//!
//! The main entry points end to end on loopback: a receiving [`Host`] listens for a
//! service, a sending one connects to it over one channel (a [`ConnectConfig`] naming
//! the receiver's key and address), opens a stream and sends one ADU; the receiver
//! accepts the [`Connection`] and reads the ADU from its events. Every datagram between
//! them is authenticated and encrypted with the hosts' static keys.
//!
//! ```
//! use std::time::Duration;
//!
//! use bytes::Bytes;
//! use horde_crypto::Keypair;
//! use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, InterfaceConfig};
//! use horde_policy::Fields;
//! use horde_proto::{ChannelConfig, Event, StreamConfig};
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let lo = "127.0.0.1:0".parse()?;
//! let (sender_key, receiver_key) = (Keypair::generate(), Keypair::generate());
//!
//! // The receiver takes connections from the sender's key only.
//! let mut config = HostConfig::new(receiver_key.clone(), vec![InterfaceConfig::new(lo)]);
//! config.allowed_peers = vec![*sender_key.public()];
//! let receiver = Host::bind(config).await?;
//! let mut listener = receiver.listen(7);
//!
//! let sender = Host::bind(HostConfig::new(sender_key, vec![InterfaceConfig::new(lo)])).await?;
//! let conn = sender
//!     .connect(ConnectConfig {
//!         peer: *receiver_key.public(),
//!         service: 7,
//!         channels: vec![ChannelTarget {
//!             interface: 0,
//!             remote: receiver.local_addrs()[0],
//!             config: ChannelConfig::default(),
//!         }],
//!         handshake_timeout: Duration::from_secs(5),
//!     })
//!     .await?;
//! let mut incoming = listener.accept().await.ok_or("no connection")?;
//!
//! conn.open_stream(1, StreamConfig::default()).await?;
//! conn.send_adu(1, Bytes::from_static(b"hello"), Fields::new()).await?;
//!
//! let received = tokio::time::timeout(Duration::from_secs(10), async {
//!     while let Some(event) = incoming.next_event().await {
//!         if let Event::Received { payload, .. } = event {
//!             return Some(payload);
//!         }
//!     }
//!     None
//! })
//! .await?;
//! assert_eq!(received.as_deref(), Some(&b"hello"[..]));
//!
//! sender.shutdown().await;
//! receiver.shutdown().await;
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod api;
mod batch;
mod command;
pub mod config;
mod connection;
mod driver;
mod error;
mod event_queue;
pub mod handshake;
mod index_filter;
pub mod messages;
mod pool;
mod read_progress;
mod socket;
mod stats;

pub use api::{Host, HostStatsHandle, Listener};
pub use config::{
    default_seal_worker, ChannelTarget, ConfigError, ConnectConfig, HandshakeSettings, HostConfig,
    InterfaceConfig, SchedulerFactory, DEFAULT_ACCEPT_BACKLOG, DEFAULT_INTERFACE_POLL,
    DEFAULT_RECV_BUFFER,
};
pub use connection::{Connection, ConnectionHandle, EventReceiver};
pub use error::NetError;
pub use horde_host::{ChannelStatus, HandshakeSeen, Reconnect};
pub use horde_proto::MTU_RANGE;
pub use messages::{
    DeadlineCheck, EndpointConfig, HostBandwidth, MessageEndpoint, MessageHandle, MessageNotice,
};
pub use stats::HostStats;
