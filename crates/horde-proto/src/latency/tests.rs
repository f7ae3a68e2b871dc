use super::*;
use horde_policy::Fields;

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

fn id(c: u8) -> ChannelId {
    ChannelId::new(c)
}

/// Three channels like `scenarios/cellular3.toml`'s: ~6, ~11 and ~2 Mbit/s, 30, 40 and
/// 50 ms one way.
fn cellular() -> Vec<Candidate> {
    [(0, 30, 750_000.0), (1, 40, 1_400_000.0), (2, 50, 250_000.0)]
        .into_iter()
        .map(|(c, base, rate)| Candidate {
            id: id(c),
            alive: true,
            base_one_way: Some(ms(base)),
            rate,
        })
        .collect()
}

fn chosen(candidates: &[Candidate], current: &[ChannelId], bound: u64, need: f64) -> Vec<u8> {
    let mut out = Vec::new();
    choose(candidates, current, ms(bound), need, &mut out);
    let mut ids: Vec<u8> = out.into_iter().map(u8::from).collect();
    ids.sort_unstable();
    ids
}

#[test]
fn the_budget_is_half_the_slack_under_the_bound() {
    assert_eq!(budget(ms(130), ms(30)), Some(ms(50)));
    assert_eq!(budget(ms(130), ms(50)), Some(ms(40)));
    // Too little slack, or none: no queue short enough would serve the bound.
    assert_eq!(budget(ms(130), ms(115)), None);
    assert_eq!(budget(ms(130), ms(200)), None);
}

#[test]
fn the_two_slowest_channels_that_can_serve_the_bound_are_bounded() {
    let c = cellular();
    assert_eq!(chosen(&c, &[], 130, 12_500.0), vec![0, 2]);
    // A bound the 50 ms channel cannot serve leaves it out.
    assert_eq!(chosen(&c, &[], 65, 12_500.0), vec![0, 1]);
    // A channel that cannot carry the streams' rate several times over is left out.
    assert_eq!(chosen(&c, &[], 130, 100_000.0), vec![0, 1]);
    // No channel measured yet, or none alive: nothing is bounded.
    let unmeasured: Vec<_> = c.iter().map(|x| Candidate { rate: 0.0, ..*x }).collect();
    assert!(chosen(&unmeasured, &[], 130, 12_500.0).is_empty());
}

#[test]
fn a_healthy_choice_stands_until_a_clearly_cheaper_one_appears() {
    let mut c = cellular();
    // The current pair (0, 1) costs 2.15 MB/s against 1 MB/s for (0, 2): cheaper, but
    // not by enough to drain one queue and refill another.
    assert_eq!(chosen(&c, &[id(0), id(1)], 130, 12_500.0), vec![0, 1]);
    // Channel 1 speeds up to 3 MB/s: (0, 2) now costs a quarter of (0, 1).
    c[1].rate = 3_000_000.0;
    assert_eq!(chosen(&c, &[id(0), id(1)], 130, 12_500.0), vec![0, 2]);
}

#[test]
fn a_chosen_channel_stays_through_a_slow_spell_a_newcomer_would_fail() {
    let mut c = cellular();
    // Channel 2 slows to 30 kB/s: under four times the 12.5 kB/s the streams need, so
    // not chosen afresh, but kept while it still carries that need.
    c[2].rate = 30_000.0;
    assert_eq!(chosen(&c, &[], 130, 12_500.0), vec![0, 1]);
    assert_eq!(chosen(&c, &[id(0), id(2)], 130, 12_500.0), vec![0, 2]);
}

#[test]
fn a_member_that_died_is_replaced_at_once() {
    let mut c = cellular();
    c[2].alive = false;
    assert_eq!(chosen(&c, &[id(0), id(2)], 130, 12_500.0), vec![0, 1]);
}

fn slot(channel: u8, rtt: f64) -> TxSlot {
    TxSlot {
        channel: id(channel),
        sequence: 0,
        loss_probability: 0.0,
        expected_rtt_ms: rtt,
        wait_ms: 0.0,
        max_size: 1400,
        cost_per_kb: 0.0,
        phantom: None,
        burst_correlation: [0.0; 8],
    }
}

fn adu(n: u64, stream: u32, waited_ms: i64) -> AduView {
    AduView {
        id: n,
        stream_id: stream,
        stream_seq: n,
        length: if stream == 2 { 160 } else { 1400 },
        queue_delay_ms: waited_ms,
        fields: Fields::default(),
    }
}

/// Steering with channels 1 and 2 bounded for stream 2 (bound 130 ms).
fn steering() -> LatencySteering {
    LatencySteering {
        bounded: vec![id(1), id(2)],
        ..LatencySteering::default()
    }
}

