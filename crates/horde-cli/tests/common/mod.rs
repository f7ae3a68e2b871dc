//! What the end-to-end tests of the `horde` binary share: running it and reading its output.

// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// Runs `horde` with `args` in the test's working directory and waits for it.
pub fn horde(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(args)
        .output()
        .expect("run horde")
}

/// Runs `horde` with `args` from the repository root, where `scenarios/` and `traces/` are.
pub fn horde_in_repo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run horde")
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A process's stdout or stderr as text, for assertions and failure messages.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Writes a new key pair to `dir/name` with `horde keygen` and returns its public key.
pub fn keygen(dir: &std::path::Path, name: &str) -> String {
    let out = horde(&["keygen", "--out", dir.join(name).to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).trim().to_string()
}

/// The keys and files of a `horde recv` / `horde send` pair on loopback in `dir`: the
/// receiver on two free ports, the sender with one channel to each, running for
/// `duration_s` with `streams` (TOML `[[streams]]` tables). Returns the sender's and
/// the receiver's public keys and the two ports.
pub fn two_channel_pair(
    dir: &std::path::Path,
    duration_s: u32,
    streams: &str,
) -> (String, String, [u16; 2]) {
    let (send_pub, recv_pub) = (keygen(dir, "s.key"), keygen(dir, "r.key"));
    let (p0, p1) = (free_port(), free_port());
    std::fs::write(
        dir.join("recv.toml"),
        format!(
            "key_file = \"r.key\"\nallowed_keys = [\"{send_pub}\"]\n\
             [[interfaces]]\nbind = \"127.0.0.1:{p0}\"\n\
             [[interfaces]]\nbind = \"127.0.0.1:{p1}\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("send.toml"),
        format!(
            "key_file = \"s.key\"\npeer_key = \"{recv_pub}\"\nduration_s = {duration_s}\n\
             [[channels]]\nbind = \"127.0.0.1:0\"\nremote = \"127.0.0.1:{p0}\"\n\
             [[channels]]\nbind = \"127.0.0.1:0\"\nremote = \"127.0.0.1:{p1}\"\n{streams}"
        ),
    )
    .unwrap();
    (send_pub, recv_pub, [p0, p1])
}

/// Waits for `child` to exit, killing it after `limit` (which fails the test, with its
/// output).
pub fn finish_within(mut child: Child, limit: Duration) -> Output {
    let end = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "process did not exit within {limit:?}\n{}\n{}",
                text(&out.stdout),
                text(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

/// A UDP port on loopback that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `dir/name` as a string, for a command's arguments.
pub fn path(dir: &std::path::Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_string()
}

/// Writes `dir/recv.toml`: a receiver with key `r.key` on loopback `port`, allowing the
/// sender whose public key is `sender`.
pub fn write_recv_config(dir: &std::path::Path, sender: &str, port: u16) {
    std::fs::write(
        dir.join("recv.toml"),
        format!(
            "key_file = \"r.key\"\nallowed_keys = [\"{sender}\"]\n[[interfaces]]\nbind = \"127.0.0.1:{port}\"\n"
        ),
    )
    .unwrap();
}
