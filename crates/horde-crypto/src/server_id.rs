//! Server ids carried in session indices, so that a stateless UDP load balancer sends all
//! of a session's channels to the server that holds it (`docs/load-balancing.md`).
//!
//! A server configured with an id of `len` bytes (1 or 2) draws its session indices with
//! the id in their first `len` bytes on the wire, the bytes right after the type byte.
//! Every transport datagram a client sends names the server's index there, whichever
//! channel (source address) it comes from. An initiation names the client's own index
//! there: a fresh client's is random, so fresh sessions spread evenly, and a client that
//! dials again copies the low two bytes of the index its last server gave it, so it
//! returns to that server.

use std::fmt;
use std::str::FromStr;

use rand::RngCore;
use thiserror::Error;

use crate::packet::{TYPE_INITIATION, TYPE_TRANSPORT};
use crate::KEY_PHASE_BIT;

/// Offset of the index in every datagram: right after the type byte.
pub const INDEX_OFFSET: usize = 1;
/// Bytes of an index a client copies from its last server's index when it dials again:
/// the longest server id there is.
const STICKY_MASK: u32 = 0xFFFF;

/// A server's id and its length in bytes, as the load balancer is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerId {
    id: u16,
    len: u8,
}

/// A server id that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ServerIdError {
    /// Only 1- and 2-byte ids exist.
    #[error("a server id is 1 or 2 bytes long, not {0}")]
    Length(u8),
    /// The id needs more bytes than configured.
    #[error("server id {id} does not fit in {len} byte(s)")]
    TooLarge {
        /// The id asked for.
        id: u64,
        /// Its configured length.
        len: u8,
    },
    /// Not `ID/LEN`.
    #[error("a server id is written ID/BYTES, e.g. 7/1 or 300/2, not {0:?}")]
    Syntax(String),
}

impl ServerId {
    /// Server `id` in an index prefix of `len` bytes.
    pub fn new(id: u64, len: u8) -> Result<Self, ServerIdError> {
        if !(1..=2).contains(&len) {
            return Err(ServerIdError::Length(len));
        }
        if id >= 1 << (8 * u32::from(len)) {
            return Err(ServerIdError::TooLarge { id, len });
        }
        Ok(Self { id: id as u16, len })
    }

    /// The id.
    pub fn id(self) -> u16 {
        self.id
    }

    /// How many bytes of the index it takes.
    pub fn bytes(self) -> u8 {
        self.len
    }

    /// Draws a session index that carries this id and for which `in_use` is false.
    pub fn draw_index<R: RngCore + ?Sized>(self, rng: &mut R, in_use: impl Fn(u32) -> bool) -> u32 {
        let mask = id_mask(self.len);
        loop {
            let index = (rng.next_u32() & !mask) | u32::from(self.id);
            if !in_use(index) {
                return index;
            }
        }
    }
}

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.id, self.len)
    }
}

impl FromStr for ServerId {
    type Err = ServerIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let syntax = || ServerIdError::Syntax(s.to_string());
        let (id, len) = s.split_once('/').ok_or_else(syntax)?;
        let id = id.trim().parse().map_err(|_| syntax())?;
        let len = len.trim().parse().map_err(|_| syntax())?;
        Self::new(id, len)
    }
}

fn id_mask(len: u8) -> u32 {
    (1u32 << (8 * u32::from(len))) - 1
}

/// The server id of `len` bytes that `index` carries.
pub fn id_of_index(index: u32, len: u8) -> u16 {
    (index & id_mask(len.clamp(1, 2))) as u16
}

/// What a load balancer configured with ids of `len` bytes reads from a datagram on its
/// way to the servers: the id in a transport datagram's receiver index or in an
/// initiation's sender index. `None` for anything else (responses and cookie replies go
/// to clients) and for datagrams too short to hold an index; the balancer may hash those
/// on their addresses, and a server drops them anyway.
pub fn routed_id(datagram: &[u8], len: u8) -> Option<u16> {
    let kind = *datagram.first()?;
    if kind != TYPE_INITIATION && kind & !KEY_PHASE_BIT != TYPE_TRANSPORT {
        return None;
    }
    let bytes = datagram.get(INDEX_OFFSET..INDEX_OFFSET + 4)?;
    let index = u32::from_le_bytes(bytes.try_into().ok()?);
    Some(id_of_index(index, len))
}

