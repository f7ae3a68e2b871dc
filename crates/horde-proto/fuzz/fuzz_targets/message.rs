//! Arbitrary ADUs into the message receiver: each two-byte length prefix cuts one ADU
//! from the input, which is decoded (`message::codec::decode`) and given to a
//! `Reassembly` with a small limit. Nothing may panic; the bytes held never exceed the
//! limit; a message handed on is exactly its announced length; and a cancel of every
//! message leaves nothing held.

#![no_main]

use std::collections::HashSet;

use bytes::Bytes;
use horde_proto::message::codec::{self, Item};
use horde_proto::message::{ControlItem, Reassembly};
use libfuzzer_sys::fuzz_target;

const LIMIT: u64 = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let mut receiver = Reassembly::new(LIMIT, 64);
    let mut seen = HashSet::new();
    let mut rest = data;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let adu = Bytes::copy_from_slice(&rest[2..2 + len]);
        rest = &rest[2 + len..];
        match codec::decode(adu) {
            Ok(Item::Piece(header, slice)) => {
                seen.insert(header.message);
                if let Ok(Some(message)) = receiver.on_piece(header, slice) {
                    assert_eq!(message.id, header.message);
                    assert_eq!(message.payload.len() as u64, header.total);
                }
            }
            Ok(Item::Control(item)) => {
                receiver.on_control(item);
            }
            Err(_) => {}
        }
        assert!(receiver.held_bytes() <= LIMIT);
    }
    for id in seen {
        receiver.on_control(ControlItem::Cancel(id));
    }
    assert_eq!((receiver.held_bytes(), receiver.partial_messages()), (0, 0));
});
