//! The `[rekey]` table of a tunnel file: when the secure layer rotates its sending key.
//! Absent values keep WireGuard's thresholds (120 s, 2^60 datagrams); a short interval
//! is for tests and for watching rotations in `horde status`.

use std::time::Duration;

use horde_config::Checks;
use horde_crypto::RekeyPolicy;
use serde::Deserialize;

/// `[rekey]`: `after_s` and `after_messages`, each optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RekeyConfig {
    /// Rotate the sending key once it has been in use this many seconds; a peer's key is
    /// refused 1.5 times this long after its first use, WireGuard's ratio.
    #[serde(default)]
    pub after_s: Option<f64>,
    /// Rotate the sending key after this many datagrams under it.
    #[serde(default)]
    pub after_messages: Option<u64>,
}

impl RekeyConfig {
    /// The policy for the host (call after [`RekeyConfig::check`] passed).
    pub fn policy(&self) -> RekeyPolicy {
        let mut policy = match self.after_s {
            Some(s) => RekeyPolicy::every(Duration::from_secs_f64(s)),
            None => RekeyPolicy::default(),
        };
        if let Some(n) = self.after_messages {
            policy.rekey_after_messages = n;
        }
        policy
    }

    pub fn check(&self, c: &mut Checks) {
        if let Some(s) = self.after_s {
            // A tenth of a second keeps the ratchet far from every datagram's cost; a
            // day keeps `Duration` arithmetic far from overflowing.
            if !(0.1..=86_400.0).contains(&s) {
                c.error(
                    "rekey.after_s",
                    format!("rekey.after_s must be in 0.1..=86400 seconds, got {s}"),
                );
            }
        }
        let min = horde_net::config::SEAL_GROUP_DATAGRAMS as u64;
        if self.after_messages.is_some_and(|n| n <= min) {
            // The sealing worker can send a datagram a group behind later ones, and a
            // receiver tells a key from the next by one phase bit.
            c.error(
                "rekey.after_messages",
                format!("rekey.after_messages must be above {min}"),
            );
        }
    }
}
