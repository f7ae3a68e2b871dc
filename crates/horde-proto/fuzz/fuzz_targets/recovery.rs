//! The recovery frame decoder on arbitrary bytes: never panics, and every frame it
//! accepts encodes back to the same bytes. Accepted frames then go through the
//! receiver's decoder and reorder cache, which must not panic either.
#![no_main]

use std::time::Duration;

use bytes::Bytes;
use horde_proto::recovery::decoder::Decoder;
use horde_proto::recovery::header;
use horde_proto::recovery::reorder::ReorderCache;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut decoder = Decoder::default();
    let mut cache = ReorderCache::new(Duration::from_millis(50));
    let mut out = Vec::new();
    // Several frames per input: a length byte before each.
    let mut rest = data;
    let mut now = Duration::ZERO;
    while let Some((&len, tail)) = rest.split_first() {
        let len = usize::from(len).min(tail.len());
        let (frame, tail) = tail.split_at(len);
        rest = tail;
        now += Duration::from_millis(7);
        let bytes = Bytes::copy_from_slice(frame);
        let Ok(f) = header::decode(&bytes) else {
            continue;
        };
        assert_eq!(header::encode(&f), bytes, "re-encoding changed the frame");
        for (seq, p, _) in decoder.on_frame(now, f).new {
            cache.push(now, seq, p, &mut out);
        }
        cache.on_timeout(now, &mut out);
    }
});
