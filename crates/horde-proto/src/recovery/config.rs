//! A stream's loss-recovery settings, chosen by its sender in the stream's configuration.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How a stream masks losses on its paths (see `docs/recovery.md`).
///
/// In TOML, inside a stream's configuration:
/// `recovery = { mode = "oec" }`, `{ mode = "fec", percent = 10 }`,
/// `{ mode = "retransmit" }`, `{ mode = "block" }`, `{ mode = "none" }`; every form also
/// takes `reorder_ms` (the receive reorder cache's hold, 50 by default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawRecoveryConfig", into = "RawRecoveryConfig")]
pub struct RecoveryConfig {
    /// The scheme and its parameter.
    pub mode: RecoveryMode,
    /// Longest the receiver holds an out-of-order ADU waiting for the ones before it, ms.
    pub reorder_ms: f64,
}

/// The recovery scheme of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum RecoveryMode {
    /// Plain ADUs, as without this layer: no sequence numbers, no cache.
    #[default]
    None,
    /// Opportunistic erasure coding: XOR-coded ADUs only into spare transmission slots.
    Oec,
    /// One XOR of the recent data after every `100 / percent` data ADUs, capacity-oblivious.
    Fec {
        /// Coded ADUs per 100 data ADUs, in (0, 100].
        percent: f64,
    },
    /// Resend an ADU once when the receiver's acknowledgements show it lost.
    Retransmit,
    /// A Reed-Solomon code over blocks of `data` ADUs, parity sent at OEC's opportunities.
    Block {
        /// Data ADUs per block, in `2..=MAX_BLOCK_DATA`.
        data: usize,
    },
}

/// Default hold of the receive reorder cache (PluriBus §5.4).
pub const DEFAULT_REORDER_MS: f64 = 50.0;
/// Default source block length of the block code.
pub const DEFAULT_BLOCK_DATA: usize = 16;
/// Largest block the block code takes (its encoder's shard limit is far above this; the
/// bound keeps a block inside one reorder hold at tunnel rates).
pub const MAX_BLOCK_DATA: usize = 128;

impl Default for RecoveryConfig {
    fn default() -> Self {
        Self {
            mode: RecoveryMode::None,
            reorder_ms: DEFAULT_REORDER_MS,
        }
    }
}

impl RecoveryConfig {
    /// `mode` with the default reorder hold ([`DEFAULT_REORDER_MS`]).
    pub fn new(mode: RecoveryMode) -> Self {
        Self {
            mode,
            reorder_ms: DEFAULT_REORDER_MS,
        }
    }

    /// Whether the stream's ADUs carry the recovery header at all.
    pub fn is_on(&self) -> bool {
        self.mode != RecoveryMode::None
    }

    /// Check the values a program (rather than a parsed file) put in.
    pub fn validate(&self) -> Result<(), RecoveryConfigError> {
        if !(self.reorder_ms.is_finite() && self.reorder_ms >= 0.0) {
            return Err(RecoveryConfigError::ReorderMs(self.reorder_ms));
        }
        match self.mode {
            RecoveryMode::Fec { percent } if !(percent > 0.0 && percent <= 100.0) => {
                Err(RecoveryConfigError::Percent(percent))
            }
            RecoveryMode::Block { data } if !(2..=MAX_BLOCK_DATA).contains(&data) => {
                Err(RecoveryConfigError::BlockData(data))
            }
            _ => Ok(()),
        }
    }
}

/// A [`RecoveryConfig`] value out of range, or a TOML form that mixes up the modes'
/// fields. The message names the field as written in a configuration file.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum RecoveryConfigError {
    /// `fec`'s percentage is not in (0, 100].
    #[error("recovery.percent must be in (0, 100], got {0}")]
    Percent(f64),
    /// `block`'s length is not in `2..=MAX_BLOCK_DATA`.
    #[error("recovery.data (block length) must be in 2..={MAX_BLOCK_DATA}, got {0}")]
    BlockData(usize),
    /// The reorder hold is negative or not a number.
    #[error("recovery.reorder_ms must be a non-negative number, got {0}")]
    ReorderMs(f64),
    /// A field given to a mode that has no use for it (`percent` with `oec`).
    #[error("recovery.{field} does not apply to mode \"{mode}\"")]
    Misplaced {
        /// The field, as written.
        field: &'static str,
        /// The mode, as written.
        mode: &'static str,
    },
    /// `mode = "fec"` without `percent`.
    #[error("recovery mode \"fec\" needs `percent` (e.g. 10 or 100)")]
    MissingPercent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ModeName {
    None,
    Oec,
    Fec,
    Retransmit,
    Block,
}

impl ModeName {
    fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Oec => "oec",
            Self::Fec => "fec",
            Self::Retransmit => "retransmit",
            Self::Block => "block",
        }
    }
}

