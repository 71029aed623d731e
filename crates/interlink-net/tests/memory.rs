//! `memory::return_large_buffers` in a process of its own (the allocator's settings are
//! per process): a large buffer allocated after a larger one was freed is still a
//! mapping of its own, which glibc's dynamic threshold would have served from a heap.
#![cfg(all(target_os = "linux", target_env = "gnu"))]
#![allow(unsafe_code, clippy::unwrap_used)] // test code: reads the allocator's counters

/// Blocks the allocator has mapped by themselves right now.
fn mapped_blocks() -> usize {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    unsafe { libc::mallinfo2() }.hblks
}

#[test]
fn a_large_buffer_is_mapped_by_itself_after_a_larger_one_was_freed() {
    interlink_net::memory::return_large_buffers();
    let big = vec![1u8; 4 << 20];
    std::hint::black_box(&big);
    drop(big);
    let before = mapped_blocks();
    let buffer = vec![1u8; 1 << 20];
    std::hint::black_box(&buffer);
    let during = mapped_blocks();
    drop(buffer);
    assert_eq!(
        during,
        before + 1,
        "a 1 MiB buffer after a freed 4 MiB one was served from a heap"
    );
}
