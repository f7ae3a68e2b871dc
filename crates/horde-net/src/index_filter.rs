//! A socket filter on the data sockets that drops, in the kernel, every datagram that can
//! belong to no live session or pending handshake, so that a flood of them never wakes the
//! driver: an empty or too short datagram, an undefined type, and a transport datagram,
//! response or cookie reply whose receiver index is not in use here. Initiations (types 5
//! and 1) pass: they belong to the handshake socket, and reach the data socket only where
//! there is none (the driver then gates them).
//!
//! The program is classic BPF (`SO_ATTACH_FILTER`), rebuilt with the indices in use
//! whenever they change: one comparison per index, so its size is bounded by
//! [`MAX_FILTERED_INDICES`]; with more indices than that, transport datagrams are not
//! filtered by index (the driver still drops them, counted as `WrongIndex`).

use std::io;
use std::os::fd::RawFd;

use horde_crypto::{
    COOKIE_REPLY_LEN, RESPONSE_LEN, TRANSPORT_OVERHEAD, TYPE_COOKIE_REPLY, TYPE_INITIATION,
    TYPE_LEGACY_INITIATION, TYPE_RESPONSE, TYPE_TRANSPORT,
};

/// Most indices the program compares; beyond, it lets every index through.
pub const MAX_FILTERED_INDICES: usize = 3000;

/// A socket filter on a UDP socket sees the datagram from its UDP header on.
const UDP_HEADER: u32 = 8;
/// Type byte and receiver index.
const PREFIX: u32 = 5;
/// What the program returns to keep the whole datagram.
const KEEP: u32 = u32::MAX;
/// Index comparisons per block; a conditional jump reaches at most 255 instructions on.
const BLOCK: usize = 200;

const LD_W_LEN: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_LEN) as u16;
const LD_B_ABS: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const LDX_IMM: u16 = (libc::BPF_LDX | libc::BPF_W | libc::BPF_IMM) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JGE_X: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_X) as u16;
const JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

