//! Signal dispositions: Ctrl-C as a flag a run polls (so that it can print its summary
//! before it exits), SIGHUP as a request to reload, the signals that ask a process to
//! stop, and SIGPIPE.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether Ctrl-C has been caught by a live [`SigintGuard`] (always `false` without one).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Catches SIGINT while alive; restores the previous disposition when dropped.
pub struct SigintGuard {
    previous: libc::sigaction,
}

impl SigintGuard {
    /// Catch SIGINT from now on; the error is `sigaction`'s.
    pub fn install() -> io::Result<Self> {
        INTERRUPTED.store(false, Ordering::SeqCst);
        // SAFETY: a zeroed sigaction is valid; the handler only stores to an atomic,
        // which is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGINT, &action, &mut previous) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(Self { previous })
        }
    }

    /// Whether Ctrl-C has been pressed since [`SigintGuard::install`].
    pub fn interrupted(&self) -> bool {
        interrupted()
    }
}

impl Drop for SigintGuard {
    fn drop(&mut self) {
        // SAFETY: restores the disposition saved by `install`.
        unsafe {
            libc::sigaction(libc::SIGINT, &self.previous, std::ptr::null_mut());
        }
    }
}

static RELOAD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sighup(_: libc::c_int) {
    RELOAD.store(true, Ordering::SeqCst);
}

/// From now on SIGHUP asks for a reload ([`take_reload_request`]) instead of ending the
/// process; the error is `sigaction`'s.
pub fn catch_reload_signal() -> io::Result<()> {
    // SAFETY: a zeroed sigaction is valid; the handler only stores to an atomic, which
    // is async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sighup as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGHUP, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether SIGHUP came since the last call (after [`catch_reload_signal`]).
pub fn take_reload_request() -> bool {
    RELOAD.swap(false, Ordering::SeqCst)
}

/// The signal that asked the process to stop (0: none yet).
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop_signal(signal: libc::c_int) {
    STOP_SIGNAL.store(signal, Ordering::SeqCst);
}

/// From now on, SIGINT, SIGTERM and SIGHUP do not end the process: the last one that
/// came is kept for [`stop_signal`].
pub fn catch_stop_signals() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The last signal caught by [`catch_stop_signals`], if any.
pub fn stop_signal() -> Option<libc::c_int> {
    match STOP_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// Restore SIGPIPE's default action (the Rust runtime ignores it, so a write to a closed
/// pipe fails instead of ending the process).
pub fn default_sigpipe() {
    // SAFETY: installs the default disposition of one signal; no handler runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
