//! Per-stream figures for the metrics endpoint, fed by the interval rows `horde send`
//! and `horde recv` already compute: the last interval's rates and delays, and counts
//! summed over the run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use horde_apps::report::{Quantiles, RecvInterval, SendInterval};
use serde::Serialize;

/// One stream's figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StreamFigures {
    /// The stream's name (its id on the receiving side).
    pub name: String,
    /// Goodput over the last interval, bit/s.
    pub goodput_bps: f64,
    /// The last interval's delay quantiles, s: insertion to ack at a sender, one-way at
    /// a receiver.
    pub delay_p50_s: Option<f64>,
    pub delay_p95_s: Option<f64>,
    /// ADUs over the run: queued, acked, lost, dropped at a sender; received at a
    /// receiver.
    pub sent: u64,
    pub acked: u64,
    pub lost: u64,
    pub dropped: u64,
    pub received: u64,
}

/// The streams of a process, shared between the run that produces interval rows and
/// the endpoint that serves them.
#[derive(Clone, Default)]
pub struct StreamFeed(Arc<Mutex<BTreeMap<u32, StreamFigures>>>);

fn seconds(q: &Quantiles) -> (Option<f64>, Option<f64>) {
    (q.p50.map(|ms| ms / 1e3), q.p95.map(|ms| ms / 1e3))
}

impl StreamFeed {
    /// A sender's interval.
    pub fn send_interval(&self, i: &SendInterval) {
        let mut streams = self.0.lock().expect("stream feed lock");
        for s in &i.streams {
            let f = streams.entry(s.id).or_default();
            f.name.clone_from(&s.name);
            f.goodput_bps = s.goodput_kbps * 1e3;
            (f.delay_p50_s, f.delay_p95_s) = seconds(&s.latency_ms);
            f.sent += s.sent;
            f.acked += s.acked;
            f.lost += s.lost;
            f.dropped += s.dropped;
        }
    }

    /// A receiver's interval (over all its senders).
    pub fn recv_interval(&self, i: &RecvInterval) {
        let mut streams = self.0.lock().expect("stream feed lock");
        for s in &i.streams {
            let f = streams.entry(s.id).or_default();
            f.name = s.id.to_string();
            f.goodput_bps = s.goodput_kbps * 1e3;
            (f.delay_p50_s, f.delay_p95_s) = seconds(&s.one_way_delay_ms);
            f.received += s.received;
        }
    }

    /// The streams now, by id.
    pub fn figures(&self) -> Vec<(u32, StreamFigures)> {
        let streams = self.0.lock().expect("stream feed lock");
        streams.iter().map(|(id, f)| (*id, f.clone())).collect()
    }
}
