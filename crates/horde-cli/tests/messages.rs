//! A message workload from the command line, with real `horde send` and `horde recv`
//! processes: two priorities with deadlines over two loopback channels, where the
//! sender's books balance (every message offered is refused or sent, every one sent ends
//! in exactly one fate) and the receiver counts what the sender counts delivered; a link
//! through `horde emu` whose rate drops to a tenth, where the low priority's early
//! callbacks fire, the high priority still gets through, and messages cancelled after
//! a while are freed at the receiver; and bad `[[messages]]`
//! values refused at their position.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{finish_within, free_port, horde, keygen, path, text, write_recv_config};

/// A child process killed when the test is done with it, also when it fails.
struct Running(Option<Child>);

impl Running {
    fn spawn(args: &[&str]) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_horde"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Self(Some(child))
    }

    /// Waits for it to exit (killing it after `limit`, which fails the test).
    fn finish(mut self, limit: Duration) -> Output {
        finish_within(self.0.take().unwrap(), limit)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)))
}

/// A directory with keys, a receiver on `port` and a sender whose channels go to
/// `remotes`, with `body` (queues and messages) at the end of its file.
fn setup(tag: &str, port: u16, remotes: &[u16], duration_s: u32, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("horde-messages-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (receiver, sender) = (keygen(&dir, "r.key"), keygen(&dir, "s.key"));
    let channels: String = remotes
        .iter()
        .map(|p| format!("[[channels]]\nbind = \"127.0.0.1:0\"\nremote = \"127.0.0.1:{p}\"\n"))
        .collect();
    std::fs::write(
        dir.join("send.toml"),
        format!(
            "key_file = \"s.key\"\npeer_key = \"{receiver}\"\nduration_s = {duration_s}\n\
             reconnect = false\n{channels}{body}"
        ),
    )
    .unwrap();
    write_recv_config(&dir, &sender, port);
    dir
}

/// Runs the receiver, then the sender, both with `--json`; returns their reports and
/// the sender's exit code.
fn run(dir: &Path, limit: Duration) -> (serde_json::Value, serde_json::Value, Option<i32>) {
    let recv = Running::spawn(&["recv", &path(dir, "recv.toml"), "--json"]);
    std::thread::sleep(Duration::from_millis(300));
    let send = Running::spawn(&["send", &path(dir, "send.toml"), "--json"]);
    let sent = send.finish(limit);
    let received = recv.finish(Duration::from_secs(10));
    (json(&sent), json(&received), sent.status.code())
}

/// Each priority's books, checked to balance; by priority.
fn balanced(send: &serde_json::Value) -> Vec<serde_json::Value> {
    let rows = send["messages"]["priorities"].as_array().unwrap().clone();
    for b in &rows {
        let n = |k: &str| b[k].as_u64().unwrap_or_else(|| panic!("no {k} in {b}"));
        assert!(n("offered") > 0, "{b}");
        assert_eq!(n("offered"), n("refused") + n("sent"), "{b}");
        assert_eq!(
            n("refused"),
            n("refused_unreachable") + n("refused_endangers"),
            "{b}"
        );
        assert_eq!(
            n("sent"),
            n("delivered") + n("early") + n("cancelled") + n("expired") + n("abandoned"),
            "a message in no fate, or in two: {b}"
        );
    }
    assert_eq!(send["messages"]["unaccounted"], 0, "{send}");
    rows
}

/// The receiver's row for `priority`.
fn received(recv: &serde_json::Value, priority: u64) -> serde_json::Value {
    recv["messages"]["priorities"]
        .as_array()
        .unwrap_or_else(|| panic!("no messages in {recv}"))
        .iter()
        .find(|r| r["priority"] == priority)
        .cloned()
        .unwrap_or_else(|| panic!("no priority {priority} in {recv}"))
}

#[test]
fn two_priorities_with_deadlines_balance_their_books_at_both_ends() {
    let p0 = free_port();
    let dir = setup(
        "books",
        p0,
        &[p0, p0],
        3,
        "[[message_queues]]\nname = \"bulk\"\nweight = 2\n\
         [[messages]]\nname = \"alarm\"\npriority = 0\nsize = 2000\nrate = 20\ndeadline_ms = 400\n\
         [[messages]]\nqueue = \"bulk\"\npriority = 4\nsize = { min = 5000, max = 30000 }\n\
         interval_ms = 100\ndeadline_ms = 1000\n",
    );
    let (tx, rx, code) = run(&dir, Duration::from_secs(25));
    assert_eq!(code, Some(0), "{tx}");
    let rows = balanced(&tx);
    let priorities: Vec<u64> = rows
        .iter()
        .map(|r| r["priority"].as_u64().unwrap())
        .collect();
    assert_eq!(priorities, [0, 4], "{tx}");
    for b in &rows {
        let p = b["priority"].as_u64().unwrap();
        let r = received(&rx, p);
        // What the sender counts delivered, the receiver has whole: the same number,
        // and bytes within the sizes declared.
        assert_eq!(r["received"], b["delivered"], "priority {p}: {r} vs {b}");
        assert_eq!(r["bytes"], b["delivered_bytes"], "priority {p}: {r} vs {b}");
        assert_eq!(r["with_deadline"], r["received"], "{r}");
        assert!(r["delay_ms"]["p95"].as_f64().is_some(), "{r}");
        assert!(r["lateness_ms"]["p50"].as_f64().is_some(), "{r}");
    }
    // Unshaped loopback: nearly every message gets through in time, and admission,
    // which sees the channels' rates and not just the little offered so far, refuses
    // almost none.
    for b in &rows {
        let (refused, offered) = (
            b["refused"].as_u64().unwrap(),
            b["offered"].as_u64().unwrap(),
        );
        assert!(refused * 10 <= offered, "{b}");
    }
    let alarm = &rows[0];
    assert!(
        alarm["delivered"].as_u64().unwrap() >= 40,
        "3 s at 20 messages/s: {alarm}"
    );
    assert_eq!(rx["messages"]["dropped"], 0, "{rx}");
    // Both ends report each second: the rows of the intervals add up to the totals.
    for b in &rows {
        let p = b["priority"].as_u64().unwrap();
        let sent = per_interval(&tx["messages"]["intervals"], "priorities", p);
        assert_eq!(
            sum(&sent, "offered"),
            b["offered"],
            "priority {p}: {sent:?}"
        );
        assert_eq!(
            sum(&sent, "delivered"),
            b["delivered"],
            "priority {p}: {sent:?}"
        );
        let got = per_interval(&rx["intervals"], "messages", p);
        assert_eq!(
            sum(&got, "received"),
            received(&rx, p)["received"],
            "{got:?}"
        );
        assert!(got.len() >= 3, "3 s of rows: {got:?}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// The rows for `priority` in the `key` list of each of `intervals`.
fn per_interval(intervals: &serde_json::Value, key: &str, priority: u64) -> Vec<serde_json::Value> {
    let intervals = intervals
        .as_array()
        .unwrap_or_else(|| panic!("no intervals: {intervals}"));
    for i in intervals {
        let span = i["end_s"].as_f64().unwrap() - i["start_s"].as_f64().unwrap();
        assert!(
            span > 0.0 && span < 1.5,
            "an interval about a second long: {i}"
        );
    }
    intervals
        .iter()
        .flat_map(|i| i[key].as_array().unwrap().clone())
        .filter(|r| r["priority"] == priority)
        .collect()
}

fn sum(rows: &[serde_json::Value], key: &str) -> serde_json::Value {
    rows.iter()
        .map(|r| r[key].as_u64().unwrap())
        .sum::<u64>()
        .into()
}

/// Messages with a plain stream beside them on the same connection: both run to the
/// end, both sets of books balance, and the receiver counts the stream's ADUs apart from
/// the messages.
#[test]
fn a_stream_beside_messages_runs_on_the_same_connection() {
    let p0 = free_port();
    let dir = setup(
        "mixed",
        p0,
        &[p0, p0],
        3,
        "[[messages]]\nname = \"alarm\"\npriority = 0\nsize = 2000\nrate = 10\ndeadline_ms = 400\n\
         [[streams]]\nid = 1\nname = \"video\"\n\
         workload = { kind = \"cbr\", kbps = 800, adu_bytes = 1000 }\n",
    );
    let (tx, rx, code) = run(&dir, Duration::from_secs(25));
    assert_eq!(code, Some(0), "{tx}");
    let rows = balanced(&tx);
    assert!(rows[0]["delivered"].as_u64().unwrap() >= 25, "{}", rows[0]);
    assert_eq!(received(&rx, 0)["received"], rows[0]["delivered"], "{rx}");
    let streams = &tx["streams"];
    assert_eq!(streams["unaccounted"], 0, "{streams}");
    let video = &streams["books"][0];
    let n = |k: &str| {
        video[k]
            .as_u64()
            .unwrap_or_else(|| panic!("no {k} in {video}"))
    };
    // 3 s of 100 ADUs a second, every one acked.
    assert!(n("sent") >= 250, "{video}");
    assert_eq!(n("acked"), n("sent"), "{video}");
    assert!(
        streams["intervals"].as_array().unwrap().len() >= 3,
        "{streams}"
    );
    // The receiver saw the stream's ADUs as a stream, not as messages.
    let got = &rx["summary"]["streams"];
    let stream = got
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == 1)
        .unwrap_or_else(|| panic!("no stream 1 in {got}"));
    assert_eq!(stream["received"].as_u64(), Some(n("acked")), "{stream}");
    assert_eq!(rx["messages"]["dropped"], 0, "{rx}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A light offer (a few small messages a second, and now and then a large one) is
/// admitted on unshaped links: admission reads the channels' rates, not just the little
/// that was offered so far.
#[test]
fn a_light_offer_is_admitted_on_unshaped_links() {
    let p0 = free_port();
    let dir = setup(
        "light",
        p0,
        &[p0, p0],
        4,
        "[[messages]]\nname = \"alarm\"\npriority = 0\nsize = 2000\nrate = 4\ndeadline_ms = 300\n\
         [[messages]]\nname = \"snapshot\"\npriority = 5\nsize = 200000\ninterval_ms = 1000\n\
         deadline_ms = 3000\n",
    );
    let (tx, _rx, code) = run(&dir, Duration::from_secs(25));
    assert_eq!(code, Some(0), "{tx}");
    let rows = balanced(&tx);
    let n = |b: &serde_json::Value, k: &str| b[k].as_u64().unwrap();
    let alarm = &rows[0];
    assert!(n(alarm, "refused") * 10 <= n(alarm, "offered"), "{alarm}");
    assert!(
        n(alarm, "delivered") * 10 >= n(alarm, "offered") * 9,
        "{alarm}"
    );
    // The first snapshot is submitted as the session starts, when the channels' rates
    // are still their controllers' first guesses; it may be refused, no later one.
    let snapshot = &rows[1];
    assert!(n(snapshot, "refused") <= 1, "{snapshot}");
    assert!(
        n(snapshot, "delivered") + 1 >= n(snapshot, "offered"),
        "{snapshot}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_rate_drop_makes_low_priority_deadlines_fire_early() {
    let (port, link) = (free_port(), free_port());
    let dir = setup(
        "early",
        port,
        &[link],
        6,
        "[[messages]]\nname = \"alarm\"\npriority = 1\nsize = 2000\nrate = 10\ndeadline_ms = 500\n\
         [[messages]]\nname = \"bulk\"\npriority = 6\nsize = 40000\ninterval_ms = 200\n\
         deadline_ms = 1500\n\
         [[messages]]\nname = \"snapshot\"\npriority = 7\nsize = 100000\ninterval_ms = 1000\n\
         cancel_after_ms = 100\n",
    );
    // One link of 4 Mbit/s that drops to 0.4 Mbit/s 3 s in; the sender's 220 kB/s
    // fit before, not after.
    std::fs::write(
        dir.join("emu.toml"),
        format!(
            "seed = 1\n[[channels]]\nname = \"link\"\nlisten = \"127.0.0.1:{link}\"\n\
             forward_to = \"127.0.0.1:{port}\"\n\
             up = {{ rate = {{ model = \"steps\", steps = [{{ at_s = 0, kbps = 4000 }}, {{ at_s = 3, kbps = 400 }}] }}, \
             delay = {{ model = \"constant\", ms = 20 }}, buffer_bytes = 40000 }}\n\
             down = {{ delay = {{ model = \"constant\", ms = 20 }} }}\n"
        ),
    )
    .unwrap();
    let _emu = Running::spawn(&["emu", &path(&dir, "emu.toml"), "--duration", "40"]);
    std::thread::sleep(Duration::from_millis(200));
    let (tx, rx, code) = run(&dir, Duration::from_secs(25));
    assert_eq!(code, Some(0), "{tx}");
    let rows = balanced(&tx);
    let (alarm, bulk, snapshot) = (&rows[0], &rows[1], &rows[2]);
    let priorities: Vec<u64> = rows
        .iter()
        .map(|r| r["priority"].as_u64().unwrap())
        .collect();
    assert_eq!(priorities, [1, 6, 7], "{tx}");
    let n = |b: &serde_json::Value, k: &str| b[k].as_u64().unwrap();
    // The low priority's admitted messages cannot all make it after the drop: their
    // early callbacks fire.
    assert!(n(bulk, "early_callbacks") >= 1, "{bulk}");
    // The high priority pre-empts it and still gets through.
    assert!(
        n(alarm, "delivered") * 10 >= n(alarm, "sent") * 8,
        "{alarm}"
    );
    for b in &rows {
        let r = received(&rx, n(b, "priority"));
        assert_eq!(r["received"], b["delivered"], "{r} vs {b}");
    }
    // A snapshot takes longer than its 100 ms to send: each is cancelled, and the
    // receiver frees what it held of it.
    assert!(n(snapshot, "cancels_after") >= 1, "{snapshot}");
    assert_eq!(n(snapshot, "cancelled"), n(snapshot, "sent"), "{snapshot}");
    let freed = received(&rx, 7);
    assert!(n(&freed, "cancelled") >= 1, "{rx}");
    assert!(n(&freed, "freed_bytes") > 0, "{rx}");
    // Only a message that ended undelivered is cancelled at the receiver.
    let cancels = rx["messages"]["cancelled"].as_u64().unwrap();
    let undelivered: u64 = rows
        .iter()
        .map(|b| n(b, "early") + n(b, "expired") + n(b, "cancelled"))
        .sum();
    assert!(cancels <= undelivered, "{rx}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_message_values_are_refused_by_name_before_anything_runs() {
    let dir = setup(
        "bad",
        free_port(),
        &[free_port()],
        3,
        "[[messages]]\npriority = 2\nsize = 2000\nrate = 5\ndeadline_ms = 300\n",
    );
    let file = dir.join("send.toml");
    let good = std::fs::read_to_string(&file).unwrap();
    let cases = [
        (
            "size = 2000",
            "size = -5",
            "size must be in 16..=1073741824 bytes",
            "got -5",
        ),
        (
            "priority = 2",
            "priority = 9",
            "priority must be in 0..=7",
            "got 9",
        ),
        (
            "deadline_ms = 300",
            "deadline_ms = 0",
            "deadline_ms must be a positive number",
            "got 0",
        ),
    ];
    for (from, to, message, got) in cases {
        std::fs::write(&file, good.replacen(from, to, 1)).unwrap();
        let started = Instant::now();
        let out = horde(&["send", file.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{to}: {err}");
        // FILE:line:col: at the value.
        let line = good.lines().position(|l| l.starts_with(from)).unwrap() + 1;
        let col = from.find('=').unwrap() + 3;
        let at = format!("send.toml:{line}:{col}: ");
        assert!(
            err.contains(&at) && err.contains(message) && err.contains(got),
            "{to}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "{to}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_run_that_delivers_no_message_exits_3_with_every_refusal_counted() {
    let port = free_port();
    // A 1 µs deadline: no piece can arrive in time, so admission refuses every message.
    let dir = setup(
        "none",
        port,
        &[port],
        1,
        "[[messages]]\npriority = 3\nsize = 5000\nrate = 10\ndeadline_ms = 0.001\n",
    );
    let recv = Running::spawn(&["recv", &path(&dir, "recv.toml"), "--json"]);
    std::thread::sleep(Duration::from_millis(300));
    let out = Running::spawn(&["send", &path(&dir, "send.toml"), "--json"])
        .finish(Duration::from_secs(20));
    drop(recv);
    let tx = json(&out);
    assert_eq!(out.status.code(), Some(3), "{tx}");
    assert_eq!(tx["exit_code"], 3, "{tx}");
    assert!(
        text(&out.stderr).contains("error: not one message was delivered"),
        "{}",
        text(&out.stderr)
    );
    let rows = balanced(&tx);
    let b = &rows[0];
    assert_eq!(b["sent"], 0, "{b}");
    assert_eq!(b["refused"], b["refused_unreachable"], "{b}");
    assert!(
        b["last_refusal"]
            .as_str()
            .is_some_and(|r| r.starts_with("it cannot meet its own deadline")),
        "{b}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
