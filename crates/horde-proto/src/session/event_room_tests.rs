//! Room the session's event queue grew for a burst (an outage's end resolves thousands
//! of ADUs in one input) goes back once the driver has taken every event.

use super::test_session::one_channel_session;
use super::*;

#[test]
fn room_grown_for_a_burst_is_given_back_once_the_events_are_taken() {
    let mut s = one_channel_session(1);
    while s.poll_event().is_some() {}
    s.events
        .extend((0..50_000).map(|stream| Event::Writable { stream }));
    assert!(s.events.capacity() >= 50_000);
    let taken = std::iter::from_fn(|| s.poll_event()).count();
    assert_eq!(taken, 50_000);
    let room = s.events.capacity();
    assert!(room <= EVENT_ROOM_KEPT, "{room}");
}
