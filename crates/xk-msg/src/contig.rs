//! The contiguous message form: one buffer, headroom in front.
//!
//! The buffer is either uniquely owned (`BytesMut`, writable: headers are written
//! into the headroom in place) or shared (`Bytes`, after a `slice`: reading is
//! free, and the first `push` copies the data into a fresh writable buffer, as a
//! Click packet is "uniqueified" before it is written).

use core::fmt;
use core::ops::Range;

use bytes::{Buf, Bytes, BytesMut};

use crate::copies::count_copy;
use crate::{DEFAULT_HEADROOM, Msg, TooShort, check_len, check_range};

enum Store {
    Unique(BytesMut),
    Shared(Bytes),
}

impl Store {
    fn bytes(&self) -> &[u8] {
        match self {
            Store::Unique(b) => b,
            Store::Shared(b) => b,
        }
    }
}

/// A message held in one contiguous buffer (PIX "SingleBuffer").
pub struct Contig {
    store: Store,
    /// Start of the message in `store`; `store[..head]` is headroom.
    head: usize,
}

impl Contig {
    /// The message bytes as one slice.
    pub fn as_slice(&self) -> &[u8] {
        &self.store.bytes()[self.head..]
    }

    /// Bytes of headroom available to `push` without reallocating.
    pub fn headroom(&self) -> usize {
        match self.store {
            Store::Unique(_) => self.head,
            Store::Shared(_) => 0,
        }
    }

    /// Replaces the buffer with a fresh writable one holding the same bytes and
    /// at least `headroom` bytes in front (one counted copy).
    fn reallocate(&mut self, headroom: usize) {
        let data = self.as_slice();
        let mut buf = BytesMut::with_capacity(headroom + data.len());
        buf.resize(headroom, 0);
        buf.extend_from_slice(data);
        count_copy(data.len());
        self.store = Store::Unique(buf);
        self.head = headroom;
    }

    fn freeze(&mut self) -> &Bytes {
        if let Store::Unique(b) = &mut self.store {
            let b = std::mem::take(b).freeze();
            self.store = Store::Shared(b);
        }
        match &self.store {
            Store::Shared(b) => b,
            Store::Unique(_) => unreachable!("just frozen"),
        }
    }
}

impl fmt::Debug for Contig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Contig").field("len", &self.len()).field("headroom", &self.headroom()).finish()
    }
}

impl Msg for Contig {
    fn with_headroom(headroom: usize) -> Self {
        Contig { store: Store::Unique(BytesMut::zeroed(headroom)), head: headroom }
    }

    fn from_payload(payload: Bytes, headroom: usize) -> Self {
        // The single-buffer trade-off: the payload is copied behind the headroom.
        let mut buf = BytesMut::with_capacity(headroom + payload.len());
        buf.resize(headroom, 0);
        buf.extend_from_slice(&payload);
        count_copy(payload.len());
        Contig { store: Store::Unique(buf), head: headroom }
    }

    #[inline]
    fn from_shared(payload: Bytes) -> Self {
        Contig { store: Store::Shared(payload), head: 0 }
    }

    #[inline]
    fn from_received(buf: BytesMut) -> Self {
        Contig { store: Store::Unique(buf), head: 0 }
    }

    #[inline]
    fn len(&self) -> usize {
        self.store.bytes().len() - self.head
    }

    fn push(&mut self, n: usize) -> &mut [u8] {
        if self.headroom() < n || matches!(self.store, Store::Shared(_)) {
            self.reallocate(n.max(DEFAULT_HEADROOM));
        }
        self.head -= n;
        match &mut self.store {
            Store::Unique(b) => &mut b[self.head..self.head + n],
            Store::Shared(_) => unreachable!("reallocate made the buffer unique"),
        }
    }

    #[inline]
    fn peek(&mut self, n: usize) -> Result<&[u8], TooShort> {
        check_len(n, self.len())?;
        Ok(&self.as_slice()[..n])
    }

    #[inline]
    fn pop(&mut self, n: usize) -> Result<&[u8], TooShort> {
        check_len(n, self.len())?;
        self.head += n;
        Ok(&self.store.bytes()[self.head - n..self.head])
    }

    fn extend_from_slice(&mut self, data: &[u8]) {
        if let Store::Shared(_) = self.store {
            self.reallocate(0);
        }
        if let Store::Unique(b) = &mut self.store {
            b.extend_from_slice(data);
        }
        count_copy(data.len());
    }

    fn truncate(&mut self, len: usize) {
        let end = self.head + len.min(self.len());
        match &mut self.store {
            Store::Unique(b) => b.truncate(end),
            Store::Shared(b) => b.truncate(end),
        }
    }

    fn split_off(&mut self, at: usize) -> Result<Self, TooShort> {
        check_len(at, self.len())?;
        let at = self.head + at;
        let tail = match &mut self.store {
            Store::Unique(b) => Store::Unique(b.split_off(at)),
            Store::Shared(b) => Store::Shared(b.split_off(at)),
        };
        Ok(Contig { store: tail, head: 0 })
    }

    fn split_to(&mut self, at: usize) -> Result<Self, TooShort> {
        check_len(at, self.len())?;
        let at = self.head + at;
        let front = match &mut self.store {
            Store::Unique(b) => Store::Unique(b.split_to(at)),
            Store::Shared(b) => Store::Shared(b.split_to(at)),
        };
        let head = self.head;
        self.head = 0;
        Ok(Contig { store: front, head })
    }

    fn join(&mut self, tail: Self) {
        if tail.is_empty() {
            return;
        }
        let Contig { store: tail_store, head: tail_head } = tail;
        match (&mut self.store, tail_store) {
            (Store::Unique(a), Store::Unique(b)) => {
                // Zero copy when `tail` starts exactly where `self` ends (undoing
                // a split of one allocation); otherwise the tail is copied.
                let adjacent = tail_head == 0 && a.as_ptr() as usize + a.len() == b.as_ptr() as usize;
                if adjacent {
                    a.unsplit(b);
                } else {
                    count_copy(b.len() - tail_head);
                    a.extend_from_slice(&b[tail_head..]);
                }
            }
            (_, tail_store) => {
                let data = &tail_store.bytes()[tail_head..];
                if let Store::Shared(_) = self.store {
                    self.reallocate(0);
                }
                if let Store::Unique(a) = &mut self.store {
                    a.extend_from_slice(data);
                }
                count_copy(data.len());
            }
        }
    }

    fn slice(&mut self, range: Range<usize>) -> Result<Self, TooShort> {
        check_range(&range, self.len())?;
        let head = self.head;
        let shared = self.freeze().slice(head + range.start..head + range.end);
        Ok(Contig { store: Store::Shared(shared), head: 0 })
    }

    fn for_each_chunk(&self, mut f: impl FnMut(&[u8])) {
        f(self.as_slice());
    }

    // Per packet on both framework paths (every frame received, every
    // message pushed); `#[inline]` alone left it a call.
    #[inline(always)]
    fn into_bytes(self) -> Bytes {
        let head = self.head;
        match self.store {
            // Moving the start within the unique buffer costs no reference
            // count traffic (`freeze().slice()` would add a pair).
            Store::Unique(mut b) => {
                if head > 0 {
                    b.advance(head);
                }
                b.freeze()
            }
            // Advancing the owned handle moves its start: no reference
            // count pair (`slice` would clone and drop the handle).
            Store::Shared(mut b) => {
                if head > 0 {
                    b.advance(head);
                }
                b
            }
        }
    }
}
