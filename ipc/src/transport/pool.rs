//! A bounded pool of fixed-size send buffers ("chunks"), one pool per ring thread.
//!
//! Responses are serialized straight into chunks; a large response is a chain of chunks that the
//! send path hands to the kernel one by one and returns to the pool as each send completes. The
//! pool never grows: when every chunk is in use [`BufferPool::try_acquire`] says so (and counts
//! it), and the server stops reading new requests until sends complete. Nothing on the response
//! path allocates memory sized by the response.
//!
//! The pool is one anonymous `mmap` of `chunk_size × chunks` bytes, page-aligned, so that the
//! io_uring backend can register each chunk as a fixed buffer (index = [`ChunkId::index`]).
//! Registration pins the pages and counts against `RLIMIT_MEMLOCK` for users without
//! `CAP_IPC_LOCK`; when the kernel refuses it the backend keeps the pool unregistered (plain
//! user-memory sends) and logs one warning per process. See [`PoolConfig`] for the defaults.
//!
//! The mapping is `MADV_DONTFORK` (`exclude_from_fork`): a process that forks children (the
//! agent spawns every container) would otherwise copy every pinned page of it into each child
//! at `fork`, since the kernel cannot share a page pinned for DMA copy-on-write (measured: half
//! of the agent's CPU per container launch went to copying its pools into children that
//! `exec` at once). A forked child does not see the pool; only an `exec` follows a fork here.
//!
//! Chunks are reference counted: a chunk may hold several small responses, each sent by its own
//! send operation, and returns to the free list when the last reference is dropped. The free list
//! is LIFO, so the most recently used (cache-warm) chunk is handed out first.

use std::io;
use std::ptr::NonNull;

/// Default chunk size: 64 KiB. It is the largest loopback/GSO segment the kernel builds from one
/// send, it amortises a send operation over 8× more bytes than Java's 8 KiB `NIO_BUFFER_LIMIT`
/// slices, and a handful of chunks per connection stays inside L2 while being filled and sent.
pub const DEFAULT_CHUNK_SIZE: usize = 64 * 1024;
/// Default chunk count per ring: 96 × 64 KiB = 6 MiB. That stays below the 8 MiB
/// `RLIMIT_MEMLOCK` of an unprivileged user, so registration succeeds without `LimitMEMLOCK=`,
/// and 6 MiB in flight is more than loopback or a 25 GbE NIC needs to stay busy (the socket send
/// buffers are the next stage and hold the rest).
pub const DEFAULT_CHUNK_COUNT: usize = 96;
/// Default cap on chunks one connection may hold (queued or in flight): 8 × 64 KiB = 512 KiB.
/// It keeps one connection streaming a 10 MB response from taking the whole pool, so a dozen
/// connections progress at once, and 512 KiB in flight keeps one TCP connection's window full.
pub const DEFAULT_CHUNKS_PER_CONN: usize = 8;

/// Smallest and largest chunk sizes accepted.
pub const MIN_CHUNK_SIZE: usize = 4096;
pub const MAX_CHUNK_SIZE: usize = 16 * 1024 * 1024;
/// io_uring accepts at most 2^14 fixed buffers; a larger pool is used unregistered.
pub const MAX_REGISTERED_CHUNKS: usize = 1 << 14;

/// Pool geometry. See the `DEFAULT_*` constants for the defaults and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    /// Bytes per chunk; a multiple of 4096 between [`MIN_CHUNK_SIZE`] and [`MAX_CHUNK_SIZE`].
    pub chunk_size: usize,
    /// Chunks in the pool (per ring thread). At least 2.
    pub chunks: usize,
    /// Most chunks one connection may hold at once. At least 2 (a small response may need the
    /// tail of one chunk and the start of the next).
    pub per_conn_chunks: usize,
    /// Try to register the chunks as io_uring fixed buffers (io_uring backend only).
    pub register: bool,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            chunk_size: DEFAULT_CHUNK_SIZE,
            chunks: DEFAULT_CHUNK_COUNT,
            per_conn_chunks: DEFAULT_CHUNKS_PER_CONN,
            register: true,
        }
    }
}

impl PoolConfig {
    /// Total bytes of one pool.
    pub fn bytes(&self) -> usize {
        self.chunk_size * self.chunks
    }

