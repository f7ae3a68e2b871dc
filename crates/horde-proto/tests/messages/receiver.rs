//! The receiver: pieces in any order make the message; a cancel frees a partial one.

use bytes::Bytes;
use horde_proto::message::codec::{self, Item, PieceHeader};
use horde_proto::message::{ControlItem, MessageId, Reassembly, ReassemblyError};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn pieces(id: u64, total: usize, size: usize) -> Vec<(PieceHeader, Bytes)> {
    let payload: Vec<u8> = (0..total).map(|i| (i % 253) as u8).collect();
    (0..total.div_ceil(size))
        .map(|k| {
            let start = k * size;
            let end = (start + size).min(total);
            (
                PieceHeader {
                    message: MessageId(id),
                    offset: start as u64,
                    total: total as u64,
                    priority: 2,
                },
                Bytes::copy_from_slice(&payload[start..end]),
            )
        })
        .collect()
}

#[test]
fn shuffled_pieces_through_the_codec_make_the_whole_message() {
    let mut list = pieces(1, 2_000_000, 1200);
    list.shuffle(&mut ChaCha8Rng::seed_from_u64(3));
    let mut receiver = Reassembly::new(1 << 30, 16);
    let mut whole = None;
    let count = list.len();
    for (k, (header, slice)) in list.into_iter().enumerate() {
        let mut adu = Vec::new();
        codec::encode_piece_header(&header, &mut adu);
        adu.extend_from_slice(&slice);
        let Ok(Item::Piece(header, slice)) = codec::decode(Bytes::from(adu)) else {
            panic!("a piece decodes");
        };
        let done = receiver.on_piece(header, slice).unwrap();
        assert_eq!(
            done.is_some(),
            k + 1 == count,
            "complete only at the last piece"
        );
        whole = whole.or(done);
    }
    let whole = whole.unwrap();
    assert_eq!(whole.payload.len(), 2_000_000);
    assert!(whole
        .payload
        .iter()
        .enumerate()
        .all(|(i, b)| *b == (i % 253) as u8));
    assert_eq!(receiver.held_bytes(), 0);
}

#[test]
fn a_cancel_frees_what_the_receiver_held_and_drops_late_pieces() {
    let mut receiver = Reassembly::new(1 << 30, 16);
    let list = pieces(5, 100_000, 1000);
    let kept = pieces(6, 3_000, 1000);
    for (header, slice) in list.iter().take(60).cloned() {
        assert_eq!(receiver.on_piece(header, slice).unwrap(), None);
    }
    receiver.on_piece(kept[0].0, kept[0].1.clone()).unwrap();
    assert_eq!(receiver.held_bytes(), 61_000);
    assert_eq!(receiver.partial_messages(), 2);

    let mut adu = Vec::new();
    codec::encode_control(&ControlItem::Cancel(MessageId(5)), &mut adu);
    let Ok(Item::Control(cancel)) = codec::decode(Bytes::from(adu)) else {
        panic!("a control item decodes");
    };
    assert_eq!(receiver.on_control(cancel), 60_000);
    assert_eq!(receiver.held_bytes(), 1_000);
    assert_eq!(receiver.partial_messages(), 1);
    // Pieces still in flight after the cancel are dropped, not held again.
    for (header, slice) in list.into_iter().skip(60) {
        assert_eq!(receiver.on_piece(header, slice).unwrap(), None);
    }
    assert_eq!(receiver.held_bytes(), 1_000);
    // The other message is untouched.
    for (header, slice) in kept.into_iter().skip(1) {
        receiver.on_piece(header, slice).unwrap();
    }
    assert_eq!((receiver.held_bytes(), receiver.partial_messages()), (0, 0));
}

#[test]
fn bad_pieces_are_typed_errors() {
    let mut receiver = Reassembly::new(10_000, 16);
    let header = PieceHeader {
        message: MessageId(1),
        offset: 900,
        total: 1000,
        priority: 0,
    };
    assert!(matches!(
        receiver.on_piece(header, Bytes::from(vec![0; 200])),
        Err(ReassemblyError::PastEnd { .. })
    ));
    receiver
        .on_piece(header, Bytes::from(vec![0; 100]))
        .unwrap();
    assert!(matches!(
        receiver.on_piece(
            PieceHeader {
                total: 2000,
                ..header
            },
            Bytes::from(vec![0; 100])
        ),
        Err(ReassemblyError::LengthChanged { .. })
    ));
    assert!(matches!(
        receiver.on_piece(
            PieceHeader {
                offset: 850,
                ..header
            },
            Bytes::from(vec![0; 100])
        ),
        Err(ReassemblyError::Overlap { .. })
    ));
    assert!(matches!(
        receiver.on_piece(
            PieceHeader {
                message: MessageId(2),
                total: 20_000,
                ..header
            },
            Bytes::from(vec![0; 100])
        ),
        Err(ReassemblyError::TooLarge { .. })
    ));
}

