//! Arbitrary bytes into `wire::decode`. Whatever decodes must re-encode to exactly the
//! same bytes (the format has one encoding per packet) and decode again to the same
//! packet; the cheap routing helpers must agree with the full decoder; ack ranges must
//! come out highest first, disjoint and well formed. Nothing may panic.

#![no_main]

use bytes::Bytes;
use horde_proto::wire::{self, Packet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let datagram = Bytes::copy_from_slice(data);
    let Ok(packet) = wire::decode(&datagram) else {
        return;
    };
    let mut out = Vec::new();
    wire::encode(&packet, &mut out);
    assert_eq!(out, data, "re-encoding {packet:?} changed the bytes");
    assert_eq!(wire::decode(&Bytes::from(out)).as_ref(), Ok(&packet));

    assert_eq!(wire::peek_conn(data), Some(packet.conn()));
    assert_eq!(wire::is_hello(data), matches!(packet, Packet::Hello { .. }));

    if let Packet::Ack(ack) = &packet {
        let mut below: Option<u64> = None;
        let mut n = 0;
        for (lo, hi) in ack.iter_ranges() {
            assert!(lo <= hi, "range {lo}..={hi} upside down");
            assert!(hi <= ack.largest);
            if let Some(prev_lo) = below {
                assert!(hi < prev_lo, "ranges overlap or ascend");
            }
            below = Some(lo);
            n += 1;
        }
        assert!(n <= ack.ranges.len() + 1);
    }
});