    /// Checks the geometry.
    pub fn validate(&self) -> Result<(), PoolError> {
        if self.chunk_size < MIN_CHUNK_SIZE || self.chunk_size > MAX_CHUNK_SIZE {
            return Err(PoolError::Config(
                "chunk_size must be between 4 KiB and 16 MiB",
            ));
        }
        if self.chunk_size % 4096 != 0 {
            return Err(PoolError::Config("chunk_size must be a multiple of 4096"));
        }
        if self.chunks < 2 || self.chunks > u32::MAX as usize / 2 {
            return Err(PoolError::Config("chunks must be at least 2"));
        }
        if self.per_conn_chunks < 2 {
            return Err(PoolError::Config("per_conn_chunks must be at least 2"));
        }
        Ok(())
    }
}

/// Errors creating a pool.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The configuration is out of range.
    #[error("invalid buffer pool configuration: {0}")]
    Config(&'static str),
    /// The kernel refused the mapping.
    #[error("mapping {bytes} bytes for the buffer pool failed: {source}")]
    Map { bytes: usize, source: io::Error },
}

/// A chunk of the pool, by index. Plain data: ownership is the pool's reference count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkId(u32);

impl ChunkId {
    /// The chunk's index in the pool, which is also its io_uring fixed-buffer index.
    pub fn index(self) -> u32 {
        self.0
    }

    /// Rebuilds an id from an index carried through the kernel (`user_data`).
    pub(crate) fn from_index(index: u32) -> Self {
        Self(index)
    }
}

/// Counters of one pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Successful acquisitions.
    pub acquired: u64,
    /// Acquisitions refused because every chunk was in use (backpressure events).
    pub exhausted: u64,
    /// Largest number of chunks in use at once.
    pub peak_in_use: u32,
}

/// The pool. Owned by one ring thread; not shared.
pub struct BufferPool {
    base: NonNull<u8>,
    map_len: usize,
    chunk_size: usize,
    count: u32,
    per_conn: u32,
    /// Free chunk indexes, used as a stack (LIFO: warm chunks first). Capacity `count`, never
    /// reallocated.
    free: Vec<u32>,
    refs: Box<[u32]>,
    registered: bool,
    stats: PoolStats,
}

// SAFETY: the pool exclusively owns its mapping (nothing else holds `base`), so moving it to
// another thread moves that ownership; all access goes through `&self`/`&mut self`.
unsafe impl Send for BufferPool {}

/// Marks an anonymous mapping `MADV_DONTFORK`, so that `fork` neither copies it (a pinned page
/// is copied eagerly) nor maps it in the child. Best effort: a refusal is only slower.
pub(crate) fn exclude_from_fork(p: *mut libc::c_void, len: usize) {
    // SAFETY: `p`/`len` are exactly a mapping the caller just made with mmap; madvise does not
    // touch its contents.
    let r = unsafe { libc::madvise(p, len, libc::MADV_DONTFORK) };
    if r != 0 {
        tracing::debug!("madvise(MADV_DONTFORK): {}", io::Error::last_os_error());
    }
}

