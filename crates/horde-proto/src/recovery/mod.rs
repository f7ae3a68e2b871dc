//! Loss recovery for a stream (PluriBus, seed 004): tunnel sequence numbers, opportunistic
//! erasure coding, K% FEC, retransmission, a block code, and the receive reorder cache.
//! See `docs/recovery.md` for the design and the wire format.

mod config;

pub use config::{
    RecoveryConfig, RecoveryConfigError, RecoveryMode, DEFAULT_BLOCK_DATA, DEFAULT_REORDER_MS,
    MAX_BLOCK_DATA,
};
