//! Horde's protocol core, sans-IO: no sockets, threads or clock reads. A driver (the
//! simulator, the real-time runtime, a test) passes in datagrams and the time, and polls
//! out datagrams, the next timer and application events.

#![forbid(unsafe_code)]

pub mod cc;
mod channel;
mod endpoint;
mod estimator;
mod event;
mod fair_share;
#[cfg(feature = "harness")]
pub mod harness;
mod lifecycle;
mod packing;
pub mod recovery;
mod session;
mod stream;
mod timers;
pub mod wire;

pub use cc::{AckSample, CcConfig, CongestionControl, LossKind, LossSample, RateSample};
pub use channel::{ChannelConfig, ChannelStats, ChannelView, ChannelViews, LossCorrelation};
pub use endpoint::{
    AcceptError, ChannelConfigFn, ConnectOptions, ConnectionHandle, DatagramEvent, Endpoint,
    EndpointConfig, EndpointStats, NewConnection, SchedulerFactory, ServerConfig,
};
pub use event::{CloseReason, Event, NackReason};
pub use horde_policy::ChannelId;
pub use recovery::{RecoveryConfig, RecoveryMode};
pub use session::{
    AduHandle, ChannelSpec, LatencyMode, Session, SessionConfig, SessionError, SessionStats,
    Transmit, TransmitAdus,
};
pub use stream::{InFlightPolicy, StreamConfig};
