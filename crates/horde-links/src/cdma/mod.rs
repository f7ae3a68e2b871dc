//! The CDMA2000 1xRTT downlink as the measurement thesis (seed 003) found it: a rate that
//! follows the sender's own backlog in the base-station buffer, not the radio channel.
//!
//! - [`CdmaParams`]: every number of the model (defaults and sources in `docs/cdma.md`);
//! - [`CdmaSector`]: users' drop-tail buffers, the scheduler granting FCH/SCH rates from
//!   backlog with per-sector caps, the rate limiter, generated Ec/Io and load series;
//! - [`CdmaLink`]: one user's downlink as a [`Link`](crate::Link);
//! - [`probe`]: UDP sources (CBR, on-off) driven through a sector in virtual time, giving
//!   the per-second series the thesis analysed.
//!
//! In a [`LinkSpec`](crate::LinkSpec) it is `rate = { model = "cdma1x_rtt", ... }`, with
//! `buffer_bytes` the per-user buffer and a constant `delay` the base one-way delay.

mod limiter;
mod link;
mod params;
pub mod probe;
mod sector;
#[cfg(test)]
mod tests;

pub use link::CdmaLink;
pub use params::CdmaParams;
pub use sector::{CdmaSecond, CdmaSector};
