//! Float32 working buffers of the 16-bit operators, kept per thread between
//! calls: a forward calls the same shapes over and over, and a fresh
//! megabyte-sized allocation is a fresh mapping, a page fault for every
//! 4 KiB it touches and the kernel zeroing each page.

use std::cell::RefCell;

/// The most float32 elements kept per thread (16 MiB: a DINOv2 operator at
/// 224 × 224 works on under 2 Mi elements).
const KEEP_ELEMENTS: usize = 4 << 20;

thread_local! {
    static POOL: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of at least `n` initialised elements (their values are left over
/// from earlier calls: callers write before they read).
pub fn take(n: usize) -> Vec<f32> {
    let mut v = POOL
        .with_borrow_mut(|pool| {
            // The smallest kept buffer that is large enough, else the largest.
            let best = (0..pool.len())
                .filter(|&i| pool[i].len() >= n)
                .min_by_key(|&i| pool[i].len())
                .or_else(|| (0..pool.len()).max_by_key(|&i| pool[i].len()));
            best.map(|i| pool.swap_remove(i))
        })
        .unwrap_or_default();
    if v.len() < n {
        // Grown from empty: nothing stale is copied.
        v.clear();
        v.resize(n, 0.0);
    }
    v
}

/// Returns a buffer for later calls, unless the thread already keeps enough.
pub fn give(v: Vec<f32>) {
    POOL.with_borrow_mut(|pool| {
        let kept: usize = pool.iter().map(Vec::capacity).sum();
        if kept + v.capacity() <= KEEP_ELEMENTS {
            pool.push(v);
        }
    })
}
