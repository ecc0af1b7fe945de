//! Host memory standing in for device memory. Every allocation is recorded so
//! that a kernel call can be checked against it: a tensor that reaches outside
//! a live buffer is the host's bug, and the reference provider says so instead
//! of reading stray memory.
//!
//! Freed buffers are kept, up to [`CACHE_BYTES`] in all, for the next
//! allocation of the same layout (as GPU runtimes' caching allocators do): a
//! forward allocates the same sizes over and over, and a fresh large
//! allocation is fresh pages, a page fault for every 4 KiB it touches.
//! The ABI leaves a new buffer's contents unspecified.

use std::alloc::Layout;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use vsdk_provider_kit::ProviderError;

/// Every buffer is at least this aligned, so any dtype can view it.
const MIN_ALIGN: usize = 64;

/// The most freed memory kept for reuse: a transformer block's intermediates
/// at 224 × 224 (a few MiB at float32) fit, a model's weights do not.
const CACHE_BYTES: usize = 16 << 20;

#[derive(Default)]
pub struct Allocations {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    live: BTreeMap<usize, Layout>,
    /// Freed buffers by layout, and their total size.
    cached: HashMap<Layout, Vec<usize>>,
    cached_bytes: usize,
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
        let reused = {
            let mut state = self.lock();
            let p = state.cached.get_mut(&layout).and_then(Vec::pop);
            if p.is_some() {
                state.cached_bytes -= layout.size();
            }
            p
        };
        let ptr = match reused {
            Some(p) => p as *mut u8,
            // SAFETY: the layout has a non-zero size.
            None => unsafe { std::alloc::alloc(layout) },
        };
        if ptr.is_null() {
            return Err(ProviderError::out_of_memory(format!(
                "allocation of {size} bytes failed"
            )));
        }
        self.lock().live.insert(ptr as usize, layout);
        Ok(ptr)
    }

    pub fn free(&self, ptr: *mut u8) {
        let release = {
            let mut state = self.lock();
            let Some(layout) = state.live.remove(&(ptr as usize)) else {
                return;
            };
            if state.cached_bytes + layout.size() <= CACHE_BYTES {
                state.cached_bytes += layout.size();
                state.cached.entry(layout).or_default().push(ptr as usize);
                None
            } else {
                Some(layout)
            }
        };
        if let Some(layout) = release {
            // SAFETY: `ptr` was returned by `alloc` with this layout and is freed once
            // (it was just removed from the registry and was not cached).
            unsafe { std::alloc::dealloc(ptr, layout) };
        }
    }

    /// Checks that `[ptr, ptr + len)` lies inside one live buffer.
    pub fn check(&self, ptr: *const u8, len: usize, what: &str) -> Result<(), ProviderError> {
        let addr = ptr as usize;
        let state = self.lock();
        let inside = state
            .live
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

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps inconsistent
        // (no code that can panic runs between a removal and its insertion),
        // so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Allocations {
    fn drop(&mut self) {
        let state = std::mem::take(&mut *self.lock());
        let cached = state
            .cached
            .into_iter()
            .flat_map(|(layout, ptrs)| ptrs.into_iter().map(move |p| (p, layout)));
        for (ptr, layout) in state.live.into_iter().chain(cached) {
            // SAFETY: every entry is a live or cached allocation made with its
            // layout, and appears once.
            unsafe { std::alloc::dealloc(ptr as *mut u8, layout) };
        }
    }
}
