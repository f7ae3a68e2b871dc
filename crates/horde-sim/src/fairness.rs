//! Does every stream get its bandwidth allocation over time? The min-max allocation a
//! scenario's streams are owed, and how much of it each got in every window of a run.
//!
//! A stream's *due* in a window is the smaller of its allocation over the window and
//! what it offered in the window: a stream that asks for less than its share is owed only
//! what it asks for. Its *service ratio* is the bytes first sent in the window over its
//! due. Windows start at the first transmission of the run (the end of the handshake).

use std::collections::BTreeMap;
use std::time::Duration;

use horde_policy::{allocate, Demand};
use horde_proto::wire::DATA_HEADER_LEN;

use crate::metrics::Metrics;
use crate::scenario::{Congestion, Scenario, StreamRate};

/// The min-max allocation of each stream, in payload bytes/s, as the sender's allocator
/// computes it when every channel delivers its configured rate: each sending host's
/// streams to one peer share the payload rate of the channels between the two (a slot
/// carries `mtu` payload bytes and a Horde header). `None` when a channel's rate is not
/// fixed (AIMD).
pub fn allocations(s: &Scenario) -> Option<BTreeMap<u32, f64>> {
    let mut out = BTreeMap::new();
    let mut groups: Vec<(&str, &str)> = Vec::new();
    for st in &s.streams {
        if !groups.contains(&(st.from.as_str(), st.to.as_str())) {
            groups.push((st.from.as_str(), st.to.as_str()));
        }
    }
    for (from, to) in groups {
        let mut total = 0.0;
        for c in s.channels.iter().filter(|c| c.joins(from, to)) {
            let Congestion::Cbr { kbps, .. } = c.congestion else {
                return None;
            };
            let wire = f64::from(c.mtu) + DATA_HEADER_LEN as f64;
            total += kbps * 1000.0 / 8.0 * f64::from(c.mtu) / wire;
        }
        let members: Vec<_> = s
            .streams
            .iter()
            .filter(|st| st.from == from && st.to == to)
            .collect();
        let demands: Vec<Demand> = members
            .iter()
            .map(|st| match st.rate {
                StreamRate::MaxKbps(k) => Demand::MaxRate(k * 1000.0 / 8.0),
                StreamRate::Elastic => Demand::Elastic,
            })
            .collect();
        for (st, a) in members.iter().zip(allocate(total, &demands)) {
            out.insert(st.id, a);
        }
    }
    Some(out)
}

/// One stream's service over a run.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamService {
    pub stream: u32,
    /// Allocation, payload bytes/s.
    pub allocation: f64,
    /// Bytes sent over bytes due, in the worst window (1 if nothing was ever due).
    pub worst_ratio: f64,
    /// Where the worst window starts.
    pub worst_start: Duration,
    /// Total bytes sent over total bytes due across the windows.
    pub mean_ratio: f64,
    /// Mean rate sent over the windows, payload bytes/s.
    pub sent_rate: f64,
}

/// Each stream's service in the windows of `width` starting every `step` from the
/// run's first transmission to `end`.
pub fn service(
    metrics: &Metrics,
    allocations: &BTreeMap<u32, f64>,
    width: Duration,
    step: Duration,
    end: Duration,
) -> Vec<StreamService> {
    let from = metrics.first_send().unwrap_or_default();
    allocations
        .iter()
        .map(|(&stream, &allocation)| {
            let mut worst = (1.0, from);
            let (mut sent, mut due, mut all_sent) = (0.0, 0.0, 0.0);
            let windows = metrics.windows(stream, from, width, step, end);
            for w in &windows {
                all_sent += w.sent as f64;
                let owed = (allocation * width.as_secs_f64()).min(w.offered as f64);
                if owed <= 0.0 {
                    continue;
                }
                let ratio = w.sent as f64 / owed;
                if ratio < worst.0 {
                    worst = (ratio, w.start);
                }
                sent += w.sent as f64;
                due += owed;
            }
            StreamService {
                stream,
                allocation,
                worst_ratio: worst.0,
                worst_start: worst.1,
                mean_ratio: if due > 0.0 { sent / due } else { 1.0 },
                sent_rate: all_sent / (windows.len().max(1) as f64 * width.as_secs_f64()),
            }
        })
        .collect()
}
