//! How the SDK's own processes (the CLI, the worker) give freed tensors back
//! to the system.
//!
//! glibc's malloc raises its mmap threshold after each large free (up to
//! 32 MiB), so the tensors of a large stage (a ViT-L/14 block's are 5-50 MiB)
//! then come from the heap and stay in the process once freed: peak RSS grows
//! stage after stage. Trimming the heap when a stage (or a worker request)
//! is done returns those pages. (A fixed 1 MiB threshold did the same at the
//! price of a page fault per page of every large allocation: +50 % system
//! time on dinov2-vits14.) A library leaves its host's allocator alone: the C
//! library does not call this.

/// Returns the heap's free pages to the system; call it between units of
/// work (a stage, a worker request), not inside one, and only in the SDK's
/// own processes (`RunOptions::return_freed_memory`, the worker).
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of malloc's own arenas
    // (thread-safe in glibc); its result (whether any was released) is
    // advisory.
    unsafe {
        libc::malloc_trim(0);
    }
}
