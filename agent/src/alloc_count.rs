//! A counting global allocator for the `bench` subcommands' allocation figures.
//!
//! Off until a bench calls [`enable`]: until then each allocation pays one well-predicted
//! relaxed load, so the timed paths (and the eager baselines' many allocations) are not taxed.
//! Once enabled it counts every allocation of the process in one atomic; the benches read it
//! from their only running thread. (A thread-local counter is not usable here: in this binary
//! the thread-local access itself can allocate, which recursed into the allocator.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub struct Counting;

static ENABLED: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);

#[inline]
fn count() {
    if ENABLED.load(Ordering::Relaxed) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Starts counting (for the whole process, from now on).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Allocations (including reallocations) counted so far.
pub fn allocs() -> u64 {
    ALLOCS.load(Ordering::Relaxed)
}

// SAFETY: every method forwards to `System` unchanged; the counter has no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }
    // SAFETY: the caller upholds GlobalAlloc::dealloc's contract; we forward it to System.
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    // SAFETY: the caller upholds GlobalAlloc::alloc_zeroed's contract; we forward it to System.
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    // SAFETY: the caller upholds GlobalAlloc::realloc's contract; we forward it to System.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as for `dealloc`, and the caller upholds `realloc`'s size rules.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
