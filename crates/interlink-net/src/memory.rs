//! How a node's process gives large buffers back to the system.
//!
//! A holder reads strangers' mailbox copies of up to 4 MiB, and a swarm of them keeps
//! several in memory at once (read, checked, merged). glibc serves an allocation of
//! 128 KiB or more with a mapping of its own, but each time it frees such a block it
//! raises that threshold to the block's size (its dynamic mmap threshold, up to
//! 32 MiB). After the first copies, the next ones come from the arenas' heaps, which
//! keep the memory after the free and fragment across the arenas of the node's task
//! and the copy checker's thread. The peak grows with the fragmentation, not with
//! what is live. Fixing the threshold keeps every large buffer a mapping, unmapped
//! when freed. In the `hostile-load` bench (docs/BENCHMARKS.md) it lowered the Sybil
//! cases' peak RSS above idle by 5–10 MiB. Small allocations (messages, receipts) are
//! not affected.

/// Allocations from this size up get a mapping of their own (glibc's default
/// threshold, held fixed).
pub const LARGE_BUFFER_BYTES: usize = 128 * 1024;

/// Makes the allocator map every allocation of [`LARGE_BUFFER_BYTES`] or more by
/// itself and unmap it when it is freed. Call it once, first thing in `main`. Where the
/// allocator is not glibc's, it does nothing.
pub fn return_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        #[allow(unsafe_code)]
        // SAFETY: `mallopt` only sets a tuning parameter of glibc's allocator; it takes
        // the allocator's own lock, and the value is a valid threshold (well under
        // glibc's 32 MiB maximum), so it cannot fail or corrupt anything.
        let set = unsafe {
            libc::mallopt(
                libc::M_MMAP_THRESHOLD,
                libc::c_int::try_from(LARGE_BUFFER_BYTES).unwrap_or(libc::c_int::MAX),
            )
        };
        if set != 1 {
            tracing::debug!("mallopt(M_MMAP_THRESHOLD) refused");
        }
    }
}
