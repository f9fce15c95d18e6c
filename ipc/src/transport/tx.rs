//! The transmit side of one connection: what has been written into pool chunks and not yet sent.
//!
//! [`TxQueue`] is a queue of [`Segment`]s (a chunk and a byte range in it), oldest first. The
//! front `submitted` segments are with the kernel; the rest wait for the backend to submit them.
//! Bytes are written into the *open* chunk after its sealed position; [`Outbox::seal`] turns
//! them into a segment (coalescing with the previous one when it is contiguous and not yet
//! submitted), so only whole messages ever reach the kernel and a half-written reply can be
//! rolled back without touching anything in flight.
//!
//! A message may cross from the open chunk into one more (*spill*) chunk; [`Outbox::reserve`]
//! acquires that chunk before a handler runs, so writing up to one chunk's worth of bytes cannot
//! fail half way. Streamed bodies instead take chunks one at a time ([`Outbox::tail`]) and seal
//! after each, so they are limited by nothing but the per-connection quota and the pool.
//!
//! [`Outbox`] is the handle a session (connection state machine) gets: the pool plus this
//! connection's queue. When a chunk cannot be had it reports [`Starved`], and the backend parks
//! the connection until sends complete.

use std::collections::VecDeque;

use super::pool::{BufferPool, ChunkId};

/// A byte range of one chunk, queued for sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub chunk: ChunkId,
    pub start: u32,
    pub end: u32,
}

impl Segment {
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// Why a chunk could not be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Starved {
    /// Every chunk of the ring's pool is in use. The connection waits for any send to complete.
    #[error("the buffer pool is exhausted")]
    Pool,
    /// This connection holds its quota of chunks. It waits for its own sends to complete.
    #[error("the connection holds its quota of pool chunks")]
    Quota,
}

/// Errors of [`Outbox::write`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// No chunk for the bytes (see [`Starved`]).
    #[error(transparent)]
    Starved(#[from] Starved),
    /// The message is longer than the open chunk's tail plus one more chunk: stream it instead.
    #[error("message larger than the space reserved for an unstreamed reply")]
    TooLarge,
}

#[derive(Debug, Clone, Copy)]
struct Open {
    id: ChunkId,
    /// Bytes before this are sealed (queued or sent).
    sealed: u32,
    /// Write position; `sealed..pos` is the pending (unsealed) message.
    pos: u32,
}

/// One connection's transmit queue. See the module docs.
#[derive(Debug, Default)]
pub struct TxQueue {
    segs: VecDeque<Segment>,
    submitted: usize,
    open: Option<Open>,
    spill: Option<Open>,
    /// Chunks this queue acquired that are not yet back in the pool.
    held: u32,
    /// Sealed bytes not yet reported sent.
    queued_bytes: u64,
}

