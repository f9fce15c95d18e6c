//! The transmit side of one connection: what has been written into pool chunks and not yet sent.
//!
//! [`TxQueue`] is a queue of [`Segment`]s (a chunk and a byte range in it), oldest first. The
//! front `submitted` segments are with the kernel; the rest wait for the backend to submit them.
//! Bytes are written into the *open* chunk after its sealed position; [`Outbox::seal`] turns
//! them into a segment (coalescing with the previous one when it is contiguous and not yet
//! submitted), so only whole messages ever reach the kernel and a half-written reply can be
//! rolled back without touching anything in flight.
//!
//! Two ways to write:
//! - [`Outbox::contiguous`]: `n` bytes (at most one chunk) in one piece, for a whole small
//!   response. If the open chunk's tail is too short the response starts in a fresh chunk (the
//!   *spare*, which [`Outbox::reserve_spare`] acquires before a handler runs, so that writing a
//!   response of up to one chunk cannot fail for want of memory once the handler has run).
//! - [`Outbox::tail`] / [`Outbox::advance`]: whatever room the current chunk has, for streamed
//!   bodies, which take chunks one at a time and are limited by nothing but the per-connection
//!   quota and the pool.
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
    /// A fresh chunk kept for the next response that does not fit the open chunk's tail.
    spare: Option<ChunkId>,
    /// Chunks this queue acquired that are not yet back in the pool.
    held: u32,
    /// Sealed bytes not yet reported sent.
    queued_bytes: u64,
    /// Bytes ever sealed / ever reported sent on this queue (monotonic).
    sealed_total: u64,
    sent_total: u64,
}

