//! Bad calls get typed errors, never panics.

use std::time::Duration;

use horde_proto::message::{
    ChannelEstimate, Fate, MessageConfig, MessageError, MessageId, MessageScheduler, MessageSpec,
    QueueId,
};

#[test]
fn each_bad_call_names_what_was_wrong() {
    let now = Duration::from_secs(10);
    let mut sender = MessageScheduler::new(MessageConfig {
        max_message_size: 200_000_000,
        ..MessageConfig::default()
    })
    .unwrap();
    sender
        .set_channels(
            now,
            &[ChannelEstimate {
                rate: 1e9,
                delay: Duration::ZERO,
                startup: None,
            }],
        )
        .unwrap();
    assert_eq!(
        sender.cancel(now, MessageId(42)),
        Err(MessageError::UnknownMessage(MessageId(42)))
    );
    assert_eq!(
        sender.submit(
            now,
            MessageSpec::new(0, 10).with_deadline(Duration::from_secs(9))
        ),
        Err(MessageError::DeadlineInPast {
            deadline: Duration::from_secs(9),
            now
        })
    );
    assert_eq!(
        sender.submit(now, MessageSpec::new(0, 200_000_001)),
        Err(MessageError::TooLarge {
            size: 200_000_001,
            limit: 200_000_000
        })
    );
    assert!(
        sender.submit(now, MessageSpec::new(0, 100_000_000)).is_ok(),
        "100 MB is fine"
    );
    assert!(matches!(
        sender.submit(now, MessageSpec::new(8, 10)),
        Err(MessageError::InvalidPriority { priority: 8, .. })
    ));
    assert_eq!(
        sender.submit(now, MessageSpec::new(0, 10).on_queue(QueueId(9))),
        Err(MessageError::UnknownQueue(QueueId(9)))
    );
    assert!(matches!(
        sender.poll_piece(now, 3),
        Err(MessageError::UnknownChannel { index: 3, count: 1 })
    ));

    let mut sender = MessageScheduler::new(MessageConfig::default()).unwrap();
    sender
        .set_channels(
            now,
            &[ChannelEstimate {
                rate: 1e9,
                delay: Duration::ZERO,
                startup: None,
            }],
        )
        .unwrap();
    let id = sender.submit(now, MessageSpec::new(0, 10)).unwrap();
    assert_eq!(
        sender.confirm_delivered(now, id),
        Err(MessageError::NotFullySent(id))
    );
    sender.poll_piece(now, 0).unwrap().unwrap();
    sender.confirm_delivered(now, id).unwrap();
    assert_eq!(
        sender.cancel(now, id),
        Err(MessageError::AlreadyDelivered(id))
    );
    assert_eq!(
        sender.remaining(id),
        Err(MessageError::AlreadyDelivered(id))
    );
    let other = sender.submit(now, MessageSpec::new(0, 10)).unwrap();
    sender.cancel(now, other).unwrap();
    assert_eq!(
        sender.resume(other),
        Err(MessageError::AlreadyFinished {
            id: other,
            fate: Fate::Cancelled
        })
    );
    assert!(matches!(
        sender.defer(now, other, Some(now)),
        Err(MessageError::DeadlineInPast { .. })
    ));
    assert!(sender
        .set_channels(
            now,
            &[ChannelEstimate {
                rate: f64::NAN,
                delay: Duration::ZERO,
                startup: None,
            }]
        )
        .is_err());
    assert!(MessageScheduler::new(MessageConfig {
        piece_size: 0,
        ..MessageConfig::default()
    })
    .is_err());
}
