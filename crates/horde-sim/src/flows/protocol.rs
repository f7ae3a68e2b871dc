//! The flow protocol, spoken the same way by the simulated hosts (over smoltcp) and by
//! `horde flow client --workload` / its server (over kernel TCP).
//!
//! A connection carries one or more exchanges, one after the other. In each, the client
//! sends a request of `up` bytes that starts with a [`RequestHeader`] and is padded to
//! `up`, and the server, once it has read the whole request, answers with `down` bytes.
//! The client closes the connection after its last exchange.

/// Bytes of a [`RequestHeader`] on the wire; a request is never shorter.
pub const HEADER_LEN: usize = 24;

/// What every request starts with (big-endian on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    /// The flow the request belongs to (lets the server attribute its counters).
    pub flow: u32,
    /// Which exchange of the flow this is, from 0.
    pub exchange: u32,
    /// Size of the whole request, header included (at least [`HEADER_LEN`]).
    pub up: u64,
    /// Size of the answer the client wants.
    pub down: u64,
}

/// Why a request header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("request of {0} bytes is shorter than its {HEADER_LEN}-byte header")]
    TooShort(u64),
}

impl RequestHeader {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&self.flow.to_be_bytes());
        b[4..8].copy_from_slice(&self.exchange.to_be_bytes());
        b[8..16].copy_from_slice(&self.up.to_be_bytes());
        b[16..24].copy_from_slice(&self.down.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Self, HeaderError> {
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let h = RequestHeader {
            flow: u32_at(0),
            exchange: u32_at(4),
            up: u64_at(8),
            down: u64_at(16),
        };
        if h.up < HEADER_LEN as u64 {
            return Err(HeaderError::TooShort(h.up));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_rejects_short_requests() {
        let h = RequestHeader {
            flow: 7,
            exchange: 3,
            up: 200,
            down: 1 << 40,
        };
        assert_eq!(RequestHeader::decode(&h.encode()), Ok(h));
        let short = RequestHeader { up: 23, ..h };
        assert_eq!(
            RequestHeader::decode(&short.encode()),
            Err(HeaderError::TooShort(23))
        );
    }
}