impl TxQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sealed bytes waiting for or in a send.
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    /// Bytes ever sealed on this queue.
    pub fn sealed_total(&self) -> u64 {
        self.sealed_total
    }

    /// Bytes ever reported sent on this queue.
    pub fn sent_total(&self) -> u64 {
        self.sent_total
    }

    /// Chunks held (queued, in flight, open or spare).
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
        self.open.map_or(0, |o| (o.pos - o.sealed) as usize)
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
        self.sent_total += n as u64;
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

    /// Releases everything: queued segments (none may be in flight), the open and spare chunks.
    pub fn clear(&mut self, pool: &mut BufferPool) {
        debug_assert_eq!(self.submitted, 0, "clear with sends in flight");
        while let Some(seg) = self.segs.pop_front() {
            self.release_chunk(pool, seg.chunk);
        }
        self.submitted = 0;
        self.queued_bytes = 0;
        if let Some(s) = self.spare.take() {
            self.release_chunk(pool, s);
        }
        if let Some(o) = self.open.take() {
            self.release_chunk(pool, o.id);
        }
    }

    /// When idle (nothing queued or pending), gives the open chunk back to the pool so that an
    /// idle connection holds no pool memory.
    pub fn release_idle(&mut self, pool: &mut BufferPool) {
        if self.segs.is_empty() && self.pending_len() == 0 {
            if let Some(s) = self.spare.take() {
                self.release_chunk(pool, s);
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
        self.sealed_total += (end - start) as u64;
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

    /// Makes sure a response of up to one chunk can be written without acquiring: either the
    /// open chunk is untouched, or a spare chunk is held. On `Err` nothing changed.
    pub fn reserve_spare(&mut self) -> Result<(), Starved> {
        if self.tx.spare.is_some() || self.tx.open.is_some_and(|o| o.pos == 0) {
            return Ok(());
        }
        let id = self.tx.acquire(self.pool).map_err(|s| self.starve(s))?;
        if self.tx.open.is_none() {
            self.tx.open = Some(Open {
                id,
                sealed: 0,
                pos: 0,
            });
        } else {
            self.tx.spare = Some(id);
        }
        Ok(())
    }

    /// Takes a fresh chunk as the open one: the spare if there is one, else a new one. Nothing
    /// may be pending in the old open chunk, which is let go.
    fn fresh_open(&mut self) -> Result<(), Starved> {
        debug_assert_eq!(
            self.tx.pending_len(),
            0,
            "switching chunks with a pending message"
        );
        let id = match self.tx.spare.take() {
            Some(id) => id,
            None => self.tx.acquire(self.pool).map_err(|s| self.starve(s))?,
        };
        if let Some(o) = self.tx.open.take() {
            self.tx.release_chunk(self.pool, o.id);
        }
        self.tx.open = Some(Open {
            id,
            sealed: 0,
            pos: 0,
        });
        Ok(())
    }

    /// `n` writable bytes (at most one chunk) in one piece, after the open chunk's sealed bytes
    /// or at the start of a fresh chunk. Nothing may be pending. Write them, then
    /// [`Self::advance`] by what was written and [`Self::seal`].
    pub fn contiguous(&mut self, n: usize) -> Result<&mut [u8], Starved> {
        let cs = self.pool.chunk_size();
        assert!(n <= cs, "contiguous write larger than a chunk");
        let room = self.tx.open.map_or(0, |o| cs - o.pos as usize);
        if self.tx.open.is_none() || room < n {
            self.fresh_open()?;
        }
        let o = self.tx.open.expect("open chunk");
        Ok(self
            .pool
            .slice_mut(o.id, o.pos as usize, o.pos as usize + n))
    }

    /// Writes `bytes` (at most one chunk) in one piece and seals them.
    pub fn write_sealed(&mut self, bytes: &[u8]) -> Result<(), Starved> {
        self.contiguous(bytes.len())?.copy_from_slice(bytes);
        self.advance(bytes.len());
        self.seal();
        Ok(())
    }

    /// Writable tail of the current chunk for a streamed body, taking a fresh chunk when the open
    /// one is full. Nothing may be pending. Write into it, then [`Self::advance`] and
    /// [`Self::seal`].
    pub fn tail(&mut self) -> Result<&mut [u8], Starved> {
        let cs = self.pool.chunk_size();
        let full = self.tx.open.is_none_or(|o| o.pos as usize == cs);
        if full {
            self.fresh_open()?;
        }
        let o = self.tx.open.expect("open chunk");
        Ok(self.pool.slice_mut(o.id, o.pos as usize, cs))
    }

    /// Marks `n` bytes of the last [`Self::tail`] / [`Self::contiguous`] as written (pending).
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

    /// Turns the pending bytes into a queued segment: they will be sent, in order.
    pub fn seal(&mut self) {
        let cs = self.pool.chunk_size() as u32;
        let Some(mut open) = self.tx.open else {
            return;
        };
        self.tx.push_seg(self.pool, open.id, open.sealed, open.pos);
        open.sealed = open.pos;
        self.tx.open = Some(open);
        if open.pos == cs {
            self.tx.open = None;
            self.tx.release_chunk(self.pool, open.id);
        }
    }

    /// Discards the pending bytes.
    pub fn rollback(&mut self) {
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
            ob.reserve_spare().unwrap();
            ob.write_sealed(m).unwrap();
        }
        assert_eq!(tx.segments(), 1, "contiguous unsubmitted writes coalesce");
        assert_eq!(tx.held_chunks(), 2, "open chunk plus the spare");
        assert_eq!(tx.sealed_total(), 12);
        assert_eq!(drain(&mut tx, &mut p), b"hello world!");
        assert_eq!(tx.sent_total(), 12);
        tx.release_idle(&mut p);
        assert_eq!(tx.held_chunks(), 0);
        assert_eq!(p.available(), 4);
    }

    #[test]
    fn a_response_that_does_not_fit_the_tail_starts_in_the_spare() {
        let mut p = pool(4, 4);
        let mut tx = TxQueue::new();
        let mut ob = Outbox::new(&mut p, &mut tx);
        ob.reserve_spare().unwrap();
        ob.write_sealed(&[1u8; 4000]).unwrap();
        ob.reserve_spare().unwrap();
        assert_eq!(ob.pool_available(), 2, "open + spare held");
        ob.write_sealed(&[2u8; 4096]).unwrap();
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
        ob.write_sealed(b"keep").unwrap();
        let d = ob.contiguous(100).unwrap();
        d[..5].copy_from_slice(b"oops!");
        ob.advance(5);
        ob.rollback();
        ob.write_sealed(b"next").unwrap();
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
            assert_eq!(ob.reserve_spare().unwrap_err(), Starved::Pool);
        }
        assert_eq!(p.available(), 0);
        // Sending a's first chunk frees it for b.
        a.complete_front(&mut p, 4096);
        assert_eq!(p.available(), 1);
        let mut ob = Outbox::new(&mut p, &mut b);
        assert!(ob.tail().is_ok());
    }

    #[test]
    fn partial_completions_advance_the_front() {
        let mut p = pool(2, 2);
        let mut tx = TxQueue::new();
        let mut ob = Outbox::new(&mut p, &mut tx);
        ob.write_sealed(b"0123456789").unwrap();
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