/// Stream 2 has a 130 ms bound, stream 3 is quickest, the others are free.
fn bound_of(stream: u32) -> Steer {
    match stream {
        2 => Steer::Bound(130.0),
        3 => Steer::Quickest,
        _ => Steer::Free,
    }
}

#[test]
fn only_bound_streams_adus_that_are_still_patient_are_pinned() {
    let mut s = steering();
    let adus = [adu(0, 1, 0), adu(1, 2, 10), adu(2, 2, 64), adu(3, 2, 65)];
    s.pin(&adus, false, bound_of);
    assert_eq!(s.pinned(), &[false, true, true, false]);
    // Nothing bounded, nothing pinned.
    let mut idle = LatencySteering::default();
    idle.pin(&adus, false, bound_of);
    assert!(idle.pinned().is_empty());
}

#[test]
fn a_pinned_adu_takes_the_bounded_slot_with_the_shortest_round_trip() {
    let mut s = steering();
    // Real slots: channel 0 (unbounded, 600 ms), channel 2 (bounded, 140 ms), channel 1
    // (bounded, 90 ms). Bulk holds both bounded slots; the voice ADU got channel 0.
    let slots = [slot(0, 600.0), slot(2, 140.0), slot(1, 90.0)];
    let adus = [adu(0, 1, 0), adu(1, 1, 0), adu(2, 2, 5)];
    s.pin(&adus, false, bound_of);
    let mut asg = vec![Some(1), Some(2), Some(0)];
    assert_eq!(s.steer(&slots, 3, &adus, &mut asg), 1);
    assert_eq!(asg, vec![Some(1), Some(0), Some(2)], "bulk takes channel 0");
}

#[test]
fn with_no_bounded_slot_a_pinned_adu_waits_and_its_slot_goes_to_another() {
    let mut s = steering();
    let slots = [slot(0, 600.0), slot(0, 600.0)];
    // Voice on the first slot, bulk on the second, a third bulk ADU without a slot.
    let adus = [adu(0, 2, 5), adu(1, 1, 0), adu(2, 1, 0)];
    s.pin(&adus, false, bound_of);
    let mut asg = vec![Some(0), Some(1), None];
    assert_eq!(s.steer(&slots, 2, &adus, &mut asg), 1);
    assert_eq!(asg, vec![None, Some(1), Some(0)]);
    // Past its patience the voice ADU goes where the scheduler put it.
    let late = [adu(0, 2, 80), adu(1, 1, 0), adu(2, 1, 0)];
    s.pin(&late, false, bound_of);
    let mut asg = vec![Some(0), Some(1), None];
    assert_eq!(s.steer(&slots, 2, &late, &mut asg), 0);
    assert_eq!(asg, vec![Some(0), Some(1), None]);
}

#[test]
fn a_reserved_slot_goes_to_the_bound_adu_and_never_to_bulk() {
    let mut s = steering();
    // Channel 1's only open slot is reserved (its queue bound is reached); the scheduler
    // gave it to bulk and left the voice ADU without a slot.
    let slots = [slot(0, 600.0), slot(1, 90.0)];
    let reserved = [false, true];
    let adus = [adu(0, 1, 0), adu(1, 1, 0), adu(2, 2, 5)];
    s.pin(&adus, false, bound_of);
    let mut asg = vec![Some(0), Some(1), None];
    s.steer(&slots, 2, &adus, &mut asg);
    s.keep_reserved(&reserved, 2, &mut asg);
    assert_eq!(asg, vec![Some(0), None, Some(1)], "voice takes the reserve");
    // With no bound ADU in the cycle, bulk still may not take it.
    let bulk = [adu(0, 1, 0), adu(1, 1, 0)];
    s.pin(&bulk, false, bound_of);
    let mut asg = vec![Some(0), Some(1)];
    s.steer(&slots, 2, &bulk, &mut asg);
    s.keep_reserved(&reserved, 2, &mut asg);
    assert_eq!(asg, vec![Some(0), None]);
}

#[test]
fn two_pinned_adus_never_displace_each_other() {
    let mut s = steering();
    let slots = [slot(1, 90.0), slot(0, 600.0)];
    let adus = [adu(0, 2, 5), adu(1, 2, 5)];
    s.pin(&adus, false, bound_of);
    let mut asg = vec![Some(0), Some(1)];
    s.steer(&slots, 2, &adus, &mut asg);
    // The first keeps the bounded slot; the second waits for the next one.
    assert_eq!(asg, vec![Some(0), None]);
}

#[test]
fn an_adu_past_its_patience_takes_the_quickest_slot_of_any_channel() {
    let mut s = steering();
    // Channel 0 queues 300 ms one way, channel 3 (not bounded) 50 ms; no bounded slot.
    let slots = [slot(0, 600.0), slot(3, 100.0)];
    let adus = [adu(0, 2, 80), adu(1, 1, 0)];
    s.pin(&adus, false, bound_of);
    assert_eq!(s.pinned(), &[false, false]);
    let mut asg = vec![Some(0), Some(1)];
    assert_eq!(s.steer(&slots, 2, &adus, &mut asg), 1);
    assert_eq!(asg, vec![Some(1), Some(0)]);
}

