//! A stream's `latency_bound_ms` in `horde send`'s file, given as a number or taken from
//! the stream's hose objective (`latency_bound_from_objectives`): a bad value is refused
//! at its place in the file, and a good one reaches the session, whose status then
//! shows channels held to a queueing budget (docs/congestion.md, "Latency objectives").

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{horde, text, two_channel_pair};

/// Voice (stream 2, G.711-like) with `voice_extra` lines, next to a 4 Mbit/s stream 1
/// that keeps the channels' delivery rate well above voice's.
fn streams(voice_extra: &str) -> String {
    format!(
        "[[streams]]\nid = 1\nmax_kbps = 4000\n\
         workload = {{ kind = \"cbr\", kbps = 4000, adu_bytes = 1000 }}\n\
         [[streams]]\nid = 2\nname = \"voice\"\nmax_kbps = 100\n{voice_extra}\
         workload = {{ kind = \"audio\", frame_ms = 20, frame_bytes = 160 }}\n"
    )
}

struct Dir(std::path::PathBuf);

impl Dir {
    fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!("horde-cli-bound-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Self(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Children killed when the test ends, passed or failed.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn(dir: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// `horde send` on `dir`'s send.toml, checked only: it must fail, and what it says.
fn refused(dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(["send", "send.toml", "--duration", "1"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out.stdout));
    text(&out.stderr)
}

#[test]
fn a_bad_latency_bound_or_recovery_is_refused_at_its_place() {
    for (i, (extra, want)) in [
        (
            "latency_bound_ms = 0\n",
            "send.toml:18:20: latency_bound_ms must be 1 to 60000 ms, got 0",
        ),
        (
            "latency_bound_ms = 90000\n",
            "send.toml:18:20: latency_bound_ms must be 1 to 60000 ms, got 90000",
        ),
        (
            "latency_bound_from_objectives = true\n",
            "send.toml:18:33: latency_bound_from_objectives is set, but no objective bounds stream 2's latency",
        ),
        (
            "latency_bound_ms = 130
latency_copies = 2
recovery = { mode = \"oec\" }
",
            "send.toml:20:12: latency_copies = 2 sends its copies as recovery mode \"fec\" at percent 100",
        ),
        (
            "recovery = { mode = \"fec\", percent = 0 }
",
            "send.toml:18:12: recovery.percent must be in (0, 100], got 0",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = Dir::new(&format!("bad{i}"));
        two_channel_pair(&dir.0, 2, &streams(extra));
        let err = refused(&dir.0);
        assert!(err.contains(want), "{extra}: {err}");
    }
}

/// Runs recv and send on loopback and returns, from the sender's status, the queueing
/// budgets (ms) its channels were held to once voice was bound.
fn budgets_of_a_run(tag: &str, voice_extra: &str, objective: Option<&str>) -> Vec<f64> {
    let dir = Dir::new(tag);
    two_channel_pair(&dir.0, 10, &streams(voice_extra));
    if let Some(src) = objective {
        std::fs::write(dir.0.join("voice.hose"), src).unwrap();
    }
    let status = dir.0.join("send.status");
    let mut procs = Procs(Vec::new());
    procs
        .0
        .push(spawn(&dir.0, &["recv", "recv.toml", "--duration", "12"]));
    std::thread::sleep(Duration::from_millis(300));
    procs.0.push(spawn(
        &dir.0,
        &["send", "send.toml", "--status", status.to_str().unwrap()],
    ));
    let deadline = Instant::now() + Duration::from_secs(9);
    loop {
        let out = horde(&["status", status.to_str().unwrap(), "--json"]);
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let budgets: Vec<f64> = v["peers"][0]["channels"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["queue_budget_ms"].as_f64())
                .collect();
            if !budgets.is_empty() {
                return budgets;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no channel was bound: {}",
            text(&out.stdout)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_latency_bound_reaches_the_session_written_or_from_the_objective() {
    // Loopback's base delay is about 0: a channel may queue half the bound.
    let written = budgets_of_a_run("written", "latency_bound_ms = 130\n", None);
    assert!(
        written.iter().all(|b| (55.0..=65.0).contains(b)),
        "{written:?}"
    );
    let objective = "objective {
        context { adu:voice { stream_id == 2 } }
        goal { expected(voice::latency) <= 100 }
        utility { voice { 100 - expected(voice::latency) } }
    }";
    let derived = budgets_of_a_run(
        "derived",
        "latency_bound_from_objectives = true\nobjectives = [\"voice.hose\"]\n",
        Some(objective),
    );
    assert!(
        derived.iter().all(|b| (40.0..=50.0).contains(b)),
        "{derived:?}"
    );
}