#[test]
fn a_message_that_expires_part_sent_tells_the_receiver_to_free_it() {
    use horde_proto::message::{ChannelEstimate, MessageConfig, MessageScheduler, MessageSpec};
    use std::time::Duration;

    let mut sender = MessageScheduler::new(MessageConfig::default()).unwrap();
    let channel = ChannelEstimate {
        rate: 1_000_000.0,
        delay: Duration::from_millis(10),
        startup: None,
    };
    sender.set_channels(Duration::ZERO, &[channel]).unwrap();
    let spec = MessageSpec::new(0, 12_000).with_deadline(Duration::from_millis(100));
    let part_sent = sender.submit(Duration::ZERO, spec).unwrap();
    let unsent = sender.submit(Duration::ZERO, spec).unwrap();
    let piece = sender.poll_piece(Duration::ZERO, 0).unwrap().unwrap();
    assert_eq!(piece.message, part_sent);
    sender.handle_timeout(Duration::from_millis(100));
    assert_eq!(sender.poll_control(), Some(ControlItem::Cancel(part_sent)));
    assert_eq!(sender.poll_control(), None, "nothing of {unsent} was sent");
}

#[test]
fn repeated_pieces_are_dropped_and_a_one_piece_message_is_handed_on_whole() {
    let mut receiver = Reassembly::new(1 << 20, 16);
    let mut list = pieces(7, 10_000, 1000);
    // Each piece twice, then one piece's second half again at its own offset: every
    // repeat lies inside bytes already held.
    let half = {
        let (h, s) = &list[3];
        let header = PieceHeader {
            offset: h.offset + 500,
            ..*h
        };
        (header, s.slice(500..))
    };
    list.extend(list.clone());
    list.shuffle(&mut ChaCha8Rng::seed_from_u64(5));
    list.insert(list.len() / 2, half);
    let done: Vec<_> = list
        .into_iter()
        .filter_map(|(h, s)| receiver.on_piece(h, s).unwrap())
        .collect();
    assert_eq!(done.len(), 1, "the message comes once");
    assert_eq!(done[0].payload, pieces(7, 10_000, 10_000)[0].1);
    assert_eq!((receiver.held_bytes(), receiver.partial_messages()), (0, 0));

    let (header, slice) = pieces(8, 900, 1000).remove(0);
    let whole = receiver.on_piece(header, slice.clone()).unwrap().unwrap();
    assert_eq!(whole.payload.as_ptr(), slice.as_ptr(), "not copied");
    assert_eq!(receiver.on_piece(header, slice).unwrap(), None, "nor twice");
}

#[test]
fn the_limit_counts_the_whole_length_of_each_partial_message() {
    // One piece of each of two 6,000-byte messages: 2,000 bytes received, but the
    // second message's buffer would take the held total to 12,000.
    let mut receiver = Reassembly::new(10_000, 16);
    let (h, s) = pieces(1, 6_000, 1000).remove(0);
    assert_eq!(receiver.on_piece(h, s).unwrap(), None);
    let (h, s) = pieces(2, 6_000, 1000).remove(0);
    assert!(matches!(
        receiver.on_piece(h, s),
        Err(ReassemblyError::TooLarge { total: 6_000, .. })
    ));
    // Once the first is cancelled, the second fits.
    assert_eq!(receiver.on_control(ControlItem::Cancel(MessageId(1))), 1000);
    let (h, s) = pieces(2, 6_000, 1000).remove(0);
    assert_eq!(receiver.on_piece(h, s).unwrap(), None);
}

#[test]
fn a_length_past_the_machine_is_refused_not_an_abort() {
    // No limit to stop it: the allocator is asked, and says no.
    let mut receiver = Reassembly::new(u64::MAX, 16);
    let header = PieceHeader {
        message: MessageId(9),
        offset: 0,
        total: 1 << 62,
        priority: 0,
    };
    assert!(matches!(
        receiver.on_piece(header, Bytes::from(vec![1; 1000])),
        Err(ReassemblyError::NoMemory { total, .. }) if total == 1 << 62
    ));
    assert_eq!((receiver.held_bytes(), receiver.partial_messages()), (0, 0));
}
