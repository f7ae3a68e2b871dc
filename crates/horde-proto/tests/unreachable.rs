//! When a session gives its peer up as unreachable (`Session::peer_unreachable`): not
//! under heavy bursty loss on its only path, where the channel dies now and then but
//! the peer still answers; and, in a real outage, soon after the channel is dead: at
//! once or a probe or two later with data in flight, some 0.6 s later when idle.

use std::time::Duration;

use bytes::Bytes;
use horde_policy::Fields;
use horde_proto::harness::{Harness, NodeId, PathConfig};
use horde_proto::{
    ChannelConfig, ChannelSpec, ConnectOptions, EndpointConfig, Event, ServerConfig, SessionHandle,
    StreamConfig,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// PluriBus setup (b)'s link: 75 ms one way.
const DELAY: Duration = Duration::from_millis(75);
/// How often the tests look at the session.
const STEP: Duration = Duration::from_millis(10);

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// One direction of a Gilbert-Elliott channel: a good state without loss and a bad
/// state losing `loss_in_bad`, each packet moving between them with probability 0.5
/// (setup (b) of PluriBus, Fig. 10).
struct GilbertElliott {
    bad: bool,
    loss_in_bad: f64,
}

impl GilbertElliott {
    fn drops(&mut self, rng: &mut ChaCha8Rng) -> bool {
        if rng.gen_bool(0.5) {
            self.bad = !self.bad;
        }
        self.bad && rng.gen_bool(self.loss_in_bad)
    }
}

struct Pair {
    h: Harness,
    client: NodeId,
    server: NodeId,
    conn: SessionHandle,
    accepted: SessionHandle,
}

/// A client and a server joined by one channel of [`DELAY`], connected, with stream 1
/// open on the client.
fn connected_pair(seed: u64) -> Pair {
    let mut h = Harness::new(seed);
    h.set_default_path(PathConfig::delay(DELAY));
    let server = h.add_node(EndpointConfig::default(), 1);
    h.listen(server, 7, ServerConfig::uniform(ChannelConfig::default()));
    let client = h.add_node(EndpointConfig::default(), 1);
    let channels = vec![ChannelSpec {
        local: 0,
        remote: Harness::addr(server, 0),
        config: ChannelConfig::default(),
    }];
    let conn = h
        .connect(
            client,
            ConnectOptions {
                service: 7,
                channels,
                ..ConnectOptions::default()
            },
        )
        .unwrap();
    assert!(h.run_until_pred(ms(2_000), |n| n.session(client, conn).is_connected()));
    let accepted = h.accept(server).expect("the server accepted");
    h.session_mut(client, conn)
        .open_stream(1, StreamConfig::default())
        .unwrap();
    Pair {
        h,
        client,
        server,
        conn,
        accepted,
    }
}

impl Pair {
    /// Queue `n` ADUs of 1000 bytes on stream 1.
    fn send(&mut self, n: usize) {
        let now = self.h.now();
        for i in 0..n {
            self.h
                .session_mut(self.client, self.conn)
                .send_adu(now, 1, Bytes::from(vec![i as u8; 1000]), Fields::new())
                .unwrap();
        }
    }

    fn received(&self) -> usize {
        self.h
            .events(self.server, self.accepted)
            .iter()
            .filter(|e| matches!(e, Event::Received { .. }))
            .count()
    }

    fn all_channels_dead(&self) -> bool {
        let s = self.h.session(self.client, self.conn);
        !s.channels().is_empty() && s.channels().iter().all(|c| !c.is_alive())
    }

    fn unreachable(&self) -> bool {
        let now = self.h.now();
        self.h.session(self.client, self.conn).peer_unreachable(now)
    }
}

/// 60 s of virtual time over one path losing 50% in the bad state (25% on average, in
/// both directions), with a few ADUs every two seconds and silence in between, the
/// pattern of web flows that leaves little in flight. The channel dies now and then
/// (the former rule, every channel dead, would have ended the session), but the peer
/// is never given up, the session stays connected, and data arrives in every 10 s.
#[test]
fn bursty_heavy_loss_on_the_only_path_is_not_an_outage() {
    let mut p = connected_pair(11);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (client_if, server_if) = (Harness::addr(p.client, 0), Harness::addr(p.server, 0));
    let mut up = GilbertElliott {
        bad: false,
        loss_in_bad: 0.5,
    };
    let mut down = GilbertElliott {
        bad: false,
        loss_in_bad: 0.5,
    };
    p.h.set_drop_filter(move |s| {
        if s.src == client_if {
            up.drops(&mut rng)
        } else if s.src == server_if {
            down.drops(&mut rng)
        } else {
            false
        }
    });
    let start = p.h.now();
    let mut dead_steps = 0;
    let mut received_at_window_start = p.received();
    let mut t = start;
    while t < start + ms(60_000) {
        let since = (t - start).as_millis() as u64;
        if since.is_multiple_of(2_000) {
            p.send(3);
        }
        t += STEP;
        p.h.run_until(t);
        assert!(
            !p.unreachable(),
            "peer given up at {:?} into the loss",
            t - start
        );
        dead_steps += usize::from(p.all_channels_dead());
        if (t - start).as_millis().is_multiple_of(10_000) {
            let received = p.received();
            assert!(
                received > received_at_window_start,
                "nothing delivered in the 10 s before {:?}",
                t - start
            );
            received_at_window_start = received;
        }
    }
    let s = p.h.session(p.client, p.conn);
    assert!(s.is_connected(), "{:?}", s.close_reason());
    let deaths =
        p.h.events(p.client, p.conn)
            .iter()
            .filter(|e| matches!(e, Event::ChannelDown { .. }))
            .count();
    eprintln!(
        "channel died {deaths} times, dead {} ms in all; {} ADUs received",
        dead_steps * STEP.as_millis() as usize,
        p.received()
    );
    assert!(
        deaths > 0 && dead_steps > 0,
        "the loss never killed the channel: the test proves nothing"
    );
    // 90 ADUs sent on a stream without recovery over 25% loss.
    assert!(p.received() > 45, "{} ADUs received", p.received());
}

/// From `cut` on, nothing crosses the path. Returns when every channel was first dead
/// and when the peer was given up, both measured from `cut`.
fn outage(p: &mut Pair, cut: Duration, traffic: bool) -> (Duration, Duration) {
    p.h.set_drop_filter(move |s| s.at >= cut);
    let mut t = p.h.now();
    let mut dead_at = None;
    while t < cut + ms(10_000) {
        if traffic
            && t.as_millis().is_multiple_of(50)
            && p.h.session(p.client, p.conn).queued(1) < 20
        {
            p.send(2);
        }
        t += STEP;
        p.h.run_until(t);
        if dead_at.is_none() && p.all_channels_dead() {
            dead_at = Some(t);
        }
        if p.unreachable() {
            let dead_at = dead_at.expect("given up before every channel died");
            return (dead_at - cut, t - cut);
        }
    }
    panic!("the peer was never given up (channel dead: {dead_at:?})");
}

/// A real outage while data flows: what was in flight goes unanswered, so the peer is
/// given up when the channel dies (the former rule) or at most two fast probes later,
/// and within two seconds of the cut.
#[test]
fn an_outage_under_traffic_is_detected_when_the_channel_dies() {
    let mut p = connected_pair(3);
    let cut = p.h.now() + ms(3_000);
    let (dead, given_up) = outage(&mut p, cut, true);
    eprintln!("channel dead {dead:?}, peer given up {given_up:?} after the cut");
    assert!(given_up >= dead);
    assert!(given_up - dead <= ms(100), "{dead:?} {given_up:?}");
    assert!(given_up <= ms(2_000), "{given_up:?}");
}

/// A real outage on an idle session (keepalives only): given up once sixteen packets went
/// unanswered, a few dead-channel probes after the channel died, within three seconds.
#[test]
fn an_outage_of_an_idle_session_is_detected_a_few_probes_after_the_channel_dies() {
    let mut p = connected_pair(4);
    let cut = p.h.now() + ms(3_000);
    let (dead, given_up) = outage(&mut p, cut, false);
    eprintln!("channel dead {dead:?}, peer given up {given_up:?} after the cut");
    assert!(given_up >= dead);
    assert!(given_up - dead <= ms(700), "{dead:?} {given_up:?}");
    assert!(given_up <= ms(3_000), "{given_up:?}");
}
