//! Ctrl-C as a flag the receiver polls, so that it can print its summary before it exits.

use anyhow::Result;

pub use horde_emu::sys::SigintGuard as Guard;

/// Catch Ctrl-C until the guard is dropped.
pub fn install() -> Result<Guard> {
    Guard::install().map_err(|e| anyhow::anyhow!("sigaction: {e}"))
}
