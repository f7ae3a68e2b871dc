//! XOR of unequal-length payloads: each is taken as zero-padded to the longest.

/// XOR `src` into `acc`, growing `acc` with zeros to `src`'s length first.
pub fn xor_into(acc: &mut Vec<u8>, src: &[u8]) {
    if acc.len() < src.len() {
        acc.resize(src.len(), 0);
    }
    for (a, s) in acc.iter_mut().zip(src) {
        *a ^= s;
    }
}

/// The coded payload and the XOR of the lengths of `parts`.
pub fn xor_all<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> (Vec<u8>, u16) {
    let mut acc = Vec::new();
    let mut len_xor = 0u16;
    for p in parts {
        xor_into(&mut acc, p);
        len_xor ^= p.len() as u16;
    }
    (acc, len_xor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xor_with_all_but_one_part_leaves_that_part() {
        let parts: [&[u8]; 3] = [b"hello", b"hi", b"a longer one"];
        let (coded, len_xor) = xor_all(parts);
        assert_eq!(coded.len(), 12);
        let mut acc = coded.clone();
        xor_into(&mut acc, parts[0]);
        xor_into(&mut acc, parts[2]);
        let len = len_xor ^ 5 ^ 12;
        assert_eq!(&acc[..usize::from(len)], b"hi");
        assert!(acc[usize::from(len)..].iter().all(|&b| b == 0));
    }
}
