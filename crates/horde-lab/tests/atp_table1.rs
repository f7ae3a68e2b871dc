//! `horde-lab atp table1 --ablations --json`: the directions of the ATP paper's Table 1
//! hold end to end through the command, and each one rests on the feature it is about:
//! the same runs with that feature off lose what the feature gave.

mod common;

use serde_json::Value;

struct Row {
    levels: [f64; 4],
    total: f64,
    bw: f64,
}

fn find(rows: &[Value], trace: &str, scheme: &str, poll: u64, capped: bool, off: &str) -> Row {
    let r = rows
        .iter()
        .find(|r| {
            let c = &r["config"];
            c["trace"] == trace
                && c["scheme"] == scheme
                && c["poll_delay"] == poll
                && (scheme == "callbacks" || c["capped"] == capped)
                && c["ablation"] == off
        })
        .unwrap_or_else(|| panic!("no row {trace} {scheme} {poll} {capped} {off}"));
    let levels: Vec<f64> = r["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    Row {
        levels: [levels[0], levels[1], levels[2], levels[3]],
        total: r["total"].as_f64().unwrap(),
        bw: r["bw"].as_f64().unwrap(),
    }
}

#[test]
fn table_1_directions_hold_and_rest_on_their_features() {
    let json = common::lab_json(&["atp", "table1", "--ablations", "--json"]);
    let rows = json["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 24);

    for poll in [1, 3] {
        // Callbacks plus priorities deliver more useful data than notifications alone,
        // with either estimate, at the cost of more waste (paper §4.4).
        let callbacks = find(rows, "cellular", "callbacks", poll, true, "none");
        for capped in [true, false] {
            let modal = find(rows, "cellular", "bandwidth", poll, capped, "none");
            assert!(
                callbacks.total > modal.total * 1.05,
                "poll {poll} s, capped {capped}: callbacks {} MB vs bandwidth {} MB",
                callbacks.total,
                modal.total
            );
            assert!(
                callbacks.bw - callbacks.total > modal.bw - modal.total,
                "poll {poll} s: callbacks waste more"
            );
        }

        for trace in ["synthetic", "cellular"] {
            // Timers off (no admission, no early callbacks): late pieces of lower levels
            // crowd the link and the useful data falls.
            let callbacks = find(rows, trace, "callbacks", poll, true, "none");
            let untimed = find(rows, trace, "callbacks", poll, true, "no_timers");
            assert!(
                untimed.total < callbacks.total * 0.8,
                "{trace}: without timers {} MB vs {} MB",
                untimed.total,
                callbacks.total
            );
            // Notifications off: the modal application never leaves mode 1.
            let modal = find(rows, trace, "bandwidth", poll, true, "none");
            let deaf = find(rows, trace, "bandwidth", poll, true, "no_notifications");
            assert!(deaf.levels[1] == 0.0 && deaf.total < modal.total * 0.5);
        }

        // Priorities: levels 1 and 2 get more with them than without.
        let flat = find(rows, "cellular", "callbacks", poll, true, "no_priorities");
        assert!(
            callbacks.levels[0] > flat.levels[0] && callbacks.levels[1] > flat.levels[1] * 1.1,
            "priorities: {:?} vs {:?}",
            callbacks.levels,
            flat.levels
        );
    }

    // A slower probe (poll delay 3 s) makes the modal scheme climb later and deliver less.
    for trace in ["synthetic", "cellular"] {
        let fast = find(rows, trace, "bandwidth", 1, false, "none");
        let slow = find(rows, trace, "bandwidth", 3, false, "none");
        assert!(
            fast.total > slow.total,
            "{trace}: poll 1 s {} MB vs 3 s {} MB",
            fast.total,
            slow.total
        );
    }
}
