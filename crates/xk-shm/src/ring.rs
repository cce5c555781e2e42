//! A single-producer single-consumer ring of variable-length records in a
//! shared [`Segment`], between two processes that do not trust each other.
//!
//! Layout: a `head` word (written by the producer only), a `tail` word
//! (written by the consumer only), each on its own cache line, and `cap`
//! bytes of data (a power of two). Positions are byte counts that only
//! grow (`pos % cap` is the offset). A record is an 8-byte header — `u32`
//! length (header included), `u32` kind — then its body, padded to 8 bytes;
//! a record never wraps: when it does not fit before the end, a pad record
//! (kind [`PAD`]) fills the rest.
//!
//! The producer writes a record, then publishes `head` (release); the
//! consumer reads `head` (acquire), then the record. The consumer releases
//! space by publishing `tail`; records may be released out of order (a
//! record whose body became a zero-copy [`bytes::Bytes`] is released when
//! the last clone goes), and `tail` moves over the released prefix.
//!
//! Each side keeps its own position and treats the other's word as
//! untrusted: a `head` or `tail` out of range, or a record that overruns,
//! is [`Corrupt`] — never an out-of-bounds access.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::segment::{Segment, View};

/// The kind of a pad record (skipped by the consumer).
pub const PAD: u32 = 0;
const HEADER: usize = 8;

/// Where a ring lives in its segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingLayout {
    /// Offset of the `head` word.
    pub head: usize,
    /// Offset of the `tail` word.
    pub tail: usize,
    /// Offset of the data area.
    pub data: usize,
    /// Bytes of data: a power of two, at least 64, at most 1 GiB.
    pub cap: usize,
}

impl RingLayout {
    /// Whether the layout fits a segment of `len` bytes and is well formed.
    pub fn check(&self, len: usize) -> Result<(), Corrupt> {
        let ok = self.cap.is_power_of_two()
            && (64..=1 << 30).contains(&self.cap)
            && self.head.is_multiple_of(8)
            && self.tail.is_multiple_of(8)
            && self.data.is_multiple_of(8)
            && self.head + 8 <= len
            && self.tail + 8 <= len
            && self.data.checked_add(self.cap).is_some_and(|e| e <= len);
        if ok { Ok(()) } else { Err(Corrupt("ring layout does not fit the segment")) }
    }

    /// The largest body one record may have (a quarter of the ring, so a
    /// record always fits once the ring is empty, pad included).
    pub fn max_body(&self) -> usize {
        self.cap / 4 - HEADER
    }
}

/// The other side broke the ring protocol (what it got wrong).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt(pub &'static str);

impl fmt::Display for Corrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "corrupt shared ring: {}", self.0)
    }
}

impl std::error::Error for Corrupt {}

fn round8(n: usize) -> usize {
    (n + 7) & !7
}

/// The writing side of a ring.
pub struct Producer {
    seg: Arc<Segment>,
    lay: RingLayout,
    head: u64,
}

impl Producer {
    /// The producer of the ring at `lay` (checked against the segment),
    /// starting from the published `head`.
    pub fn new(seg: Arc<Segment>, lay: RingLayout) -> Result<Producer, Corrupt> {
        lay.check(seg.len())?;
        let head = seg.u64_at(lay.head).load(Ordering::Acquire);
        Ok(Producer { seg, lay, head })
    }

    /// The ring's layout.
    pub fn layout(&self) -> RingLayout {
        self.lay
    }

    fn tail(&self) -> Result<u64, Corrupt> {
        let tail = self.seg.u64_at(self.lay.tail).load(Ordering::Acquire);
        if tail > self.head || self.head - tail > self.lay.cap as u64 {
            return Err(Corrupt("the reader's tail is out of range"));
        }
        Ok(tail)
    }

    /// Bytes free (a record of body `n` needs `8 + n` rounded up to 8, and
    /// a pad when it does not fit before the end).
    pub fn free(&self) -> Result<usize, Corrupt> {
        Ok(self.lay.cap - (self.head - self.tail()?) as usize)
    }

