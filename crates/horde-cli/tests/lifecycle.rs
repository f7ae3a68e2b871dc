//! `horde send` and `horde recv` as real processes through the connection lifecycle:
//! two senders at once (with and without `--server`), a sender killed with SIGKILL and
//! restarted with the same key, a receiver killed and restarted, and a sender stopped
//! with Ctrl-C. Each checks that the sender's books balance: sent = acked + lost +
//! dropped + abandoned.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod common;

use common::{free_port, keygen, path, text};

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

fn finish(mut child: Child) -> Output {
    let end = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "process did not exit");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

fn json_of(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)))
}

fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// A directory with a receiver key and config on a free port, and `senders` sender
/// keys and configs (`send0.toml`, ...) streaming a 400 kbit/s CBR stream for
/// `duration_s`, plus `extra` TOML in each sender's file. Sender `i`'s public key is in
/// `s{i}.pub`, as the receiver names it.
fn setup(tag: &str, senders: usize, duration_s: u32, extra: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("horde-life-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = |name: &str| keygen(&dir, name);
    let receiver = key("r.key");
    let port = free_port();
    let mut allowed = Vec::new();
    for i in 0..senders {
        let public = key(&format!("s{i}.key"));
        std::fs::write(dir.join(format!("s{i}.pub")), &public).unwrap();
        allowed.push(format!("\"{public}\""));
        std::fs::write(
            dir.join(format!("send{i}.toml")),
            format!(
                "key_file = \"s{i}.key\"\npeer_key = \"{receiver}\"\nduration_s = {duration_s}\n{extra}\n\
                 [[channels]]\nbind = \"127.0.0.1:0\"\nremote = \"127.0.0.1:{port}\"\n\
                 [[streams]]\nid = 1\nworkload = {{ kind = \"cbr\", kbps = 400, adu_bytes = 500 }}\n"
            ),
        )
        .unwrap();
    }
    std::fs::write(
        dir.join("recv.toml"),
        format!(
            "key_file = \"r.key\"\nallowed_keys = [{}]\n[[interfaces]]\nbind = \"127.0.0.1:{port}\"\n",
            allowed.join(", ")
        ),
    )
    .unwrap();
    dir
}

/// The sender's stream 1 summary, checked to balance.
fn balanced(send: &serde_json::Value) -> serde_json::Value {
    let s = send["summary"]["streams"][0].clone();
    let n = |k: &str| s[k].as_u64().unwrap();
    assert_eq!(
        n("sent"),
        n("acked") + n("lost") + n("dropped") + n("abandoned"),
        "books do not balance: {s}"
    );
    assert_eq!(send["unaccounted"], 0, "{send}");
    s
}

fn sender(recv: &serde_json::Value, id: u64) -> &serde_json::Value {
    recv["senders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("no sender {id} in {recv}"))
}

fn received(s: &serde_json::Value) -> u64 {
    s["summary"]["streams"][0]["received"].as_u64().unwrap_or(0)
}

/// Start `recv --server` (plus `recv_args`) in a directory made by [`setup`], then its
/// `senders` senders all at once, and wait for every sender to exit. Returns the
/// receiver, still to be stopped, and each sender's report, in `send{i}` order.
fn serve_senders(
    dir: &Path,
    senders: usize,
    recv_args: &[&str],
) -> (Child, Vec<serde_json::Value>) {
    let config = path(dir, "recv.toml");
    let mut args = vec!["recv", &config, "--server", "--json"];
    args.extend_from_slice(recv_args);
    let recv = spawn(&args);
    std::thread::sleep(Duration::from_millis(300));
    let running: Vec<Child> = (0..senders)
        .map(|i| spawn(&["send", &path(dir, &format!("send{i}.toml")), "--json"]))
        .collect();
    let reports = running.into_iter().map(|c| json_of(&finish(c))).collect();
    (recv, reports)
}

/// Each sender's books balance, the receiver heard it close, and everything it had
/// acked reached the receiving application: the receiver's entry for sender `i` is
/// found by the key in `s{i}.pub`.
fn delivered_in_full(dir: &Path, rx: &serde_json::Value, txs: &[serde_json::Value]) {
    for (i, tx) in txs.iter().enumerate() {
        let key = std::fs::read_to_string(dir.join(format!("s{i}.pub"))).unwrap();
        let rx_sender = rx["senders"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["peer"] == key.as_str())
            .unwrap_or_else(|| panic!("sender {i} ({key}) not in {rx}"));
        assert_eq!(rx_sender["end"], "peer closed", "{rx_sender}");
        let s = balanced(tx);
        assert_eq!(
            received(rx_sender),
            s["acked"].as_u64().unwrap(),
            "sender {i}: {rx_sender} vs {s}"
        );
    }
}

#[test]
fn recv_serves_two_senders_at_once() {
    let dir = setup("two", 2, 2, "");
    let recv = spawn(&["recv", &path(&dir, "recv.toml"), "--json"]);
    std::thread::sleep(Duration::from_millis(300));
    let a = spawn(&["send", &path(&dir, "send0.toml"), "--json"]);
    let b = spawn(&["send", &path(&dir, "send1.toml"), "--json"]);
    let (a, b) = (json_of(&finish(a)), json_of(&finish(b)));
    let rx = json_of(&finish(recv));
    assert_eq!(rx["end"], "sender closed", "{rx}");
    assert_eq!(rx["senders"].as_array().unwrap().len(), 2, "{rx}");
    // 400 kbit/s of 500-byte ADUs for 2 s is 200 ADUs from each.
    for id in 0..2 {
        let s = sender(&rx, id);
        assert_eq!(s["end"], "peer closed", "{s}");
        let n = received(s);
        assert!((180..=201).contains(&n), "sender {id} delivered {n}: {s}");
    }
    for tx in [&a, &b] {
        let s = balanced(tx);
        assert!(s["acked"].as_u64().unwrap() >= 180, "{s}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// The reported failure: a sender killed with SIGKILL and started again with the same
/// key had its data acked by the receiving host but never delivered.
#[test]
fn a_sender_killed_and_restarted_is_delivered_within_two_seconds() {
    let dir = setup("restart", 1, 30, "");
    let recv = spawn(&["recv", &path(&dir, "recv.toml"), "--json"]);
    std::thread::sleep(Duration::from_millis(300));
    let first = spawn(&["send", &path(&dir, "send0.toml")]);
    std::thread::sleep(Duration::from_millis(1500));
    signal(&first, "-KILL");
    finish(first);
    let restarted_us = unix_us();
    let second = spawn(&[
        "send",
        &path(&dir, "send0.toml"),
        "--duration",
        "2",
        "--json",
    ]);
    let tx = json_of(&finish(second));
    let rx = json_of(&finish(recv));
    assert_eq!(rx["end"], "sender closed", "{rx}");
    assert_eq!(rx["sessions_replaced"], 1, "{rx}");
    let old = sender(&rx, 0);
    assert_eq!(old["end"], "replaced by a new session", "{old}");
    let new = sender(&rx, 1);
    assert_eq!(new["end"], "peer closed", "{new}");
    // Everything the new process sent was delivered, not just acked.
    let s = balanced(&tx);
    let acked = s["acked"].as_u64().unwrap();
    assert!(acked >= 180, "{s}");
    assert_eq!(received(new), acked, "{new} vs {s}");
    let first_us = new["first_arrival_unix_us"].as_u64().unwrap();
    let resumed = Duration::from_micros(first_us.saturating_sub(restarted_us));
    eprintln!("delivery resumed {resumed:?} after the sender restarted");
    assert!(resumed < Duration::from_secs(2), "{resumed:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_sender_reconnects_when_the_receiver_is_killed_and_restarted() {
    // Default session settings: every channel dies about a second after the receiver,
    // and the sender handshakes again with backoff.
    let dir = setup("recv-restart", 1, 6, "");
    let recv = spawn(&["recv", &path(&dir, "recv.toml"), "--json"]);
    std::thread::sleep(Duration::from_millis(300));
    let send = spawn(&["send", &path(&dir, "send0.toml"), "--json"]);
    std::thread::sleep(Duration::from_millis(1500));
    signal(&recv, "-KILL");
    finish(recv);
    std::thread::sleep(Duration::from_millis(1000));
    let restarted_us = unix_us();
    let recv = spawn(&["recv", &path(&dir, "recv.toml"), "--json"]);
    let tx = json_of(&finish(send));
    let rx = json_of(&finish(recv));
    assert_eq!(rx["end"], "sender closed", "{rx}");
    let s = balanced(&tx);
    assert_eq!(tx["reconnects"], 1, "{tx}");
    // The outage cost about a second and a half of the 6 s: the rest was delivered.
    let n = received(sender(&rx, 0));
    assert!(n >= 150, "delivered {n} after the restart; sender {s}");
    let first_us = sender(&rx, 0)["first_arrival_unix_us"].as_u64().unwrap();
    let resumed = Duration::from_micros(first_us.saturating_sub(restarted_us));
    eprintln!("delivery resumed {resumed:?} after the receiver restarted");
    assert!(resumed < Duration::from_secs(2), "{resumed:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn ctrl_c_stops_the_sender_with_a_close_and_balanced_books() {
    let dir = setup("sigint", 1, 30, "");
    let recv = spawn(&["recv", &path(&dir, "recv.toml"), "--json"]);
    std::thread::sleep(Duration::from_millis(300));
    let send = spawn(&["send", &path(&dir, "send0.toml"), "--json"]);
    std::thread::sleep(Duration::from_millis(1500));
    signal(&send, "-INT");
    let interrupted = Instant::now();
    let tx = json_of(&finish(send));
    let rx = json_of(&finish(recv));
    // The receiver heard the Close: no wait for an idle timeout.
    assert!(interrupted.elapsed() < Duration::from_secs(5));
    assert_eq!(rx["end"], "sender closed", "{rx}");
    assert_eq!(tx["interrupted"], true);
    let s = balanced(&tx);
    let acked = s["acked"].as_u64().unwrap();
    assert!(acked > 100, "{s}");
    assert_eq!(received(sender(&rx, 0)), acked);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn recv_in_server_mode_outlives_its_senders() {
    let dir = setup("server", 1, 1, "");
    let (recv, txs) = serve_senders(&dir, 1, &["--duration", "3"]);
    let started = Instant::now();
    let rx = json_of(&finish(recv));
    // The sender closed after about 1 s; the server ran on to its 3 s.
    assert!(started.elapsed() > Duration::from_millis(500));
    assert_eq!(rx["end"], "duration reached", "{rx}");
    delivered_in_full(&dir, &rx, &txs);
    std::fs::remove_dir_all(dir).unwrap();
}

/// CPU time a process has used, user and system, in seconds (Linux counts it in
/// USER_HZ = 100 ticks a second).
fn cpu_seconds(child: &Child) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
    // The fields after the command name, which ends at the last ')'.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// The reported failure: a server whose last sender had gone quiet for longer than the
/// idle timeout woke at once for ever, one core at 100% until it was stopped.
#[test]
fn recv_in_server_mode_rests_once_its_senders_are_idle() {
    let dir = setup("server-idle", 1, 1, "");
    let (recv, _) = serve_senders(&dir, 1, &["--idle-timeout", "0.5"]);
    std::thread::sleep(Duration::from_millis(1500));
    let before = cpu_seconds(&recv);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_seconds(&recv) - before;
    assert!(used < 0.4, "an idle server used {used} s of CPU in 2 s");
    signal(&recv, "-INT");
    let rx = json_of(&finish(recv));
    assert_eq!(rx["end"], "interrupted", "{rx}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn recv_in_server_mode_serves_two_senders_at_once() {
    let dir = setup("server-two", 2, 2, "");
    let (mut recv, txs) = serve_senders(&dir, 2, &[]);
    // Both senders have closed; without `--server` the receiver would end now.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        recv.try_wait().unwrap().is_none(),
        "the server exited with its senders"
    );
    signal(&recv, "-INT");
    let rx = json_of(&finish(recv));
    assert_eq!(rx["end"], "interrupted", "{rx}");
    assert_eq!(rx["senders"].as_array().unwrap().len(), 2, "{rx}");
    delivered_in_full(&dir, &rx, &txs);
    // 400 kbit/s of 500-byte ADUs for 2 s is 200 ADUs from each, and the two 2 s
    // streams overlapped: each began to arrive before the other was half done.
    for tx in &txs {
        assert!(balanced(tx)["acked"].as_u64().unwrap() >= 180, "{tx}");
    }
    let first: Vec<u64> = (0..2)
        .map(|id| sender(&rx, id)["first_arrival_unix_us"].as_u64().unwrap())
        .collect();
    assert!(
        first[0].abs_diff(first[1]) < 1_000_000,
        "first arrivals {first:?}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A bulk stream is fed by back-pressure: the application waits for its queue to drain.
/// When the receiver was killed while the queue was full, the new session took the queue
/// over without the old one's back-pressure state, never announced that it had drained,
/// and the bulk source waited for ever: the restarted receiver got a dozen ADUs.
#[test]
fn a_bulk_stream_carries_on_after_the_receiver_restarts() {
    let dir = setup("bulk-restart", 1, 6, "");
    // The same keys and receiver, but a bulk stream over two channels paced at 2 Mbit/s
    // each: about 400 ADUs/s, with the queue at its high-water mark most of the time.
    let file = dir.join("send0.toml");
    let config = std::fs::read_to_string(&file).unwrap();
    let head = &config[..config.find("[[channels]]").unwrap()];
    let remote = config.lines().find(|l| l.starts_with("remote")).unwrap();
    let channel = format!(
        "[[channels]]\nbind = \"127.0.0.1:0\"\n{remote}\ncongestion = {{ kind = \"cbr\", kbps = 2000 }}\n"
    );
    std::fs::write(
        &file,
        format!(
            "{head}{channel}{channel}[[streams]]\nid = 1\n\
             workload = {{ kind = \"bulk\", adu_bytes = 1200 }}\n"
        ),
    )
    .unwrap();
    let recv = spawn(&["recv", &path(&dir, "recv.toml"), "--json"]);
    std::thread::sleep(Duration::from_millis(300));
    let send = spawn(&["send", &path(&dir, "send0.toml"), "--json"]);
    std::thread::sleep(Duration::from_millis(1500));
    signal(&recv, "-KILL");
    finish(recv);
    std::thread::sleep(Duration::from_millis(1000));
    let recv = spawn(&["recv", &path(&dir, "recv.toml"), "--json"]);
    let tx = json_of(&finish(send));
    let rx = json_of(&finish(recv));
    let s = balanced(&tx);
    assert_eq!(tx["reconnects"], 1, "{tx}");
    // About three seconds of the run remain after the restart: some 1200 ADUs at the
    // channels' pace. Before the fix the source stalled for good at the kill.
    let n = received(sender(&rx, 0));
    assert!(n >= 400, "delivered {n} after the restart; sender {s}");
    std::fs::remove_dir_all(dir).unwrap();
}
