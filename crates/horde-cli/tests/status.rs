//! `horde status` against a running `horde recv` and `horde send` pair on loopback: both
//! processes keep their status files current, and the view names each peer's key, the
//! handshake's age and every channel with its endpoint, state and traffic.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{horde, text, two_channel_pair};

fn spawn(dir: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `horde status FILE --json` once the file shows a peer whose channels have all counted
/// some `counter` (`packets_acked`, `packets_received`), or a failure after the deadline.
fn wait_for_traffic(
    file: &Path,
    channels: usize,
    counter: &str,
    deadline: Instant,
) -> serde_json::Value {
    loop {
        let out = horde(&["status", file.to_str().unwrap(), "--json"]);
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let busy = v["peers"].as_array().is_some_and(|p| {
                p.len() == 1
                    && p[0]["channels"].as_array().is_some_and(|c| {
                        c.len() == channels && c.iter().all(|c| c[counter].as_u64() > Some(0))
                    })
            });
            if busy {
                return v;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never showed {channels} channels with {counter}: {}",
            file.display(),
            text(&out.stdout)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn status_shows_the_peer_and_its_channels_of_a_running_pair() {
    let dir = std::env::temp_dir().join(format!("horde-cli-status-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (send_pub, recv_pub, [p0, p1]) = two_channel_pair(
        &dir,
        6,
        "[[streams]]\nid = 1\nworkload = { kind = \"cbr\", kbps = 200, adu_bytes = 500 }\n",
    );
    let (recv_status, send_status) = (dir.join("recv.status"), dir.join("send.status"));
    let mut recv = spawn(
        &dir,
        &[
            "recv",
            "recv.toml",
            "--duration",
            "12",
            "--status",
            recv_status.to_str().unwrap(),
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let mut send = spawn(
        &dir,
        &[
            "send",
            "send.toml",
            "--status",
            send_status.to_str().unwrap(),
        ],
    );

    // The sender's channels count what the receiver acknowledged (it receives only acks).
    let deadline = Instant::now() + Duration::from_secs(8);
    let s = wait_for_traffic(&send_status, 2, "packets_acked", deadline);
    assert_eq!(s["role"], "send");
    assert_eq!(s["public_key"], send_pub.as_str());
    let peer = &s["peers"][0];
    assert_eq!(peer["key"], recv_pub.as_str(), "{s}");
    assert_eq!(peer["closed"], false, "{s}");
    let remotes: Vec<&str> = peer["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["endpoint"].as_str().unwrap())
        .collect();
    let want = [format!("127.0.0.1:{p0}"), format!("127.0.0.1:{p1}")];
    assert_eq!(remotes, want, "{s}");
    assert!(peer["channels"][0]["rtt_ms"].as_f64().is_some(), "{s}");
    assert_eq!(peer["channels"][0]["state"], "up", "{s}");

    // The receiver's view: the sender's key, both channels it opened.
    let r = wait_for_traffic(&recv_status, 2, "packets_received", deadline);
    assert_eq!(r["role"], "recv");
    assert_eq!(r["peers"][0]["key"], send_pub.as_str(), "{r}");
    assert!(
        r["peers"][0]["session"]["adus_received"].as_u64() > Some(0),
        "{r}"
    );

    // The text view, in the manner of `wg show`.
    let out = horde(&["status", send_status.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let view = text(&out.stdout);
    assert!(view.contains(&format!("peer: {recv_pub}")), "{view}");
    assert!(view.contains("latest handshake: "), "{view}");
    assert!(
        view.contains(&format!(
            "channel 0: endpoint 127.0.0.1:{p0} via interface 0, up"
        )),
        "{view}"
    );
    // Both channels had packets acked in the snapshot above, and counters only grow.
    assert_eq!(view.matches(" acked, received ").count(), 2, "{view}");
    assert!(!view.contains(" 0 acked,"), "{view}");
    assert!(
        view.contains(&format!(
            "channel 1: endpoint 127.0.0.1:{p1} via interface 1, up"
        )),
        "{view}"
    );

    for child in [&mut send, &mut recv] {
        let _ = child.kill();
        let _ = child.wait();
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A file that is not a status file is an error at its line and column, both counted
/// from 1 as in every other file error: an empty or cut-off file at its end, a wrong
/// value at the value.
#[test]
fn a_file_that_is_not_a_status_file_is_named_at_its_line_and_column() {
    let dir = std::env::temp_dir().join(format!("horde-cli-badstatus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        ("", "1:1", "EOF while parsing a value"),
        ("\n\n", "3:1", "EOF while parsing a value"),
        (
            "{\n  \"role\": \"send\",\n",
            "3:1",
            "EOF while parsing a value",
        ),
        ("{\"role\": \"send\"", "1:16", "EOF while parsing an object"),
        (
            "{\n  \"role\": 3\n}\n",
            "2:11",
            "invalid type: integer `3`, expected a string",
        ),
        ("key_file = \"s.key\"\n", "1:1", "expected value"),
    ];
    let mut wrong = Vec::new();
    for (i, (content, at, message)) in cases.iter().enumerate() {
        let file = dir.join(format!("{i}.status"));
        std::fs::write(&file, content).unwrap();
        let out = horde(&["status", file.to_str().unwrap()]);
        let want = format!(
            "error: {}:{at}: not a horde status file: {message}\n",
            file.display()
        );
        if out.status.success() || text(&out.stderr) != want {
            wrong.push(format!("{content:?}: got {:?}", text(&out.stderr)));
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
    assert!(wrong.is_empty(), "{wrong:#?}");
}