    /// Whether nothing is written and unreleased.
    pub fn is_empty(&self) -> Result<bool, Corrupt> {
        Ok(self.tail()? == self.head)
    }

    /// Appends a record of `kind` whose body is `parts` one after the
    /// other. `Ok(false)`: not enough room now (try again once the
    /// consumer released some). A body above [`RingLayout::max_body`] is
    /// the caller's bug and is refused as `Err`.
    pub fn push(&mut self, kind: u32, parts: &[&[u8]]) -> Result<bool, Corrupt> {
        let body: usize = parts.iter().map(|p| p.len()).sum();
        if body > self.lay.max_body() || kind == PAD {
            return Err(Corrupt("record too large (or of the pad kind) for this ring"));
        }
        let adv = round8(HEADER + body);
        let free = self.free()?;
        let cap = self.lay.cap;
        let mut at = (self.head % cap as u64) as usize;
        let to_end = cap - at;
        let need = if adv <= to_end { adv } else { to_end + adv };
        if need > free {
            return Ok(false);
        }
        if adv > to_end {
            self.header(at, to_end, PAD);
            self.head += to_end as u64;
            at = 0;
        }
        self.header(at, HEADER + body, kind);
        let mut off = self.lay.data + at + HEADER;
        for p in parts {
            self.seg.write(off, p);
            off += p.len();
        }
        self.head += adv as u64;
        self.seg.u64_at(self.lay.head).store(self.head, Ordering::Release);
        Ok(true)
    }

    fn header(&self, at: usize, len: usize, kind: u32) {
        let mut h = [0u8; HEADER];
        h[..4].copy_from_slice(&(len as u32).to_le_bytes());
        h[4..].copy_from_slice(&kind.to_le_bytes());
        self.seg.write(self.lay.data + at, &h);
    }
}

/// The consumer's release bookkeeping, shared with the views it made.
struct Tail {
    seg: Arc<Segment>,
    word: usize,
    /// Released position and the ranges released beyond it (start → end).
    state: Mutex<(u64, BTreeMap<u64, u64>)>,
    on_advance: Box<dyn Fn() + Send + Sync>,
}

impl Tail {
    fn released(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0
    }

    fn release(&self, start: u64, end: u64) {
        {
            let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let (tail, rest) = &mut *g;
            if start != *tail {
                rest.insert(start, end);
                return;
            }
            *tail = end;
            while let Some(e) = rest.remove(tail) {
                *tail = e;
            }
            self.seg.u64_at(self.word).store(*tail, Ordering::Release);
        }
        (self.on_advance)();
    }
}

/// One record taken from a ring: read its body, or turn (part of) it into
/// [`Bytes`]; its space is released when it is dropped (or, for a view,
/// when the last clone of the `Bytes` is).
pub struct Record {
    /// The record's kind.
    pub kind: u32,
    /// Its body's length.
    pub len: usize,
    body: usize,
    start: u64,
    end: u64,
    seg: Arc<Segment>,
    tail: Option<Arc<Tail>>,
}

impl Record {
    /// Copies `dst.len()` bytes of the body from `off`.
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result<(), Corrupt> {
        if off.checked_add(dst.len()).is_none_or(|e| e > self.len) {
            return Err(Corrupt("a field runs past its record"));
        }
        self.seg.read(self.body + off, dst);
        Ok(())
    }

    /// `len` bytes of the body from `off` as [`Bytes`] without a copy; the
    /// record's space stays taken until the last clone is dropped.
    pub fn view(mut self, off: usize, len: usize) -> Result<Bytes, Corrupt> {
        if off.checked_add(len).is_none_or(|e| e > self.len) {
            return Err(Corrupt("a field runs past its record"));
        }
        let tail = self.tail.take().expect("a record is released once");
        let (start, end) = (self.start, self.end);
        let v = View::new(self.seg.clone(), self.body + off, len, Box::new(move || tail.release(start, end)));
        Ok(Bytes::from_owner(v))
    }

