//! `horde send --file` and `horde recv --out` as real processes over two loopback
//! channels: 50 MB of random bytes from file to file and from pipe to pipe, a receiver
//! killed (SIGKILL) mid-transfer and restarted with the same `--out` (nothing it had
//! let the sender forget may be missing), a pipe receiver that cannot resume, and a
//! table of bad inputs. Every copy is checked byte for byte and by SHA-256.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use rand::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};

mod common;

use common::{finish_within, free_port, text};

const SIZE: usize = 50_000_000;
/// `send`'s and `recv`'s status when the receiver left and the transfer did not complete.
const RECEIVER_LEFT: i32 = 4;
/// Their status when the receiver's copy differs from what the sender read.
const MISMATCH: i32 = 5;

fn horde() -> Command {
    Command::new(env!("CARGO_BIN_EXE_horde"))
}

fn spawn(args: &[&str], stdin: Stdio) -> Child {
    horde()
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn kill(child: &mut Child) {
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)))
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A directory with keys, a receiver on a free port, a sender with two channels to it
/// (each paced at `pace_kbps` if given) and one synthetic stream that `--file` replaces,
/// and `in.bin`: `SIZE` random bytes. Removed on drop, pass or fail.
struct Setup {
    dir: PathBuf,
    input: Vec<u8>,
}

