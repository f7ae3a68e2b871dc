//! `horde send` and `horde recv` hold flat memory however many ADUs pass through them:
//! a bulk stream of small ADUs over loopback, with both processes' resident memory
//! (VmRSS from /proc/PID/status) read against the ADUs the sender has had acked. Neither
//! process's peak over the last sixth of the run's ADUs may exceed its peak between a
//! third and a half of them by more than 5 %. A
//! sender that kept 8 bytes per acked ADU (every latency sample, as it once did) grows
//! by several MB over the run and fails.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{free_port, keygen, write_recv_config};

/// How long the sender runs.
const RUN_S: u64 = 30;
/// Fewest ADUs the run must carry for a leak of a few bytes per ADU to show.
const MIN_ADUS: u64 = 300_000;
/// Largest growth allowed from the warm peak to the late peak.
const MAX_GROWTH: f64 = 1.05;

fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Kills the processes when the test ends, however it ends.
struct Reap(Vec<Child>);

impl Drop for Reap {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn send_and_recv_memory_stays_flat_as_adus_pass() {
    let dir = std::env::temp_dir().join(format!("horde-memory-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = |name: &str| keygen(&dir, name);
    let (receiver, sender) = (key("r.key"), key("s.key"));
    let port = free_port();
    let channel = format!(
        "[[channels]]\nbind = \"127.0.0.1:0\"\nremote = \"127.0.0.1:{port}\"\n\
         congestion = {{ kind = \"cbr\", kbps = 20000 }}\n"
    );
    std::fs::write(
        dir.join("send.toml"),
        format!(
            "key_file = \"s.key\"\npeer_key = \"{receiver}\"\nduration_s = {RUN_S}\n\
             {channel}{channel}[[streams]]\nid = 1\nname = \"bulk\"\n\
             workload = {{ kind = \"bulk\", adu_bytes = 40 }}\n"
        ),
    )
    .unwrap();
    write_recv_config(&dir, &sender, port);
    let bin = env!("CARGO_BIN_EXE_horde");
    let recv = Command::new(bin)
        .args(["recv", dir.join("recv.toml").to_str().unwrap(), "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut send = Command::new(bin)
        .args(["send", dir.join("send.toml").to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = send.stdout.take().unwrap();
    let (send_pid, recv_pid) = (send.id(), recv.id());
    let _reap = Reap(vec![send, recv]);

    // The sender's interval rows, as they come: the ADUs acked so far.
    let acked = Arc::new(AtomicU64::new(0));
    let reader = {
        let acked = acked.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.trim() == "summary" {
                    break;
                }
                let cols: Vec<&str> = line.split_whitespace().collect();
                if cols.get(1) == Some(&"bulk") {
                    let n: u64 = cols[3].parse().unwrap();
                    acked.fetch_add(n, Ordering::Relaxed);
                }
            }
        })
    };
    // (ADUs acked, sender kB, receiver kB), every 200 ms until the run ends.
    let mut samples = Vec::new();
    let end = Instant::now() + Duration::from_secs(RUN_S - 1);
    while Instant::now() < end {
        if let (Some(s), Some(r)) = (rss_kb(send_pid), rss_kb(recv_pid)) {
            samples.push((acked.load(Ordering::Relaxed), s, r));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let total = acked.load(Ordering::Relaxed);
    assert!(
        total >= MIN_ADUS,
        "only {total} ADUs acked in {RUN_S} s: too few to show a leak"
    );
    // The peak of each process once it is warm (a third to half of the ADUs) against its
    // peak over the last sixth: a leak grows with the ADUs between the two, while the
    // buffers a loaded machine makes the processes hold for a while show in both.
    let window = |lo: u64, hi: u64| -> (u64, u64) {
        let w: Vec<_> = samples
            .iter()
            .filter(|(n, _, _)| *n >= lo && *n < hi)
            .collect();
        assert!(!w.is_empty(), "no sample between {lo} and {hi} ADUs");
        (
            w.iter().map(|s| s.1).max().unwrap(),
            w.iter().map(|s| s.2).max().unwrap(),
        )
    };
    let (send0, recv0) = window(total / 3, total / 2);
    let (send_max, recv_max) = window(total * 5 / 6, u64::MAX);
    eprintln!(
        "{total} ADUs; peak from {} to {} ADUs: send {send0} kB, recv {recv0} kB; \
         over the last sixth: send {send_max} kB, recv {recv_max} kB",
        total / 3,
        total / 2
    );
    assert!(
        send_max as f64 <= send0 as f64 * MAX_GROWTH,
        "sender grew from {send0} kB to {send_max} kB by {total} ADUs"
    );
    assert!(
        recv_max as f64 <= recv0 as f64 * MAX_GROWTH,
        "receiver grew from {recv0} kB to {recv_max} kB by {total} ADUs"
    );
    drop(_reap);
    let _ = reader.join();
    std::fs::remove_dir_all(dir).unwrap();
}
