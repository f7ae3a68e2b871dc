//! Horde's real-time user-space link emulator.
//!
//! Each emulated channel is a pair of packet ports, usually UDP relay sockets: a client-facing one that the
//! Horde sender sends to, and a server-facing one that forwards to the real receiver.
//! Client → server traffic crosses the channel's `up` [`Link`](horde_links::Link), replies
//! cross its `down` link back to the client's most recently seen address. A receive
//! thread feeds the links; a timer thread releases packets at their scheduled times
//! and measures how late each release was.
//!
//! See `docs/emulator.md` for the architecture, the configuration format and measured
//! release-time error.

mod channel_setup;
mod config;
mod emulator;
mod error;
mod histogram;
mod ideal;
mod packet_log;
mod port;
mod realtime;
mod receiver;
mod run;
mod schedule;
mod shared;
mod slab;
mod stall_probe;
mod stats;
pub mod sys;
mod timer;
mod tun;

pub use channel_setup::ChannelSetup;
pub use config::{
    link_seed, ChannelConfig, ChannelState, EmulatorConfig, ScheduleEntry, TimerConfig,
};
pub use emulator::{Emulator, EmulatorHandle, PortChannel};
pub use error::EmuError;
pub use histogram::Histogram;
pub use ideal::IdealLink;
pub use packet_log::{Fate, PacketLogging, PacketRecord};
pub use port::PacketPort;
pub use run::{run_until, run_until_with};
pub use schedule::ScheduleStep;
pub use stall_probe::spawn_stall_probe;
pub use stats::{ChannelStats, Direction, DirectionStats, Stats};
pub use timer::{TimerOptions, DEFAULT_REALTIME_PRIORITY, DEFAULT_SPIN_US};
pub use tun::TunDevice;

/// Link specifications, re-exported for building configurations in code.
pub use horde_links::LinkSpec;

#[cfg(test)]
mod tests {
    #[test]
    fn handle_and_stats_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<crate::EmulatorHandle>();
        send_sync::<crate::Stats>();
        send_sync::<crate::EmuError>();
    }
}
