//! A broken invariant: what the ledger and the world record, and the report shows.

use serde::Serialize;

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// A short stable name: `accounted_twice`, `delivered_twice`, `panic`, ...
    pub kind: &'static str,
    pub detail: String,
}

impl Violation {
    pub fn new(kind: &'static str, detail: String) -> Self {
        Self { kind, detail }
    }
}
