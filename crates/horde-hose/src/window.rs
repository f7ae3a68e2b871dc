//! Stream fields (`latency_ave`, `latency_sdev`, `loss_rate`) under a candidate
//! schedule. A stream's window is its entries in the transmission history plus its
//! ADUs the candidate places; acked entries count with their measured latency and
//! no loss, lost ones with loss 1 and no latency, and pending or placed ones with
//! their slot's expectations. With no samples the core's [`StreamStats`] are used.

use horde_policy::adu::{HistoryEntry, Outcome, StreamStats};
use horde_policy::slot::{round_ms, TxSlot};

use crate::eval::StreamVals;

/// Running sums over a window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Window {
    lat_n: f64,
    lat_sum: f64,
    lat_sq: f64,
    items: f64,
    loss_sum: f64,
}

impl Window {
    /// The history part of a stream's window.
    pub fn of_history(history: &[HistoryEntry], stream: u32) -> Window {
        let mut w = Window::default();
        for h in history.iter().filter(|h| h.adu.stream_id == stream) {
            match h.outcome {
                Outcome::Acked { latency_ms } => w.add(Some(latency_ms), 0.0),
                Outcome::Lost => w.add(None, 1.0),
                Outcome::Pending => w.add_expected(h.adu.queue_delay_ms, &h.slot),
            }
        }
        w
    }

    fn add(&mut self, latency: Option<f64>, loss: f64) {
        if let Some(l) = latency.filter(|l| l.is_finite()) {
            self.lat_n += 1.0;
            self.lat_sum += l;
            self.lat_sq += l * l;
        }
        self.items += 1.0;
        self.loss_sum += if loss.is_nan() {
            0.0
        } else {
            loss.clamp(0.0, 1.0)
        };
    }

    /// An ADU expected to go in `slot` after queueing `queue_delay_ms`.
    pub fn add_expected(&mut self, queue_delay_ms: i64, slot: &TxSlot) {
        self.add_expected_in(queue_delay_ms, slot.latency_ms(), slot.loss_probability);
    }

    /// As [`Window::add_expected`], for a slot of `latency_ms()` and `loss_probability`.
    pub fn add_expected_in(&mut self, queue_delay_ms: i64, latency_ms: i64, loss_probability: f64) {
        let lat = queue_delay_ms as f64 + latency_ms as f64;
        self.add(Some(lat), loss_probability);
    }

    pub fn values(&self, id: u32, fallback: Option<&StreamStats>) -> StreamVals {
        let (ave, sdev) = if self.lat_n > 0.0 {
            let mean = self.lat_sum / self.lat_n;
            let var = (self.lat_sq / self.lat_n - mean * mean).max(0.0);
            (round_ms(mean), round_ms(var.sqrt()))
        } else {
            fallback.map_or((0, 0), |s| {
                (round_ms(s.latency_ave_ms), round_ms(s.latency_sdev_ms))
            })
        };
        let loss = if self.items > 0.0 {
            round_ms(100.0 * self.loss_sum / self.items)
        } else {
            fallback.map_or(0, |s| round_ms(s.loss_rate_pct))
        };
        StreamVals {
            id: i64::from(id),
            latency_ave: ave,
            latency_sdev: sdev,
            loss_rate: loss,
        }
    }
}
