//! The `qdisc` link key: disciplines that tell flows apart serve a small flow ahead of a
//! bulk backlog, FIFO does not; drops after acceptance are reported; bad combinations are
//! refused.

use std::path::Path;
use std::time::Duration;

use horde_links::{Delivery, FlowKey, Link, LinkSpec, QdiscKind, RateSpec, Verdict};

fn bulk() -> FlowKey {
    FlowKey::tcp([10, 0, 0, 1], 443, [10, 0, 0, 2], 40_000)
}

fn small() -> FlowKey {
    FlowKey::udp([10, 0, 0, 1], 3074, [10, 0, 0, 3], 3074)
}

fn link(qdisc: Option<QdiscKind>, buffer_bytes: Option<u64>) -> Box<dyn Link> {
    LinkSpec {
        rate: Some(RateSpec::Constant { kbps: 10_000.0 }),
        buffer_bytes,
        qdisc,
        ..LinkSpec::default()
    }
    .build(1, Path::new("."))
    .unwrap()
}

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// 100 bulk packets of 1500 B at 0 (120 ms of work at 10 Mbit/s), then one 100-byte
/// packet of a small flow at 1 ms. Returns the small packet's time on the link.
fn small_packet_delay(qdisc: Option<QdiscKind>) -> Duration {
    let mut l = link(qdisc, None);
    for id in 0..100 {
        assert_eq!(l.enqueue_flow(ms(0), id, 1500, &bulk()), Verdict::Queued);
    }
    assert_eq!(l.enqueue_flow(ms(1), 1000, 100, &small()), Verdict::Queued);
    let (mut out, mut lost): (Vec<Delivery>, Vec<u64>) = (Vec::new(), Vec::new());
    while let Some(t) = l.next_delivery() {
        l.deliver_and_report_losses(t, &mut out, &mut lost);
    }
    // fq_codel's CoDel may drop from the bulk backlog, which stands for 120 ms.
    assert_eq!(
        out.len() + lost.len(),
        101,
        "{qdisc:?}: every packet accounted for"
    );
    assert!(
        !lost.contains(&1000),
        "{qdisc:?}: the small packet was dropped"
    );
    assert!(out.windows(2).all(|w| w[0].at <= w[1].at));
    let at = out.iter().find(|d| d.id == 1000).unwrap().at;
    at - ms(1)
}

#[test]
fn chap_serves_a_small_flow_ahead_of_a_bulk_flow_and_fifo_does_not() {
    let fifo = small_packet_delay(None);
    assert!(
        fifo > ms(115),
        "FIFO: behind the whole backlog, got {fifo:?}"
    );
    assert_eq!(small_packet_delay(Some(QdiscKind::Fifo)), fifo);
    for kind in [QdiscKind::Chap, QdiscKind::FqCodel, QdiscKind::Spq] {
        let delay = small_packet_delay(Some(kind));
        // At most the bulk packet in service plus its own 80 µs.
        assert!(delay < ms(3), "{kind}: got {delay:?}");
    }
}

#[test]
fn chap_charges_each_packet_its_time_on_the_link() {
    // Bulk has sent 29 packets (1.2 ms each, 34.8 ms in all: more than I = 25 ms) and
    // is sending its 30th when a second flow with 30 packets arrives; the newcomer, still
    // at I, then goes first until its own charges bring it below the bulk flow.
    let mut l = link(Some(QdiscKind::Chap), None);
    let other = FlowKey::tcp([10, 0, 0, 9], 443, [10, 0, 0, 2], 40_001);
    for id in 0..60 {
        l.enqueue_flow(ms(0), id, 1500, &bulk());
    }
    let mut out = Vec::new();
    l.deliver(ms(35), &mut out);
    assert_eq!(out.len(), 29);
    for id in 100..130 {
        l.enqueue_flow(ms(35), id, 1500, &other);
    }
    l.deliver(ms(1000), &mut out);
    assert_eq!(out[29].id, 29, "the packet in service finishes first");
    let next: Vec<u64> = out[30..40].iter().map(|d| d.id).collect();
    assert!(
        next.iter().all(|&id| id >= 100),
        "the newcomer goes first: {next:?}"
    );
}

#[test]
fn packets_dropped_after_acceptance_are_reported_and_counted() {
    // CHAP keeps the buffer by dropping the head of the flow with the fewest credits.
    let mut l = link(Some(QdiscKind::Chap), Some(15_000));
    let mut verdicts = Vec::new();
    for id in 0..20 {
        verdicts.push(l.enqueue_flow(ms(0), id, 1500, &bulk()));
    }
    assert!(
        verdicts.iter().all(|v| *v == Verdict::Queued),
        "head drops, not refusals"
    );
    let (mut out, mut lost) = (Vec::new(), Vec::new());
    l.deliver_and_report_losses(ms(1000), &mut out, &mut lost);
    let stats = l.stats();
    assert_eq!(stats.offered, 20);
    assert_eq!(stats.queue_drops, lost.len() as u64);
    assert_eq!(
        out.len() + lost.len(),
        20,
        "every packet delivered or reported"
    );
    assert!(!lost.is_empty());
    assert!(lost.iter().all(|&id| id < 10), "the oldest went: {lost:?}");
}

#[test]
fn qdisc_parses_from_toml_and_bad_uses_are_refused() {
    let spec: LinkSpec =
        toml::from_str("rate = { model = \"constant\", kbps = 1000 }\nqdisc = \"fq_codel\"\n")
            .unwrap();
    assert_eq!(spec.qdisc, Some(QdiscKind::FqCodel));
    let err = toml::from_str::<LinkSpec>("qdisc = \"red\"\n").unwrap_err();
    assert!(err.to_string().contains("unknown variant `red`"), "{err}");

    let traced = LinkSpec {
        rate: Some(RateSpec::Trace {
            path: "cell-a.up".into(),
        }),
        qdisc: Some(QdiscKind::Chap),
        ..LinkSpec::default()
    };
    let err = traced.validate().unwrap_err().to_string();
    assert!(err.starts_with("qdisc must be fifo with a trace"), "{err}");
    let fifo_traced = LinkSpec {
        qdisc: Some(QdiscKind::Fifo),
        ..traced
    };
    assert!(fifo_traced.validate().is_ok());
}
