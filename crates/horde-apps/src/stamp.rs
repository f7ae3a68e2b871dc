//! The application header `horde send` puts at the start of every ADU so that `horde
//! recv` can measure delay as an application would: the sender's wall-clock time when it
//! handed the ADU to Horde (unix-epoch microseconds) and the ADU's sequence number in its
//! stream, both 8-byte big-endian. The rest of the payload is zeros.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};

/// Bytes of the stamp; smaller ADUs are padded up to this size.
pub const STAMP_LEN: usize = 16;

/// Microseconds since the unix epoch on this host's wall clock.
pub fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// A payload of `size` bytes (at least [`STAMP_LEN`]) starting with the stamp.
pub fn payload(size: usize, seq: u64, sent_us: u64) -> Bytes {
    let mut b = BytesMut::with_capacity(size.max(STAMP_LEN));
    b.put_u64(sent_us);
    b.put_u64(seq);
    b.resize(size.max(STAMP_LEN), 0);
    b.freeze()
}

/// The (sequence, send time in unix µs) a payload starts with, if it is long enough.
pub fn read(payload: &[u8]) -> Option<(u64, u64)> {
    let sent = u64::from_be_bytes(payload.get(0..8)?.try_into().ok()?);
    let seq = u64::from_be_bytes(payload.get(8..16)?.try_into().ok()?);
    Some((seq, sent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip_and_short_adus_are_padded() {
        let p = payload(1200, 77, 1_700_000_000_123_456);
        assert_eq!(p.len(), 1200);
        assert_eq!(read(&p), Some((77, 1_700_000_000_123_456)));
        assert_eq!(payload(2, 1, 5).len(), STAMP_LEN);
        assert_eq!(read(&[0u8; 15]), None);
    }
}