/// The flat TOML form; [`RecoveryConfig`] is its checked counterpart.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecoveryConfig {
    mode: ModeName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    percent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<usize>,
    #[serde(default = "default_reorder_ms")]
    reorder_ms: f64,
}

fn default_reorder_ms() -> f64 {
    DEFAULT_REORDER_MS
}

impl TryFrom<RawRecoveryConfig> for RecoveryConfig {
    type Error = RecoveryConfigError;

    fn try_from(raw: RawRecoveryConfig) -> Result<Self, Self::Error> {
        let misplaced = |field| RecoveryConfigError::Misplaced {
            field,
            mode: raw.mode.as_str(),
        };
        if raw.percent.is_some() && raw.mode != ModeName::Fec {
            return Err(misplaced("percent"));
        }
        if raw.data.is_some() && raw.mode != ModeName::Block {
            return Err(misplaced("data"));
        }
        let mode = match raw.mode {
            ModeName::None => RecoveryMode::None,
            ModeName::Oec => RecoveryMode::Oec,
            ModeName::Retransmit => RecoveryMode::Retransmit,
            ModeName::Fec => RecoveryMode::Fec {
                percent: raw.percent.ok_or(RecoveryConfigError::MissingPercent)?,
            },
            ModeName::Block => RecoveryMode::Block {
                data: raw.data.unwrap_or(DEFAULT_BLOCK_DATA),
            },
        };
        let config = RecoveryConfig {
            mode,
            reorder_ms: raw.reorder_ms,
        };
        config.validate()?;
        Ok(config)
    }
}

impl From<RecoveryConfig> for RawRecoveryConfig {
    fn from(c: RecoveryConfig) -> Self {
        let (mode, percent, data) = match c.mode {
            RecoveryMode::None => (ModeName::None, None, None),
            RecoveryMode::Oec => (ModeName::Oec, None, None),
            RecoveryMode::Retransmit => (ModeName::Retransmit, None, None),
            RecoveryMode::Fec { percent } => (ModeName::Fec, Some(percent), None),
            RecoveryMode::Block { data } => (ModeName::Block, None, Some(data)),
        };
        Self {
            mode,
            percent,
            data,
            reorder_ms: c.reorder_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Serialize, Debug, PartialEq)]
    struct Holder {
        #[serde(default)]
        recovery: RecoveryConfig,
    }

    fn parse(s: &str) -> Result<RecoveryConfig, String> {
        toml::from_str::<Holder>(s)
            .map(|h| h.recovery)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn every_mode_parses_from_its_toml_form() {
        assert_eq!(parse("").unwrap(), RecoveryConfig::default());
        assert_eq!(
            parse(r#"recovery = { mode = "oec" }"#).unwrap(),
            RecoveryConfig::new(RecoveryMode::Oec)
        );
        assert_eq!(
            parse(r#"recovery = { mode = "fec", percent = 10 }"#).unwrap(),
            RecoveryConfig::new(RecoveryMode::Fec { percent: 10.0 })
        );
        assert_eq!(
            parse(r#"recovery = { mode = "retransmit", reorder_ms = 80 }"#).unwrap(),
            RecoveryConfig {
                mode: RecoveryMode::Retransmit,
                reorder_ms: 80.0
            }
        );
        assert_eq!(
            parse(r#"recovery = { mode = "block" }"#).unwrap().mode,
            RecoveryMode::Block {
                data: DEFAULT_BLOCK_DATA
            }
        );
        assert_eq!(
            parse(r#"recovery = { mode = "none" }"#).unwrap().mode,
            RecoveryMode::None
        );
    }

    #[test]
    fn bad_settings_are_named_with_their_place() {
        let e = parse("recovery = { mode = \"fec\" }").unwrap_err();
        assert!(e.contains("needs `percent`"), "{e}");
        assert!(e.contains("line 1"), "{e}");
        let e = parse("recovery = { mode = \"fec\", percent = 0 }").unwrap_err();
        assert!(e.contains("(0, 100]"), "{e}");
        let e = parse("recovery = { mode = \"oec\", percent = 10 }").unwrap_err();
        assert!(e.contains("does not apply"), "{e}");
        let e = parse("recovery = { mode = \"xor\" }").unwrap_err();
        assert!(e.contains("unknown variant"), "{e}");
        let e = parse("recovery = { mode = \"oec\", bogus = 1 }").unwrap_err();
        assert!(e.contains("bogus"), "{e}");
    }

    #[test]
    fn configs_round_trip_through_toml() {
        for mode in [
            RecoveryMode::None,
            RecoveryMode::Oec,
            RecoveryMode::Retransmit,
            RecoveryMode::Fec { percent: 100.0 },
            RecoveryMode::Block { data: 8 },
        ] {
            let h = Holder {
                recovery: RecoveryConfig::new(mode),
            };
            let text = toml::to_string(&h).unwrap();
            assert_eq!(toml::from_str::<Holder>(&text).unwrap(), h, "{text}");
        }
    }
}
