//! `horde flows` end to end: the simulator run through the binary (report files,
//! byte-identical JSON, scenario errors with file:line:col), and the same scenario in
//! real time over kernel TCP through `horde shell` (root; CI runs as root).

use std::path::PathBuf;
use std::process::Output;

mod common;

use common::{horde_in_repo as horde, text};

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("horde-flows-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Web flows and a game over 8 Mbit/s, 15 ms each way, for a few seconds.
const SMALL: &str = r#"
name = "small"
seed = 4
duration_s = 3
drain_s = 10
[link]
up = { rate = { model = "constant", kbps = 8000 }, delay = { model = "constant", ms = 15 }, buffer_bytes = 80000 }
[[flow]]
name = "web"
kind = "web"
load = 0.3
capacity_kbps = 8000
[[flow]]
name = "game"
kind = "interactive"
request_bytes = 44
response_bytes = 72
interval_ms = 40
count = 50
"#;

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn sim_reports_are_repeatable_and_written_out() {
    let dir = scratch("sim");
    let file = dir.join("small.toml");
    std::fs::write(&file, SMALL).unwrap();
    let f = file.to_str().unwrap();
    let a = horde(&["flows", "sim", f, "--json"]);
    let b = horde(&["flows", "sim", f, "--json"]);
    assert_eq!(a.stdout, b.stdout, "same seed, same bytes");
    let report = json(&a);
    assert_eq!(report["stack"], "smoltcp");
    for c in report["classes"].as_array().unwrap() {
        assert!(c["flows"].as_u64().unwrap() > 0);
        assert_eq!(c["flows"], c["completed"], "{c}");
    }
    let other = horde(&["flows", "sim", f, "--json", "--seed", "5"]);
    assert_ne!(other.stdout, a.stdout);

    let out = dir.join("out");
    let r = horde(&["flows", "sim", f, "--out", out.to_str().unwrap()]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    assert!(text(&r.stdout).contains("mean 95% CI ms"));
    let flows = std::fs::read_to_string(out.join("flows.csv")).unwrap();
    let n = report["flows"].as_array().unwrap().len();
    assert_eq!(flows.lines().count(), n + 1);
    assert!(std::fs::read_to_string(out.join("fct_cdf.svg"))
        .unwrap()
        .contains("<svg"));
    assert!(std::fs::read_to_string(out.join("summary.csv"))
        .unwrap()
        .starts_with("class,"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn workload_file_errors_name_file_line_and_column() {
    let dir = scratch("errors");
    let cases = [
        (
            SMALL.replace("load = 0.3", "load = 3"),
            ":8:1: flow 1 (web): load must be in (0, 1]",
        ),
        (
            SMALL.replace("interval_ms = 40", "interval_ms = \"fast\""),
            ":13:1: flow 2: invalid type",
        ),
        (
            SMALL.replace("\"interactive\"", "\"chat\""),
            ":13:1: flow 2: unknown variant `chat`",
        ),
        (
            SMALL.replace(
                "model = \"constant\", kbps = 8000",
                "model = \"trace\", path = \"missing.trace\"",
            ),
            ":7:6: link.up:",
        ),
    ];
    for (i, (body, want)) in cases.iter().enumerate() {
        let file = dir.join(format!("bad{i}.toml"));
        std::fs::write(&file, body).unwrap();
        let out = horde(&["flows", "sim", file.to_str().unwrap()]);
        assert!(!out.status.success());
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("bad{i}.toml{want}")),
            "case {i}: {err}"
        );
    }
    let out = horde(&["flows", "sim", "no/such/file.toml"]);
    assert!(text(&out.stderr).contains("no/such/file.toml: cannot read"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn emu_runs_the_same_workload_over_kernel_tcp() {
    let dir = scratch("emu");
    let file = dir.join("small.toml");
    std::fs::write(&file, SMALL).unwrap();
    let f = file.to_str().unwrap();
    let out = horde(&["flows", "emu", f, "--json"]);
    if !is_root() {
        assert!(
            text(&out.stderr).contains("needs root"),
            "{}",
            text(&out.stderr)
        );
        return;
    }
    let emu = json(&out);
    let sim = json(&horde(&["flows", "sim", f, "--json"]));
    assert_eq!(emu["stack"], "kernel");
    assert!(text(&out.stderr).contains("--link up=rate=8000kbit,delay=15ms"));
    // The same plan: same flows, same sizes, same starts.
    let key = |r: &serde_json::Value| {
        r["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["id"].clone(),
                    f["bytes_down"].clone(),
                    f["start_s"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(key(&emu), key(&sim));
    for c in emu["classes"].as_array().unwrap() {
        assert_eq!(c["flows"], c["completed"], "{c}");
    }
    // Game messages cross a 30 ms round trip: never faster, and on an idle 8 Mbit/s
    // link not much slower.
    let game = &emu["classes"][1]["exchange_ms"];
    assert!(game["median"].as_f64().unwrap() >= 30.0, "{game}");
    assert!(game["median"].as_f64().unwrap() < 80.0, "{game}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server that accepts and then never reads: the client fills the socket buffers,
/// makes no progress, and must give up after `--stall-timeout` with a message that
/// says how far it got, instead of waiting as long as the kernel's TCP would.
#[test]
fn a_stalled_flow_client_gives_up_and_says_how_far_it_got() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let holder = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        std::thread::sleep(std::time::Duration::from_secs(4));
        drop(stream);
    });
    let start = std::time::Instant::now();
    let out = horde(&[
        "flow",
        "client",
        "--connect",
        &addr,
        "--bytes",
        "1000000000",
        "--stall-timeout",
        "1",
    ]);
    let took = start.elapsed();
    let err = text(&out.stderr);
    assert!(!out.status.success(), "a stalled transfer succeeded: {err}");
    assert!(err.contains("no progress within --stall-timeout"), "{err}");
    assert!(err.contains("of 1000000000 bytes handed to TCP"), "{err}");
    assert!(
        took < std::time::Duration::from_millis(3500),
        "gave up after {took:?}"
    );
    holder.join().unwrap();
}

/// An MPTCP `flow server` also accepts plain TCP clients, which fall back to TCP: each
/// transfer is labelled with what its connection speaks (plain TCP was labelled `mptcp`).
#[test]
fn flow_server_labels_each_connection_by_what_it_speaks() {
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(["flow", "server", "--listen", "127.0.0.1:0", "--count", "2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    let mut stderr = std::io::BufReader::new(server.stderr.take().unwrap());
    std::io::BufRead::read_line(&mut stderr, &mut banner).unwrap();
    assert!(banner.contains("(mptcp, and tcp by fallback)"), "{banner}");
    let addr = banner
        .split_whitespace()
        .find(|w| w.starts_with("127.0.0.1:"))
        .expect("the banner names the address")
        .to_string();
    let client = |mptcp: bool| {
        let mut args = vec!["flow", "client", "--connect", &addr, "--bytes", "100000"];
        if mptcp {
            args.push("--mptcp");
        }
        let out = horde(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        report["protocol"].as_str().unwrap().to_string()
    };
    assert_eq!(client(false), "tcp");
    assert_eq!(client(true), "mptcp");
    let out = server.wait_with_output().unwrap();
    let protocols: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["protocol"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(protocols, ["tcp", "mptcp"]);
}
