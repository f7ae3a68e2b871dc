//! Entering a network namespace.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// Move the calling thread (only it) into the network namespace `ns` (an open
/// `/run/netns/NAME`); sockets it makes afterwards live there. Needs `CAP_SYS_ADMIN`.
pub fn enter_netns(ns: &impl AsFd) -> io::Result<()> {
    // SAFETY: setns takes a descriptor that stays open for the call.
    if unsafe { libc::setns(ns.as_fd().as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
