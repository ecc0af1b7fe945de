//! How the SDK's own processes (the CLI, the worker) give large tensors back
//! to the system.
//!
//! glibc's malloc raises its mmap threshold after each large free (up to
//! 32 MiB), so the tensors of a large stage (a ViT-L/14 block's are 5-50 MiB)
//! then come from the heap and stay in the process once freed: peak RSS grows
//! stage after stage. A fixed threshold keeps every allocation of 1 MiB or
//! more in its own mapping, returned to the system when freed. (A library
//! leaves its host's allocator alone: the C library does not call this.)

/// Sets the allocator's policy; call it first thing in `main`.
pub fn return_large_frees() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets one of malloc's parameters (thread-safe in
    // glibc); a rejected value leaves the default, which is also correct.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}