#[test]
fn a_copy_takes_the_bounded_channel_its_original_did_not() {
    let mut s = steering();
    // Voice's ADU 0 left on channel 1; ADU 5 is its copy, 6 and 7 are bulk.
    s.note_sent(2, id(1));
    // Real slots: channel 1 (bounded, 90 ms), channel 2 (bounded, 140 ms), channel 0.
    let slots = [slot(1, 90.0), slot(2, 140.0), slot(0, 600.0)];
    let adus = [adu(5, 2, 5), adu(6, 1, 0), adu(7, 1, 0)];
    s.pin(&adus, false, bound_of);
    s.mark_copies(&adus, |a| a.id == 5);
    assert_eq!(s.avoided(), &[Some(id(1)), None, None]);
    let mut asg = vec![Some(0), Some(1), Some(2)];
    s.steer(&slots, 3, &adus, &mut asg);
    // The copy goes on channel 2 although channel 1 is quicker; bulk takes its slot.
    assert_eq!(asg, vec![Some(1), Some(0), Some(2)]);

    // With only its original's channel offering a bounded slot, the copy waits.
    let slots = [slot(1, 90.0), slot(0, 600.0)];
    let adus = [adu(5, 2, 5), adu(7, 1, 0)];
    s.pin(&adus, false, bound_of);
    s.mark_copies(&adus, |a| a.id == 5);
    let mut asg = vec![Some(0), Some(1)];
    s.steer(&slots, 2, &adus, &mut asg);
    assert_eq!(asg[0], None, "{asg:?}");
    // Past its patience it is no longer held to another channel.
    let late = [adu(5, 2, 80), adu(7, 1, 0)];
    s.pin(&late, false, bound_of);
    s.mark_copies(&late, |a| a.id == 5);
    assert_eq!(s.avoided(), &[None, None]);
}

#[test]
fn a_quickest_adu_takes_the_quickest_slot_with_nothing_bounded() {
    let mut s = LatencySteering::default();
    // Real slots: channel 0 (600 ms round trip), channel 1 (90 ms), channel 2 (140 ms).
    // Bulk holds the quick one; the quickest stream's ADU got channel 0.
    let slots = [slot(0, 600.0), slot(1, 90.0), slot(2, 140.0)];
    let adus = [adu(0, 3, 0), adu(1, 1, 0), adu(2, 1, 0)];
    // Without a quickest stream in the cycle nothing is steered.
    s.pin(&adus, false, bound_of);
    let mut asg = vec![Some(0), Some(1), Some(2)];
    assert_eq!(s.steer(&slots, 3, &adus, &mut asg), 0);
    s.pin(&adus, true, bound_of);
    assert_eq!(s.pinned(), &[false, false, false], "never held back");
    assert_eq!(s.steer(&slots, 3, &adus, &mut asg), 1);
    assert_eq!(asg, vec![Some(1), Some(0), Some(2)], "bulk takes channel 0");
    // A bound stream's ADU is not steered while no channel is bounded.
    let adus = [adu(0, 2, 0), adu(1, 1, 0)];
    s.pin(&adus, true, bound_of);
    let mut asg = vec![Some(0), Some(1)];
    assert_eq!(s.steer(&slots, 2, &adus, &mut asg), 0);
}

#[test]
fn a_quickest_adu_waits_for_a_quick_channel_while_a_slow_one_would_cost_more() {
    // Channel 0 is expected to take 300 ms one way, channel 1 45 ms; only channel 0 has
    // a slot this cycle.
    let mut s = LatencySteering {
        expected_ms: vec![(id(0), 300.0), (id(1), 45.0)],
        ..LatencySteering::default()
    };
    let slots = [slot(0, 600.0)];
    let adus = [adu(0, 3, 10), adu(1, 1, 0)];
    s.pin(&adus, true, bound_of);
    assert_eq!(s.limits()[0], 45.0 + QUICK_SLACK_MS + 10.0);
    let mut asg = vec![Some(0), None];
    assert_eq!(s.steer(&slots, 1, &adus, &mut asg), 1);
    assert_eq!(asg, vec![None, Some(0)], "held; bulk takes the slot");
    // Having waited longer than channel 0 would cost over channel 1, it takes it.
    let late = [adu(0, 3, 260), adu(1, 1, 0)];
    s.pin(&late, true, bound_of);
    let mut asg = vec![Some(0), None];
    assert_eq!(s.steer(&slots, 1, &late, &mut asg), 0);
    assert_eq!(asg, vec![Some(0), None]);
}
