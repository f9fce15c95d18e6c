//! The `bench` subcommands' allocation figures come from the workspace's one counting
//! allocator (`alloc-counter`), process-wide: each bench measures on its only running thread.
//! It stays off until a bench calls [`enable`]: until then each allocation pays one
//! well-predicted relaxed load, so the timed paths (and the eager baselines' many
//! allocations) are not taxed.

pub use alloc_counter::{enable_process as enable, process_allocs as allocs, Counting};
