//! `horde-lab pluribus live` end to end: a short real-time comparison over `horde shell`
//! links (kernel TCP through `horde tunnel`, MPTCP, single-path TCP), its JSON, and its
//! teardown after Ctrl-C.
//!
//! It needs root (namespaces, TUN devices). Without it, the tests check the refusal;
//! CI runs them as root.
//!
//! The runner starts the `horde` binary, which belongs to another package: it is found
//! next to `horde-lab` (both in `target/release/` after `cargo build --release
//! --workspace`, or `cargo test --release --workspace`), or named by `HORDE_BIN`.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `horde-lab`, checking first that the `horde` binary it starts is there.
fn lab_command() -> Command {
    let lab = PathBuf::from(env!("CARGO_BIN_EXE_horde-lab"));
    let horde = std::env::var_os("HORDE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| lab.with_file_name("horde"));
    assert!(
        horde.is_file(),
        "no horde binary at {}: run cargo build --release -p horde-cli first, or set HORDE_BIN",
        horde.display()
    );
    Command::new(lab)
}

fn horde_lab(args: &[&str]) -> Output {
    lab_command()
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run horde")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn namespaces() -> String {
    text(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .expect("ip netns list")
            .stdout,
    )
}

/// Rows of the link logs' CSVs (packets that entered that link and direction).
fn logged_packets(csv: &std::path::Path) -> usize {
    std::fs::read_to_string(csv)
        .map(|t| {
            t.lines()
                .filter(|l| l.contains(',') && !l.starts_with("arrival"))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn bad_arms_are_refused_before_anything_starts() {
    let out = horde_lab(&[
        "pluribus",
        "live",
        "scenarios/pluribus/a.toml",
        "--modes",
        "none,bogus",
    ]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("no arm named \"bogus\""), "{err}");
    assert!(
        err.contains("mptcp") && err.contains("direct:wimax"),
        "{err}"
    );
}

#[test]
fn a_short_comparison_completes_every_flow_in_every_arm() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out_dir = std::env::temp_dir().join(format!("horde-plb-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let out_text = out_dir.display().to_string();
    let args = [
        "pluribus",
        "live",
        "scenarios/pluribus/a.toml",
        "--loads",
        "1",
        "--modes",
        "none,oec,mptcp,direct:wimax",
        "--duration",
        "6",
        "--drain",
        "20",
        "--json",
        "--out",
        &out_text,
    ];
    if !is_root() {
        let out = horde_lab(&args);
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("needs root"),
            "{}",
            text(&out.stderr)
        );
        eprintln!("not root: checked the refusal only");
        return;
    }
    let started = Instant::now();
    let out = horde_lab(&args);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    eprintln!("{err}took {:.1} s", started.elapsed().as_secs_f64());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let rows = report["rows"].as_array().expect("rows");
    let modes: Vec<&str> = rows.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["none", "oec", "mptcp", "direct:wimax"]);
    for r in rows {
        let flows = r["flows"].as_u64().unwrap();
        assert!(flows >= 2, "{r}");
        // Every arm carries every flow to its end within the drain time.
        assert_eq!(r["completed"].as_u64(), Some(flows), "{r}");
        assert!(r["fct_ms"]["mean"].as_f64().unwrap() > 40.0, "{r}");
        assert!(r["links"]["packets"].as_u64().unwrap() > 0, "{r}");
        let tunnel = r["mode"] == "none" || r["mode"] == "oec";
        assert_eq!(r["overhead"].is_number(), tunnel, "{r}");
        if tunnel {
            assert!(r["ip_bytes_offered"].as_u64().unwrap() > 1000, "{r}");
            assert_eq!(r["reconnects"].as_u64(), Some(0), "{r}");
        }
    }
    // OEC sends coded packets in the capacity the data leaves: more bytes on the links
    // per byte offered than no recovery.
    let overhead = |i: usize| rows[i]["overhead"].as_f64().unwrap();
    assert!(overhead(1) > overhead(0) + 0.05, "{report}");
    // MPTCP opened a subflow on the second link; single-path TCP on link 0 never used it.
    let runs = out_dir.join("runs");
    assert!(logged_packets(&runs.join("1x-mptcp/links/link1-up.csv")) > 0);
    assert_eq!(
        logged_packets(&runs.join("1x-direct-wimax/links/link1-up.csv")),
        0
    );
    for f in ["live.json", "live.csv", "table.md"] {
        assert!(out_dir.join(f).exists(), "{f}");
    }
    let table = std::fs::read_to_string(out_dir.join("table.md")).unwrap();
    assert!(table.contains("direct:wimax (best single path)"), "{table}");
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn ctrl_c_tears_everything_down() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !is_root() {
        return; // the refusal is checked above
    }
    let child = lab_command()
        .args([
            "pluribus",
            "live",
            "scenarios/pluribus/a.toml",
            "--loads",
            "1",
            "--modes",
            "oec",
            "--duration",
            "60",
        ])
        .current_dir(repo())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ns = format!("horde-plb-{}", child.id());
    let work = format!("horde-pluribus-live-{}", child.id());
    // Wait until the run is under way (the tunnel server's namespace exists), then a bit.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !namespaces().contains(&ns) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(namespaces().contains(&ns), "the run never started");
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let stopped = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("interrupted"),
        "{}",
        text(&out.stderr)
    );
    assert!(stopped.elapsed() < Duration::from_secs(15));
    assert!(!namespaces().contains(&ns), "{}", namespaces());
    // No process of the run is left (they all name its work folder), and the folder is gone.
    let left = Command::new("pgrep").args(["-f", &work]).output().unwrap();
    assert!(
        text(&left.stdout).trim().is_empty(),
        "left: {}",
        text(&left.stdout)
    );
    assert!(!std::env::temp_dir().join(&work).exists());
}
