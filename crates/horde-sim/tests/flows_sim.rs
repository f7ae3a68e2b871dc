//! smoltcp flows in the simulator, end to end: every workload kind finishes over a
//! clean link, completion times follow the link's physics, lossy links cause
//! retransmissions, and the same seed gives byte-identical JSON.

use std::path::Path;
use std::time::Duration;

use horde_sim::flows::{run_scenario, FlowScenario};

fn scenario(text: &str) -> FlowScenario {
    FlowScenario::parse(text, "test.toml", Path::new(".")).unwrap()
}

const MIXED: &str = r#"
name = "mixed"
seed = 7
duration_s = 8
drain_s = 30
[link]
up = { rate = { model = "constant", kbps = 5000 }, delay = { model = "constant", ms = 20 }, buffer_bytes = 60000 }
down = { rate = { model = "constant", kbps = 10000 }, delay = { model = "constant", ms = 20 }, buffer_bytes = 120000, loss = { model = "gilbert_elliott", p_good_to_bad = 0.01, p_bad_to_good = 0.5, loss_in_bad = 0.5 } }
[[flow]]
kind = "web"
load = 0.3
capacity_kbps = 10000
[[flow]]
kind = "bulk"
bytes = 1000000
at_s = 1
[[flow]]
kind = "request_response"
request_bytes = 400
response_bytes = 4000
rate_per_s = 2
[[flow]]
name = "voip"
kind = "interactive"
request_bytes = 200
response_bytes = 200
interval_ms = 20
count = 200
"#;

#[test]
fn same_seed_same_json_and_every_kind_finishes() {
    let s = scenario(MIXED);
    let a = run_scenario(&s).unwrap();
    let b = run_scenario(&s).unwrap();
    assert_eq!(a.to_json(), b.to_json(), "byte-identical under one seed");
    for c in &a.classes {
        assert!(c.flows > 0 && c.completed == c.flows, "{}: {c:?}", c.class);
    }
    let total_rtx: u64 = a.classes.iter().map(|c| c.retransmits).sum();
    assert!(total_rtx > 0, "a Gilbert-Elliott link loses segments");
    let mut other = s.clone();
    other.seed = 8;
    assert_ne!(run_scenario(&other).unwrap().to_json(), a.to_json());
}

#[test]
fn completion_times_follow_the_link() {
    // One 20 kB request/response at a time over an idle 8 Mbit/s, 50 ms link: the
    // handshake, request and answer take about three round trips (slow start adds a
    // round or two); no loss, no retransmission.
    let text = r#"
seed = 3
duration_s = 20
[link]
up = { rate = { model = "constant", kbps = 8000 }, delay = { model = "constant", ms = 50 } }
[[flow]]
kind = "request_response"
request_bytes = 100
response_bytes = 20000
rate_per_s = 0.2
"#;
    let r = run_scenario(&scenario(text)).unwrap();
    let c = &r.classes[0];
    assert!(c.completed >= 2 && c.completed == c.flows);
    assert_eq!(c.retransmits, 0);
    let fct = c.completion_ms.as_ref().unwrap();
    assert!(fct.median >= 300.0 && fct.median <= 700.0, "{fct:?}");
    // Goodput cannot beat the link.
    assert!(r.flows.iter().all(|f| f.goodput_mbps.unwrap() < 8.0));

    // A bulk transfer over the same link gets most of its capacity.
    let bulk = text.replace(
        "kind = \"request_response\"\nrequest_bytes = 100\nresponse_bytes = 20000\nrate_per_s = 0.2",
        "kind = \"bulk\"\nbytes = 4000000",
    );
    let r = run_scenario(&scenario(&bulk)).unwrap();
    let g = r.flows[0].goodput_mbps.unwrap();
    assert!(g > 6.0 && g < 8.0, "{g}");
}

#[test]
fn flows_cut_off_by_the_end_are_reported_unfinished() {
    let text = r#"
duration_s = 1
drain_s = 1
[link]
up = { rate = { model = "constant", kbps = 1000 }, delay = { model = "constant", ms = 10 } }
[[flow]]
kind = "bulk"
bytes = 10000000
"#;
    let s = scenario(text);
    let r = run_scenario(&s).unwrap();
    assert_eq!(r.flows.len(), 1);
    assert_eq!(r.flows[0].completion_ms, None);
    assert_eq!(r.classes[0].completed, 0);
    assert!(r.run_s <= s.end().as_secs_f64() + 1e-9);
    assert!(Duration::from_secs_f64(r.run_s) > Duration::from_millis(1900));
}

/// A carrier of our own in front of the direct link: it drops every 40th data segment
/// the server sends, which is how a tunnel or any other path plugs in.
struct DropEveryNth {
    inner: horde_sim::flows::DirectLink,
    n: u64,
    data_seen: u64,
    dropped: std::rc::Rc<std::cell::Cell<u64>>,
}

impl horde_sim::flows::Carrier for DropEveryNth {
    fn send(&mut self, now: Duration, from: horde_sim::flows::Side, packet: Vec<u8>) {
        // 40 bytes of IPv4 + TCP headers (smoltcp sends no options on data segments).
        if from == horde_sim::flows::Side::Server && packet.len() > 40 {
            self.data_seen += 1;
            if self.data_seen.is_multiple_of(self.n) {
                self.dropped.set(self.dropped.get() + 1);
                return;
            }
        }
        self.inner.send(now, from, packet);
    }
    fn next_delivery(&self) -> Option<Duration> {
        self.inner.next_delivery()
    }
    fn deliver(&mut self, now: Duration, out: &mut Vec<(horde_sim::flows::Side, Vec<u8>)>) {
        self.inner.deliver(now, out);
    }
    fn stats(&self) -> horde_sim::flows::CarrierStats {
        self.inner.stats()
    }
}

#[test]
fn any_carrier_plugs_in_and_every_lost_segment_is_resent() {
    let s = scenario(
        r#"
seed = 2
duration_s = 5
[link]
up = { rate = { model = "constant", kbps = 10000 }, delay = { model = "constant", ms = 10 } }
[[flow]]
kind = "bulk"
bytes = 300000
count = 3
[[flow]]
kind = "request_response"
request_bytes = 100
response_bytes = 30000
rate_per_s = 4
"#,
    );
    let (up, down) = s.links().unwrap();
    let dropped = std::rc::Rc::new(std::cell::Cell::new(0));
    let carrier = DropEveryNth {
        inner: horde_sim::flows::DirectLink::new(up, down),
        n: 40,
        data_seen: 0,
        dropped: dropped.clone(),
    };
    let r = horde_sim::flows::simulate(
        "drops",
        carrier,
        s.tcp,
        &s.flows,
        s.plan().unwrap(),
        s.seed,
        s.end(),
    )
    .unwrap();
    assert!(dropped.get() > 10, "{}", dropped.get());
    for c in &r.classes {
        assert_eq!(c.completed, c.flows, "{c:?}");
    }
    let retransmits: u64 = r.flows.iter().map(|f| f.retransmits).sum();
    assert!(
        retransmits >= dropped.get(),
        "{retransmits} < {}",
        dropped.get()
    );
}
