//! The scheduler's view of application data units and their header fields.
//!
//! Header fields are never transmitted (thesis §3.2.2): they exist for policy. Horde
//! defines `stream_id`, `stream_seq`, `length` and `queue_delay`; applications add any
//! numeric, boolean or string field, e.g. `frame_type = "I"`.

use std::sync::Arc;

/// A header-field value. hose numerics are integers (thesis §B.2.2).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Value {
    /// An integer (every hose numeric).
    Int(i64),
    /// A boolean, e.g. `keyframe = true`.
    Bool(bool),
    /// A string, e.g. `frame_type = "I"`; shared so copying a field is cheap.
    Str(Arc<str>),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.into())
    }
}

/// Application-defined header fields of one ADU. Cheap to clone (shared until changed).
///
/// One heap block per distinct list (an `Arc<Vec>` was two): a sender holds an ADU's
/// fields while it is queued, and an outage queues thousands.
#[derive(Debug, Clone, PartialEq)]
pub struct Fields(Arc<[(Arc<str>, Value)]>);

impl Default for Fields {
    fn default() -> Self {
        Fields(Arc::new([]))
    }
}

impl Fields {
    /// No fields.
    pub fn new() -> Self {
        Self::default()
    }

    /// The value of field `name`, if set.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| &**k == name).map(|(_, v)| v)
    }

    /// Set or replace a field. Replacing copies the list only if it is shared; adding
    /// a field makes a new list one longer.
    pub fn set(&mut self, name: &str, value: Value) {
        match self.0.iter().position(|(k, _)| &**k == name) {
            Some(at) => Arc::make_mut(&mut self.0)[at].1 = value,
            None => {
                let added = std::iter::once((Arc::from(name), value));
                self.0 = self.0.iter().cloned().chain(added).collect();
            }
        }
    }

    /// Every field, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0.iter().map(|(k, v)| (&**k, v))
    }

    /// How many fields are set.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no field is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'a> FromIterator<(&'a str, Value)> for Fields {
    fn from_iter<T: IntoIterator<Item = (&'a str, Value)>>(iter: T) -> Self {
        let mut f = Fields::new();
        for (k, v) in iter {
            f.set(k, v);
        }
        f
    }
}

/// An ADU as the scheduler sees it: the predefined fields plus the application's.
#[derive(Debug, Clone, PartialEq)]
pub struct AduView {
    /// Session-unique handle.
    pub id: u64,
    /// The stream the ADU belongs to.
    pub stream_id: u32,
    /// Its position in its stream (the receiver orders by it).
    pub stream_seq: u64,
    /// Payload bytes.
    pub length: u32,
    /// Time spent queued inside Horde so far, in ms.
    pub queue_delay_ms: i64,
    /// The application's header fields, for objectives to read.
    pub fields: Fields,
}

/// What is known about an ADU that was already transmitted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// Sent, neither acked nor declared lost yet.
    Pending,
    /// Acked.
    Acked {
        /// Insertion to ack, ms.
        latency_ms: f64,
    },
    /// Declared lost.
    Lost,
}

/// One entry of the transmission history that objectives are bound over (§6.3).
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    /// The ADU that was sent.
    pub adu: AduView,
    /// The slot it went out in.
    pub slot: crate::slot::TxSlot,
    /// What became of it: pending, acked (with its latency) or lost.
    pub outcome: Outcome,
}

/// Per-stream statistics that hose stream variables read (`latency_ave`, `latency_sdev`,
/// `loss_rate`). Latencies in ms, loss rate in percent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StreamStats {
    /// The stream these statistics describe.
    pub stream_id: u32,
    /// Mean insertion-to-ack latency of its ADUs, ms.
    pub latency_ave_ms: f64,
    /// Standard deviation of that latency, ms.
    pub latency_sdev_ms: f64,
    /// Share of its sent ADUs declared lost, percent.
    pub loss_rate_pct: f64,
}
