//! The widest figures a link spec may hold: anything beyond is a typo, and would make
//! the emulators pace or hold packets absurdly.

/// The fastest link a spec may describe: beyond any radio link, and beyond what the
/// emulators can pace, so a larger figure is a typo (`99999999gbit`).
pub const MAX_RATE_KBPS: f64 = 1e8;

/// The longest one-way delay (or delay deviation) a spec may describe: no network path
/// holds a packet this long, and the emulators would hold every packet in memory for it.
pub const MAX_DELAY_MS: f64 = 60_000.0;