impl TxQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sealed bytes waiting for or in a send.
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    /// Chunks held (queued, in flight, open or spill).
    pub fn held_chunks(&self) -> u32 {
        self.held
    }

    /// Segments handed to the kernel and not completed.
    pub fn submitted(&self) -> usize {
        self.submitted
    }

    /// Segments queued and not yet handed to the kernel.
    pub fn unsubmitted(&self) -> usize {
        self.segs.len() - self.submitted
    }

    /// True when nothing is queued, in flight or pending.
    pub fn is_empty(&self) -> bool {
        self.segs.is_empty() && self.pending_len() == 0
    }

    /// Bytes written but not sealed.
    pub fn pending_len(&self) -> usize {
        let a = self.open.map_or(0, |o| (o.pos - o.sealed) as usize);
        let b = self.spill.map_or(0, |o| o.pos as usize);
        a + b
    }

    /// The `i`-th segment not yet submitted.
    pub fn unsubmitted_segment(&self, i: usize) -> Option<Segment> {
        self.segs.get(self.submitted + i).copied()
    }

    /// The segment at the front of the queue (the oldest, submitted or not).
    pub fn front(&self) -> Option<Segment> {
        self.segs.front().copied()
    }

    /// The `i`-th segment from the front, submitted or not (for `writev`).
    pub fn segment(&self, i: usize) -> Option<Segment> {
        self.segs.get(i).copied()
    }

    /// Number of queued segments, submitted or not.
    pub fn segments(&self) -> usize {
        self.segs.len()
    }

    /// Marks the next `n` unsubmitted segments as handed to the kernel.
    pub fn mark_submitted(&mut self, n: usize) {
        assert!(self.submitted + n <= self.segs.len());
        self.submitted += n;
    }

    /// `n` bytes of the front segment were sent. When the segment is done it is popped and its
    /// chunk reference dropped (a SEND_ZC sender takes an extra reference first, for the
    /// notification). Returns whether the segment is done.
    pub fn complete_front(&mut self, pool: &mut BufferPool, n: usize) -> bool {
        let seg = self
            .segs
            .front_mut()
            .expect("completion without a queued segment");
        let n = n.min(seg.len());
        seg.start += n as u32;
        self.queued_bytes -= n as u64;
        if !seg.is_empty() {
            return false;
        }
        let seg = self.segs.pop_front().expect("front exists");
        if self.submitted > 0 {
            self.submitted -= 1;
        }
        self.release_chunk(pool, seg.chunk);
        true
    }

    /// Drops one reference this queue holds on `id`.
    pub fn release_chunk(&mut self, pool: &mut BufferPool, id: ChunkId) {
        if pool.release(id) {
            self.held -= 1;
        }
    }

    /// The kernel rejected or cancelled the submitted segments (their sends will not complete
    /// normally): forget that they were submitted, so that [`Self::clear`] releases them.
    pub fn unsubmit_all(&mut self) {
        self.submitted = 0;
    }

    /// Releases everything: queued segments (none may be in flight), the open and spill chunks.
    pub fn clear(&mut self, pool: &mut BufferPool) {
        debug_assert_eq!(self.submitted, 0, "clear with sends in flight");
        while let Some(seg) = self.segs.pop_front() {
            self.release_chunk(pool, seg.chunk);
        }
        self.submitted = 0;
        self.queued_bytes = 0;
        if let Some(s) = self.spill.take() {
            self.release_chunk(pool, s.id);
        }
        if let Some(o) = self.open.take() {
            self.release_chunk(pool, o.id);
        }
    }

    /// When idle (nothing queued or pending), gives the open chunk back to the pool so that an
    /// idle connection holds no pool memory.
    pub fn release_idle(&mut self, pool: &mut BufferPool) {
        if self.segs.is_empty() && self.pending_len() == 0 {
            if let Some(s) = self.spill.take() {
                self.release_chunk(pool, s.id);
            }
            if let Some(o) = self.open.take() {
                self.release_chunk(pool, o.id);
            }
        }
    }

    fn acquire(&mut self, pool: &mut BufferPool) -> Result<ChunkId, Starved> {
        if self.held >= pool.per_conn_limit() {
            return Err(Starved::Quota);
        }
        let id = pool.try_acquire().ok_or(Starved::Pool)?;
        self.held += 1;
        Ok(id)
    }

    fn push_seg(&mut self, pool: &mut BufferPool, id: ChunkId, start: u32, end: u32) {
        if start == end {
            return;
        }
        self.queued_bytes += (end - start) as u64;
        if self.segs.len() > self.submitted {
            if let Some(last) = self.segs.back_mut() {
                if last.chunk == id && last.end == start {
                    last.end = end;
                    return;
                }
            }
        }
        pool.retain(id);
        self.segs.push_back(Segment {
            chunk: id,
            start,
            end,
        });
    }
}

/// What a session writes through: the ring's pool and this connection's queue.
pub struct Outbox<'a> {
    pool: &'a mut BufferPool,
    tx: &'a mut TxQueue,
    starved: Option<Starved>,
}

impl<'a> Outbox<'a> {
    pub fn new(pool: &'a mut BufferPool, tx: &'a mut TxQueue) -> Self {
        Self {
            pool,
            tx,
            starved: None,
        }
    }

    /// The last starvation reported through this outbox, if any (the backend parks the
    /// connection on it).
    pub fn starved(&self) -> Option<Starved> {
        self.starved
    }

    /// Bytes per chunk.
    pub fn chunk_size(&self) -> usize {
        self.pool.chunk_size()
    }

    /// The connection's queue.
    pub fn queue(&self) -> &TxQueue {
        self.tx
    }

    fn starve(&mut self, s: Starved) -> Starved {
        self.starved = Some(s);
        s
    }

