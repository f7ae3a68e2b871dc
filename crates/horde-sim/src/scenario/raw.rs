//! The file as written, with source spans for validation errors. Converted into the
//! public types by `validate`.

use horde_links::LinkSpec;
use horde_proto::{LossCorrelation, LossPrior};
use serde::Deserialize;
use toml::Spanned;

use super::Congestion;
use crate::workload::WorkloadSpec;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenario {
    pub(crate) name: Spanned<String>,
    pub(crate) seed: u64,
    pub(crate) duration_s: Spanned<f64>,
    #[serde(default)]
    pub(crate) scheduler: Option<RawScheduler>,
    #[serde(default)]
    pub(crate) hosts: Option<Spanned<Vec<RawHost>>>,
    #[serde(default)]
    pub(crate) channels: Vec<RawChannel>,
    #[serde(default)]
    pub(crate) streams: Vec<RawStream>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScheduler {
    #[serde(default)]
    pub(crate) kind: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) cycle_ms: Option<Spanned<f64>>,
    #[serde(default)]
    pub(crate) lookahead_ms: Option<Spanned<f64>>,
    #[serde(default)]
    pub(crate) k: Option<Spanned<u32>>,
    #[serde(default)]
    pub(crate) pack_adus: Option<Spanned<bool>>,
    #[serde(default)]
    pub(crate) phantom_wait_ms: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHost {
    pub(crate) name: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawChannel {
    pub(crate) name: Spanned<String>,
    #[serde(default)]
    pub(crate) between: Option<Spanned<Vec<Spanned<String>>>>,
    pub(crate) mtu: Spanned<u32>,
    #[serde(default)]
    pub(crate) congestion: Option<Spanned<Congestion>>,
    #[serde(default)]
    pub(crate) cost_per_kb: Option<Spanned<f64>>,
    #[serde(default)]
    pub(crate) loss_correlation: LossCorrelation,
    #[serde(default)]
    pub(crate) loss_prior: Option<Spanned<LossPrior>>,
    pub(crate) up: Spanned<LinkSpec>,
    #[serde(default)]
    pub(crate) down: Option<Spanned<LinkSpec>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStream {
    pub(crate) id: Spanned<u32>,
    #[serde(default)]
    pub(crate) from: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) to: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) max_kbps: Option<Spanned<f64>>,
    #[serde(default)]
    pub(crate) elastic: Option<Spanned<bool>>,
    #[serde(default)]
    pub(crate) ordered: bool,
    #[serde(default)]
    pub(crate) latency_bound_ms: Option<Spanned<f64>>,
    #[serde(default)]
    pub(crate) latency_bound_from_objectives: bool,
    #[serde(default)]
    pub(crate) latency_copies: Option<Spanned<i64>>,
    #[serde(default)]
    pub(crate) quickest: bool,
    pub(crate) workload: Spanned<WorkloadSpec>,
    #[serde(default)]
    pub(crate) objectives: Vec<Spanned<String>>,
}
