//! An always-backlogged source, topped up by the driver.

use std::time::Duration;

use super::frag::{frame_fields, push_frame};
use super::{AduSpec, Workload};

#[derive(Debug, Clone)]
pub(crate) struct Bulk {
    adu_bytes: u32,
    batch: u32,
    max_adu: u32,
    frame_seq: u64,
}

impl Bulk {
    pub(crate) fn new(adu_bytes: u32, batch: u32, max_adu: u32) -> Self {
        Self {
            adu_bytes,
            batch,
            max_adu,
            frame_seq: 0,
        }
    }
}

impl Workload for Bulk {
    fn next_at(&self) -> Option<Duration> {
        None
    }

    fn emit(&mut self, now: Duration, out: &mut Vec<AduSpec>) {
        for _ in 0..self.batch {
            let fields = frame_fields("bulk", self.frame_seq, None);
            push_frame(u64::from(self.adu_bytes), fields, now, self.max_adu, out);
            self.frame_seq += 1;
        }
    }

    fn is_bulk(&self) -> bool {
        true
    }
}
