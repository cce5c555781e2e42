//! The rope message form: a writable header area plus shared payload chunks.
//!
//! Layout: `hdr[hdr_start..]` holds the pushed headers (and, for a received
//! buffer, the whole packet), followed by the `body` chunks in order. The payload
//! is never copied by push, pop, split, join or slice: those only clone or cut
//! `Bytes` handles. The one gather is a header that straddles pieces, which is
//! pulled up into the header area and counted as a pull-up.

use core::fmt;
use core::ops::Range;
use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};

use crate::copies::{count_copy, count_pullup};
use crate::{DEFAULT_HEADROOM, Msg, TooShort, check_len, check_range};

/// A message held as a header area and a list of shared chunks (PIX
/// "BufferTree").
pub struct Rope {
    hdr: BytesMut,
    hdr_start: usize,
    /// Non-empty chunks following the header area.
    body: VecDeque<Bytes>,
    len: usize,
    /// Keeps the bytes returned by the last `pop` alive when they were cut from a
    /// body chunk.
    popped: Bytes,
}

/// Splits a chunk list at byte offset `at`: `body` keeps `[0, at)`, the rest is
/// returned. Cuts at most one chunk; copies nothing.
fn split_chunks(body: &mut VecDeque<Bytes>, at: usize) -> VecDeque<Bytes> {
    let mut acc = 0;
    for i in 0..body.len() {
        let l = body[i].len();
        if acc + l > at {
            let off = at - acc;
            let mut rest = body.split_off(i);
            if off > 0 {
                let tail = rest[0].split_off(off);
                let head = std::mem::replace(&mut rest[0], tail);
                body.push_back(head);
            }
            return rest;
        }
        acc += l;
    }
    VecDeque::new()
}

impl Rope {
    fn hdr_len(&self) -> usize {
        self.hdr.len() - self.hdr_start
    }

    /// Number of pieces (header area counts if non-empty); 1 means contiguous.
    pub fn chunk_count(&self) -> usize {
        usize::from(self.hdr_len() > 0) + self.body.len()
    }

    /// Moves the header-area bytes to the front of `body` as a shared chunk,
    /// leaving the header area as pure headroom. No copy.
    fn spill_header(&mut self) {
        if self.hdr_len() > 0 {
            let data = self.hdr.split_off(self.hdr_start).freeze();
            self.body.push_front(data);
        }
    }

    /// Gathers the first `n` bytes into the header area.
    fn pull_up(&mut self, n: usize) {
        let have = self.hdr_len();
        let mut buf = BytesMut::with_capacity(DEFAULT_HEADROOM + n);
        buf.resize(DEFAULT_HEADROOM, 0);
        buf.extend_from_slice(&self.hdr[self.hdr_start..]);
        let mut need = n - have;
        while need > 0 {
            let chunk = &mut self.body[0];
            let take = need.min(chunk.len());
            buf.extend_from_slice(&chunk[..take]);
            if take == chunk.len() {
                self.body.pop_front();
            } else {
                let _ = chunk.split_to(take);
            }
            need -= take;
        }
        count_pullup(n - have);
        self.hdr = buf;
        self.hdr_start = DEFAULT_HEADROOM;
    }
}

impl fmt::Debug for Rope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rope")
            .field("len", &self.len)
            .field("headroom", &self.hdr_start)
            .field("chunks", &self.chunk_count())
            .finish()
    }
}

impl Msg for Rope {
    fn with_headroom(headroom: usize) -> Self {
        Rope {
            hdr: BytesMut::zeroed(headroom),
            hdr_start: headroom,
            body: VecDeque::new(),
            len: 0,
            popped: Bytes::new(),
        }
    }

    fn from_payload(payload: Bytes, headroom: usize) -> Self {
        let mut m = Self::with_headroom(headroom);
        m.len = payload.len();
        if !payload.is_empty() {
            m.body.push_back(payload);
        }
        m
    }

    fn from_shared(payload: Bytes) -> Self {
        Self::from_payload(payload, 0)
    }

