//! A scenario link served by the 802.11 airtime model (`rate = { model = "wifi", ... }`)
//! with `qdisc = "chap"`: a stream whose frames need retries (its destination, port 2
//! in the simulator's flow keys, has a frame error rate of its own) pays for the airtime
//! it burns, so CHAP serves the clean stream first; under FIFO the two stay alike.

use horde_sim::build::topology;
use horde_sim::engine::Simulation;
use horde_sim::scenario::Scenario;

/// Two identical voice-like streams over one 802.11b uplink at 2 Mbit/s, together more
/// than it carries; stream 2's frames are lost with probability 0.4 per attempt.
fn scenario(qdisc: &str) -> String {
    format!(
        r#"
name = "clean-next-to-lossy"
seed = 1
duration_s = 20

[scheduler]
kind = "rrr"
cycle_ms = 0

[[hosts]]
name = "a"

[[hosts]]
name = "b"

[[channels]]
name = "air"
mtu = 1200
up = {{ rate = {{ model = "wifi", phy = "dot11b", mbps = 2, stations = [{{ port = 2, fer = 0.4 }}] }}, buffer_bytes = 30000, delay = {{ model = "constant", ms = 5 }}{qdisc} }}
down = {{ delay = {{ model = "constant", ms = 5 }} }}

[[streams]]
id = 1
max_kbps = 800
workload = {{ kind = "audio", frame_ms = 10, frame_bytes = 1000 }}

[[streams]]
id = 2
max_kbps = 800
workload = {{ kind = "audio", frame_ms = 10, frame_bytes = 1000 }}
"#
    )
}

/// Each stream's goodput in kbit/s and network round trip at the median, ms.
fn run(qdisc: &str) -> [(f64, f64); 2] {
    let key = match qdisc {
        "" => String::new(),
        q => format!(", qdisc = \"{q}\""),
    };
    let s = Scenario::from_str(&scenario(&key), "clean-next-to-lossy.toml").unwrap();
    let report = Simulation::new(topology(&s).unwrap()).unwrap().run(|_| {});
    let stream = |id: u32| {
        let r = report.streams.iter().find(|r| r.id == id).unwrap();
        (r.goodput_kbps, r.rtt_ms.median.unwrap_or(f64::INFINITY))
    };
    [stream(1), stream(2)]
}

#[test]
fn chap_with_airtime_serves_the_clean_stream_first() {
    let fifo = run("");
    let chap = run("chap");
    eprintln!("(goodput kbit/s, rtt p50 ms) fifo: {fifo:?}\nchap: {chap:?}");
    let [(_, clean_rtt), (_, lossy_rtt)] = chap;
    let [(_, f_clean_rtt), (_, f_lossy_rtt)] = fifo;
    // CHAP: the clean stream's packets go ahead of the lossy stream's backlog.
    assert!(
        lossy_rtt > 3.0 * clean_rtt,
        "CHAP: clean p50 {clean_rtt} ms, lossy {lossy_rtt} ms"
    );
    assert!(
        clean_rtt < 0.5 * f_clean_rtt,
        "the clean stream waits less under CHAP ({clean_rtt} ms) than FIFO ({f_clean_rtt} ms)"
    );
    // FIFO: both wait in the same queue.
    assert!(
        f_lossy_rtt < 1.5 * f_clean_rtt && f_clean_rtt < 1.5 * f_lossy_rtt,
        "FIFO: clean p50 {f_clean_rtt} ms, lossy {f_lossy_rtt} ms"
    );
}
