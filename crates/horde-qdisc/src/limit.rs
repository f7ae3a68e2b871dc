//! How much a queue may hold: packets, bytes, or both.

use crate::error::QdiscError;

/// A queue's capacity. A bound that is `None` does not apply; at least one must be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Most packets queued at once.
    pub packets: Option<usize>,
    /// Most bytes queued at once.
    pub bytes: Option<u64>,
}

impl Limit {
    /// At most `n` packets.
    pub fn packets(n: usize) -> Limit {
        Limit {
            packets: Some(n),
            bytes: None,
        }
    }

    /// At most `n` bytes.
    pub fn bytes(n: u64) -> Limit {
        Limit {
            packets: None,
            bytes: Some(n),
        }
    }

    /// Whether a queue of `packets` packets and `bytes` bytes is within the limit.
    pub(crate) fn holds(&self, packets: usize, bytes: u64) -> bool {
        self.packets.is_none_or(|p| packets <= p) && self.bytes.is_none_or(|b| bytes <= b)
    }

    /// Checks the limit has a bound and each bound is at least `min_packets` / 1 byte.
    pub(crate) fn validate(
        &self,
        what: &'static str,
        min_packets: usize,
    ) -> Result<(), QdiscError> {
        if self.packets.is_none() && self.bytes.is_none() {
            return Err(QdiscError::invalid(
                what,
                "a bound in packets or in bytes",
                "no bound",
            ));
        }
        if let Some(p) = self.packets {
            if p < min_packets {
                return Err(QdiscError::invalid(
                    what,
                    format!("at least {min_packets} packets"),
                    p,
                ));
            }
        }
        if self.bytes == Some(0) {
            return Err(QdiscError::invalid(what, "at least 1 byte", 0));
        }
        Ok(())
    }
}
