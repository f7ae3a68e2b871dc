//! Constant-size packets at a constant interval in both directions: the game and VoIP.

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{AppPacket, Direction};
use crate::clock::Clock;
use crate::WorkloadError;

/// Game server to client payload (seed §6.1.1, Halo 2 model).
pub const GAME_DOWN_BYTES: u32 = 72;
/// Game client to server payload (seed §6.1.1).
pub const GAME_UP_BYTES: u32 = 44;
/// Game packet interval in each direction (seed §6.1.1).
pub const GAME_PERIOD: Duration = Duration::from_millis(40);
/// G.711 VoIP packet size in each direction (seed §6.1.2).
pub const VOIP_BYTES: u32 = 200;
/// VoIP packet interval (seed §6.1.2).
pub const VOIP_PERIOD: Duration = Duration::from_millis(20);

/// Two constant-rate streams, one each way, with independent random phases; yields
/// their packets merged in time order (downstream first on a tie).
#[derive(Debug, Clone)]
pub struct TwoWay {
    down: Clock,
    up: Clock,
    down_bytes: u32,
    up_bytes: u32,
}

impl TwoWay {
    /// `down_bytes` and `up_bytes` every `period` each way; sizes of at least 1 byte and
    /// a period of at least 1 µs.
    pub fn new(
        down_bytes: u32,
        up_bytes: u32,
        period: Duration,
        seed: u64,
    ) -> Result<TwoWay, WorkloadError> {
        if down_bytes == 0 || up_bytes == 0 {
            return Err(WorkloadError(format!(
                "two-way traffic: packet sizes must be at least 1 byte, got {down_bytes} down and {up_bytes} up"
            )));
        }
        if period < Duration::from_micros(1) {
            return Err(WorkloadError(format!(
                "two-way traffic: the period must be at least 1 µs, got {period:?}"
            )));
        }
        Ok(TwoWay::build(down_bytes, up_bytes, period, seed))
    }

    fn build(down_bytes: u32, up_bytes: u32, period: Duration, seed: u64) -> TwoWay {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let ns = period.as_nanos() as f64;
        TwoWay {
            down: Clock::new(ns, &mut rng),
            up: Clock::new(ns, &mut rng),
            down_bytes,
            up_bytes,
        }
    }
}

/// The game of the dissertation: 72 B down and 44 B up every 40 ms.
pub fn game(seed: u64) -> TwoWay {
    TwoWay::build(GAME_DOWN_BYTES, GAME_UP_BYTES, GAME_PERIOD, seed)
}

/// A G.711 call: 200 B each way every 20 ms.
pub fn voip(seed: u64) -> TwoWay {
    TwoWay::build(VOIP_BYTES, VOIP_BYTES, VOIP_PERIOD, seed)
}

impl Iterator for TwoWay {
    type Item = AppPacket;

    fn next(&mut self) -> Option<AppPacket> {
        let down_first = self.down.next() <= self.up.next();
        let (clock, size, direction) = if down_first {
            (&mut self.down, self.down_bytes, Direction::Down)
        } else {
            (&mut self.up, self.up_bytes, Direction::Up)
        };
        let p = AppPacket {
            at: clock.next(),
            size,
            direction,
            seq: clock.index(),
            frame: None,
        };
        clock.advance();
        Some(p)
    }
}
