//! The simulator gives its links a flow per stream: a voice stream sharing a link with a
//! bulk upload keeps a short network delay when the link's queue tells flows apart
//! (`qdisc = "chap"` or `"fq_codel"`), and waits behind the bulk queue under FIFO.

use horde_sim::build::topology;
use horde_sim::engine::Simulation;
use horde_sim::scenario::Scenario;

/// One 2 Mbit/s uplink with a 100 kB buffer (400 ms at its rate) and CUBIC, which keeps
/// that buffer full; a bulk stream and G.711-like voice share it.
fn scenario(qdisc: &str) -> String {
    format!(
        r#"
name = "voice-next-to-bulk"
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
name = "up"
mtu = 1200
congestion = {{ kind = "cubic" }}
up = {{ rate = {{ model = "constant", kbps = 2000 }}, buffer_bytes = 100000, delay = {{ model = "constant", ms = 20 }}{qdisc} }}
down = {{ delay = {{ model = "constant", ms = 20 }} }}

[[streams]]
id = 1
elastic = true
workload = {{ kind = "bulk", adu_bytes = 1200 }}

[[streams]]
id = 2
max_kbps = 100
workload = {{ kind = "audio", frame_ms = 20, frame_bytes = 160 }}
"#
    )
}

/// Voice's network round trip at the 95th percentile, ms, and bulk's goodput, kbit/s.
fn run(qdisc: &str) -> (f64, f64) {
    let key = match qdisc {
        "" => String::new(),
        q => format!(", qdisc = \"{q}\""),
    };
    let s = Scenario::from_str(&scenario(&key), "voice-next-to-bulk.toml").unwrap();
    let report = Simulation::new(topology(&s).unwrap()).unwrap().run(|_| {});
    let stream = |id: u32| report.streams.iter().find(|r| r.id == id).unwrap();
    let voice = stream(2).rtt_ms.p95.expect("voice was acked");
    (voice, stream(1).goodput_kbps)
}

#[test]
fn flow_queues_keep_voice_out_of_the_bulk_queue() {
    let (fifo, fifo_bulk) = run("");
    let (fifo_named, _) = run("fifo");
    assert_eq!(fifo, fifo_named, "an explicit fifo is the default");
    // FIFO: voice waits behind the bulk stream's standing queue.
    assert!(fifo > 200.0, "voice p95 {fifo} ms under fifo");
    for q in ["chap", "fq_codel"] {
        let (voice, bulk) = run(q);
        eprintln!(
            "{q}: voice p95 {voice} ms, bulk {bulk} kbit/s; fifo: {fifo} ms, {fifo_bulk} kbit/s"
        );
        assert!(voice < 100.0, "{q}: voice p95 {voice} ms (fifo {fifo} ms)");
        assert!(
            bulk > 0.8 * fifo_bulk,
            "{q}: bulk {bulk} kbit/s (fifo {fifo_bulk})"
        );
    }
}
