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

/// Without a socket of their own, initiations reach the driver, which defends the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initiations_on_the_data_socket_are_defended_too() {
    let options = FloodOptions {
        separate_socket: false,
        ..FloodOptions::default()
    };
    for kind in [FloodKind::Random, FloodKind::Disallowed] {
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
        // A valid mac1 puts the host under load: cookies, then the per-source limit; only
        // a trickle reaches Diffie-Hellman.
        FloodKind::Replay | FloodKind::Disallowed => {
            let worker = if kind == FloodKind::Replay {
                d.get(DropReason::StaleInitiation)
            } else {
                d.get(DropReason::NotAllowed)
            };
            assert!(worker >= 1, "{name}: never reached the worker: {d:?}");
            assert!(
                worker <= 200,
                "{name}: {worker} initiations reached Diffie-Hellman: {d:?}"
            );
            assert!(d.get(DropReason::NeedCookie) >= 1, "{name}: {d:?}");
            assert!(
                d.get(DropReason::RateLimited) + d.get(DropReason::NeedCookie) >= 30_000,
                "{name}: {d:?}"
            );
        }
    }
}
