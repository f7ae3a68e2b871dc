//! The disciplines by name, as a configuration key spells them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::QdiscError;

/// Which queue discipline: `fifo`, `spq`, `chap` or `fq_codel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QdiscKind {
    /// [`Fifo`](crate::Fifo), drop-tail.
    #[default]
    Fifo,
    /// [`Spq`](crate::Spq), strict priority.
    Spq,
    /// [`Chap`](crate::Chap), credit-based.
    Chap,
    /// [`FqCodel`](crate::FqCodel), RFC 8290.
    FqCodel,
}

impl QdiscKind {
    /// Every discipline, in the order above.
    pub const ALL: [QdiscKind; 4] = [
        QdiscKind::Fifo,
        QdiscKind::Spq,
        QdiscKind::Chap,
        QdiscKind::FqCodel,
    ];

    /// The name as written in configuration.
    pub fn name(self) -> &'static str {
        match self {
            QdiscKind::Fifo => "fifo",
            QdiscKind::Spq => "spq",
            QdiscKind::Chap => "chap",
            QdiscKind::FqCodel => "fq_codel",
        }
    }
}

impl fmt::Display for QdiscKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for QdiscKind {
    type Err = QdiscError;

    fn from_str(s: &str) -> Result<QdiscKind, QdiscError> {
        QdiscKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| QdiscError::UnknownKind(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for kind in QdiscKind::ALL {
            assert_eq!(kind.name().parse::<QdiscKind>(), Ok(kind));
        }
        let err = "fq-codel".parse::<QdiscKind>().unwrap_err();
        assert!(err.to_string().contains("`fq-codel`"), "{err}");
    }
}
