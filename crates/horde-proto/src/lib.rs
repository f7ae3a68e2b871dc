//! Horde's protocol core, sans-IO: no sockets, threads or clock reads. A driver (the
//! simulator, the real-time runtime, a test) passes in datagrams and the time, and polls
//! out datagrams, the next timer and application events.
//!
//! The surface:
//!
//! - [`Session`]: one connection over any number of channels, with its streams
//!   ([`StreamConfig`]), objectives and scheduler, and the [`Event`]s it reports;
//!   [`Endpoint`] demultiplexes many sessions on one set of sockets and accepts new ones.
//! - Configuration: [`SessionConfig`], [`ChannelConfig`] (with [`CcConfig`], the
//!   congestion controller), [`RecoveryConfig`]; all of them deserialize from TOML.
//! - Read-only views of the channels ([`ChannelView`]) and counters ([`SessionStats`],
//!   [`ChannelStats`]).
//! - [`wire`], the packet codec, and [`recovery`]'s frame codec and building blocks, for
//!   tools, benchmarks and fuzzing; [`cc`], the congestion-control interface.
//! - [`message`]: messages with priorities and deadlines over all channels, their
//!   reassembly, and host bandwidth notifications (not yet wired into [`Session`]).
//! - `harness` (feature `harness`): sessions on in-memory paths, for tests.
//!
//! # Example
//!
//! Two sessions exchange one ADU by hand, in virtual time: the client's hello opens the
//! server's session, and datagrams are carried between them until the ADU arrives.
//!
//! ```
//! use std::net::SocketAddr;
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use bytes::Bytes;
//! use horde_policy::Fields;
//! use horde_proto::{ChannelConfig, ChannelSpec, Event, Session, SessionConfig, StreamConfig};
//!
//! let client_addr: SocketAddr = "192.0.2.1:4000".parse()?;
//! let server_addr: SocketAddr = "192.0.2.2:5000".parse()?;
//! let mut now = Duration::ZERO;
//! let channel = ChannelSpec {
//!     local: 0,
//!     remote: server_addr,
//!     config: ChannelConfig::default(),
//! };
//! let mut client = Session::connect(
//!     SessionConfig::default(),
//!     7, // connection id
//!     1, // service
//!     vec![channel],
//!     vec![client_addr],
//!     now,
//! )?;
//! client.open_stream(1, StreamConfig::default())?;
//! client.send_adu(now, 1, Bytes::from_static(b"EKG sample"), Fields::default())?;
//!
//! // The client's first datagram is its hello; the server's session starts from it.
//! let mut buf = Vec::new();
//! client.poll_transmit(now, &mut buf).expect("a hello");
//! let mut server = Session::accept(
//!     SessionConfig::default(),
//!     now,
//!     0,
//!     client_addr,
//!     Bytes::copy_from_slice(&buf),
//!     vec![server_addr],
//!     Arc::new(|_| ChannelConfig::default()),
//! )?;
//!
//! // What a driver does at `now` for one end: run its due timers, then hand every
//! // datagram it has to send to the other end (a lossless, instant path).
//! fn step(from: &mut Session, to: &mut Session, src: SocketAddr, now: Duration, buf: &mut Vec<u8>) {
//!     if from.poll_timeout(now).is_some_and(|t| t <= now) {
//!         from.handle_timeout(now);
//!     }
//!     while from.poll_transmit(now, buf).is_some() {
//!         to.handle_datagram(now, 0, src, Bytes::copy_from_slice(buf));
//!     }
//! }
//!
//! // Carry datagrams both ways, 1 ms at a time, until the ADU is delivered.
//! let mut received = None;
//! while received.is_none() && now < Duration::from_secs(1) {
//!     step(&mut client, &mut server, client_addr, now, &mut buf);
//!     step(&mut server, &mut client, server_addr, now, &mut buf);
//!     while let Some(event) = server.poll_event() {
//!         if let Event::Received { payload, .. } = event {
//!             received = Some(payload);
//!         }
//!     }
//!     now += Duration::from_millis(1);
//! }
//! assert_eq!(received.as_deref(), Some(&b"EKG sample"[..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cc;
mod channel;
pub mod chunks;
mod endpoint;
mod estimator;
mod event;
mod fair_share;
#[cfg(feature = "harness")]
pub mod harness;
mod latency;
pub mod message;
mod packing;
pub mod recovery;
mod session;
mod stream;
mod timers;
pub mod wire;

pub use cc::{AckSample, CcConfig, CongestionControl, LossKind, LossSample, RateSample};
pub use channel::{
    AckFrequency, ChannelConfig, ChannelStats, ChannelView, ChannelViews, LossCorrelation, Startup,
    MTU_RANGE, STARTUP_ROUNDS,
};
pub use endpoint::{
    AcceptError, ChannelConfigFn, ConnectOptions, DatagramEvent, Endpoint, EndpointConfig,
    EndpointStats, NewConnection, SchedulerFactory, ServerConfig, SessionHandle,
};
pub use estimator::{LossPrior, LossPriorError};
pub use event::{CloseReason, Event, NackReason};
pub use horde_policy::ChannelId;
pub use recovery::{RecoveryConfig, RecoveryMode};
pub use session::{
    AduHandle, ChannelSpec, LatencyMode, Session, SessionConfig, SessionError, SessionStats,
    Transmit, TransmitAdus,
};
pub use stream::{InFlightPolicy, StreamConfig, LATENCY_BOUND_MS, LATENCY_COPIES};