impl Setup {
    fn new(tag: &str, pace_kbps: Option<u32>) -> Self {
        let dir = std::env::temp_dir().join(format!("horde-file-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let key = |name: &str| {
            let out = horde()
                .args(["keygen", "--out", dir.join(name).to_str().unwrap()])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", text(&out.stderr));
            text(&out.stdout).trim().to_string()
        };
        let (receiver, sender) = (key("r.key"), key("s.key"));
        let port = free_port();
        let pace = pace_kbps.map_or(String::new(), |k| {
            format!("congestion = {{ kind = \"cbr\", kbps = {k} }}\n")
        });
        let channel =
            format!("[[channels]]\nbind = \"127.0.0.1:0\"\nremote = \"127.0.0.1:{port}\"\n{pace}");
        std::fs::write(
            dir.join("send.toml"),
            format!(
                "key_file = \"s.key\"\npeer_key = \"{receiver}\"\n{channel}{channel}\
                 [[streams]]\nid = 1\nworkload = {{ kind = \"cbr\", kbps = 400, adu_bytes = 500 }}\n"
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("recv.toml"),
            format!(
                "key_file = \"r.key\"\nallowed_keys = [\"{sender}\"]\n\
                 [[interfaces]]\nbind = \"127.0.0.1:{port}\"\n"
            ),
        )
        .unwrap();
        let mut input = vec![0u8; SIZE];
        rand::rngs::StdRng::seed_from_u64(27).fill_bytes(&mut input);
        std::fs::write(dir.join("in.bin"), &input).unwrap();
        Self { dir, input }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }

    fn recv(&self, out: &str, json: bool) -> Child {
        let mut args = vec![
            "recv".to_string(),
            self.path("recv.toml"),
            "--out".into(),
            out.into(),
        ];
        if json {
            args.push("--json".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        spawn(&args, Stdio::null())
    }

    fn send(&self, file: &str, stdin: Stdio) -> Child {
        spawn(
            &["send", &self.path("send.toml"), "--file", file, "--json"],
            stdin,
        )
    }

    /// What the receiver's resume file says it has written, if it is there.
    fn resume_written(&self) -> Option<u64> {
        let text = std::fs::read_to_string(self.dir.join("out.bin.horde-resume")).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("written "))
            .and_then(|n| n.parse().ok())
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The sender's report says the receiver verified the whole input.
fn verified_send(out: &Output, input: &[u8]) -> serde_json::Value {
    assert!(out.status.success(), "send: {}", text(&out.stderr));
    let v = json(out);
    let f = &v["file"];
    assert_eq!(f["end"]["result"], "verified", "{v}");
    assert_eq!(f["bytes"], input.len() as u64, "{v}");
    assert_eq!(f["confirmed"], input.len() as u64, "{v}");
    assert_eq!(f["sha256"], hex(input), "{v}");
    v
}

#[test]
fn a_50_mb_file_goes_over_two_channels_and_its_checksum_matches() {
    let s = Setup::new("file", None);
    let recv = s.recv(&s.path("out.bin"), true);
    std::thread::sleep(Duration::from_millis(300));
    let send = s.send(&s.path("in.bin"), Stdio::null());
    let tx = finish_within(send, Duration::from_secs(40));
    let rx = finish_within(recv, Duration::from_secs(20));
    let tx_json = verified_send(&tx, &s.input);
    assert!(
        text(&tx.stderr).contains("--file replaces the 1 synthetic stream(s)"),
        "{}",
        text(&tx.stderr)
    );
    assert!(rx.status.success(), "recv: {}", text(&rx.stderr));
    let rx_json = json(&rx);
    assert_eq!(rx_json["file"]["end"]["result"], "verified", "{rx_json}");
    assert_eq!(rx_json["file"]["sha256"], hex(&s.input), "{rx_json}");
    assert!(
        text(&rx.stderr).contains("OK: sha256"),
        "{}",
        text(&rx.stderr)
    );
    let copy = std::fs::read(s.dir.join("out.bin")).unwrap();
    assert!(copy == s.input, "the copy differs from the file");
    assert!(
        !s.dir.join("out.bin.horde-resume").exists(),
        "the resume file outlived the transfer"
    );
    eprintln!(
        "50 MB file to file: {:.2} s, {:.0} Mbit/s (sender's count)",
        tx_json["file"]["seconds"], tx_json["file"]["mbit_s"]
    );
}

#[test]
fn a_pipe_goes_to_a_pipe() {
    let s = Setup::new("pipe", None);
    let mut recv = s.recv("-", false);
    // Read the receiver's standard output as it comes, so that the pipe never fills.
    let mut stdout = recv.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        stdout.read_to_end(&mut got).unwrap();
        got
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut send = s.send("-", Stdio::piped());
    let mut stdin = send.stdin.take().unwrap();
    let input = s.input.clone();
    let writer = std::thread::spawn(move || {
        // In uneven pieces, as a producer would write them.
        for chunk in input.chunks(777_777) {
            stdin.write_all(chunk).unwrap();
        }
    });
    let tx = finish_within(send, Duration::from_secs(40));
    writer.join().unwrap();
    let rx = finish_within(recv, Duration::from_secs(20));
    verified_send(&tx, &s.input);
    assert!(rx.status.success(), "recv: {}", text(&rx.stderr));
    let got = reader.join().unwrap();
    assert!(
        got == s.input,
        "the pipe's copy differs ({} bytes)",
        got.len()
    );
    assert!(
        text(&rx.stderr).contains(&hex(&s.input)),
        "{}",
        text(&rx.stderr)
    );
}

#[test]
fn a_receiver_killed_mid_transfer_and_restarted_completes_the_file() {
    // Two channels paced at 100 Mbit/s: about two seconds for the 50 MB.
    let s = Setup::new("restart", Some(100_000));
    let out = s.path("out.bin");
    let mut recv = s.recv(&out, false);
    std::thread::sleep(Duration::from_millis(300));
    let send = s.send(&s.path("in.bin"), Stdio::null());
    // Kill it once it has confirmed some of the file, well before the end.
    let until = Instant::now() + Duration::from_secs(20);
    while s.resume_written().unwrap_or(0) < 5_000_000 {
        assert!(Instant::now() < until, "the receiver wrote nothing");
        std::thread::sleep(Duration::from_millis(10));
    }
    kill(&mut recv);
    let written = s.resume_written().unwrap();
    assert!(written < SIZE as u64, "killed too late: {written} written");
    std::thread::sleep(Duration::from_millis(500));
    let recv = s.recv(&out, true);
    let tx = finish_within(send, Duration::from_secs(40));
    let rx = finish_within(recv, Duration::from_secs(20));
    let tx_json = verified_send(&tx, &s.input);
    assert!(tx_json["reconnects"].as_u64().unwrap() >= 1, "{tx_json}");
    assert!(rx.status.success(), "recv: {}", text(&rx.stderr));
    let rx_json = json(&rx);
    assert_eq!(rx_json["file"]["end"]["result"], "verified", "{rx_json}");
    // The new receiver went on from what the old one had on disk.
    let resumed = rx_json["file"]["resumed_from"].as_u64().unwrap();
    assert!(
        resumed >= written,
        "resumed at {resumed}, {written} were confirmed"
    );
    let copy = std::fs::read(&out).unwrap();
    assert!(copy == s.input, "the copy differs from the file");
    eprintln!(
        "50 MB with a receiver restart: {:.2} s, {:.0} Mbit/s; the new receiver resumed at {resumed} bytes",
        tx_json["file"]["seconds"], tx_json["file"]["mbit_s"]
    );
}

/// Bytes changed on the receiver's disk after they were written (another writer, a bad
/// disk) are caught by the end's checksum: both ends exit 5.
#[test]
fn a_copy_changed_on_disk_is_a_checksum_mismatch_at_both_ends() {
    let s = Setup::new("mismatch", Some(100_000));
    let out = s.path("out.bin");
    let recv = s.recv(&out, true);
    std::thread::sleep(Duration::from_millis(300));
    let mut send = s.send(&s.path("in.bin"), Stdio::null());
    let until = Instant::now() + Duration::from_secs(20);
    while s.resume_written().unwrap_or(0) < 1_000_000 {
        if Instant::now() > until {
            let mut recv = recv;
            let _ = (send.kill(), recv.kill());
            let (tx, rx) = (send.wait_with_output(), recv.wait_with_output());
            panic!(
                "the receiver wrote less than 1 MB in 20 s\nsend: {}\nrecv: {}",
                tx.map_or_else(|e| e.to_string(), |o| text(&o.stderr)),
                rx.map_or_else(|e| e.to_string(), |o| text(&o.stderr)),
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let file = std::fs::OpenOptions::new().write(true).open(&out).unwrap();
    let first = !s.input[0];
    std::os::unix::fs::FileExt::write_all_at(&file, &[first], 0).unwrap();
    drop(file);
    let tx = finish_within(send, Duration::from_secs(40));
    let rx = finish_within(recv, Duration::from_secs(20));
    assert_eq!(tx.status.code(), Some(MISMATCH), "{}", text(&tx.stderr));
    assert!(
        text(&tx.stderr).contains("checksum mismatch"),
        "{}",
        text(&tx.stderr)
    );
    assert_eq!(json(&tx)["file"]["end"]["result"], "mismatch");
    assert_eq!(rx.status.code(), Some(MISMATCH), "{}", text(&rx.stderr));
    let rx_json = json(&rx);
    assert_eq!(rx_json["file"]["end"]["result"], "mismatch", "{rx_json}");
    assert_eq!(rx_json["file"]["end"]["expected_sha256"], hex(&s.input));
    let mut changed = s.input.clone();
    changed[0] = first;
    assert_eq!(rx_json["file"]["sha256"], hex(&changed), "{rx_json}");
}

#[test]
fn a_pipe_receiver_restarted_cannot_resume_and_both_ends_say_so() {
    let s = Setup::new("pipe-restart", Some(100_000));
    // Each receiver's standard output is read (and dropped) as it comes.
    let drained = |mut child: Child| {
        let mut stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        child
    };
    let mut recv = drained(s.recv("-", false));
    std::thread::sleep(Duration::from_millis(300));
    let send = s.send(&s.path("in.bin"), Stdio::null());
    // About two fifths of the 50 MB go through, confirmed as they are written.
    std::thread::sleep(Duration::from_millis(1000));
    kill(&mut recv);
    std::thread::sleep(Duration::from_millis(300));
    let recv = drained(s.recv("-", false));
    let tx = finish_within(send, Duration::from_secs(30));
    let rx = finish_within(recv, Duration::from_secs(30));
    assert_eq!(
        tx.status.code(),
        Some(RECEIVER_LEFT),
        "{}",
        text(&tx.stderr)
    );
    assert!(
        text(&tx.stderr).contains("no longer keeps them"),
        "{}",
        text(&tx.stderr)
    );
    assert_eq!(json(&tx)["file"]["end"]["result"], "receiver_left");
    assert_eq!(rx.status.code(), Some(1), "{}", text(&rx.stderr));
    assert!(
        text(&rx.stderr).contains("the sender gave up"),
        "{}",
        text(&rx.stderr)
    );
}

#[test]
fn bad_inputs_get_clear_errors() {
    let s = Setup::new("bad", None);
    let no_streams = s.dir.join("send-no-streams.toml");
    let config = std::fs::read_to_string(s.dir.join("send.toml")).unwrap();
    std::fs::write(&no_streams, &config[..config.find("[[streams]]").unwrap()]).unwrap();
    std::fs::write(s.dir.join("out.bin.horde-resume"), "not ours\n").unwrap();
    let (send, recv, out) = (s.path("send.toml"), s.path("recv.toml"), s.path("out.bin"));
    let dir = s.dir.to_str().unwrap();
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (
            vec!["send", &send, "--file", "/nonexistent/in.bin"],
            1,
            "--file /nonexistent/in.bin: cannot read it",
        ),
        (
            vec!["send", &send, "--file", dir],
            1,
            "is a directory, not a file",
        ),
        (
            vec!["send", &send, "--file", "/etc/passwd/in.bin"],
            1,
            "cannot read it: Not a directory",
        ),
        (
            vec!["send", &send, "--file", "x", "--duration", "5"],
            2,
            "cannot be used with",
        ),
        (
            vec!["send", no_streams.to_str().unwrap()],
            1,
            "declares no [[streams]]: declare one (or [[messages]]), or send a file with --file",
        ),
        (
            vec!["recv", &recv, "--out", "/nonexistent-dir/out.bin"],
            1,
            "the directory /nonexistent-dir does not exist",
        ),
        (
            vec!["recv", &recv, "--out", dir],
            1,
            "is a directory; name a file in it",
        ),
        (
            vec!["recv", &recv, "--out", "-", "--json"],
            2,
            "--json prints to standard output",
        ),
        (
            vec!["recv", &recv, "--out", "x", "--server"],
            2,
            "cannot be used with",
        ),
        (
            vec!["recv", &recv, "--out", &out],
            1,
            "not a resume file; remove it to start over",
        ),
    ];
    for (args, code, message) in cases {
        let out = finish_within(spawn(&args, Stdio::null()), Duration::from_secs(10));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
