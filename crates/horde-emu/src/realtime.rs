//! Per-thread scheduling tweaks for timing precision.

/// Ask the kernel for exact timer expiry on this thread (the default slack is 50 µs).
pub(crate) fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only this thread.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        tracing::debug!(
            "PR_SET_TIMERSLACK failed: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Move this thread to `SCHED_FIFO` at `priority` (clamped to 1..=99). Returns false,
/// leaving the thread as it was, when the process lacks the privilege.
pub(crate) fn go_realtime(priority: i32) -> bool {
    let param = libc::sched_param {
        sched_priority: priority.clamp(1, 99),
    };
    // SAFETY: pid 0 is the calling thread; param is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        tracing::info!(
            "emulator thread stays SCHED_OTHER: {}",
            std::io::Error::last_os_error()
        );
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_request_reports_the_outcome() {
        let granted = std::thread::spawn(|| {
            tighten_timer_slack();
            let granted = go_realtime(5);
            // SAFETY: queries the calling thread's policy.
            let policy = unsafe { libc::sched_getscheduler(0) };
            (granted, policy)
        })
        .join()
        .unwrap();
        let (granted, policy) = granted;
        assert_eq!(granted, policy == libc::SCHED_FIFO);
    }
}
