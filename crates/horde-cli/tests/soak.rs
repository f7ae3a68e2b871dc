//! The soak script (`scripts/soak.sh`) in its short form: about 25 s of `horde send` and
//! `horde recv` over `horde emu`, with a one-link outage, a full outage, the receiver
//! killed with SIGKILL, and the sender killed with SIGKILL and later stopped with SIGINT.
//! The script checks the invariants; this test checks that it ran every one of them on
//! real data and that they held.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn a_short_soak_keeps_its_invariants_through_outages_and_restarts() {
    let dir = std::env::temp_dir().join(format!("horde-soak-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(repo().join("scripts/soak.sh"))
        .args([
            "--minutes",
            "0.4",
            "--horde",
            env!("CARGO_BIN_EXE_horde"),
            "--dir",
        ])
        .arg(&dir)
        .output()
        .expect("run scripts/soak.sh (needs python3)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: no JSON verdict\n{stderr}"));
    let report = format!("{v:#}\n{stderr}");
    for check in [
        "no_early_exit",
        "accounting",
        "agreement",
        "no_stall",
        "rss_flat",
    ] {
        assert_eq!(v["checks"][check], true, "{check} failed: {report}");
    }
    assert_eq!(v["pass"], true, "{report}");
    assert!(out.status.success(), "{report}");

    // Each check saw real data, not an empty list.
    let events: Vec<&str> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["what"].as_str().unwrap())
        .collect();
    for what in ["recv SIGKILL", "send SIGKILL", "send SIGINT"] {
        assert!(events.contains(&what), "no {what} in {events:?}");
    }
    let balanced = v["senders"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["balanced"] == true)
        .count();
    assert_eq!(
        balanced, 2,
        "the SIGINT'd and the last sender report: {report}"
    );
    let agreed = v["agreement"].as_array().unwrap();
    assert_eq!(agreed.len(), 2, "{report}");
    for a in agreed {
        let acked = a["streams"]["1"]["acked"].as_u64().unwrap();
        assert!(
            acked > 100,
            "a sender inside one receiver delivered {acked}: {report}"
        );
    }
    let roles: Vec<&str> = v["rss"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    for role in ["emu", "recv", "send"] {
        assert!(roles.contains(&role), "no RSS series for {role}: {roles:?}");
    }
    // Deliveries were seen: the stall check had intervals to look at.
    assert!(
        v["delivering_intervals"].as_u64().unwrap() >= 15,
        "{report}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// The script's verdict logic on its own: a check with nothing to look at is "no data",
/// not a failure, and a check with data that fails still fails the run.
#[test]
fn the_soak_verdict_tells_no_data_from_a_failure() {
    let out = Command::new("python3")
        .arg(repo().join("scripts/soak_checks_test.py"))
        .output()
        .expect("run scripts/soak_checks_test.py (needs python3)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