/// The index a client dials again with after a session whose server index was
/// `server_index`: that index's low two bytes (the server id, however long the balancer
/// takes it to be), random above, and not `in_use`.
pub fn redial_index<R: RngCore + ?Sized>(
    rng: &mut R,
    server_index: u32,
    in_use: impl Fn(u32) -> bool,
) -> u32 {
    loop {
        let index = (rng.next_u32() & !STICKY_MASK) | (server_index & STICKY_MASK);
        if !in_use(index) {
            return index;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn transport(index: u32, phase: u8) -> Vec<u8> {
        let mut d = vec![TYPE_TRANSPORT | phase];
        d.extend_from_slice(&index.to_le_bytes());
        d.extend_from_slice(&[0; 8 + 16]);
        d
    }

    #[test]
    fn ids_are_checked_against_their_length() {
        assert!(ServerId::new(255, 1).is_ok());
        assert_eq!(
            ServerId::new(256, 1),
            Err(ServerIdError::TooLarge { id: 256, len: 1 })
        );
        assert!(ServerId::new(65_535, 2).is_ok());
        assert_eq!(ServerId::new(1, 3), Err(ServerIdError::Length(3)));
        assert_eq!(ServerId::new(1, 0), Err(ServerIdError::Length(0)));
        assert_eq!("300/2".parse(), ServerId::new(300, 2));
        assert_eq!(" 7 / 1".parse(), ServerId::new(7, 1));
        for bad in ["7", "x/1", "7/", "-1/1", "7/1/1"] {
            assert!(
                matches!(bad.parse::<ServerId>(), Err(ServerIdError::Syntax(_))),
                "{bad}"
            );
        }
        assert_eq!(ServerId::new(300, 2).unwrap().to_string(), "300/2");
    }

    #[test]
    fn drawn_indices_carry_the_id_on_the_wire_and_vary_above_it() {
        let mut rng = StdRng::seed_from_u64(9);
        for (id, len) in [(0, 1), (0xAB, 1), (0x1234, 2), (0xFFFF, 2)] {
            let sid = ServerId::new(id, len).unwrap();
            let mut seen = std::collections::HashSet::new();
            for _ in 0..64 {
                let index = sid.draw_index(&mut rng, |_| false);
                let wire = transport(index, 0);
                assert_eq!(routed_id(&wire, len), Some(id as u16));
                assert_eq!(
                    &wire[1..1 + len as usize],
                    &(id as u16).to_le_bytes()[..len as usize]
                );
                seen.insert(index);
            }
            assert!(seen.len() > 60, "indices must stay random above the id");
        }
    }

    #[test]
    fn drawing_skips_indices_in_use() {
        let sid = ServerId::new(5, 1).unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        let first = sid.draw_index(&mut rng, |_| false);
        let mut rng = StdRng::seed_from_u64(1);
        let second = sid.draw_index(&mut rng, |i| i == first);
        assert_ne!(first, second);
        assert_eq!(id_of_index(second, 1), 5);
    }

    #[test]
    fn the_balancer_reads_initiations_and_both_key_phases_only() {
        let index = ServerId::new(0x0102, 2)
            .unwrap()
            .draw_index(&mut StdRng::seed_from_u64(3), |_| false);
        assert_eq!(routed_id(&transport(index, 0), 2), Some(0x0102));
        assert_eq!(routed_id(&transport(index, KEY_PHASE_BIT), 2), Some(0x0102));
        assert_eq!(routed_id(&transport(index, 0), 1), Some(0x02));
        let mut initiation = transport(index, 0);
        initiation[0] = TYPE_INITIATION;
        assert_eq!(routed_id(&initiation, 2), Some(0x0102));
        for other in [2u8, 4, 1, 0, 0xFF] {
            let mut d = transport(index, 0);
            d[0] = other;
            assert_eq!(routed_id(&d, 2), None, "type {other}");
        }
        assert_eq!(routed_id(&[], 1), None);
        assert_eq!(routed_id(&[TYPE_TRANSPORT, 1, 2, 3], 1), None);
    }

    #[test]
    fn a_redial_returns_to_the_same_server_for_either_id_length() {
        let mut rng = StdRng::seed_from_u64(4);
        for len in [1, 2] {
            let server = ServerId::new(200, len).unwrap();
            let server_index = server.draw_index(&mut rng, |_| false);
            let again = redial_index(&mut rng, server_index, |_| false);
            let mut initiation = transport(again, 0);
            initiation[0] = TYPE_INITIATION;
            assert_eq!(routed_id(&initiation, len), Some(200));
            assert_ne!(again, server_index, "the client's index is its own");
        }
    }
}