    fn open_room(&self) -> usize {
        let cs = self.pool.chunk_size();
        self.tx.open.map_or(0, |o| cs - o.pos as usize)
            + self.tx.spill.map_or(0, |s| cs - s.pos as usize)
    }

    /// Makes sure `want` more bytes (at most one chunk) can be written without acquiring, by
    /// acquiring the open and spill chunks now. On `Err` nothing was written.
    pub fn reserve(&mut self, want: usize) -> Result<(), Starved> {
        assert!(want <= self.pool.chunk_size(), "reserve beyond one chunk");
        if self.open_room() >= want {
            return Ok(());
        }
        if self.tx.open.is_none() {
            let id = self.tx.acquire(self.pool).map_err(|s| self.starve(s))?;
            self.tx.open = Some(Open {
                id,
                sealed: 0,
                pos: 0,
            });
            if self.open_room() >= want {
                return Ok(());
            }
        }
        // The open chunk's tail is too short.
        if self.tx.spill.is_none() {
            let open = self.tx.open.expect("open chunk");
            if open.pos == open.sealed {
                // Nothing pending in it: move on to a fresh chunk instead of splitting.
                let id = self.tx.acquire(self.pool).map_err(|s| self.starve(s))?;
                self.tx.open = Some(Open {
                    id,
                    sealed: 0,
                    pos: 0,
                });
                self.tx.release_chunk(self.pool, open.id);
            } else {
                let id = self.tx.acquire(self.pool).map_err(|s| self.starve(s))?;
                self.tx.spill = Some(Open {
                    id,
                    sealed: 0,
                    pos: 0,
                });
            }
        }
        debug_assert!(self.open_room() >= want);
        Ok(())
    }

