//! The flow simulator with 100 concurrent smoltcp TCP flows: simulated seconds per wall
//! second. 100 bulk downloads share one 50 Mbit/s, 20 ms link for 10 simulated seconds
//! (each flow far larger than it can finish, so all 100 stay active throughout).
//!
//! `cargo bench -p horde-sim --bench tcp_flows`

use std::path::Path;
use std::time::{Duration, Instant};

use horde_links::{DelaySpec, LinkSpec, RateSpec};
use horde_sim::flows::{plan, DirectLink, FlowSim, FlowSpec, TcpSettings};

const FLOWS: u32 = 100;
const SIMULATED: Duration = Duration::from_secs(10);

fn link() -> LinkSpec {
    LinkSpec {
        rate: Some(RateSpec::Constant { kbps: 50_000.0 }),
        buffer_bytes: Some(375_000),
        loss: None,
        delay: Some(DelaySpec::Constant { ms: 20.0 }),
        qdisc: None,
    }
}

fn main() {
    let specs = vec![FlowSpec::Bulk {
        name: None,
        bytes: 1_000_000_000,
        at_s: 0.0,
        count: FLOWS,
        direction: Default::default(),
    }];
    let flows = plan(&specs, 1.0, 1).expect("valid plan");
    let build = |seed| link().build(seed, Path::new(".")).expect("valid link");
    let tcp = TcpSettings {
        buffer_bytes: 256 * 1024,
        ..TcpSettings::default()
    };
    let sim = FlowSim::new(
        DirectLink::new(build(1), build(2)),
        tcp,
        specs.clone(),
        flows,
        1,
    );
    let wall = Instant::now();
    let (records, until) = sim.run(SIMULATED).expect("runs");
    let secs = wall.elapsed().as_secs_f64();
    assert_eq!(records.len(), FLOWS as usize);
    println!(
        "tcp_flows: {FLOWS} concurrent TCP flows, {:.1} simulated s in {secs:.2} wall s: {:.2} simulated s per wall s",
        until.as_secs_f64(),
        until.as_secs_f64() / secs
    );
}
