//! Loss recovery for a stream (PluriBus, seed 004): tunnel sequence numbers, opportunistic
//! erasure coding, K% FEC, retransmission, a block code, and the receive reorder cache.
//! See `docs/recovery.md` for the design and the wire format.

pub mod block;
mod config;
pub mod decoder;
pub mod estimators;
pub mod header;
mod layer;
pub mod reorder;
pub mod sender;
mod stats;
pub mod window;
mod xor;

pub use config::{
    RecoveryConfig, RecoveryConfigError, RecoveryMode, DEFAULT_BLOCK_DATA, DEFAULT_REORDER_MS,
    MAX_BLOCK_DATA,
};
pub(crate) use layer::{RecoveryLayer, Reframed, Released};
pub use stats::RecoveryStats;
