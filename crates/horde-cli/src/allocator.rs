//! The C allocator's settings for long-running processes.

/// Blocks from 128 KiB up always get a mapping of their own, given back to the system
/// when freed. By default glibc raises this threshold every time such a block is freed
/// (up to 32 MiB); blocks of that size then come from the heap, whose free middle it
/// keeps. A sender's loss-recovery buffers, grown in an outage and shrunk after it, then
/// stayed resident, and its memory crept up outage after outage (`docs/results.md`,
/// "Soak"). Setting the threshold turns the adjustment off.
pub fn keep_large_blocks_mapped() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it is called before any thread
    // starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// How long a server's accepting must pause before the free memory of the burst is
/// given back.
const BURST_QUIET: std::time::Duration = std::time::Duration::from_millis(500);

/// Give the allocator's free memory back to the system once a burst of accepted
/// connections is over (no accept for [`BURST_QUIET`]). A burst of handshakes (a fleet
/// connecting, or coming back after a restart) leaves the heap with free space between
/// the connections' live blocks, which glibc keeps resident until it is trimmed.
/// `accepted` counts the connections accepted so far.
pub fn trim_after_bursts(
    accepted: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    use std::sync::atomic::Ordering;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(BURST_QUIET);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (mut seen, mut trimmed) = (0, 0);
        loop {
            tick.tick().await;
            let now = accepted.load(Ordering::Relaxed);
            if now == seen && now != trimmed {
                give_back_free_memory();
                trimmed = now;
            }
            seen = now;
        }
    })
}

/// Return the free pages of every heap to the system.
fn give_back_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own heaps.
    unsafe {
        libc::malloc_trim(0);
    }
}