    /// `len` bytes of the body from `off`, copied.
    pub fn copy(&self, off: usize, len: usize) -> Result<Bytes, Corrupt> {
        let mut v = vec![0u8; len.min(self.len)];
        self.read(off, &mut v)?;
        if v.len() != len {
            return Err(Corrupt("a field runs past its record"));
        }
        Ok(Bytes::from(v))
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        if let Some(t) = self.tail.take() {
            t.release(self.start, self.end);
        }
    }
}

/// The reading side of a ring.
pub struct Consumer {
    seg: Arc<Segment>,
    lay: RingLayout,
    pos: u64,
    tail: Arc<Tail>,
}

impl Consumer {
    /// The consumer of the ring at `lay`, from the published `tail`;
    /// `on_advance` runs each time released space is published (to wake a
    /// producer waiting for room).
    pub fn new(
        seg: Arc<Segment>,
        lay: RingLayout,
        on_advance: Box<dyn Fn() + Send + Sync>,
    ) -> Result<Consumer, Corrupt> {
        lay.check(seg.len())?;
        let pos = seg.u64_at(lay.tail).load(Ordering::Acquire);
        let tail = Arc::new(Tail {
            seg: seg.clone(),
            word: lay.tail,
            state: Mutex::new((pos, BTreeMap::new())),
            on_advance,
        });
        Ok(Consumer { seg, lay, pos, tail })
    }

    /// Whether a record (or a pad) is waiting.
    pub fn has_input(&self) -> bool {
        self.seg.u64_at(self.lay.head).load(Ordering::Acquire) != self.pos
    }

    /// Bytes taken from the ring and not yet released (held by records or
    /// views still alive).
    pub fn held(&self) -> usize {
        (self.pos - self.tail.released()) as usize
    }

    /// The ring's layout.
    pub fn layout(&self) -> RingLayout {
        self.lay
    }

