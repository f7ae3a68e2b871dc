//! `horde bench fleet` at N = 500 against a real `horde recv --server` process: every
//! vehicle connects and has an ADU acknowledged, all send at once, the server is killed
//! with SIGKILL and started again, and every vehicle reconnects and moves data again.

use std::time::Instant;

mod common;

use common::{horde, text};

const VEHICLES: u64 = 500;

#[test]
fn five_hundred_vehicles_connect_move_data_and_come_back_after_a_server_kill() {
    let started = Instant::now();
    let out = horde(&[
        "bench",
        "fleet",
        "--vehicles",
        &VEHICLES.to_string(),
        "--keepalive",
        "2",
        "--idle",
        "3",
        "--load",
        "3",
        "--telemetry",
        "0.5",
        "--limit",
        "20",
        "--json",
    ]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "bench failed: {stderr}");
    let stdout = text(&out.stdout);
    let r: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let n = |path: &str| {
        r.pointer(path)
            .and_then(serde_json::Value::as_f64)
            .unwrap_or_else(|| panic!("{path} missing: {stdout}"))
    };
    let all = VEHICLES as f64;
    assert_eq!(n("/vehicles"), all);
    assert_eq!(n("/connect/connected"), all, "{stdout}");
    assert_eq!(n("/connect/moved_data"), all, "{stdout}");
    assert_eq!(n("/connect/failed"), 0.0, "{stdout}");
    // The server holds the sessions: its memory grew with them.
    assert!(n("/idle/server_bytes_per_vehicle") > 0.0, "{stdout}");
    assert!(n("/load/total_goodput_mbps") > 0.0, "{stdout}");
    assert!(n("/load/jain") > 0.0 && n("/load/jain") <= 1.0, "{stdout}");
    // Every vehicle gets a share under load.
    assert_eq!(n("/load/starved"), 0.0, "{stdout}");
    assert_eq!(n("/restart/reconnected"), all, "{stdout}");
    assert_eq!(n("/restart/not_reconnected"), 0.0, "{stdout}");
    assert_eq!(n("/restart/moved_data_after"), all, "{stdout}");
    assert!(n("/restart/all_reconnected_s") > 0.0, "{stdout}");
    eprintln!(
        "fleet of {VEHICLES}: {:.1} s; all reconnected {:.1} s after the kill",
        started.elapsed().as_secs_f64(),
        n("/restart/all_reconnected_s")
    );
}

#[test]
fn a_fleet_of_no_vehicles_or_a_bad_interval_is_refused_with_its_name() {
    for (args, named) in [
        (&["--vehicles", "0"][..], "--vehicles"),
        (&["--vehicles", "10", "--keepalive=-1"][..], "--keepalive"),
        (&["--vehicles", "10", "--adu-bytes", "3"][..], "--adu-bytes"),
    ] {
        let mut all = vec!["bench", "fleet"];
        all.extend_from_slice(args);
        let out = horde(&all);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(named), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
