//! The block code: Reed-Solomon over GF(2^16) (`reed-solomon-simd`) across a block of
//! data ADUs. Each ADU becomes one shard: its 2-byte length, its payload, zero padding
//! to the block's shard size (even, as the encoder wants).

use std::collections::BTreeMap;

use bytes::Bytes;

fn shard_size(max_len: usize) -> usize {
    (max_len + 2).next_multiple_of(2)
}

fn to_shard(payload: &[u8], size: usize) -> Vec<u8> {
    let mut s = Vec::with_capacity(size);
    s.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    s.extend_from_slice(payload);
    s.resize(size, 0);
    s
}

fn from_shard(shard: &[u8]) -> Option<Bytes> {
    let len = usize::from(u16::from_be_bytes([*shard.first()?, *shard.get(1)?]));
    shard.get(2..2 + len).map(Bytes::copy_from_slice)
}

/// All `parity` recovery shards of a block of `payloads`.
pub fn encode(payloads: &[&[u8]], parity: usize) -> Option<Vec<Vec<u8>>> {
    let size = shard_size(payloads.iter().map(|p| p.len()).max()?);
    let shards = payloads.iter().map(|p| to_shard(p, size));
    reed_solomon_simd::encode(payloads.len(), parity, shards).ok()
}

/// The missing data ADUs of the block of `data` from `first`, given the present ones
/// (`(index in block, payload)`) and the parity shards by index. `None` when the pieces
/// are inconsistent (a foreign or corrupt shard) or too few.
pub fn decode(
    first: u64,
    data: u8,
    parity: u8,
    present: &[(usize, &Bytes)],
    shards: &BTreeMap<u8, Bytes>,
) -> Option<Vec<(u64, Bytes)>> {
    let size = shards.values().next()?.len();
    if present.iter().any(|(_, p)| p.len() + 2 > size) {
        return None;
    }
    let originals: Vec<(usize, Vec<u8>)> = present
        .iter()
        .map(|(i, p)| (*i, to_shard(p, size)))
        .collect();
    let restored = reed_solomon_simd::decode(
        usize::from(data),
        usize::from(parity),
        originals.iter().map(|(i, s)| (*i, s)),
        shards.iter().map(|(i, s)| (usize::from(*i), s)),
    )
    .ok()?;
    restored
        .into_iter()
        .map(|(i, s)| Some((first + i as u64, from_shard(&s)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_parity_count_of_losses_is_recovered() {
        let payloads: Vec<Bytes> = (0..8u8)
            .map(|i| Bytes::from(vec![i; 10 + usize::from(i) * 13]))
            .collect();
        let refs: Vec<&[u8]> = payloads.iter().map(|p| &p[..]).collect();
        let parity = encode(&refs, 3).unwrap();
        // Lose 1, 4 and 6; keep parity 0 and 2, and 1 (any three do).
        let present: Vec<(usize, &Bytes)> = payloads
            .iter()
            .enumerate()
            .filter(|(i, _)| ![1, 4, 6].contains(i))
            .collect();
        let shards: BTreeMap<u8, Bytes> = parity
            .into_iter()
            .enumerate()
            .map(|(i, s)| (i as u8, s.into()))
            .collect();
        let mut got = decode(100, 8, 3, &present, &shards).unwrap();
        got.sort_by_key(|(s, _)| *s);
        assert_eq!(
            got,
            vec![
                (101, payloads[1].clone()),
                (104, payloads[4].clone()),
                (106, payloads[6].clone())
            ]
        );
        let mut two = shards.clone();
        two.remove(&1);
        assert!(
            decode(100, 8, 3, &present, &two).is_none(),
            "too few shards"
        );
    }
}
