//! The host estimate and range notifications.

use horde_proto::message::{
    BandwidthEstimator, BandwidthNotifier, EstimatorConfig, MessageError, UsageSample,
};

fn sample(sent_bytes: u64, backlog_bytes: u64, capacity: f64) -> UsageSample {
    UsageSample {
        sent_bytes,
        backlog_bytes,
        capacity: Some(capacity),
    }
}

#[test]
fn a_notification_fires_when_the_estimate_leaves_the_range_and_not_otherwise() {
    let mut estimator = BandwidthEstimator::new(EstimatorConfig::default()).unwrap();
    let mut notifier = BandwidthNotifier::new();
    let range = notifier.register(90_000.0, 150_000.0).unwrap();
    // Steady 100 KB/s on channels able to carry 120 KB/s: the estimate stays inside.
    for tick in 0..20 {
        let estimate = estimator.on_tick(sample(100_000, 0, 120_000.0));
        notifier.on_estimate(&estimate);
        if tick > 0 {
            assert!((90_000.0..=150_000.0).contains(&estimate.available));
        }
    }
    assert_eq!(notifier.poll_event(), None, "no event while inside");
    // The link drops to 30 KB/s and the send queues back up.
    let estimate = estimator.on_tick(sample(30_000, 40_000, 120_000.0));
    notifier.on_estimate(&estimate);
    let event = notifier.poll_event().expect("left the range");
    assert_eq!(event.range, range);
    assert!(event.available < 90_000.0);
    assert_eq!(notifier.poll_event(), None, "one event");
    assert_eq!(notifier.registered(), 0, "one-shot");
    // The application registers a new range around the new value; a further drop inside
    // it is silent, one below it fires.
    let next = notifier
        .register(event.available * 0.7, event.available * 1.3)
        .unwrap();
    let mut fired = Vec::new();
    for _ in 0..10 {
        let estimate = estimator.on_tick(sample(30_000, 20_000, 120_000.0));
        notifier.on_estimate(&estimate);
        fired.extend(std::iter::from_fn(|| notifier.poll_event()));
        if !fired.is_empty() {
            break;
        }
        assert!(estimate.available >= event.available * 0.7);
    }
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].range, next);
    assert!(fired[0].available < event.available * 0.7);
}

#[test]
fn backlog_marks_a_real_drop_and_a_quiet_sender_is_not_one() {
    let mut quiet = BandwidthEstimator::new(EstimatorConfig::default()).unwrap();
    let mut backed_up = BandwidthEstimator::new(EstimatorConfig::default()).unwrap();
    for _ in 0..10 {
        quiet.on_tick(sample(100_000, 0, 1e9));
        backed_up.on_tick(sample(100_000, 0, 1e9));
    }
    // Both send 20 KB in the next second; only one has 30 KB stuck in its queues.
    let quiet = quiet.on_tick(sample(20_000, 0, 1e9));
    let backed_up = backed_up.on_tick(sample(20_000, 30_000, 1e9));
    // 5-sample smoothing: (4 × 100 + 20) / 5 = 84 KB/s used.
    assert!(quiet.available > 84_000.0, "probing above usage: {quiet:?}");
    assert_eq!(backed_up.available, 84_000.0);
    assert_eq!(
        backed_up.budget,
        84_000.0 - 30_000.0,
        "the queue drains first"
    );
}

#[test]
fn an_underused_estimate_probes_upwards_even_from_zero() {
    for (sent, poll_delay) in [(25_000, 1), (0, 1), (0, 3)] {
        let mut estimator = BandwidthEstimator::new(EstimatorConfig {
            poll_delay,
            ..EstimatorConfig::default()
        })
        .unwrap();
        let advertised: Vec<f64> = (0..12)
            .map(|_| estimator.on_tick(sample(sent, 0, 200_000.0)).available)
            .collect();
        assert!(
            advertised.windows(2).skip(1).all(|w| w[1] >= w[0]),
            "rises: {advertised:?}"
        );
        assert!(
            advertised[11] > sent as f64 + 1000.0,
            "probes up: {advertised:?}"
        );
        assert!(
            advertised.iter().all(|a| *a <= 200_000.0),
            "capped by the channels"
        );
    }
}

#[test]
fn bad_ranges_and_settings_are_typed_errors() {
    let mut notifier = BandwidthNotifier::new();
    assert_eq!(
        notifier.register(10.0, 5.0),
        Err(MessageError::InvalidRange {
            min: 10.0,
            max: 5.0
        })
    );
    assert!(notifier.register(f64::NAN, 5.0).is_err());
    assert!(notifier.register(-1.0, 5.0).is_err());
    assert!(BandwidthEstimator::new(EstimatorConfig {
        poll_delay: 0,
        ..EstimatorConfig::default()
    })
    .is_err());
}
