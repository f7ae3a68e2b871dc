//! Ctrl-C as a flag the receiver polls, so that it can print its summary before it exits.

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether Ctrl-C has been caught by a live [`Guard`] (always `false` without one).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Catches SIGINT while alive; restores the previous disposition when dropped.
pub struct Guard {
    previous: libc::sigaction,
}

impl Guard {
    pub fn install() -> Result<Self> {
        INTERRUPTED.store(false, Ordering::SeqCst);
        // SAFETY: a zeroed sigaction is valid; the handler only stores to an atomic,
        // which is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGINT, &action, &mut previous) != 0 {
                anyhow::bail!("sigaction: {}", std::io::Error::last_os_error());
            }
            Ok(Self { previous })
        }
    }

    /// Whether Ctrl-C has been pressed since [`Guard::install`].
    pub fn interrupted(&self) -> bool {
        INTERRUPTED.load(Ordering::SeqCst)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // SAFETY: restores the disposition saved by `install`.
        unsafe {
            libc::sigaction(libc::SIGINT, &self.previous, std::ptr::null_mut());
        }
    }
}
