//! Host memory standing in for device memory. Every allocation is recorded so
//! that a kernel call can be checked against it: a tensor that reaches outside
//! a live buffer is the host's bug, and the reference provider says so instead
//! of reading stray memory.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::sync::Mutex;
use vsdk_provider_kit::ProviderError;

/// Every buffer is at least this aligned, so any dtype can view it.
const MIN_ALIGN: usize = 64;

#[derive(Default)]
pub struct Allocations {
    live: Mutex<BTreeMap<usize, Layout>>,
}

impl Allocations {
    pub fn alloc(&self, size: u64, alignment: u64) -> Result<*mut u8, ProviderError> {
        if !alignment.is_power_of_two() && alignment != 0 {
            return Err(ProviderError::invalid(format!(
                "alignment {alignment} is not a power of two"
            )));
        }
        let layout = usize::try_from(size)
            .ok()
            .zip(usize::try_from(alignment).ok())
            .and_then(|(s, a)| Layout::from_size_align(s.max(1), a.max(MIN_ALIGN)).ok())
            .ok_or_else(|| ProviderError::out_of_memory(format!("cannot allocate {size} bytes")))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            return Err(ProviderError::out_of_memory(format!(
                "allocation of {size} bytes failed"
            )));
        }
        self.lock().insert(ptr as usize, layout);
        Ok(ptr)
    }

    pub fn free(&self, ptr: *mut u8) {
        if let Some(layout) = self.lock().remove(&(ptr as usize)) {
            // SAFETY: `ptr` was returned by `alloc` with this layout and is freed once
            // (it was just removed from the registry).
            unsafe { std::alloc::dealloc(ptr, layout) };
        }
    }

    /// Checks that `[ptr, ptr + len)` lies inside one live buffer.
    pub fn check(&self, ptr: *const u8, len: usize, what: &str) -> Result<(), ProviderError> {
        let addr = ptr as usize;
        let live = self.lock();
        let inside = live
            .range(..=addr)
            .next_back()
            .is_some_and(|(&start, layout)| {
                addr.checked_add(len)
                    .is_some_and(|end| end <= start + layout.size())
            });
        if inside {
            Ok(())
        } else {
            Err(ProviderError::invalid(format!(
                "{what}: {len} bytes at {addr:#x} are not inside a buffer allocated by this provider"
            )))
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, Layout>> {
        // A panic while holding the lock cannot leave the map inconsistent
        // (insert/remove are atomic), so a poisoned lock is still usable.
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Allocations {
    fn drop(&mut self) {
        for (ptr, layout) in std::mem::take(&mut *self.lock()) {
            // SAFETY: every entry is a live allocation made with its layout.
            unsafe { std::alloc::dealloc(ptr as *mut u8, layout) };
        }
    }
}
