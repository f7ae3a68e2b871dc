//! A handshake flood against a live session over loopback: the session keeps delivering and
//! acknowledging, and each kind of flood is stopped where it should be.

mod common;

use std::time::Duration;

use common::flood::{live_session, live_session_with, FloodKind, FloodOptions, LiveReport, WINDOW};
use horde_crypto::DropReason;

const RATE: u32 = 20_000;
const SECONDS: f64 = 2.0;
const ADUS_PER_SECOND: u32 = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_session_keeps_delivering_under_a_handshake_flood() {
    for kind in FloodKind::ALL {
        let r = live_session(None, Some((kind, RATE)), ADUS_PER_SECOND, 500, SECONDS).await;
        check(kind, &r);
        // The kernel steered the whole flood to the handshake socket: the driver read
        // only the session's own datagrams (at most a few per ADU).
        let s = &r.server_stats;
        assert!(
            s.handshake_datagrams_in >= 30_000,
            "{}: the worker read only {} datagrams",
            kind.name(),
            s.handshake_datagrams_in
        );
        let on_data_path = s.datagrams_in - s.handshake_datagrams_in;
        assert!(
            on_data_path < r.sent * 4,
            "{}: {on_data_path} datagrams on the data path for {} ADUs",
            kind.name(),
            r.sent
        );
    }
}

/// Without a socket of their own, initiations reach the driver, and the host defends the
/// same way: replays too are refused by its memory before they can take a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initiations_on_the_data_socket_are_defended_too() {
    let options = FloodOptions {
        separate_socket: false,
        ..FloodOptions::default()
    };
    for kind in [FloodKind::Random, FloodKind::Replay, FloodKind::Disallowed] {
        let r = live_session_with(
            None,
            Some((kind, RATE)),
            options,
            ADUS_PER_SECOND,
            500,
            SECONDS,
        )
        .await;
        check(kind, &r);
        assert_eq!(r.server_stats.handshake_datagrams_in, 0, "{}", kind.name());
    }
}

/// What every flooded run must show, however the initiations are read.
fn check(kind: FloodKind, r: &LiveReport) {
    let d = &r.server_drops;
    let name = kind.name();
    eprintln!(
        "{name}: flood {} datagrams, sent {} delivered {} acked {}, p95 {:.1} ms, \
             late client connected in {:?}, drops {d:?}",
        r.flood_sent,
        r.sent,
        r.delivered,
        r.acked,
        r.p95_ms(),
        r.late_connect
    );
    assert!(r.flood_sent >= 30_000, "{name}: flood too small");
    // A new client still gets in while the flood is on (through a cookie round trip
    // when the host is under load).
    let took = r
        .late_connect
        .unwrap_or_else(|| panic!("{name}: a new client could not connect"));
    assert!(
        took < Duration::from_secs(2),
        "{name}: connecting took {took:?}"
    );
    assert!(
        r.delivered * 100 >= r.sent * 95,
        "{name}: only {} of {} delivered",
        r.delivered,
        r.sent
    );
    // Delivery and acks never stall: every 250 ms window of the run has both.
    let windows = (SECONDS / WINDOW.as_secs_f64()) as usize;
    for w in 1..windows {
        assert!(
            r.delivered_per_window[w] > 0,
            "{name}: nothing delivered in window {w}"
        );
        assert!(
            r.acked_per_window[w] > 0,
            "{name}: nothing acked in window {w}"
        );
    }
    match kind {
        // Random bytes never get past mac1.
        FloodKind::Random => {
            assert!(d.get(DropReason::BadMac) >= 30_000, "{name}: {d:?}");
            assert_eq!(d.get(DropReason::StaleInitiation), 0);
        }
        // A replay of an initiation the responder decrypted before is recognised by a
        // lookup, before any rate limit: it takes no token (so it cannot starve another
        // port of its address) and costs no Diffie-Hellman.
        FloodKind::Replay => {
            assert!(
                d.get(DropReason::StaleInitiation) >= 30_000,
                "{name}: {d:?}"
            );
            assert!(
                d.get(DropReason::RateLimited) + d.get(DropReason::NeedCookie) <= 200,
                "{name}: replays took tokens: {d:?}"
            );
        }
        // Fresh initiations of a key that is not allowed put the host under load: cookies,
        // then the per-flow limit; copies of one already decrypted are recognised.
        FloodKind::Disallowed => {
            assert!(d.get(DropReason::NotAllowed) >= 1, "{name}: {d:?}");
            assert!(d.get(DropReason::NeedCookie) >= 1, "{name}: {d:?}");
            assert!(
                d.get(DropReason::RateLimited)
                    + d.get(DropReason::NeedCookie)
                    + d.get(DropReason::NotAllowed)
                    >= 30_000,
                "{name}: {d:?}"
            );
        }
        FloodKind::Legacy => {
            assert!(
                d.get(DropReason::LegacyHandshake) >= 30_000,
                "{name}: {d:?}"
            );
        }
        _ => assert!(r.server_stats.kernel_dropped >= 30_000, "{name}: {d:?}"),
    }
}

/// Datagrams that can belong to no live session never cost it anything: old-format
/// initiations are steered to the handshake worker and refused there as such; transport
/// datagrams, responses and cookie replies to unknown indices, undefined types and empty
/// datagrams are dropped by the data socket's kernel filter, so the driver never reads
/// them. Each is counted once, where it was dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_path_floods_are_dropped_before_any_session() {
    for kind in FloodKind::DATA_PATH {
        let r = live_session(None, Some((kind, RATE)), ADUS_PER_SECOND, 500, 1.0).await;
        let d = &r.server_drops;
        let s = &r.server_stats;
        let name = kind.name();
        eprintln!(
            "{name}: flood {} datagrams, delivered {} of {}, drops {d:?}, {} dropped in the \
             kernel, {} read by the driver",
            r.flood_sent,
            r.delivered,
            r.sent,
            s.kernel_dropped,
            s.datagrams_in - s.handshake_datagrams_in
        );
        assert!(r.flood_sent >= 10_000, "{name}: flood too small");
        // Loopback may lose a few datagrams of a flood; none may go uncounted.
        let counted = match kind.data_path_reason() {
            Some(reason) => d.get(reason),
            None => s.kernel_dropped,
        };
        assert!(
            counted * 100 >= r.flood_sent * 99 && counted <= r.flood_sent + 100,
            "{name}: {counted} of {} counted where they were dropped: {d:?}",
            r.flood_sent,
        );
        // The driver read only the session's own datagrams (a few per ADU).
        let on_data_path = s.datagrams_in - s.handshake_datagrams_in;
        assert!(
            on_data_path < r.sent * 4,
            "{name}: the driver read {on_data_path} datagrams for {} ADUs",
            r.sent
        );
        assert!(
            r.delivered * 100 >= r.sent * 95,
            "{name}: only {} of {} delivered",
            r.delivered,
            r.sent
        );
    }
}
