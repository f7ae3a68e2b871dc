//! The [`Link`] face of one user of a [`CdmaSector`].

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::sector::CdmaSector;
use crate::{Delivery, Link, LinkStats, Verdict};

/// One user's downlink in a (possibly shared) sector. Users of one sector must be driven
/// with one clock: the sector runs to the latest time any of them is given.
#[derive(Debug, Clone)]
pub struct CdmaLink {
    sector: Arc<Mutex<CdmaSector>>,
    user: usize,
}

impl CdmaLink {
    /// A link per user of `sector`.
    pub fn for_each_user(sector: CdmaSector) -> Vec<CdmaLink> {
        let n = sector.users();
        let sector = Arc::new(Mutex::new(sector));
        (0..n)
            .map(|user| CdmaLink {
                sector: Arc::clone(&sector),
                user,
            })
            .collect()
    }

    /// The sector this link's user is in.
    pub fn sector(&self) -> MutexGuard<'_, CdmaSector> {
        // A panic while holding the lock leaves plain data behind; keep using it.
        self.sector.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This link's user number in its sector.
    pub fn user(&self) -> usize {
        self.user
    }
}

impl Link for CdmaLink {
    fn enqueue(&mut self, now: Duration, id: u64, size: u32) -> Verdict {
        let user = self.user;
        self.sector().enqueue(user, now, id, size)
    }

    fn next_delivery(&self) -> Option<Duration> {
        self.sector().next_delivery(self.user)
    }

    fn deliver(&mut self, now: Duration, out: &mut Vec<Delivery>) {
        let user = self.user;
        self.sector().deliver(user, now, out);
    }

    fn stats(&self) -> LinkStats {
        self.sector().stats(self.user)
    }

    fn mean_assigned_kbps(&self) -> Option<f64> {
        self.sector().mean_assigned_kbps(self.user)
    }
}
