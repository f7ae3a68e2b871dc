//! `horde recv` under hostile handshakes: per-reason drop counters in its JSON, and one log
//! line for a key that is not on the allow-list.

use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{free_port, keygen, text};

/// Writes `recv.toml` in `dir` for key `r.key`, allowing `allowed`, on a free local port,
/// and returns the port.
fn write_receiver(dir: &std::path::Path, allowed: &str) -> u16 {
    let port = free_port();
    std::fs::write(
        dir.join("recv.toml"),
        format!(
            "key_file = \"r.key\"\nallowed_keys = [\"{allowed}\"]\n\
             [[interfaces]]\nbind = \"127.0.0.1:{port}\"\n"
        ),
    )
    .unwrap();
    port
}

/// Writes a sender's file `name` in `dir`: key `key_file`, one channel to the receiver on
/// `port`, one CBR stream for `seconds`.
fn write_sender(
    dir: &std::path::Path,
    name: &str,
    key_file: &str,
    receiver_pub: &str,
    port: u16,
    seconds: u32,
) {
    std::fs::write(
        dir.join(name),
        format!(
            "key_file = \"{key_file}\"\npeer_key = \"{receiver_pub}\"\nduration_s = {seconds}\n\
             [[channels]]\nbind = \"127.0.0.1:0\"\nremote = \"127.0.0.1:{port}\"\n\
             [[streams]]\nid = 1\nworkload = {{ kind = \"cbr\", kbps = 100, adu_bytes = 500 }}\n"
        ),
    )
    .unwrap();
}

#[test]
fn recv_reports_drops_per_reason_and_logs_a_refused_key() {
    let dir = std::env::temp_dir().join(format!("horde-cli-drops-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = |name: &str| keygen(&dir, name);
    let (allowed_pub, stranger_pub, receiver_pub) = (key("a.key"), key("x.key"), key("r.key"));
    let port = write_receiver(&dir, &allowed_pub);
    // A sender whose key the receiver does not allow.
    write_sender(&dir, "stranger.toml", "x.key", &receiver_pub, port, 1);
    let recv = Command::new(env!("CARGO_BIN_EXE_horde"))
        .args([
            "recv",
            dir.join("recv.toml").to_str().unwrap(),
            "--duration",
            "3",
            "--json",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));

    // Garbage shaped like initiations, and initiations in the old format.
    let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = format!("127.0.0.1:{port}");
    for i in 0..200u32 {
        let mut d = vec![(i % 251) as u8; horde_crypto::INITIATION_LEN];
        d[0] = horde_crypto::TYPE_INITIATION;
        d[1..5].copy_from_slice(&i.to_le_bytes());
        junk.send_to(&d, &target).unwrap();
    }
    for _ in 0..3 {
        let mut d = vec![7u8; horde_crypto::LEGACY_INITIATION_LEN];
        d[0] = horde_crypto::TYPE_LEGACY_INITIATION;
        junk.send_to(&d, &target).unwrap();
    }
    // The stranger retries its handshake for a while; we stop it.
    let mut stranger = Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(["send", dir.join("stranger.toml").to_str().unwrap()])
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    stranger.kill().unwrap();
    stranger.wait().unwrap();

    let mut recv = recv;
    let end = Instant::now() + Duration::from_secs(30);
    while recv.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "recv did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = recv.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    assert_eq!(json["end"], "no sender", "{json}");
    let d = &json["dropped_by_reason"];
    assert!(d["bad_mac"].as_u64().unwrap() >= 200, "{d}");
    assert_eq!(d["legacy_handshake"], 3, "{d}");
    assert!(d["not_allowed"].as_u64().unwrap() >= 2, "{d}");
    // What the data sockets' kernel filter dropped is reported beside the secure layer's
    // drops even when no sender connected.
    assert!(json["kernel_dropped"].is_u64(), "{json}");
    // One warning names the refused key, however often it tried (rate-limited log), and
    // one names the old handshake format.
    let log = text(&out.stderr);
    let refused: Vec<&str> = log.lines().filter(|l| l.contains(&stranger_pub)).collect();
    assert_eq!(refused.len(), 1, "{log}");
    assert!(refused[0].contains("not on the allow-list"), "{log}");
    assert!(!log.contains(&allowed_pub), "{log}");
    // A log read from a pipe or a file carries no terminal colour codes.
    assert!(!log.contains('\u{1b}'), "{log:?}");
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("old handshake format"))
            .count(),
        1,
        "{log}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// `recv`'s text report says how many datagrams the data sockets' kernel filter dropped:
/// here a flood of an undefined packet type during a live session, none of which a
/// session could own.
#[test]
fn recv_text_report_counts_what_the_kernel_filter_dropped() {
    const JUNK: u64 = 2000;
    let dir = std::env::temp_dir().join(format!("horde-cli-kdrops-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (sender_pub, receiver_pub) = (keygen(&dir, "s.key"), keygen(&dir, "r.key"));
    let port = write_receiver(&dir, &sender_pub);
    write_sender(&dir, "send.toml", "s.key", &receiver_pub, port, 3);
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_horde"))
            .args(args)
            .current_dir(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let recv = run(&["recv", "recv.toml", "--duration", "8"]);
    std::thread::sleep(Duration::from_millis(300));
    let send = run(&["send", "send.toml"]);
    std::thread::sleep(Duration::from_millis(1000));
    // Undefined packet types (first byte 0x40 and up), paced so that the receive buffer
    // never fills: every one is the filter's.
    let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..JUNK {
        let d = [0x40 + (i % 64) as u8; 64];
        junk.send_to(&d, ("127.0.0.1", port)).unwrap();
        if i % 100 == 99 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let sent = send.wait_with_output().unwrap();
    assert!(sent.status.success(), "{}", text(&sent.stderr));
    let out = recv.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(report.contains("sender 0 connected"), "{report}");
    let line = report
        .lines()
        .find(|l| l.starts_with("datagrams dropped by the kernel filter"))
        .unwrap_or_else(|| panic!("no kernel filter line: {report}"));
    let dropped: u64 = line
        .rsplit(": ")
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line:?}"));
    assert!(dropped >= JUNK, "{line}\n{report}");
    std::fs::remove_dir_all(dir).unwrap();
}
