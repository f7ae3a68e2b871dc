//! What the benches share: the link they load, a probe for stalls of the whole machine, and
//! a unit for printing.

use std::path::Path;
use std::time::Duration;

use horde_links::{DelaySpec, Link, LinkSpec, RateSpec};

pub use horde_emu::spawn_stall_probe;

/// A duration in microseconds.
pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A constant-rate link with a 10 ms propagation delay and a 1 MB buffer.
pub fn rate_link(mbps: f64) -> Box<dyn Link> {
    let spec = LinkSpec {
        rate: Some(RateSpec::Constant {
            kbps: mbps * 1000.0,
        }),
        buffer_bytes: Some(1_000_000),
        delay: Some(DelaySpec::Constant { ms: 10.0 }),
        loss: None,
        qdisc: None,
    };
    spec.build(1, Path::new(".")).expect("valid spec")
}
