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
