//! The device buffers an instance handed out, by address: every tensor of a
//! kernel call and every copy is checked to lie inside one of them before the
//! device sees the address. A stray address on a GPU is a fault (or silent
//! corruption) far from its cause; here it is an error naming the call.

use crate::backend::DevicePtr;
use std::collections::BTreeMap;
use std::sync::Mutex;
use vsdk_provider_kit::ProviderError;

#[derive(Default)]
pub struct Allocations {
    /// Start address to size in bytes.
    live: Mutex<BTreeMap<DevicePtr, usize>>,
}

impl Allocations {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<DevicePtr, usize>> {
        // Every update is a single insert or remove: a panic elsewhere cannot
        // leave the map half-changed, so a poisoned lock is still usable.
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn insert(&self, ptr: DevicePtr, bytes: usize) {
        self.lock().insert(ptr, bytes);
    }

    /// Whether `ptr` was live (and is now forgotten).
    pub fn remove(&self, ptr: DevicePtr) -> bool {
        self.lock().remove(&ptr).is_some()
    }

    /// Forgets every buffer, returning their addresses.
    pub fn drain(&self) -> Vec<DevicePtr> {
        std::mem::take(&mut *self.lock()).into_keys().collect()
    }

    /// Checks that `[ptr, ptr + len)` lies inside one live buffer.
    pub fn check(&self, ptr: DevicePtr, len: usize, what: &str) -> Result<(), ProviderError> {
        let live = self.lock();
        let inside = live
            .range(..=ptr)
            .next_back()
            .is_some_and(|(&start, &size)| {
                ptr.checked_add(len as u64)
                    .is_some_and(|end| end <= start + size as u64)
            });
        if inside {
            Ok(())
        } else {
            Err(ProviderError::invalid(format!(
                "{what}: {len} bytes at {ptr:#x} are not inside a buffer allocated by this provider"
            )))
        }
    }
}
