//! `horde bench links --kernel` end to end: Horde, kernel TCP and MPTCP, each as real
//! processes over the same `horde shell` links, in one invocation.
//!
//! Needs root (namespaces, TUN devices, MPTCP endpoints). Without it, the test checks
//! that the mode refuses clearly; CI runs it as root.

use std::path::PathBuf;
use std::process::{Command, Output};

fn horde_bin() -> &'static str {
    env!("CARGO_BIN_EXE_horde")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Two constant links: 8 Mbit/s at 20 ms and 4 Mbit/s at 40 ms one way.
const TWO_LINKS: &str = r#"
name = "two-constant"
seed = 1
duration_s = 5

[[hosts]]
name = "vehicle"

[[hosts]]
name = "server"

[[channels]]
name = "fast"
mtu = 1400
up = { rate = { model = "constant", kbps = 8000 }, buffer_bytes = 60000, delay = { model = "constant", ms = 20 } }
down = { delay = { model = "constant", ms = 20 } }

[[channels]]
name = "slow"
mtu = 1400
up = { rate = { model = "constant", kbps = 4000 }, buffer_bytes = 60000, delay = { model = "constant", ms = 40 } }
down = { delay = { model = "constant", ms = 40 } }

[[streams]]
id = 1
elastic = true
workload = { kind = "bulk", adu_bytes = 1400 }
"#;

/// A temporary directory removed when dropped, even when the test fails.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `horde shell` namespaces that exist now.
fn shell_namespaces() -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    text(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("horde-shell-"))
        .map(str::to_string)
        .collect()
}

fn bench(args: &[&str]) -> Output {
    Command::new(horde_bin())
        .args(["bench", "links"])
        .args(args)
        .output()
        .expect("run horde bench links")
}

/// Every contender moves data over the two links in a 3 s window, MPTCP over both of
/// them, and the run leaves no namespace behind. About 20 s.
#[test]
fn every_contender_reports_and_mptcp_uses_both_links() {
    let dir =
        TempDir(std::env::temp_dir().join(format!("horde-bench-kernel-t-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let scenario = dir.0.join("two.toml");
    std::fs::write(&scenario, TWO_LINKS).unwrap();
    let scenario = scenario.to_str().unwrap();
    if !is_root() {
        let out = bench(&[scenario, "--kernel", "--duration", "1"]);
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("needs root"),
            "{}",
            text(&out.stderr)
        );
        eprintln!("not root: checked the refusal only");
        return;
    }
    let before = shell_namespaces();
    let out_dir = dir.0.join("out");
    let out = bench(&[
        scenario,
        "--kernel",
        "--duration",
        "3",
        "--json",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Progress: one line per contender as it starts.
    for n in 1..=5 {
        assert!(stderr.contains(&format!("[{n}/5]")), "{stderr}");
    }
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let contenders: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["mode"].as_str().unwrap().to_string(),
                r["cc"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let pairs: Vec<(&str, &str)> = contenders
        .iter()
        .map(|(m, c)| (m.as_str(), c.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("horde", "cubic"),
            ("tcp", "cubic"),
            ("tcp", "bbr"),
            ("mptcp", "cubic"),
            ("mptcp", "bbr"),
        ]
    );
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} in {r}"));
        assert_eq!(f("capacity_mbps"), 12.0, "{r}");
        // Non-zero, and no more than the links can carry.
        assert!(f("goodput_mbps") > 1.0, "{r}");
        assert!(f("utilization") <= 1.0, "{r}");
        // The one-way delay is at least the links' propagation delay.
        assert!(f("delay_p50_ms") >= 20.0, "{r}");
        assert!(f("delay_p95_ms") >= f("delay_p50_ms"), "{r}");
        let links: Vec<f64> = r["link_mbps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(links.len(), 2, "{r}");
        // One flow or subflow per link: both links carry a real share (the slow one
        // 4 of 12 Mbit/s), from the packet log.
        assert!(links[0] > 2.0 && links[1] > 1.0, "both links used: {r}");
        // Only Horde's sender declares losses; the kernel's flows report none.
        assert_eq!(r["declared_loss"].is_number(), r["mode"] == "horde", "{r}");
    }
    for file in ["results.json", "results.csv", "tput_delay.svg"] {
        assert!(out_dir.join(file).exists(), "{file} written");
    }
    let leftovers: Vec<String> = shell_namespaces()
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    assert!(
        leftovers.is_empty(),
        "namespaces left behind: {leftovers:?}"
    );
}

/// A Horde controller that does not exist is refused before anything is set up.
#[test]
fn an_unknown_controller_is_refused_by_name() {
    let out = bench(&["--kernel", "--cc", "vegas", "--duration", "1"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("\"vegas\""),
        "{}",
        text(&out.stderr)
    );
}
