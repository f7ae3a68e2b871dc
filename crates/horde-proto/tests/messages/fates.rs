//! Every message ends in exactly one fate, whatever the application and the channels do.

use std::collections::HashMap;
use std::time::Duration;

use horde_proto::message::{
    ChannelEstimate, Fate, MessageConfig, MessageError, MessageEvent, MessageId, MessageScheduler,
    MessageSpec,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Submit {
        priority: u8,
        size: u64,
        deadline_ms: Option<u64>,
    },
    Poll {
        channel: usize,
        count: usize,
    },
    Advance {
        ms: u64,
    },
    SetRate {
        channel: usize,
        rate: f64,
    },
    Confirm(usize),
    Cancel(usize),
    Suspend(usize),
    Resume(usize),
    Defer {
        index: usize,
        deadline_ms: Option<u64>,
    },
    Restart(usize),
    Reprioritise {
        index: usize,
        priority: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..8, 0u64..20_000, proptest::option::of(1u64..3_000))
            .prop_map(|(priority, size, deadline_ms)| Op::Submit { priority, size, deadline_ms }),
        4 => (0usize..2, 1usize..20).prop_map(|(channel, count)| Op::Poll { channel, count }),
        3 => (1u64..400).prop_map(|ms| Op::Advance { ms }),
        1 => (0usize..2, 0.0f64..2e6).prop_map(|(channel, rate)| Op::SetRate { channel, rate }),
        2 => any::<usize>().prop_map(Op::Confirm),
        1 => any::<usize>().prop_map(Op::Cancel),
        1 => any::<usize>().prop_map(Op::Suspend),
        1 => any::<usize>().prop_map(Op::Resume),
        1 => (any::<usize>(), proptest::option::of(1u64..3_000))
            .prop_map(|(index, deadline_ms)| Op::Defer { index, deadline_ms }),
        1 => any::<usize>().prop_map(Op::Restart),
        1 => (any::<usize>(), 0u8..8).prop_map(|(index, priority)| Op::Reprioritise { index, priority }),
    ]
}

/// Records every event and checks the rules as they come.
#[derive(Default)]
struct Ledger {
    fates: HashMap<MessageId, Fate>,
    deadlines: HashMap<MessageId, Option<Duration>>,
}

impl Ledger {
    fn drain(&mut self, sender: &mut MessageScheduler) {
        while let Some(event) = sender.poll_event() {
            match event {
                MessageEvent::Early {
                    id, at, deadline, ..
                } => {
                    assert!(
                        !self.fates.contains_key(&id),
                        "early after the fate of {id}"
                    );
                    assert!(at < deadline, "early at {at:?} is not before {deadline:?}");
                    assert_eq!(self.deadlines[&id], Some(deadline));
                }
                MessageEvent::Finished { id, fate, .. } => {
                    let before = self.fates.insert(id, fate);
                    assert_eq!(before, None, "{id} got a second fate {fate}");
                }
            }
        }
    }
}

fn pick(ids: &[MessageId], index: usize) -> Option<MessageId> {
    (!ids.is_empty()).then(|| ids[index % ids.len()])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn every_admitted_message_gets_exactly_one_fate(ops in proptest::collection::vec(op(), 1..120)) {
        let mut now = Duration::ZERO;
        let mut sender = MessageScheduler::new(MessageConfig {
            piece_size: 1000,
            ..MessageConfig::default()
        }).unwrap();
        let mut rates = [200_000.0, 50_000.0];
        let estimates = |rates: &[f64; 2]| [
            ChannelEstimate { rate: rates[0], delay: Duration::from_millis(20), startup: None },
            ChannelEstimate { rate: rates[1], delay: Duration::from_millis(150), startup: None },
        ];
        sender.set_channels(now, &estimates(&rates)).unwrap();
        let mut ids: Vec<MessageId> = Vec::new();
        let mut ledger = Ledger::default();
        for op in ops {
            let any = pick(&ids, match &op {
                Op::Confirm(i) | Op::Cancel(i) | Op::Suspend(i) | Op::Resume(i) | Op::Restart(i) => *i,
                Op::Defer { index, .. } | Op::Reprioritise { index, .. } => *index,
                _ => 0,
            });
            let result = match op {
                Op::Submit { priority, size, deadline_ms } => {
                    let mut spec = MessageSpec::new(priority, size);
                    spec.deadline = deadline_ms.map(|d| now + Duration::from_millis(d));
                    match sender.submit(now, spec) {
                        Ok(id) => {
                            ids.push(id);
                            ledger.deadlines.insert(id, spec.deadline);
                            Ok(())
                        }
                        Err(MessageError::Refused(_)) => Ok(()),
                        Err(e) => Err(e),
                    }
                }
                Op::Poll { channel, count } => {
                    for _ in 0..count {
                        if sender.poll_piece(now, channel).unwrap().is_none() {
                            break;
                        }
                    }
                    Ok(())
                }
                Op::Advance { ms } => {
                    now += Duration::from_millis(ms);
                    sender.handle_timeout(now);
                    Ok(())
                }
                Op::SetRate { channel, rate } => {
                    rates[channel] = rate;
                    sender.set_channels(now, &estimates(&rates))
                }
                Op::Confirm(_) => any.map_or(Ok(()), |id| sender.confirm_delivered(now, id)),
                Op::Cancel(_) => any.map_or(Ok(()), |id| sender.cancel(now, id)),
                Op::Suspend(_) => any.map_or(Ok(()), |id| sender.suspend(id)),
                Op::Resume(_) => any.map_or(Ok(()), |id| sender.resume(id)),
                Op::Defer { deadline_ms, .. } => any.map_or(Ok(()), |id| {
                    let deadline = deadline_ms.map(|d| now + Duration::from_millis(d));
                    let done = sender.defer(now, id, deadline);
                    if done.is_ok() {
                        ledger.deadlines.insert(id, deadline);
                    }
                    done
                }),
                Op::Restart(_) => any.map_or(Ok(()), |id| sender.restart(id)),
                Op::Reprioritise { priority, .. } => {
                    any.map_or(Ok(()), |id| sender.reprioritise(id, priority))
                }
            };
            // A refused operation is one on a finished message or one not fully sent.
            if let Err(e) = result {
                prop_assert!(
                    matches!(
                        e,
                        MessageError::AlreadyDelivered(_)
                            | MessageError::AlreadyFinished { .. }
                            | MessageError::NotFullySent(_)
                    ),
                    "unexpected error {e}"
                );
            }
            ledger.drain(&mut sender);
        }
        // The application cancels whatever is left.
        for id in &ids {
            let _ = sender.cancel(now, *id);
        }
        ledger.drain(&mut sender);
        prop_assert_eq!(sender.live_messages(), 0);
        for id in &ids {
            prop_assert!(ledger.fates.contains_key(id), "{} has no fate", id);
        }
        prop_assert_eq!(ledger.fates.len(), ids.len());
    }
}
