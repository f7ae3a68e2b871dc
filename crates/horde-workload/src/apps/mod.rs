//! Application traffic of the CHAP dissertation's experiments (seed 001 §6.1): an online
//! game, a G.711 VoIP call, a video stream with I/P/B frames, and Web page views.
//!
//! These are plain packet generators for experiments that model the network hop by hop
//! (a queue discipline in front of a wireless link), not ADU sources for Horde streams:
//! each yields what an application hands its UDP socket, `(time, size, metadata)`, in
//! time order, forever. Like the crate's other sources they draw every random choice
//! from one `ChaCha8Rng` seeded from a `u64`, so a seed fixes the traffic bit for bit,
//! and each periodic stream starts at a random phase within its period.
//!
//! | application | generator | traffic |
//! | --- | --- | --- |
//! | game (Halo 2 model) | [`game`] | 72 B down / 44 B up every 40 ms |
//! | VoIP (G.711) | [`voip`] | 200 B each way every 20 ms |
//! | video | [`VideoSource`] | frames at 30 fps, GoP `IBBBPBBBPBBBPBBB`, split into packets |
//! | Web (Lee and Gupta) | [`WebPages`] | pages: HTML object, embedded objects, reading time |
//!
//! See `docs/quality.md` for the parameters, their sources and the decisions taken where
//! the dissertation is silent.

mod two_way;
mod video;
mod web;

#[cfg(test)]
mod tests;

use std::time::Duration;

pub use two_way::{
    game, voip, TwoWay, GAME_DOWN_BYTES, GAME_PERIOD, GAME_UP_BYTES, VOIP_BYTES, VOIP_PERIOD,
};
pub use video::{Fec, FrameType, VideoFrameInfo, VideoParams, VideoSource};
pub use web::{WebPage, WebPages, WebParams};

/// Which way a packet goes, seen from the access point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Server to client, through the access point's downstream queue.
    Down,
    /// Client to server.
    Up,
}

/// One packet an application sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppPacket {
    /// When the application sends it, from the start of the generator.
    pub at: Duration,
    /// Payload bytes.
    pub size: u32,
    /// Its direction.
    pub direction: Direction,
    /// Its number among the packets of its direction, from 0.
    pub seq: u64,
    /// For video, the frame it carries.
    pub frame: Option<VideoFrameInfo>,
}