    /// The next record, if one is waiting (pads are skipped).
    ///
    /// An honest producer writes a pad only right before the record that
    /// did not fit, and publishes both at once; so two pads in a row are
    /// [`Corrupt`]. Without that rule a producer that kept writing pads
    /// (and moving `head`) as fast as they were released would hold the
    /// consumer in this loop for ever.
    pub fn take(&mut self) -> Result<Option<Record>, Corrupt> {
        let mut pads = 0;
        loop {
            let head = self.seg.u64_at(self.lay.head).load(Ordering::Acquire);
            if head == self.pos {
                return Ok(None);
            }
            if head < self.pos || head - self.tail.released() > self.lay.cap as u64 {
                return Err(Corrupt("the writer's head is out of range"));
            }
            let at = (self.pos % self.lay.cap as u64) as usize;
            let mut h = [0u8; HEADER];
            self.seg.read(self.lay.data + at, &mut h);
            let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
            let kind = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
            let adv = round8(len);
            if len < HEADER || adv > self.lay.cap - at || self.pos + adv as u64 > head {
                return Err(Corrupt("a record's length runs past the ring or the written part"));
            }
            let (start, end) = (self.pos, self.pos + adv as u64);
            self.pos = end;
            if kind == PAD {
                pads += 1;
                if pads > 1 {
                    return Err(Corrupt("two pads in a row"));
                }
                self.tail.release(start, end);
                continue;
            }
            return Ok(Some(Record {
                kind,
                len: len - HEADER,
                body: self.lay.data + at + HEADER,
                start,
                end,
                seg: self.seg.clone(),
                tail: Some(self.tail.clone()),
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    const LAY: RingLayout = RingLayout { head: 0, tail: 64, data: 128, cap: 256 };

    fn pair() -> (Producer, Consumer, Arc<AtomicU64>) {
        let seg = Arc::new(Segment::create("ring-test", 4096).unwrap());
        let advances = Arc::new(AtomicU64::new(0));
        let a = advances.clone();
        let c = Consumer::new(
            seg.clone(),
            LAY,
            Box::new(move || {
                a.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .unwrap();
        (Producer::new(seg, LAY).unwrap(), c, advances)
    }

    #[test]
    fn records_cross_in_order_through_many_wraps() {
        let (mut p, mut c, _) = pair();
        let mut sent = 0u32;
        let mut got = 0u32;
        while got < 1000 {
            // Bodies of 0..=40 bytes: pads appear at the wrap.
            while sent < 1000 {
                let body = vec![sent as u8; (sent % 41) as usize];
                if !p.push(7, &[&sent.to_le_bytes(), &body]).unwrap() {
                    break;
                }
                sent += 1;
            }
            while let Some(r) = c.take().unwrap() {
                let mut n = [0u8; 4];
                r.read(0, &mut n).unwrap();
                assert_eq!(u32::from_le_bytes(n), got);
                assert_eq!(r.len, 4 + (got % 41) as usize);
                let body = r.copy(4, r.len - 4).unwrap();
                assert!(body.iter().all(|&b| b == got as u8));
                got += 1;
            }
        }
        assert!(p.is_empty().unwrap());
    }

    #[test]
    fn views_hold_their_space_until_dropped_even_out_of_order() {
        let (mut p, mut c, advances) = pair();
        assert!(p.push(1, &[&[1u8; 56]]).unwrap());
        assert!(p.push(1, &[&[2u8; 56]]).unwrap());
        let a = c.take().unwrap().unwrap().view(0, 56).unwrap();
        let b = c.take().unwrap().unwrap().view(0, 56).unwrap();
        assert_eq!(c.held(), 128);
        // The second released first: the tail cannot move yet.
        drop(b);
        assert_eq!(c.held(), 128);
        assert_eq!(advances.load(Ordering::SeqCst), 0);
        assert!(a.iter().all(|&x| x == 1));
        drop(a);
        assert_eq!(c.held(), 0);
        assert!(p.is_empty().unwrap());
    }

    #[test]
    fn a_full_ring_refuses_without_losing_and_too_large_is_an_error() {
        let (mut p, mut c, _) = pair();
        let mut n = 0;
        while p.push(3, &[&[9u8; 24]]).unwrap() {
            n += 1;
        }
        assert_eq!(n, 256 / 32);
        assert!(p.push(3, &[&[0u8; 57]]).is_err());
        let r = c.take().unwrap().unwrap();
        drop(r);
        assert!(p.push(3, &[&[9u8; 24]]).unwrap());
    }

    #[test]
    fn a_scribbled_head_or_length_is_corrupt_not_a_crash() {
        let (mut p, mut c, _) = pair();
        assert!(p.push(1, &[b"abc"]).unwrap());
        let seg = p.seg.clone();
        // A length running past the written part.
        seg.write(LAY.data, &200u32.to_le_bytes());
        assert!(c.take().is_err());
        // A head beyond the ring.
        seg.u64_at(LAY.head).store(1 << 40, Ordering::SeqCst);
        assert!(c.take().is_err());
        // A tail ahead of the head, seen by the producer.
        seg.u64_at(LAY.tail).store(1 << 40, Ordering::SeqCst);
        assert!(p.push(1, &[b"x"]).is_err());
    }

    #[test]
    fn a_producer_writing_only_pads_cannot_hold_the_consumer() {
        let (p, mut c, _) = pair();
        let seg = p.seg.clone();
        // Two pads of 16 bytes, published together: the second is refused
        // (one honest pad is skipped; see the wrap test above).
        for at in [0usize, 16] {
            seg.write(LAY.data + at, &16u32.to_le_bytes());
            seg.write(LAY.data + at + 4, &PAD.to_le_bytes());
        }
        seg.u64_at(LAY.head).store(32, Ordering::SeqCst);
        assert_eq!(c.take().err(), Some(Corrupt("two pads in a row")));
    }
}
