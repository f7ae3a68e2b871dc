//! Who the process runs as, and signals to other processes.

use std::io;
use std::process::Child;

/// Whether the process runs as root (effective user id 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Send `signal` to the process `pid`.
pub fn kill(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill has no memory-safety preconditions.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Ctrl-C (SIGINT) to a child, so that it can end as it would at a terminal.
pub fn interrupt(child: &Child) -> io::Result<()> {
    kill(child.id() as libc::pid_t, libc::SIGINT)
}