    /// Appends bytes to the pending message, within the open chunk and at most one spill chunk
    /// (acquired here if [`Self::reserve`] did not). On `Err` the caller must [`Self::rollback`].
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        let cs = self.pool.chunk_size();
        let mut rest = bytes;
        if self.tx.open.is_none() {
            self.reserve(rest.len().min(cs))?;
        }
        while !rest.is_empty() {
            // Bytes go to the open chunk until it is full, then to the spill chunk.
            let open_full = self.tx.open.is_some_and(|o| o.pos as usize == cs);
            let target = if open_full && self.tx.spill.is_some() {
                self.tx.spill.as_mut()
            } else {
                self.tx.open.as_mut()
            }
            .expect("open chunk");
            let room = cs - target.pos as usize;
            if room == 0 {
                if self.tx.spill.is_some() {
                    return Err(WriteError::TooLarge);
                }
                let id = self.tx.acquire(self.pool).map_err(|s| self.starve(s))?;
                self.tx.spill = Some(Open {
                    id,
                    sealed: 0,
                    pos: 0,
                });
                continue;
            }
            let n = room.min(rest.len());
            let (id, pos) = (target.id, target.pos as usize);
            target.pos += n as u32;
            self.pool
                .slice_mut(id, pos, pos + n)
                .copy_from_slice(&rest[..n]);
            rest = &rest[n..];
        }
        Ok(())
    }

    /// Writes `bytes` over already-written pending bytes at `offset` from the start of the
    /// pending message (to fill in a length placeholder).
    pub fn patch(&mut self, offset: usize, bytes: &[u8]) {
        assert!(
            offset + bytes.len() <= self.tx.pending_len(),
            "patch outside the pending message"
        );
        let open = self.tx.open.expect("open chunk");
        let in_open = (open.pos - open.sealed) as usize;
        for (i, &b) in bytes.iter().enumerate() {
            let at = offset + i;
            if at < in_open {
                let p = open.sealed as usize + at;
                self.pool.slice_mut(open.id, p, p + 1)[0] = b;
            } else {
                let s = self.tx.spill.expect("spill chunk");
                let p = at - in_open;
                self.pool.slice_mut(s.id, p, p + 1)[0] = b;
            }
        }
    }

    /// Drops the first `n` pending bytes (unused room in front of a message whose prefix turned
    /// out shorter than reserved). They must lie in the open chunk.
    pub fn skip_front(&mut self, n: usize) {
        let open = self.tx.open.as_mut().expect("open chunk");
        assert!(n <= (open.pos - open.sealed) as usize);
        open.sealed += n as u32;
    }

    /// Writable tail of the current chunk for a streamed body, taking a fresh chunk when the open
    /// one is full. Nothing may be pending. Write into it, then [`Self::advance`] and
    /// [`Self::seal`].
    pub fn tail(&mut self) -> Result<&mut [u8], Starved> {
        debug_assert!(self.tx.spill.is_none());
        let cs = self.pool.chunk_size();
        let full = self.tx.open.is_some_and(|o| o.pos as usize == cs);
        if full {
            let o = self.tx.open.take().expect("open chunk");
            debug_assert_eq!(o.pos, o.sealed, "tail with a pending message");
            self.tx.release_chunk(self.pool, o.id);
        }
        if self.tx.open.is_none() {
            let id = self.tx.acquire(self.pool).map_err(|s| self.starve(s))?;
            self.tx.open = Some(Open {
                id,
                sealed: 0,
                pos: 0,
            });
        }
        let o = self.tx.open.expect("open chunk");
        Ok(self.pool.slice_mut(o.id, o.pos as usize, cs))
    }

    /// Marks `n` bytes of the last [`Self::tail`] as written (pending).
    pub fn advance(&mut self, n: usize) {
        let cs = self.pool.chunk_size();
        let o = self.tx.open.as_mut().expect("open chunk");
        assert!(o.pos as usize + n <= cs);
        o.pos += n as u32;
    }

    /// Bytes written and not sealed.
    pub fn pending_len(&self) -> usize {
        self.tx.pending_len()
    }

    /// Turns the pending bytes into queued segments: they will be sent, in order.
    pub fn seal(&mut self) {
        let cs = self.pool.chunk_size() as u32;
        let Some(mut open) = self.tx.open else {
            return;
        };
        self.tx.push_seg(self.pool, open.id, open.sealed, open.pos);
        open.sealed = open.pos;
        self.tx.open = Some(open);
        if let Some(mut spill) = self.tx.spill.take().filter(|s| {
            // A reserved spill chunk the message did not reach goes back.
            s.pos > 0 || {
                self.tx.release_chunk(self.pool, s.id);
                false
            }
        }) {
            // The message continued into the spill chunk: the old open chunk is done.
            self.tx.release_chunk(self.pool, open.id);
            self.tx.push_seg(self.pool, spill.id, 0, spill.pos);
            spill.sealed = spill.pos;
            self.tx.open = Some(spill);
            open = spill;
        }
        if open.pos == cs {
            self.tx.open = None;
            self.tx.release_chunk(self.pool, open.id);
        }
    }

    /// Discards the pending bytes (and the spill chunk).
    pub fn rollback(&mut self) {
        if let Some(s) = self.tx.spill.take() {
            self.tx.release_chunk(self.pool, s.id);
        }
        if let Some(o) = self.tx.open.as_mut() {
            o.pos = o.sealed;
        }
    }

    /// Chunks available in the pool right now.
    pub fn pool_available(&self) -> u32 {
        self.pool.available()
    }

    /// This connection's chunk quota.
    pub fn quota(&self) -> u32 {
        self.pool.per_conn_limit()
    }
}

#[cfg(test)]
mod tests {
    use super::super::pool::PoolConfig;
    use super::*;

    fn pool(chunks: usize, per_conn: usize) -> BufferPool {
        BufferPool::new(&PoolConfig {
            chunk_size: 4096,
            chunks,
            per_conn_chunks: per_conn,
            register: false,
        })
        .unwrap()
    }