fn op(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The program for a data socket, given the receiver indices in use (`None`: do not
/// filter by index). Jumps are relative to the next instruction.
pub(crate) fn program(indices: Option<&[u32]>) -> Vec<libc::sock_filter> {
    let payload = |offset: u32| UDP_HEADER + offset;
    let min_len = |len: usize| UDP_HEADER + len as u32;
    let mut p = vec![
        /* 0 */ op(LD_W_LEN, 0, 0, 0),
        /* 1 */ op(JGE_K, 1, 0, UDP_HEADER + PREFIX),
        /* 2 */ op(RET_K, 0, 0, 0), // empty, or no room for type and index
        /* 3 */ op(LD_B_ABS, 0, 0, payload(0)),
        /* 4 */ op(JEQ_K, 6, 0, u32::from(TYPE_INITIATION)), // -> 11
        /* 5 */ op(JEQ_K, 5, 0, u32::from(TYPE_LEGACY_INITIATION)), // -> 11
        /* 6 */ op(JEQ_K, 5, 0, u32::from(TYPE_TRANSPORT)), // -> 12
        /* 7 */ op(JEQ_K, 4, 0, u32::from(TYPE_TRANSPORT | 0x80)), // -> 12
        /* 8 */ op(JEQ_K, 5, 0, u32::from(TYPE_RESPONSE)), // -> 14
        /* 9 */ op(JEQ_K, 6, 0, u32::from(TYPE_COOKIE_REPLY)), // -> 16
        /* 10 */ op(RET_K, 0, 0, 0), // a type Horde does not define
        /* 11 */ op(RET_K, 0, 0, KEEP),
        /* 12 */ op(LDX_IMM, 0, 0, min_len(TRANSPORT_OVERHEAD)),
        /* 13 */ op(JA, 0, 0, 4), // -> 18
        /* 14 */ op(LDX_IMM, 0, 0, min_len(RESPONSE_LEN)),
        /* 15 */ op(JA, 0, 0, 2), // -> 18
        /* 16 */ op(LDX_IMM, 0, 0, min_len(COOKIE_REPLY_LEN)),
        /* 17 */ op(JA, 0, 0, 0), // -> 18
        /* 18 */ op(LD_W_LEN, 0, 0, 0),
        /* 19 */ op(JGE_X, 1, 0, 0), // -> 21
        /* 20 */ op(RET_K, 0, 0, 0), // too short for its type
    ];
    let Some(indices) = indices else {
        p.push(op(RET_K, 0, 0, KEEP));
        return p;
    };
    // The index is little-endian on the wire; a word load reads big-endian.
    p.push(op(LD_W_ABS, 0, 0, payload(1)));
    for block in indices.chunks(BLOCK) {
        let n = block.len();
        for (j, index) in block.iter().enumerate() {
            // Equal: jump past the rest of the block and its `ja` to the block's KEEP.
            p.push(op(JEQ_K, (n - j) as u8, 0, index.swap_bytes()));
        }
        p.push(op(JA, 0, 0, 1));
        p.push(op(RET_K, 0, 0, KEEP));
    }
    p.push(op(RET_K, 0, 0, 0)); // an index not in use here
    p
}

/// Attaches (or replaces) the data socket's filter for the indices in use.
pub(crate) fn attach(fd: RawFd, indices: &[u32]) -> io::Result<()> {
    let by_index = (indices.len() <= MAX_FILTERED_INDICES).then_some(indices);
    let mut program = program(by_index);
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    // SAFETY: the kernel copies the program during the call; `prog` points at it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            &prog as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Datagrams the kernel dropped at this socket: refused by its filter, or finding the
/// receive buffer full (`SK_MEMINFO_DROPS`).
pub(crate) fn kernel_drops(fd: RawFd) -> u64 {
    let mut info = [0u32; 16];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: `info` has room for `len` bytes; the kernel writes at most that.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            info.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    let slot = libc::SK_MEMINFO_DROPS as usize;
    if r != 0 || (len as usize) < (slot + 1) * 4 {
        return 0;
    }
    u64::from(info[slot])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    fn transport(index: u32, len: usize) -> Vec<u8> {
        let mut d = vec![0xA5; len];
        d[0] = TYPE_TRANSPORT;
        d[1..5].copy_from_slice(&index.to_le_bytes());
        d
    }

    /// Through a real socket: what passes is what can belong to an index in use.
    #[test]
    fn only_datagrams_for_indices_in_use_pass() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let live = [0x0102_0304u32, 77, u32::MAX];
        attach(rx.as_raw_fd(), &live).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        let mut phase_1 = transport(77, 40);
        phase_1[0] |= 0x80;
        let mut response = vec![TYPE_RESPONSE; RESPONSE_LEN];
        response[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut cookie = vec![TYPE_COOKIE_REPLY; COOKIE_REPLY_LEN];
        cookie[1..5].copy_from_slice(&0x0102_0304u32.to_le_bytes());
        let initiation = vec![TYPE_INITIATION; 141];
        let pass = [
            transport(0x0102_0304, 29),
            phase_1,
            response.clone(),
            cookie.clone(),
            initiation,
            vec![TYPE_LEGACY_INITIATION; 109],
        ];
        let mut short_response = response.clone();
        short_response.truncate(RESPONSE_LEN - 1);
        let mut stranger_cookie = cookie.clone();
        stranger_cookie[1] ^= 1;
        let drop = [
            vec![],
            vec![TYPE_TRANSPORT; 4],
            transport(0x0403_0201, 100), // the index with its bytes the other way round
            transport(78, 100),
            transport(77, 28),
            short_response,
            stranger_cookie,
            vec![9; 50],
            vec![0x85; 50],
        ];
        let before = kernel_drops(rx.as_raw_fd());
        for d in drop.iter().chain(pass.iter()) {
            tx.send_to(d, to).unwrap();
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        while let Ok((n, _)) = rx.recv_from(&mut buf) {
            got.push(buf[..n].to_vec());
        }
        assert_eq!(got, pass.to_vec());
        assert_eq!(kernel_drops(rx.as_raw_fd()) - before, drop.len() as u64);
    }

    #[test]
    fn many_indices_fit_and_too_many_are_not_filtered_by_index() {
        let many: Vec<u32> = (0..MAX_FILTERED_INDICES as u32).map(|i| i * 7919).collect();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        attach(rx.as_raw_fd(), &many).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        for d in [
            transport(1, 40),
            transport(7919 * 2999, 40),
            transport(7919 * 1234, 40),
        ] {
            tx.send_to(&d, to).unwrap();
        }
        let mut buf = [0u8; 256];
        let mut got = Vec::new();
        while rx.recv_from(&mut buf).is_ok() {
            got.push(u32::from_le_bytes(buf[1..5].try_into().unwrap()));
        }
        assert_eq!(got, vec![7919 * 2999, 7919 * 1234]);
        let too_many: Vec<u32> = (0..=MAX_FILTERED_INDICES as u32).collect();
        attach(rx.as_raw_fd(), &too_many).unwrap();
        tx.send_to(&transport(u32::MAX - 1, 40), to).unwrap();
        assert!(rx.recv_from(&mut buf).is_ok(), "not filtered by index");
    }
}
