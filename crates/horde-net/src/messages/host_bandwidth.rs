//! The bandwidth estimate of a host across its connections: the endpoints given the same
//! [`HostBandwidth`] report their channels' usage to one estimator, and each judges its
//! application's ranges on the host's estimate.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use horde_proto::message::{
    BandwidthEstimate, EstimatorConfig, MemberId, MessageError, PooledEstimator, UsageSample,
};
use tokio::time::Instant;

/// One bandwidth estimate over the channels of every connection whose endpoint is given
/// it ([`EndpointConfig::host_bandwidth`](super::EndpointConfig::host_bandwidth)). Cheap
/// to clone: the clones share the estimate.
#[derive(Clone)]
pub struct HostBandwidth {
    pool: Arc<Mutex<PooledEstimator>>,
    /// The clock of the rounds, the same for every endpoint.
    start: Instant,
}

impl std::fmt::Debug for HostBandwidth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBandwidth")
            .field("estimate", &self.estimate())
            .finish()
    }
}

impl HostBandwidth {
    /// An estimate that no endpoint reports to yet.
    pub fn new(config: EstimatorConfig) -> Result<Self, MessageError> {
        Ok(Self {
            pool: Arc::new(Mutex::new(PooledEstimator::new(config)?)),
            start: Instant::now(),
        })
    }

    /// The host's latest estimate, once a round of reports has closed.
    pub fn estimate(&self) -> Option<BandwidthEstimate> {
        self.lock().current().map(|(_, e)| e)
    }

    pub(crate) fn join(&self) -> Membership {
        let id = self.lock().join();
        Membership {
            host: self.clone(),
            id,
            seen: 0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, PooledEstimator> {
        // The pool is whole between calls; a panic elsewhere leaves it usable.
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// An endpoint's place among those reporting to a [`HostBandwidth`]; it leaves when
/// dropped, so that the rounds stop waiting for it.
pub(crate) struct Membership {
    host: HostBandwidth,
    id: MemberId,
    /// The number of the last estimate this endpoint judged its ranges on.
    seen: u64,
}

impl Membership {
    /// How often the endpoint reports.
    pub(crate) fn tick(&self) -> Duration {
        self.host.lock().tick()
    }

    /// Reports the endpoint's channels' usage over its last tick; the host's estimate if
    /// one came since the endpoint last saw one.
    pub(crate) fn report(&mut self, sample: UsageSample) -> Option<BandwidthEstimate> {
        let mut pool = self.host.lock();
        pool.report(self.host.start.elapsed(), self.id, sample);
        let (number, estimate) = pool.current()?;
        (number != self.seen).then(|| {
            self.seen = number;
            estimate
        })
    }

    pub(crate) fn current(&self) -> Option<BandwidthEstimate> {
        self.host.estimate()
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.host.lock().leave(self.id);
    }
}