    fn drain(tx: &mut TxQueue, pool: &mut BufferPool) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some(s) = tx.front() {
            out.extend_from_slice(pool.slice(s.chunk, s.start as usize, s.end as usize));
            tx.complete_front(pool, s.len());
        }
        out
    }

    #[test]
    fn small_messages_share_a_chunk_and_coalesce() {
        let mut p = pool(4, 4);
        let mut tx = TxQueue::new();
        let mut ob = Outbox::new(&mut p, &mut tx);
        for m in [&b"hello "[..], b"world", b"!"] {
            ob.reserve(100).unwrap();
            ob.write(m).unwrap();
            ob.seal();
        }
        assert_eq!(tx.segments(), 1, "contiguous unsubmitted writes coalesce");
        assert_eq!(tx.held_chunks(), 1);
        assert_eq!(drain(&mut tx, &mut p), b"hello world!");
        tx.release_idle(&mut p);
        assert_eq!(tx.held_chunks(), 0);
        assert_eq!(p.available(), 4);
    }

    #[test]
    fn a_message_crosses_into_the_spill_chunk() {
        let mut p = pool(4, 4);
        let mut tx = TxQueue::new();
        let mut ob = Outbox::new(&mut p, &mut tx);
        ob.reserve(4000).unwrap();
        ob.write(&[1u8; 4000]).unwrap();
        ob.seal();
        ob.reserve(4096).unwrap();
        ob.write(&[2u8; 4096]).unwrap();
        ob.seal();
        let bytes = drain(&mut tx, &mut p);
        assert_eq!(bytes.len(), 8096);
        assert!(bytes[..4000].iter().all(|&b| b == 1));
        assert!(bytes[4000..].iter().all(|&b| b == 2));
        tx.release_idle(&mut p);
        assert_eq!(p.available(), 4);
    }

    #[test]
    fn rollback_leaves_no_trace() {
        let mut p = pool(4, 4);
        let mut tx = TxQueue::new();
        let mut ob = Outbox::new(&mut p, &mut tx);
        ob.reserve(10).unwrap();
        ob.write(b"keep").unwrap();
        ob.seal();
        ob.reserve(4096).unwrap();
        // Nothing was pending in the open chunk, so reserve moved on to a fresh chunk: the limit
        // is that chunk plus one spill chunk.
        ob.write(&[9u8; 2 * 4096]).unwrap();
        assert!(matches!(ob.write(b"x"), Err(WriteError::TooLarge)));
        ob.rollback();
        ob.reserve(10).unwrap();
        ob.write(b"next").unwrap();
        ob.seal();
        assert_eq!(drain(&mut tx, &mut p), b"keepnext");
    }

    #[test]
    fn quota_and_pool_exhaustion_are_reported() {
        let mut p = pool(3, 2);
        let mut a = TxQueue::new();
        let mut b = TxQueue::new();
        {
            let mut ob = Outbox::new(&mut p, &mut a);
            for _ in 0..2 {
                let t = ob.tail().unwrap();
                let n = t.len();
                ob.advance(n);
                ob.seal();
            }
            assert_eq!(ob.tail().unwrap_err(), Starved::Quota);
            assert_eq!(ob.starved(), Some(Starved::Quota));
        }
        {
            let mut ob = Outbox::new(&mut p, &mut b);
            let t = ob.tail().unwrap();
            let n = t.len();
            ob.advance(n);
            ob.seal();
            assert_eq!(ob.tail().unwrap_err(), Starved::Pool);
        }
        assert_eq!(p.available(), 0);
        // Sending a's first chunk frees it for b.
        a.complete_front(&mut p, 4096);
        assert_eq!(p.available(), 1);
        let mut ob = Outbox::new(&mut p, &mut b);
        assert!(ob.tail().is_ok());
    }

    #[test]
    fn patch_and_skip_front() {
        let mut p = pool(4, 4);
        let mut tx = TxQueue::new();
        let mut ob = Outbox::new(&mut p, &mut tx);
        ob.reserve(4096).unwrap();
        ob.write(&[0u8; 4090]).unwrap();
        ob.seal();
        ob.reserve(64).unwrap();
        ob.write(b"..........abc").unwrap(); // 10 bytes of placeholder, then the message
        ob.patch(4, b"LEN:XY");
        ob.skip_front(4);
        ob.seal();
        let all = drain(&mut tx, &mut p);
        assert_eq!(&all[4090..], b"LEN:XYabc");
    }

    #[test]
    fn partial_completions_advance_the_front() {
        let mut p = pool(2, 2);
        let mut tx = TxQueue::new();
        let mut ob = Outbox::new(&mut p, &mut tx);
        ob.reserve(10).unwrap();
        ob.write(b"0123456789").unwrap();
        ob.seal();
        tx.mark_submitted(1);
        assert!(!tx.complete_front(&mut p, 4));
        assert_eq!(tx.queued_bytes(), 6);
        let f = tx.front().unwrap();
        assert_eq!(
            p.slice(f.chunk, f.start as usize, f.end as usize),
            b"456789"
        );
        assert!(tx.complete_front(&mut p, 6));
        assert!(tx.front().is_none());
        assert_eq!(tx.submitted(), 0);
    }
}