impl BufferPool {
    /// Maps `chunk_size × chunks` bytes. Pages are not touched (nor counted in RSS) until a chunk
    /// is written or registered.
    pub fn new(cfg: &PoolConfig) -> Result<Self, PoolError> {
        cfg.validate()?;
        let map_len = cfg.bytes();
        // SAFETY: an anonymous private mapping with a null hint has no preconditions; the result
        // is checked against MAP_FAILED before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(PoolError::Map {
                bytes: map_len,
                source: io::Error::last_os_error(),
            });
        }
        exclude_from_fork(p, map_len);
        let base = NonNull::new(p.cast::<u8>()).ok_or(PoolError::Map {
            bytes: map_len,
            source: io::Error::from_raw_os_error(libc::ENOMEM),
        })?;
        let count = cfg.chunks as u32;
        // Highest index on top, so that chunk 0 is handed out first.
        let free: Vec<u32> = (0..count).rev().collect();
        Ok(Self {
            base,
            map_len,
            chunk_size: cfg.chunk_size,
            count,
            per_conn: cfg.per_conn_chunks.min(cfg.chunks) as u32,
            free,
            refs: vec![0; cfg.chunks].into_boxed_slice(),
            registered: false,
            stats: PoolStats::default(),
        })
    }

    /// Bytes per chunk.
    pub fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    /// Number of chunks.
    pub fn capacity(&self) -> u32 {
        self.count
    }

    /// Most chunks one connection may hold.
    pub fn per_conn_limit(&self) -> u32 {
        self.per_conn
    }

    /// Chunks currently free.
    pub fn available(&self) -> u32 {
        self.free.len() as u32
    }

    /// Chunks currently in use.
    pub fn in_use(&self) -> u32 {
        self.count - self.free.len() as u32
    }

    /// Total mapped bytes.
    pub fn bytes(&self) -> usize {
        self.map_len
    }

    /// Counters.
    pub fn stats(&self) -> PoolStats {
        self.stats
    }

    /// Whether the chunks are registered as io_uring fixed buffers.
    pub fn is_registered(&self) -> bool {
        self.registered
    }

    /// Records whether the chunks are registered (for callers that register [`Self::iovecs`]
    /// with a ring of their own).
    pub fn set_registered(&mut self, registered: bool) {
        self.registered = registered;
    }

    /// One `iovec` per chunk, in index order (the fixed-buffer index is the chunk index), for
    /// fixed-buffer registration. The pool must outlive the registration.
    pub fn iovecs(&self) -> Vec<libc::iovec> {
        (0..self.count)
            .map(|i| libc::iovec {
                iov_base: self.ptr(ChunkId(i)).cast(),
                iov_len: self.chunk_size,
            })
            .collect()
    }

    /// Takes a free chunk with one reference, or `None` (counted in [`PoolStats::exhausted`])
    /// when every chunk is in use. Never allocates.
    pub fn try_acquire(&mut self) -> Option<ChunkId> {
        match self.free.pop() {
            Some(i) => {
                self.refs[i as usize] = 1;
                self.stats.acquired += 1;
                let in_use = self.in_use();
                if in_use > self.stats.peak_in_use {
                    self.stats.peak_in_use = in_use;
                }
                Some(ChunkId(i))
            }
            None => {
                self.stats.exhausted += 1;
                None
            }
        }
    }

    /// Adds a reference to a chunk in use.
    pub fn retain(&mut self, id: ChunkId) {
        let r = &mut self.refs[id.0 as usize];
        debug_assert!(*r > 0, "retain of a free chunk");
        *r += 1;
    }

    /// Drops a reference; returns `true` when that was the last one and the chunk is free again.
    pub fn release(&mut self, id: ChunkId) -> bool {
        let r = &mut self.refs[id.0 as usize];
        debug_assert!(*r > 0, "release of a free chunk");
        *r -= 1;
        if *r == 0 {
            // Cannot reallocate: `free` has capacity `count` and holds fewer than `count` now.
            self.free.push(id.0);
            true
        } else {
            false
        }
    }

    /// Reference count of a chunk (0 = free).
    pub fn refs(&self, id: ChunkId) -> u32 {
        self.refs[id.0 as usize]
    }

    /// Start address of a chunk, for the kernel.
    pub(crate) fn ptr(&self, id: ChunkId) -> *mut u8 {
        assert!(id.0 < self.count);
        // SAFETY: id < count, so the offset lies inside the mapping of count × chunk_size bytes.
        unsafe { self.base.as_ptr().add(id.0 as usize * self.chunk_size) }
    }

    /// Bytes `start..end` of a chunk.
    pub fn slice(&self, id: ChunkId, start: usize, end: usize) -> &[u8] {
        assert!(start <= end && end <= self.chunk_size);
        // The IPC transport's kernel operations only read pool memory (sends); a receiving user
        // (the hdfs-io block receiver) never holds a slice of a chunk while a receive into it is
        // in flight, so the bytes cannot change under the slice.
        // SAFETY: in-bounds (checked above), mapped while `self` lives, no `&mut` alias.
        unsafe { std::slice::from_raw_parts(self.ptr(id).add(start), end - start) }
    }

    /// Bytes `start..end` of a chunk, writable. The caller writes only bytes that are not part of
    /// a submitted send (the transmit queue writes strictly after its sealed position).
    pub fn slice_mut(&mut self, id: ChunkId, start: usize, end: usize) -> &mut [u8] {
        assert!(start <= end && end <= self.chunk_size);
        // `&mut self` makes this the only Rust borrow of pool memory. The kernel may concurrently
        // read *other* bytes of the chunk (earlier, submitted segments), never this range.
        // SAFETY: in bounds and mapped as in `slice`, and not aliased (above).
        unsafe { std::slice::from_raw_parts_mut(self.ptr(id).add(start), end - start) }
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        // A ring that registered the chunks holds its own page references, so unmapping here
        // cannot leave the kernel with dangling memory.
        // SAFETY: `base`/`map_len` are what mmap returned; no slice can outlive `self`.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.map_len);
        }
    }
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPool")
            .field("chunk_size", &self.chunk_size)
            .field("chunks", &self.count)
            .field("free", &self.free.len())
            .field("registered", &self.registered)
            .field("stats", &self.stats)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> PoolConfig {
        PoolConfig {
            chunk_size: 4096,
            chunks: 4,
            per_conn_chunks: 2,
            register: false,
        }
    }

    /// The pool's mapping is marked "do not copy on fork" (`dc` in its smaps `VmFlags`).
    #[test]
    fn the_pool_is_not_copied_into_forked_children() {
        let mut p = BufferPool::new(&small()).unwrap();
        let id = p.try_acquire().unwrap();
        let addr = p.slice(id, 0, 1).as_ptr() as usize;
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut in_pool = false;
        let mut flags = None;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((a, b)) = range.split_once('-') {
                    if let (Ok(a), Ok(b)) =
                        (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                    {
                        in_pool = (a..b).contains(&addr);
                        continue;
                    }
                }
            }
            if in_pool {
                if let Some(f) = line.strip_prefix("VmFlags:") {
                    flags = Some(f.to_string());
                }
            }
        }
        let flags = flags.expect("the pool's mapping in /proc/self/smaps");
        assert!(flags.split_whitespace().any(|f| f == "dc"), "{flags}");
    }

    #[test]
    fn exhaustion_is_reported_not_allocated_around() {
        let mut p = BufferPool::new(&small()).unwrap();
        let ids: Vec<_> = (0..4).map(|_| p.try_acquire().unwrap()).collect();
        assert_eq!(p.available(), 0);
        assert!(p.try_acquire().is_none());
        assert!(p.try_acquire().is_none());
        assert_eq!(p.stats().exhausted, 2);
        assert_eq!(p.stats().peak_in_use, 4);
        assert!(p.release(ids[2]));
        assert_eq!(
            p.try_acquire(),
            Some(ids[2]),
            "LIFO: the warm chunk comes back first"
        );
    }

    #[test]
    fn refcount_frees_on_last_release() {
        let mut p = BufferPool::new(&small()).unwrap();
        let a = p.try_acquire().unwrap();
        p.retain(a);
        p.retain(a);
        assert!(!p.release(a));
        assert!(!p.release(a));
        assert_eq!(p.available(), 3);
        assert!(p.release(a));
        assert_eq!(p.available(), 4);
    }

    #[test]
    fn chunks_are_disjoint_and_page_aligned() {
        let mut p = BufferPool::new(&small()).unwrap();
        let a = p.try_acquire().unwrap();
        let b = p.try_acquire().unwrap();
        p.slice_mut(a, 0, 4096).fill(0xAA);
        p.slice_mut(b, 0, 4096).fill(0xBB);
        assert!(p.slice(a, 0, 4096).iter().all(|&x| x == 0xAA));
        assert!(p.slice(b, 0, 4096).iter().all(|&x| x == 0xBB));
        for v in p.iovecs() {
            assert_eq!(v.iov_base as usize % 4096, 0);
        }
    }

    #[test]
    fn bad_geometry_is_refused() {
        let mut c = small();
        c.chunk_size = 1000;
        assert!(matches!(BufferPool::new(&c), Err(PoolError::Config(_))));
        let mut c = small();
        c.chunks = 1;
        assert!(matches!(BufferPool::new(&c), Err(PoolError::Config(_))));
        let mut c = small();
        c.per_conn_chunks = 1;
        assert!(matches!(BufferPool::new(&c), Err(PoolError::Config(_))));
    }
}
