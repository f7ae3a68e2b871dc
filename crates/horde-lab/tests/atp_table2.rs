//! `horde-lab atp table2 --speedup 10 --workloads filesystem --json`: on the paper's
//! filesystem workload (the one where ATP beat the TCP baselines most), Horde's messages
//! deliver clearly more high-priority messages before their timers than NAI-TCP on kernel
//! TCP over the same emulated link (a `horde shell` namespace, 30 s in real time; needs
//! root), and than Horde itself with priorities and timers off.

mod common;

use serde_json::Value;

fn high(rows: &[Value], protocol: &str) -> f64 {
    let row = rows
        .iter()
        .find(|r| r["protocol"] == protocol)
        .unwrap_or_else(|| panic!("no {protocol} row"));
    let class = &row["classes"][0];
    assert_eq!(class["class"], "high");
    assert_eq!(class["total"], 300);
    class["fraction"].as_f64().unwrap()
}

#[test]
fn horde_beats_nai_tcp_on_the_filesystem_workload() {
    let json = common::lab_json(&[
        "atp",
        "table2",
        "--speedup",
        "10",
        "--workloads",
        "filesystem",
        "--no-mtcp",
        "--json",
    ]);
    let rows = json["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4);
    let horde = high(rows, "horde");
    let tcp = high(rows, "nai_tcp");
    let fifo = high(rows, "horde_fifo");
    assert!(
        horde > tcp + 0.1,
        "high priority: horde {horde:.3} vs NAI-TCP {tcp:.3}"
    );
    assert!(
        horde > fifo + 0.1,
        "high priority: horde {horde:.3} vs horde without priorities and timers {fifo:.3}"
    );
}