    fn from_received(buf: BytesMut) -> Self {
        Rope { len: buf.len(), hdr: buf, hdr_start: 0, body: VecDeque::new(), popped: Bytes::new() }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn push(&mut self, n: usize) -> &mut [u8] {
        if self.hdr_start < n {
            self.spill_header();
            self.hdr = BytesMut::zeroed(n.max(DEFAULT_HEADROOM));
            self.hdr_start = self.hdr.len();
        }
        self.hdr_start -= n;
        self.len += n;
        &mut self.hdr[self.hdr_start..self.hdr_start + n]
    }

    fn peek(&mut self, n: usize) -> Result<&[u8], TooShort> {
        check_len(n, self.len)?;
        let have = self.hdr_len();
        if have == 0 && self.body.front().is_some_and(|c| c.len() >= n) {
            return Ok(&self.body[0][..n]);
        }
        if have < n {
            self.pull_up(n);
        }
        Ok(&self.hdr[self.hdr_start..self.hdr_start + n])
    }

    fn pop(&mut self, n: usize) -> Result<&[u8], TooShort> {
        check_len(n, self.len)?;
        let have = self.hdr_len();
        if have == 0 && self.body.front().is_some_and(|c| c.len() >= n) {
            self.popped = self.body[0].split_to(n);
            if self.body[0].is_empty() {
                self.body.pop_front();
            }
            self.len -= n;
            return Ok(&self.popped);
        }
        if have < n {
            self.pull_up(n);
        }
        self.hdr_start += n;
        self.len -= n;
        Ok(&self.hdr[self.hdr_start - n..self.hdr_start])
    }

    fn extend_from_slice(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        count_copy(data.len());
        if self.body.is_empty() {
            self.hdr.extend_from_slice(data);
        } else {
            self.body.push_back(Bytes::copy_from_slice(data));
        }
        self.len += data.len();
    }

    fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        let have = self.hdr_len();
        if len <= have {
            self.hdr.truncate(self.hdr_start + len);
            self.body.clear();
        } else {
            drop(split_chunks(&mut self.body, len - have));
        }
        self.len = len;
    }

    fn split_off(&mut self, at: usize) -> Result<Self, TooShort> {
        check_len(at, self.len)?;
        let have = self.hdr_len();
        let mut tail = Rope::with_headroom(0);
        if at <= have {
            tail.hdr = self.hdr.split_off(self.hdr_start + at);
            tail.body = std::mem::take(&mut self.body);
        } else {
            tail.body = split_chunks(&mut self.body, at - have);
        }
        tail.len = self.len - at;
        self.len = at;
        Ok(tail)
    }

    fn split_to(&mut self, at: usize) -> Result<Self, TooShort> {
        check_len(at, self.len)?;
        let have = self.hdr_len();
        let mut front = Rope::with_headroom(0);
        front.hdr_start = self.hdr_start;
        if at <= have {
            front.hdr = self.hdr.split_to(self.hdr_start + at);
        } else {
            front.hdr = std::mem::take(&mut self.hdr);
            let rest = split_chunks(&mut self.body, at - have);
            front.body = std::mem::replace(&mut self.body, rest);
        }
        self.hdr_start = 0;
        front.len = at;
        self.len -= at;
        Ok(front)
    }

    fn join(&mut self, mut tail: Self) {
        tail.spill_header();
        self.len += tail.len;
        self.body.extend(tail.body);
    }

    fn slice(&mut self, range: Range<usize>) -> Result<Self, TooShort> {
        check_range(&range, self.len)?;
        self.spill_header();
        let mut out = Rope::with_headroom(0);
        let mut pos = 0;
        for chunk in &self.body {
            let (start, end) = (pos, pos + chunk.len());
            pos = end;
            let lo = range.start.max(start);
            let hi = range.end.min(end);
            if lo < hi {
                out.body.push_back(chunk.slice(lo - start..hi - start));
            }
            if end >= range.end {
                break;
            }
        }
        out.len = range.len();
        Ok(out)
    }

    fn for_each_chunk(&self, mut f: impl FnMut(&[u8])) {
        if self.hdr_len() > 0 {
            f(&self.hdr[self.hdr_start..]);
        }
        for c in &self.body {
            f(c);
        }
    }

    fn into_bytes(mut self) -> Bytes {
        match (self.hdr_len(), self.body.len()) {
            (0, 0) => Bytes::new(),
            (0, 1) => self.body.pop_front().unwrap_or_default(),
            (_, 0) => {
                let mut hdr = std::mem::take(&mut self.hdr);
                hdr.advance(self.hdr_start);
                hdr.freeze()
            }
            _ => {
                let mut v = Vec::with_capacity(self.len);
                self.for_each_chunk(|c| v.extend_from_slice(c));
                count_copy(self.len);
                Bytes::from(v)
            }
        }
    }
}
