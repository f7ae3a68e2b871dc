//! The secure layer's drop counters, per reason, and the data sockets' kernel filter's
//! count, for `recv`'s text and JSON output.

use horde_crypto::DropCounters;

/// Every reason with its count (zeros included, so the JSON keys are stable).
pub fn to_json(drops: &DropCounters) -> serde_json::Value {
    drops
        .iter()
        .map(|(reason, count)| (reason.as_str().to_string(), serde_json::Value::from(count)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// One line: the total, then the non-zero reasons.
pub fn render(drops: &DropCounters) -> String {
    let reasons: Vec<String> = drops
        .iter()
        .filter(|&(_, c)| c > 0)
        .map(|(r, c)| format!("{} {c}", r.as_str()))
        .collect();
    if reasons.is_empty() {
        "datagrams dropped by the secure layer: 0\n".to_string()
    } else {
        format!(
            "datagrams dropped by the secure layer: {} ({})\n",
            drops.total(),
            reasons.join(", ")
        )
    }
}

/// One line: what the data sockets' kernel filter dropped before Horde read it
/// (datagrams no live session here could own).
pub fn render_kernel(kernel_dropped: u64) -> String {
    format!("datagrams dropped by the kernel filter (no live session could own them): {kernel_dropped}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_crypto::DropReason;

    #[test]
    fn per_reason_counts_in_text_and_json() {
        let mut d = DropCounters::new();
        assert_eq!(render(&d), "datagrams dropped by the secure layer: 0\n");
        d.record(DropReason::BadMac);
        d.record(DropReason::BadMac);
        d.record(DropReason::NotAllowed);
        assert_eq!(
            render(&d),
            "datagrams dropped by the secure layer: 3 (not_allowed 1, bad_mac 2)\n"
        );
        assert_eq!(
            render_kernel(7),
            "datagrams dropped by the kernel filter (no live session could own them): 7\n"
        );
        let j = to_json(&d);
        assert_eq!(j["bad_mac"], 2);
        assert_eq!(j["not_allowed"], 1);
        assert_eq!(j["rate_limited"], 0);
        assert_eq!(j.as_object().unwrap().len(), DropReason::ALL.len());
    }
}
