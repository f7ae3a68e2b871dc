//! Running `horde-lab` from the tests.

use std::process::Command;

use serde_json::Value;

/// Runs `horde-lab ARGS`, requires it to succeed, and returns the JSON it printed.
pub fn lab_json(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_horde-lab"))
        .args(args)
        .output()
        .expect("run horde-lab");
    assert!(
        out.status.success(),
        "horde-lab {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}
