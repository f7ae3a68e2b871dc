//! The tunnel's base latency: over setup (a)'s two links with their loss chains removed,
//! the tunnel without recovery is about as fast as the WiMax-like link alone, because
//! earliest-arrival path selection keeps a packet for the fast link's next slot instead
//! of sending it on the 55 ms slower EVDO-like link whenever the fast one's pacing is
//! momentarily spent (docs/pluribus.md, "Where the lossless tunnel's time went").

use std::path::Path;

use horde_sim::flows::sweep::{run_cell, Arm, SweepRow};
use horde_sim::flows::tunnel_scenario::TunnelScenario;

/// Setup (a), 60 s of arrivals, no loss on any link.
fn lossless_setup_a() -> TunnelScenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/pluribus/a.toml");
    let mut s = TunnelScenario::load(path).unwrap();
    s.duration_s = 60.0;
    for l in &mut s.links {
        l.up.loss = None;
        l.down.loss = None;
    }
    s
}

fn run(s: &TunnelScenario, load: f64, arm: Arm) -> SweepRow {
    let r = run_cell(s, load, None, &arm).unwrap();
    assert_eq!(r.completed, r.flows, "every flow finishes: {r:?}");
    r
}

fn mean(r: &SweepRow) -> f64 {
    r.fct_ms.as_ref().unwrap().mean
}

#[test]
fn lossless_tunnel_is_about_as_fast_as_the_fast_link_alone() {
    let s = lossless_setup_a();
    let none = s.modes.iter().find(|m| m.name == "none").unwrap().clone();
    for load in [1.0, 8.0] {
        let wimax = run(&s, load, Arm::Direct("wimax".into()));
        let tunnel = run(&s, load, Arm::Tunnel(none.clone()));
        // Without the look-ahead the same run pays what the tunnel paid before: packets
        // spill onto the slow link and the reorder cache holds the ones behind them.
        let mut eager = s.clone();
        eager.session.lookahead_ms = 0.0;
        let spill = run(&eager, load, Arm::Tunnel(none.clone()));
        let summary = format!(
            "{load}x: wimax {:.0} ms, tunnel {:.0} ms, tunnel without look-ahead {:.0} ms",
            mean(&wimax),
            mean(&tunnel),
            mean(&spill)
        );
        eprintln!("{summary}");
        if load == 1.0 {
            // Light load: the fast link alone is the bound, and the tunnel comes close.
            assert!(mean(&tunnel) < 1.15 * mean(&wimax), "{summary}");
            assert!(mean(&spill) > 1.3 * mean(&wimax), "{summary}");
        } else {
            // 8x of 60 s fills the fast link alone (its queue drops packets): the
            // tunnel's second link makes it faster, and waiting still pays.
            assert!(mean(&tunnel) < mean(&wimax), "{summary}");
            assert!(mean(&tunnel) < 0.85 * mean(&spill), "{summary}");
        }
    }
}
