//! A counting global allocator, shared by every allocation test and bench figure in hotpath.
//!
//! [`Counting`] forwards every call to [`System`] unchanged and, on the way, counts
//! allocations (`alloc`, `alloc_zeroed` and `realloc`) in two independent places:
//!
//! - **per thread** ([`thread`]): a `const`-initialised thread-local with no destructor, so
//!   touching it never allocates, never registers a destructor and cannot recurse into the
//!   allocator. Only the allocations made by the calling thread while the closure runs are
//!   counted. This is what tests should use: libtest's main thread (and any helper thread)
//!   allocates at moments we do not control, and a process-wide counter picks those up now
//!   and then (that made a CI run fail once).
//! - **process-wide** ([`process`], [`enable_process`] / [`process_allocs`]): every thread,
//!   gated by one relaxed load so the counter costs nothing measurable until enabled. Use it
//!   only where no unrelated thread runs (a bench subcommand's single thread, or to include a
//!   client's reader thread in a single-test binary after warm-up). A filter
//!   ([`set_process_filter`]) narrows it to a class of threads, e.g. the server's ring threads.
//!
//! ```text
//! #[global_allocator]
//! static A: alloc_counter::Counting = alloc_counter::Counting;
//!
//! let (_, c) = alloc_counter::thread(|| hot_path());
//! assert_eq!(c.allocs, 0);
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// What was counted during one measured section.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Allocations, `alloc_zeroed` and `realloc` calls.
    pub allocs: u64,
    /// Bytes requested by them (a `realloc` counts its new size).
    pub bytes: u64,
    /// The largest single request.
    pub largest: usize,
}

/// The allocator: install it with `#[global_allocator]` in a test or binary.
pub struct Counting;

struct Local {
    on: Cell<bool>,
    allocs: Cell<u64>,
    bytes: Cell<u64>,
    largest: Cell<usize>,
}

thread_local! {
    // const-initialised and free of Drop: access is a plain TLS offset, no lazy init, no
    // destructor registration, hence no allocation inside the allocator.
    static LOCAL: Local = const {
        Local {
            on: Cell::new(false),
            allocs: Cell::new(0),
            bytes: Cell::new(0),
            largest: Cell::new(0),
        }
    };
}

static PROCESS_ON: AtomicBool = AtomicBool::new(false);
static P_ALLOCS: AtomicU64 = AtomicU64::new(0);
static P_BYTES: AtomicU64 = AtomicU64::new(0);
static P_LARGEST: AtomicUsize = AtomicUsize::new(0);
/// A `fn() -> bool` deciding whether the current thread counts process-wide; null = all.
static P_FILTER: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

#[inline]
fn process_counts_this_thread() -> bool {
    let f = P_FILTER.load(Ordering::Relaxed);
    if f.is_null() {
        return true;
    }
    // SAFETY: the only non-null value ever stored is a `fn() -> bool` cast to a pointer by
    // `set_process_filter`; function pointers and data pointers have the same size here.
    let f: fn() -> bool = unsafe { std::mem::transmute::<*mut (), fn() -> bool>(f) };
    f()
}

#[inline]
fn record(size: usize) {
    if PROCESS_ON.load(Ordering::Relaxed) && process_counts_this_thread() {
        P_ALLOCS.fetch_add(1, Ordering::Relaxed);
        P_BYTES.fetch_add(size as u64, Ordering::Relaxed);
        P_LARGEST.fetch_max(size, Ordering::Relaxed);
    }
    // try_with: a thread being torn down may still allocate after its locals are gone.
    let _ = LOCAL.try_with(|l| {
        if l.on.get() {
            l.allocs.set(l.allocs.get() + 1);
            l.bytes.set(l.bytes.get() + size as u64);
            if size > l.largest.get() {
                l.largest.set(size);
            }
        }
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// bookkeeping only touches atomics and a const thread-local, never the memory handed out.
unsafe impl GlobalAlloc for Counting {
    #[inline]
    // SAFETY: the caller's `GlobalAlloc::alloc` contract is passed on to `System` unchanged.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }
    #[inline]
    // SAFETY: the caller's `GlobalAlloc::alloc_zeroed` contract is passed on to `System` unchanged.
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    #[inline]
    // SAFETY: the caller's `GlobalAlloc::dealloc` contract is passed on to `System` unchanged.
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` (through this allocator) with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    #[inline]
    // SAFETY: the caller's `GlobalAlloc::realloc` contract is passed on to `System` unchanged.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        // SAFETY: as for `dealloc`, and the caller upholds `realloc`'s size rules.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns what the **calling thread** allocated meanwhile. Nests: an inner
/// call's allocations are also the outer call's.
pub fn thread<R>(f: impl FnOnce() -> R) -> (R, Counts) {
    let (was_on, a0, b0, l0) = LOCAL.with(|l| {
        let s = (l.on.get(), l.allocs.get(), l.bytes.get(), l.largest.get());
        l.on.set(true);
        l.largest.set(0);
        s
    });
    let r = f();
    let c = LOCAL.with(|l| {
        let c = Counts {
            allocs: l.allocs.get() - a0,
            bytes: l.bytes.get() - b0,
            largest: l.largest.get(),
        };
        l.on.set(was_on);
        l.largest.set(l0.max(c.largest));
        c
    });
    (r, c)
}

/// Starts the process-wide counter (every thread, from now on, until [`disable_process`]).
pub fn enable_process() {
    PROCESS_ON.store(true, Ordering::SeqCst);
}

/// Stops the process-wide counter (the totals are kept).
pub fn disable_process() {
    PROCESS_ON.store(false, Ordering::SeqCst);
}

/// Process-wide allocations counted so far (see [`enable_process`]).
pub fn process_allocs() -> u64 {
    P_ALLOCS.load(Ordering::SeqCst)
}

/// Runs `f` with the process-wide counter on and returns what **every thread** allocated
/// meanwhile. `largest` is the largest request seen since the counter was first enabled.
/// Only meaningful where no unrelated thread runs at the same time.
pub fn process<R>(f: impl FnOnce() -> R) -> (R, Counts) {
    let a0 = P_ALLOCS.load(Ordering::SeqCst);
    let b0 = P_BYTES.load(Ordering::SeqCst);
    let was_on = PROCESS_ON.swap(true, Ordering::SeqCst);
    let r = f();
    PROCESS_ON.store(was_on, Ordering::SeqCst);
    let c = Counts {
        allocs: P_ALLOCS.load(Ordering::SeqCst) - a0,
        bytes: P_BYTES.load(Ordering::SeqCst) - b0,
        largest: P_LARGEST.load(Ordering::SeqCst),
    };
    (r, c)
}

/// Narrows the process-wide counter to threads for which `filter` returns true (`None`: every
/// thread). The filter runs inside the allocator: it must not allocate (use const
/// thread-locals and libc calls only).
pub fn set_process_filter(filter: Option<fn() -> bool>) {
    let p = filter.map_or(std::ptr::null_mut(), |f| f as *mut ());
    P_FILTER.store(p, Ordering::SeqCst);
}

/// Forgets the largest process-wide request seen so far (the counts keep running).
pub fn reset_process_largest() {
    P_LARGEST.store(0, Ordering::SeqCst);
}

/// The largest single request counted process-wide since the last
/// [`reset_process_largest`].
pub fn process_largest() -> usize {
    P_LARGEST.load(Ordering::SeqCst)
}
