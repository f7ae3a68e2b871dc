//! TCP and MPTCP sockets: making one, choosing its congestion control, and reading the
//! kernel's `tcp_info` of it (of each subflow for MPTCP).

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use socket2::{Domain, Protocol, Socket, Type};

/// `IPPROTO_MPTCP` (not in every libc).
const IPPROTO_MPTCP: i32 = 262;
/// `SOL_MPTCP` and `MPTCP_TCPINFO`: per-subflow `tcp_info` of an MPTCP socket.
const SOL_MPTCP: i32 = 284;
const MPTCP_TCPINFO: i32 = 2;
/// `TCP_IS_MPTCP` (Linux 5.16): 1 on a connection that speaks MPTCP, 0 on plain TCP and
/// on an MPTCP socket that fell back to TCP (its peer did not offer MPTCP).
const TCP_IS_MPTCP: i32 = 43;
/// The most subflows whose `tcp_info` is read.
const MAX_SUBFLOWS: usize = 8;

/// A stream socket for `addr`'s family: MPTCP if `mptcp`, else TCP.
pub fn stream_socket(addr: SocketAddr, mptcp: bool) -> io::Result<Socket> {
    let protocol = if mptcp {
        Protocol::from(IPPROTO_MPTCP)
    } else {
        Protocol::TCP
    };
    Socket::new(Domain::for_address(addr), Type::STREAM, Some(protocol))
}

/// Set a TCP socket's congestion control (`TCP_CONGESTION`) to `name`; the error names
/// it and where the available ones are listed.
pub fn set_tcp_congestion(socket: &Socket, name: &str) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: passes a byte string and its length for the duration of the call.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!(
                "TCP_CONGESTION {name}: {e} (see /proc/sys/net/ipv4/tcp_available_congestion_control)"
            ),
        ));
    }
    Ok(())
}

/// A TCP socket's congestion control (`TCP_CONGESTION`).
pub fn tcp_congestion(socket: &Socket) -> io::Result<String> {
    use std::os::fd::AsRawFd;
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf and len describe a writable buffer for the duration of the call.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let name = &buf[..len as usize];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// Whether the connected stream socket `fd` speaks MPTCP: an MPTCP listener also accepts
/// plain TCP clients, and their connections fall back to TCP.
pub fn is_mptcp(fd: RawFd) -> io::Result<bool> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: value and len describe a writable int for the duration of the call.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            TCP_IS_MPTCP,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value == 1)
}

/// The kernel's `tcp_info` of the TCP socket `fd`.
pub fn tcp_info(fd: RawFd) -> io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain old data; all-zero is valid.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: info and len describe a writable buffer for the duration of the call.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

/// `struct mptcp_subflow_data` followed by one `tcp_info` per subflow.
#[repr(C)]
struct SubflowInfos {
    size_subflow_data: u32,
    num_subflows: u32,
    size_kernel: u32,
    size_user: u32,
    infos: [libc::tcp_info; MAX_SUBFLOWS],
}

/// Every subflow's `tcp_info` of the MPTCP socket `fd` (at most 8; an error for a TCP
/// socket).
pub fn mptcp_subflow_infos(fd: RawFd) -> io::Result<Vec<libc::tcp_info>> {
    // SAFETY: plain old data; all-zero is valid.
    let mut data: SubflowInfos = unsafe { std::mem::zeroed() };
    data.size_subflow_data = 16;
    data.size_user = std::mem::size_of::<libc::tcp_info>() as u32;
    let mut len = std::mem::size_of::<SubflowInfos>() as libc::socklen_t;
    // SAFETY: data and len describe a writable buffer for the duration of the call.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            SOL_MPTCP,
            MPTCP_TCPINFO,
            (&mut data as *mut SubflowInfos).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let n = (data.num_subflows as usize).min(data.infos.len());
    Ok(data.infos[..n].to_vec())
}
