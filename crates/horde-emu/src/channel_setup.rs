//! A channel ready to run: what [`EmulatorConfig::build_channels`](crate::EmulatorConfig::build_channels)
//! makes from a configuration and [`Emulator`](crate::Emulator) starts.

use std::net::SocketAddr;

use horde_links::Link;

use crate::schedule::ScheduleStep;

/// One channel with its links already built.
pub struct ChannelSetup {
    pub name: String,
    /// Client-facing address to bind (port 0 picks a free one).
    pub listen: SocketAddr,
    /// Where client packets go after the `up` link: the real receiver's socket.
    pub forward_to: SocketAddr,
    /// Client → server.
    pub up: Box<dyn Link>,
    /// Server → client.
    pub down: Box<dyn Link>,
    /// Scripted down/up steps.
    pub schedule: Vec<ScheduleStep>,
}
