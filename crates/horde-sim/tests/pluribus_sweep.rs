//! The PluriBus sweep over the shipped setup (a): deterministic under a seed.

use std::path::Path;

use horde_sim::flows::sweep::run_sweep;
use horde_sim::flows::tunnel_scenario::TunnelScenario;

fn setup_a(duration_s: f64) -> TunnelScenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/pluribus/a.toml");
    let mut s = TunnelScenario::load(path).unwrap();
    s.duration_s = duration_s;
    s
}

#[test]
fn the_same_seed_gives_byte_identical_json_and_another_seed_does_not() {
    let mut s = setup_a(30.0);
    s.loads = vec![2.0];
    let only = ["direct:wimax".to_string(), "none".to_string()];
    let run = |s: &TunnelScenario| run_sweep(s, Some(&only), |_, _, _| {}).unwrap();
    let first = run(&s);
    assert_eq!(first.rows.len(), 2);
    assert!(
        first.rows.iter().all(|r| r.completed > 10),
        "{}",
        first.table()
    );
    let tunnel = first.row(2.0, None, "none").unwrap();
    assert!(tunnel.overhead.is_some() && tunnel.link_loss > 0.0);
    assert_eq!(first.to_json(), run(&s).to_json());
    s.seed += 1;
    assert_ne!(first.to_json(), run(&s).to_json());
}
