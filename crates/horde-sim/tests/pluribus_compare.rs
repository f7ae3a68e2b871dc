//! The PluriBus comparison on the shipped setup (a), fixed seed: what the recovery modes
//! do for the end hosts against the tunnel without recovery.
//!
//! OEC beats no recovery and retransmission here (the paper's Fig. 7 and Fig. 8 claim),
//! masks the links' losses from the hosts, and codes in both directions with fewer coded
//! packets than data packets. It is not 4x better than no recovery as in the paper's
//! deployment: without recovery our flows take 0.5 s, not over 4 s (docs/results.md,
//! "PluriBus in the simulator", says why).

use std::path::Path;

use horde_sim::flows::sweep::{run_cell, Arm, SweepRow};
use horde_sim::flows::tunnel_scenario::TunnelScenario;

/// Setup (a) with its 300 s of arrivals.
fn setup_a() -> TunnelScenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/pluribus/a.toml");
    TunnelScenario::load(path).unwrap()
}

/// Setup (a) with `seconds` of arrivals.
fn setup_a_for(seconds: f64) -> TunnelScenario {
    TunnelScenario {
        duration_s: seconds,
        ..setup_a()
    }
}

fn run(s: &TunnelScenario, load: f64, mode: &str) -> SweepRow {
    let m = s.modes.iter().find(|m| m.name == mode).unwrap().clone();
    run_cell(s, load, None, &Arm::Tunnel(m)).unwrap()
}

fn mean(r: &SweepRow) -> f64 {
    r.fct_ms.as_ref().unwrap().mean
}

#[test]
fn oec_beats_no_recovery_and_retransmission_on_setup_a() {
    let s = setup_a_for(60.0);
    let none = run(&s, 1.0, "none");
    let rtx = run(&s, 1.0, "retransmit");
    let oec = run(&s, 1.0, "oec");
    let summary = format!("none {none:?}\nretransmit {rtx:?}\noec {oec:?}");
    eprintln!("{summary}");
    for r in [&none, &rtx, &oec] {
        assert_eq!(r.completed, r.flows, "every flow finishes\n{summary}");
        assert!(r.link_loss > 0.01, "the links lose packets\n{summary}");
    }
    // Without recovery the hosts see the links' losses; with it they see a fraction.
    assert!(none.end_host_loss > 0.01, "{summary}");
    assert!(rtx.end_host_loss < none.end_host_loss / 3.0, "{summary}");
    assert!(oec.end_host_loss < none.end_host_loss / 3.0, "{summary}");
    // OEC codes into spare capacity only while a coded packet is worth it: fewer coded
    // packets than data packets (the paper's 67% coded fraction is 2 per data packet;
    // before the yield limit this run sent 15 per data packet), and decoding rebuilds.
    let counts = oec.recovery.unwrap();
    assert!(counts.recovered > 50, "{summary}");
    assert!(counts.coded_sent > counts.data_sent / 4, "{summary}");
    assert!(counts.coded_sent < 2 * counts.data_sent, "{summary}");
    // The paper's ordering: OEC first, then retransmission, then no recovery.
    assert!(mean(&oec) < mean(&rtx), "{summary}");
    assert!(mean(&rtx) < mean(&none), "{summary}");
    assert!(mean(&oec) * 1.3 < mean(&none), "{summary}");
}

/// At 8x load there is little spare capacity, and OEC without the repair of reported
/// losses left about 1% of the IP packets lost and was slower than retransmission.
/// With the repairs (docs/recovery.md, "Known losses are repaired first") it beats both
/// retransmission and capacity-oblivious FEC 100%. The whole 300 s are run (2,041
/// flows, 6 s): over 60 to 120 s OEC and retransmission are within each other's noise
/// (either may come first by 5%), over 300 s OEC leads by 9% (451 against 494 ms).
#[test]
fn at_8x_oec_beats_retransmission_and_fec100_and_masks_the_loss() {
    let s = setup_a();
    let rtx = run(&s, 8.0, "retransmit");
    let fec = run(&s, 8.0, "fec100");
    let oec = run(&s, 8.0, "oec");
    let summary = format!("retransmit {rtx:?}\nfec100 {fec:?}\noec {oec:?}");
    eprintln!("{summary}");
    for r in [&rtx, &fec, &oec] {
        assert_eq!(r.completed, r.flows, "every flow finishes\n{summary}");
    }
    assert!(mean(&oec) < mean(&rtx), "{summary}");
    assert!(mean(&oec) < mean(&fec), "{summary}");
    assert!(oec.end_host_loss < 0.003, "{summary}");
    assert!(oec.end_host_loss < oec.link_loss / 10.0, "{summary}");
}
