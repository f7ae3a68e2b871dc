//! Every way a connection can end, with real `horde send` and `horde recv` processes:
//! the receiver's close (SIGINT), its crash (SIGKILL), the sender giving up
//! reconnecting, and a receiver that restarts for a sender that does not reconnect.
//! Each checks that the sender's books put every ADU somewhere (sent = acked + lost +
//! dropped + abandoned, with the reasons adding up), says how the connection ended, and
//! exits with the status for "the receiver left and ADUs were abandoned" (4) without a
//! flood of log lines. Also: a sender asking for a service the receiver does not serve
//! is refused by name, `recv --json` counts each sender's channels, and a sender whose
//! receiver never acknowledges anything exits with "not one ADU was acked" (3).

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{finish_within, free_port, keygen, path, text, write_recv_config};

/// The exit status of a run whose receiver left with ADUs abandoned.
const PEER_LEFT: i32 = 4;
/// The exit status of a run in which not one ADU was acked.
const NOTHING_ACKED: i32 = 3;

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)))
}

/// A directory with keys, a receiver file on a free port (service 1) and a sender file
/// with a 400 kbit/s stream of 500-byte ADUs over `channels` channels for `duration_s`,
/// plus `extra` TOML at the top of the sender's file.
fn setup(tag: &str, duration_s: u32, channels: usize, extra: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("horde-books-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = |name: &str| keygen(&dir, name);
    let (receiver, sender) = (key("r.key"), key("s.key"));
    let port = free_port();
    let channel = format!("[[channels]]\nbind = \"127.0.0.1:0\"\nremote = \"127.0.0.1:{port}\"\n");
    std::fs::write(
        dir.join("send.toml"),
        format!(
            "key_file = \"s.key\"\npeer_key = \"{receiver}\"\nduration_s = {duration_s}\n{extra}\n\
             {}[[streams]]\nid = 1\nworkload = {{ kind = \"cbr\", kbps = 400, adu_bytes = 500 }}\n",
            channel.repeat(channels)
        ),
    )
    .unwrap();
    write_recv_config(&dir, &sender, port);
    dir
}

/// Stream 1's books, checked to balance with their reasons; returns them.
fn balanced(send: &serde_json::Value) -> serde_json::Value {
    let b = send["books"][0].clone();
    let n = |k: &str| b[k].as_u64().unwrap_or_else(|| panic!("no {k} in {b}"));
    assert!(n("sent") > 0, "{b}");
    assert_eq!(
        n("sent"),
        n("acked") + n("lost") + n("dropped") + n("abandoned"),
        "books do not balance: {b}"
    );
    assert_eq!(
        n("dropped"),
        n("dropped_queue_full") + n("dropped_removed") + n("dropped_after_end"),
        "{b}"
    );
    assert_eq!(
        n("abandoned"),
        n("abandoned_queued") + n("abandoned_in_flight"),
        "{b}"
    );
    assert_eq!(send["unaccounted"], 0, "{send}");
    // The summary row agrees with the books.
    let s = &send["summary"]["streams"][0];
    for k in ["sent", "acked", "lost", "dropped", "abandoned"] {
        assert_eq!(s[k], b[k], "{k}: {s} vs {b}");
    }
    b
}

/// Log lines at WARN or above: one summary, never one per ADU.
fn warnings(stderr: &str) -> usize {
    stderr
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains("ERROR"))
        .count()
}

/// Start the receiver, then the sender; `event` runs 1.5 s into the sender's run.
fn run(dir: &Path, recv_args: &[&str], event: impl FnOnce(Child) -> Option<Child>) -> Output {
    let config = path(dir, "recv.toml");
    let mut args = vec!["recv", config.as_str(), "--json"];
    args.extend_from_slice(recv_args);
    let recv = spawn(&args);
    std::thread::sleep(Duration::from_millis(300));
    let send = spawn(&["send", &path(dir, "send.toml"), "--json"]);
    std::thread::sleep(Duration::from_millis(1500));
    let recv = event(recv);
    let out = finish_within(send, Duration::from_secs(20));
    if let Some(mut r) = recv {
        let _ = r.kill();
        let _ = r.wait();
    }
    out
}

