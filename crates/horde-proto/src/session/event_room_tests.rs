//! Room the session's event queue grew for a burst (an outage's end resolves thousands
//! of ADUs in one input) goes back once the driver has taken every event.

use std::net::SocketAddr;
use std::time::Duration;

use super::*;
use crate::channel::ChannelConfig;
use crate::ChannelSpec;

#[test]
fn room_grown_for_a_burst_is_given_back_once_the_events_are_taken() {
    let remote: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let channels = vec![ChannelSpec {
        local: 0,
        remote,
        config: ChannelConfig::default(),
    }];
    let mut s = Session::connect(
        SessionConfig::default(),
        1,
        1,
        channels,
        vec![],
        Duration::ZERO,
    )
    .unwrap();
    while s.poll_event().is_some() {}
    s.events
        .extend((0..50_000).map(|stream| Event::Writable { stream }));
    assert!(s.events.capacity() >= 50_000);
    let taken = std::iter::from_fn(|| s.poll_event()).count();
    assert_eq!(taken, 50_000);
    let room = s.events.capacity();
    assert!(room <= EVENT_ROOM_KEPT, "{room}");
}
