//! The session's settings and their defaults.

use std::time::Duration;

/// Session-wide settings.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionConfig {
    /// Seed of the session's RNG (scheduler randomness).
    #[serde(default)]
    pub seed: u64,
    /// Scheduling cycle period T in ms; 0 schedules whenever a slot and an ADU meet.
    #[serde(default)]
    pub cycle_ms: f64,
    /// Look-ahead N in ms: how far ahead channels predict phantom slots.
    #[serde(default)]
    pub lookahead_ms: f64,
    /// Longest an ADU may wait for phantom slots, in ms from the cycle that first left
    /// it on one; then the fairness pass puts it on a real slot. 0 (the thesis's
    /// scheduling, which its reproductions use) sets no limit per ADU, only the
    /// stream's deferral budget: an ADU that an objective ranks alike on a real and a
    /// phantom slot may then wait for the whole run while later ones go.
    #[serde(default)]
    pub phantom_wait_ms: f64,
    /// Run a cycle early once this many real slots are waiting (thesis `m`).
    #[serde(default)]
    pub early_cycle_slots: Option<usize>,
    /// Transmissions kept for objective contexts (only while objectives are active).
    #[serde(default = "default_history")]
    pub history_len: usize,
    /// Longest an ordered stream's receiver holds an ADU waiting for a gap to fill, ms.
    #[serde(default = "default_reorder_hold_ms")]
    pub reorder_hold_ms: f64,
    /// Handshake retransmission interval, ms.
    #[serde(default = "default_hello_ms")]
    pub hello_interval_ms: f64,
    /// Close the session ([`CloseReason::IdleTimeout`]) when nothing has arrived from
    /// the peer for this long, ms; 0 disables.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: f64,
    /// Send a keepalive (a ping on every channel) when nothing has been sent for this
    /// long, ms, so that a quiet but live session outlasts its peer's idle timeout (and
    /// NAT bindings stay open, as WireGuard's persistent keepalive); 0 disables.
    #[serde(default = "default_keepalive_ms")]
    pub keepalive_ms: f64,
    /// How long a local close waits for the peer's `CloseAck`, repeating `Close`, and
    /// how long an end closed by its peer keeps answering repeated `Close`s, ms.
    #[serde(default = "default_close_timeout_ms")]
    pub close_timeout_ms: f64,
    /// Interval between repetitions of an unacknowledged `Close`, ms.
    #[serde(default = "default_close_retry_ms")]
    pub close_retry_ms: f64,
    /// Pack several ADUs into one packet when they fit in a slot (wire version 2's
    /// `Packed` packets). Off, every slot carries exactly one ADU, as in the thesis; its
    /// reproductions run that way.
    #[serde(default = "default_pack_adus")]
    pub pack_adus: bool,
}

fn default_history() -> usize {
    64
}
fn default_reorder_hold_ms() -> f64 {
    50.0
}
fn default_hello_ms() -> f64 {
    500.0
}
fn default_idle_timeout_ms() -> f64 {
    10_000.0
}
fn default_keepalive_ms() -> f64 {
    1_000.0
}
fn default_close_timeout_ms() -> f64 {
    2_000.0
}
fn default_close_retry_ms() -> f64 {
    100.0
}
fn default_pack_adus() -> bool {
    true
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            cycle_ms: 0.0,
            lookahead_ms: 0.0,
            phantom_wait_ms: 0.0,
            early_cycle_slots: None,
            history_len: default_history(),
            reorder_hold_ms: default_reorder_hold_ms(),
            hello_interval_ms: default_hello_ms(),
            idle_timeout_ms: default_idle_timeout_ms(),
            keepalive_ms: default_keepalive_ms(),
            close_timeout_ms: default_close_timeout_ms(),
            close_retry_ms: default_close_retry_ms(),
            pack_adus: default_pack_adus(),
        }
    }
}

/// A duration in milliseconds, as the settings give them (negative counts as zero).
pub(crate) fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x.max(0.0) / 1e3)
}