#[test]
fn the_receivers_close_ends_a_sender_that_does_not_reconnect_with_its_books() {
    let dir = setup("recv-close", 20, 1, "reconnect = false");
    let started = Instant::now();
    let out = run(&dir, &[], |recv| {
        signal(&recv, "-INT");
        finish_within(recv, Duration::from_secs(10));
        None
    });
    // The run of 20 s ends as soon as the receiver is gone.
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    let tx = json(&out);
    let b = balanced(&tx);
    assert!(b["acked"].as_u64().unwrap() >= 100, "{b}");
    assert_eq!(tx["end"]["by"], "peer", "{tx}");
    assert_eq!(tx["end"]["peer_left"], "peer closed", "{tx}");
    let stderr = text(&out.stderr);
    assert!(warnings(&stderr) <= 1, "{stderr}");
    assert!(
        stderr.contains("the receiver left (peer closed)"),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(PEER_LEFT), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_receivers_crash_ends_a_sender_that_does_not_reconnect_with_its_books() {
    let dir = setup("recv-crash", 20, 1, "reconnect = false");
    let out = run(&dir, &[], |recv| {
        signal(&recv, "-KILL");
        finish_within(recv, Duration::from_secs(5));
        None
    });
    let tx = json(&out);
    let b = balanced(&tx);
    assert!(b["acked"].as_u64().unwrap() >= 100, "{b}");
    assert_eq!(tx["end"]["by"], "peer", "{tx}");
    // Its silence ends the session (ICMP errors may end it sooner).
    let why = tx["end"]["peer_left"].as_str().unwrap_or("");
    assert!(["idle timeout", "peer unreachable"].contains(&why), "{tx}");
    let stderr = text(&out.stderr);
    assert!(warnings(&stderr) <= 1, "{stderr}");
    assert_eq!(out.status.code(), Some(PEER_LEFT), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_sender_that_gives_up_reconnecting_says_so_and_balances_its_books() {
    let dir = setup("give-up", 20, 1, "reconnect_give_up_s = 2");
    let started = Instant::now();
    let out = run(&dir, &[], |recv| {
        signal(&recv, "-INT");
        finish_within(recv, Duration::from_secs(10));
        None
    });
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let tx = json(&out);
    let b = balanced(&tx);
    assert!(b["acked"].as_u64().unwrap() >= 100, "{b}");
    assert_eq!(tx["end"]["gave_up_reconnecting"], true, "{tx}");
    assert_eq!(tx["end"]["peer_left"], "peer closed", "{tx}");
    // What waited for a new session is abandoned, with its reason.
    assert!(b["abandoned_queued"].as_u64().unwrap() > 0, "{b}");
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("session ended (peer closed); reconnecting"))
            .count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("gave up reconnecting after 2.0 s"))
            .count(),
        1,
        "{stderr}"
    );
    assert!(warnings(&stderr) <= 1, "{stderr}");
    assert_eq!(out.status.code(), Some(PEER_LEFT), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// The receiver restarts, but the sender does not reconnect: its session dies of
/// silence (a short idle timeout here) and the run ends with its books.
#[test]
fn a_receiver_restart_ends_a_sender_that_does_not_reconnect_with_its_books() {
    let dir = setup(
        "restart-no-reconnect",
        20,
        1,
        "reconnect = false\n[session]\nidle_timeout_ms = 1500",
    );
    let out = run(&dir, &[], |recv| {
        signal(&recv, "-KILL");
        finish_within(recv, Duration::from_secs(5));
        let config = path(&dir, "recv.toml");
        Some(spawn(&["recv", &config, "--json", "--duration", "8"]))
    });
    let tx = json(&out);
    let b = balanced(&tx);
    assert!(b["acked"].as_u64().unwrap() >= 100, "{b}");
    assert_eq!(tx["end"]["by"], "peer", "{tx}");
    let stderr = text(&out.stderr);
    assert!(warnings(&stderr) <= 1, "{stderr}");
    assert_eq!(out.status.code(), Some(PEER_LEFT), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_sender_asking_for_a_service_the_receiver_does_not_serve_is_refused_by_name() {
    let dir = setup("wrong-service", 20, 1, "service = 7");
    let recv = spawn(&["recv", &path(&dir, "recv.toml"), "--duration", "4"]);
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let send = spawn(&["send", &path(&dir, "send.toml")]);
    let out = finish_within(send, Duration::from_secs(10));
    let refused_in = started.elapsed();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the receiver refused service 7"),
        "{stderr}"
    );
    // Refused at once, not at the end of its 20 s, and not retried (reconnect is on).
    assert!(refused_in < Duration::from_secs(5), "{refused_in:?}");
    let rx = finish_within(recv, Duration::from_secs(10));
    let rx_err = text(&rx.stderr);
    assert!(
        rx_err.contains("asked for service 7, but this host serves 1"),
        "{rx_err}"
    );
    assert!(text(&rx.stdout).contains("hellos refused for a service other than 1"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn recv_json_counts_each_senders_channels() {
    let dir = setup("channels", 2, 2, "");
    let recv = spawn(&["recv", &path(&dir, "recv.toml"), "--json"]);
    std::thread::sleep(Duration::from_millis(300));
    let send = spawn(&["send", &path(&dir, "send.toml"), "--json"]);
    let tx_out = finish_within(send, Duration::from_secs(20));
    assert!(tx_out.status.success(), "{}", text(&tx_out.stderr));
    let rx = json(&finish_within(recv, Duration::from_secs(20)));
    let s = &rx["senders"][0]["summary"];
    let received = s["streams"][0]["received"].as_u64().unwrap();
    assert!(received >= 180, "{s}");
    let channels = s["channels"].as_array().unwrap();
    assert_eq!(channels.len(), 2, "{s}");
    let per: Vec<u64> = channels
        .iter()
        .map(|c| c["received"].as_u64().unwrap())
        .collect();
    assert!(per.iter().all(|&n| n > 0), "{s}");
    assert_eq!(per.iter().sum::<u64>(), received, "{s}");
    assert!(channels
        .iter()
        .all(|c| c["goodput_kbps"].as_f64().unwrap() > 0.0));
    // One sender: the same counts as the receiver's summary over all senders.
    let all: Vec<u64> = rx["summary"]["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["received"].as_u64().unwrap())
        .collect();
    assert_eq!(per, all, "{rx}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A UDP relay in front of the receiver that passes everything the sender sends but,
/// of what comes back, only handshake answers (responses and cookie replies): the
/// session is established and the receiver gets the data, but no ack ever reaches the
/// sender. Returns the relay's address and a handle that stops it and reports how many
/// datagrams it withheld from the sender.
fn ack_black_hole(receiver: SocketAddr) -> (SocketAddr, impl FnOnce() -> u64) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    let front = UdpSocket::bind("127.0.0.1:0").unwrap();
    let back = UdpSocket::bind("127.0.0.1:0").unwrap();
    back.connect(receiver).unwrap();
    for s in [&front, &back] {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    }
    let addr = front.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let withheld = Arc::new(AtomicU64::new(0));
    let sender = Arc::new(Mutex::new(None::<SocketAddr>));
    let (front2, back2) = (front.try_clone().unwrap(), back.try_clone().unwrap());
    let (stop2, sender2) = (stop.clone(), sender.clone());
    let up = std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while !stop2.load(Ordering::Relaxed) {
            if let Ok((n, from)) = front2.recv_from(&mut buf) {
                *sender2.lock().unwrap() = Some(from);
                let _ = back2.send(&buf[..n]);
            }
        }
    });
    let (stop3, withheld3) = (stop.clone(), withheld.clone());
    let down = std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while !stop3.load(Ordering::Relaxed) {
            let Ok(n) = back.recv(&mut buf) else { continue };
            let handshake = n > 0
                && [horde_crypto::TYPE_RESPONSE, horde_crypto::TYPE_COOKIE_REPLY].contains(&buf[0]);
            match *sender.lock().unwrap() {
                Some(to) if handshake => {
                    let _ = front.send_to(&buf[..n], to);
                }
                _ => {
                    withheld3.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    let finish = move || {
        stop.store(true, Ordering::Relaxed);
        up.join().unwrap();
        down.join().unwrap();
        withheld.load(Ordering::Relaxed)
    };
    (addr, finish)
}

/// The receiver answers the handshake but none of its acks reach the sender: the
/// session dies of silence, every ADU is lost or abandoned, and the sender says that
/// not one was acked, with exit status 3.
#[test]
fn a_sender_whose_receiver_never_acks_exits_with_nothing_acked() {
    let dir = setup(
        "nothing-acked",
        20,
        1,
        "reconnect = false\n[session]\nidle_timeout_ms = 1500",
    );
    let recv_file = std::fs::read_to_string(dir.join("recv.toml")).unwrap();
    let receiver: SocketAddr = recv_file
        .lines()
        .find_map(|l| l.strip_prefix("bind = \""))
        .and_then(|l| l.strip_suffix('"'))
        .unwrap()
        .parse()
        .unwrap();
    let (relay, stop_relay) = ack_black_hole(receiver);
    let send_file = std::fs::read_to_string(dir.join("send.toml")).unwrap();
    std::fs::write(
        dir.join("send.toml"),
        send_file.replace(&receiver.to_string(), &relay.to_string()),
    )
    .unwrap();
    let started = Instant::now();
    let out = run(&dir, &["--duration", "10"], Some);
    let withheld = stop_relay();
    // The run of 20 s ends when the silent session does, not at its end.
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );
    assert!(withheld > 0, "the relay withheld nothing");
    let tx = json(&out);
    let b = balanced(&tx);
    assert_eq!(b["acked"], 0, "{b}");
    // What was sent was declared lost or abandoned when the session died, not dropped.
    assert!(
        b["lost"].as_u64().unwrap() + b["abandoned"].as_u64().unwrap() > 0,
        "{b}"
    );
    assert_eq!(tx["end"]["by"], "peer", "{tx}");
    let why = tx["end"]["peer_left"].as_str().unwrap_or("");
    assert!(["idle timeout", "peer unreachable"].contains(&why), "{tx}");
    assert_eq!(tx["exit_code"], NOTHING_ACKED, "{tx}");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("error: not one ADU was acked"), "{stderr}");
    assert!(warnings(&stderr) <= 1, "{stderr}");
    assert_eq!(out.status.code(), Some(NOTHING_ACKED), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A stream with loss recovery (`fec` at 25%) sending at exactly its `max_kbps`: the
/// coded ADUs take no stream number and get room of their own, so the books count the
/// application's ADUs one for one, every one is acked, and the goodput is the stream's
/// rate. Before, the coded ADUs shifted the numbers (goodput read 0), and were charged
/// to the stream's rate, whose queue then grew without end.
#[test]
fn a_stream_with_recovery_at_its_declared_rate_keeps_its_books_and_its_rate() {
    let dir = setup("recovery", 3, 2, "");
    let file = dir.join("send.toml");
    let config = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        format!("{config}max_kbps = 400\nrecovery = {{ mode = \"fec\", percent = 25 }}\n"),
    )
    .unwrap();
    let out = run(&dir, &[], Some);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let tx = json(&out);
    let b = balanced(&tx);
    // 3 s of 400 kbit/s in 500-byte ADUs.
    let sent = b["sent"].as_u64().unwrap();
    assert!((280..=310).contains(&sent), "{b}");
    assert_eq!(b["acked"], sent, "{b}");
    let s = &tx["summary"]["streams"][0];
    let goodput = s["goodput_kbps"].as_f64().unwrap();
    assert!((360.0..=440.0).contains(&goodput), "{s}");
    let p95 = s["latency_ms"]["p95"].as_f64().unwrap();
    assert!(p95 < 100.0, "{s}");
    std::fs::remove_dir_all(dir).unwrap();
}
