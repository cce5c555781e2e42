//! The receiving half of a context: reassembly, the cumulative `rseq`, spans of
//! data held beyond it, the allocation edge, and the queue the application
//! reads from.
//!
//! Received payload stays in the `Bytes` of the datagram it came in (slices,
//! no copy) from arrival until the application reads it.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use xtp_wire::Span;

use crate::ranges::RangeSet;

/// A piece of in-order data handed to the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Sequence number of the first byte.
    pub seq: u64,
    /// The bytes (a slice of the received datagram).
    pub data: Bytes,
    /// The last byte ends a message.
    pub eom: bool,
    /// The beginning tag of the message this chunk starts, if any.
    pub btag: Option<u64>,
}

struct Seg {
    data: Bytes,
    eom: bool,
    btag: Option<u64>,
}

/// What one arriving segment did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct RecvOutcome {
    /// Some new byte was stored.
    pub(crate) new_data: bool,
    /// In-order data became readable.
    pub(crate) readable: bool,
    /// The segment lies beyond `rseq` (a hole precedes it).
    pub(crate) out_of_order: bool,
    /// NOERR only: bytes skipped as lost, `(seq, len)`.
    pub(crate) gap: Option<(u64, u64)>,
    /// The segment arrived at `rseq` while later data was held: it fills
    /// (part of) a hole, news the sender is waiting for.
    pub(crate) filled: bool,
}

pub(crate) struct RecvBuf {
    /// Every byte below has been received (`rseq`).
    pub(crate) nxt: u64,
    /// Every byte below has been read by the application.
    pub(crate) read: u64,
    ooo: BTreeMap<u64, Seg>,
    /// The ranges `ooo` covers, kept alongside so span reports cost O(spans)
    /// and not O(segments held).
    held: RangeSet,
    ready: VecDeque<Chunk>,
    /// The peer's end of data, once its WCLOSE arrived.
    pub(crate) fin: Option<u64>,
    /// How far `alloc` runs ahead of `read`.
    buffer: u64,
    /// Largest `buffer` may grow to (dynamic right-sizing).
    max_buffer: u64,
    noerr: bool,
    /// Bytes dropped on arrival for lying beyond the advertised window, or
    /// beyond the bound on out-of-order segments / unread NOERR data.
    pub(crate) dropped: u64,
    /// Bytes in `ready` (under NOERR, `nxt - read` also counts skipped gaps).
    queued: u64,
}

impl RecvBuf {
    /// A buffer of `buffer` bytes that may grow to `max_buffer`.
    pub(crate) fn new(buffer: usize, max_buffer: usize, noerr: bool) -> Self {
        RecvBuf {
            nxt: 0,
            read: 0,
            ooo: BTreeMap::new(),
            held: RangeSet::new(),
            ready: VecDeque::new(),
            fin: None,
            buffer: buffer as u64,
            max_buffer: max_buffer.max(buffer) as u64,
            noerr,
            dropped: 0,
            queued: 0,
        }
    }

    /// The current buffer size (grows from the configured size).
    pub(crate) fn buffer(&self) -> u64 {
        self.buffer
    }

    /// Number of spans held beyond `nxt`.
    pub(crate) fn span_count(&self) -> usize {
        self.held.len()
    }

    /// The largest the buffer may grow to.
    pub(crate) fn max_buffer(&self) -> u64 {
        self.max_buffer
    }

    /// Grows the buffer to `bytes` (never shrinks it), up to its maximum.
    /// Returns whether it grew.
    pub(crate) fn grow_to(&mut self, bytes: u64) -> bool {
        let new = bytes.min(self.max_buffer);
        let grew = new > self.buffer;
        self.buffer = self.buffer.max(new);
        grew
    }

    /// The allocation edge we advertise: the peer may send below it.
    pub(crate) fn alloc(&self) -> u64 {
        self.read + self.buffer
    }

    /// Whether all the peer's data up to its WCLOSE has been received.
    pub(crate) fn complete(&self) -> bool {
        self.fin == Some(self.nxt)
    }

    /// Whether data waits to be read.
    pub(crate) fn readable(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Bytes waiting to be read.
    pub(crate) fn ready_bytes(&self) -> u64 {
        self.queued
    }

    /// The peer announced its end of data at `end`. Under NOERR, whatever is
    /// still missing before it will never come: returned as a gap `(seq, len)`.
    pub(crate) fn set_fin(&mut self, end: u64) -> Option<(u64, u64)> {
        if self.fin.is_none() {
            self.fin = Some(end);
        }
        if self.noerr && end > self.nxt && self.fin == Some(end) {
            let gap = (self.nxt, end - self.nxt);
            self.nxt = end;
            return Some(gap);
        }
        None
    }

    /// Takes the next readable chunk.
    pub(crate) fn read_chunk(&mut self) -> Option<Chunk> {
        let c = self.ready.pop_front()?;
        self.read += c.data.len() as u64;
        self.queued -= c.data.len() as u64;
        Some(c)
    }

    fn push_ready(&mut self, seq: u64, seg: Seg) {
        // Callers checked `seq + len` (the endpoint drops overflowing
        // packets); saturate rather than trust that from here.
        self.nxt = seq.saturating_add(seg.data.len() as u64);
        self.queued += seg.data.len() as u64;
        self.ready.push_back(Chunk { seq, data: seg.data, eom: seg.eom, btag: seg.btag });
    }

    /// Stores a segment; trims what was already received or lies beyond the
    /// allocation edge.
    pub(crate) fn on_data(&mut self, seq: u64, data: Bytes, eom: bool, btag: Option<u64>) -> RecvOutcome {
        let mut out = RecvOutcome::default();
        let len = data.len() as u64;
        if self.noerr {
            return self.on_data_noerr(seq, data, eom, btag);
        }
        let end = seq.saturating_add(len);
        let alloc = self.alloc();
        if end <= self.nxt || seq >= alloc {
            out.out_of_order = seq > self.nxt;
            if seq >= alloc {
                // A sender keeping to our window never sends here: the peer
                // ignores flow control or the packet is forged.
                self.dropped += len;
            }
            return out;
        }
        // Trim the front (already received) and the back (beyond alloc).
        let (mut s, mut seg) = (seq, Seg { data, eom, btag });
        if s < self.nxt {
            let cut = (self.nxt - s) as usize;
            seg.data = seg.data.slice(cut..);
            seg.btag = None;
            s = self.nxt;
        }
        if s + seg.data.len() as u64 > alloc {
            self.dropped += s + seg.data.len() as u64 - alloc;
            seg.data.truncate((alloc - s) as usize);
            seg.eom = false;
        }
        if s > self.nxt {
            out.out_of_order = true;
            // The window bounds the bytes held out of order; this bounds the
            // segments (each pins its whole datagram): tiny forged segments
            // spread over the window must not cost a datagram each.
            if self.ooo.len() >= self.max_segments() {
                self.dropped += seg.data.len() as u64;
                return out;
            }
            out.new_data = self.insert_ooo(s, seg);
            return out;
        }
        out.new_data = true;
        out.filled = !self.held.is_empty();
        self.push_ready(s, seg);
        // Pull in whatever is now contiguous.
        while let Some(entry) = self.ooo.first_entry() {
            let k = *entry.key();
            if k > self.nxt {
                break;
            }
            let mut seg = entry.remove();
            let e = k + seg.data.len() as u64;
            if e <= self.nxt {
                continue;
            }
            if k < self.nxt {
                seg.data = seg.data.slice((self.nxt - k) as usize..);
                seg.btag = None;
            }
            let at = self.nxt;
            self.push_ready(at, seg);
        }
        self.held.clear_below(self.nxt);
        out.readable = true;
        out
    }

    /// Most out-of-order segments held: one per 256 bytes of window (a
    /// full-sized packet carries over 1,000), at least 64.
    fn max_segments(&self) -> usize {
        usize::try_from(self.buffer / 256).unwrap_or(usize::MAX).max(64)
    }

    /// Inserts beyond `nxt`, keeping stored segments disjoint. Returns whether
    /// any new byte was stored.
    fn insert_ooo(&mut self, s: u64, mut seg: Seg) -> bool {
        let mut start = s;
        // Trim against the segment before.
        if let Some((&k, prev)) = self.ooo.range(..=start).next_back() {
            let pe = k + prev.data.len() as u64;
            if pe >= start + seg.data.len() as u64 {
                return false;
            }
            if pe > start {
                seg.data = seg.data.slice((pe - start) as usize..);
                seg.btag = None;
                start = pe;
            }
        }
        // Trim against the next one(s): keep only up to the next start; the
        // rest of the new segment (if any) goes in after it.
        let mut stored = false;
        loop {
            let end = start + seg.data.len() as u64;
            let next = self.ooo.range(start..end).next().map(|(&k, v)| (k, k + v.data.len() as u64));
            match next {
                None => {
                    if !seg.data.is_empty() {
                        self.held.insert(start, end);
                        self.ooo.insert(start, seg);
                        stored = true;
                    }
                    return stored;
                }
                Some((nk, ne)) => {
                    if nk > start {
                        let head =
                            Seg { data: seg.data.slice(..(nk - start) as usize), eom: false, btag: seg.btag };
                        self.held.insert(start, nk);
                        self.ooo.insert(start, head);
                        stored = true;
                    }
                    if ne >= end {
                        return stored;
                    }
                    seg.data = seg.data.slice((ne - start) as usize..);
                    seg.btag = None;
                    start = ne;
                }
            }
        }
    }

    fn on_data_noerr(&mut self, seq: u64, mut data: Bytes, eom: bool, mut btag: Option<u64>) -> RecvOutcome {
        let mut out = RecvOutcome::default();
        let Some(end) = seq.checked_add(data.len() as u64) else {
            return out; // forged: no sender reaches 2^64 (the endpoint counts these)
        };
        if end <= self.nxt {
            return out; // late: its place was already reported as a gap
        }
        let mut s = seq;
        if s < self.nxt {
            data = data.slice((self.nxt - s) as usize..);
            btag = None;
            s = self.nxt;
        }
        // No retransmission fills a NOERR gap, so nothing is held out of
        // order; but a reader that falls behind must not let unread data
        // grow without bound (NOFLOW senders ignore our window): beyond one
        // buffer of unread data, arrivals are dropped and counted.
        if self.ready_bytes().saturating_add(data.len() as u64) > self.buffer {
            self.dropped += data.len() as u64;
            return out;
        }
        if s > self.nxt {
            out.gap = Some((self.nxt, s - self.nxt));
        }
        out.new_data = true;
        out.readable = true;
        self.push_ready(s, Seg { data, eom, btag });
        out
    }

    /// Spans of data held beyond `nxt`, at most `max`: when there are more,
    /// the lowest half (where retransmissions fill holes) and the highest
    /// half (where new data arrives). The sender accumulates what reports
    /// tell it, so the middle was already reported when it was the top.
    pub(crate) fn spans(&self, max: usize) -> Vec<Span> {
        let span = |(left, right)| Span { left, right };
        if self.held.len() <= max {
            return self.held.iter().map(span).collect();
        }
        let high = max / 2;
        let mut out: Vec<Span> = self.held.iter().take(max - high).map(span).collect();
        let top: Vec<Span> = self.held.iter().rev().take(high).map(span).collect();
        out.extend(top.into_iter().rev());
        out
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn bytes(range: std::ops::Range<u64>) -> Bytes {
        range.map(|i| (i * 31 % 251) as u8).collect::<Vec<u8>>().into()
    }

    proptest! {
        /// Any arrival order with duplicates and overlaps reassembles exactly.
        #[test]
        fn reassembles_any_order(cuts in prop::collection::vec(1u64..500, 1..30), order in any::<prop::sample::Index>(), dups in 0usize..10) {
            let mut pieces: Vec<(u64, u64)> = Vec::new();
            let mut at = 0;
            for c in &cuts { pieces.push((at, at + c)); at += c; }
            let total = at;
            // Overlapping duplicates.
            for i in 0..dups { let (s, e) = pieces[(i * 7) % pieces.len()]; pieces.push((s.saturating_sub(3), (e + 5).min(total))); }
            let k = order.index(pieces.len());
            pieces.rotate_left(k);
            pieces.reverse();
            let mut r = RecvBuf::new(1 << 20, 1 << 20, false);
            for (s, e) in pieces { r.on_data(s, bytes(s..e), e == total, None); }
            prop_assert_eq!(r.nxt, total);
            prop_assert!(r.spans(100).is_empty());
            let mut got = Vec::new();
            while let Some(c) = r.read_chunk() { got.extend_from_slice(&c.data); }
            prop_assert_eq!(Bytes::from(got), bytes(0..total));
        }
    }

    #[test]
    fn spans_alloc_and_trimming() {
        let mut r = RecvBuf::new(1000, 1000, false);
        r.on_data(100, bytes(100..200), false, None);
        r.on_data(200, bytes(200..300), false, None);
        r.on_data(500, bytes(500..600), false, None);
        assert_eq!(r.spans(10), vec![Span { left: 100, right: 300 }, Span { left: 500, right: 600 }]);
        assert_eq!(r.spans(1), vec![Span { left: 100, right: 300 }]);
        r.on_data(700, bytes(700..800), false, None);
        assert_eq!(
            r.spans(2),
            vec![Span { left: 100, right: 300 }, Span { left: 700, right: 800 }],
            "lowest and highest when they do not all fit"
        );
        // Beyond alloc (1000) is trimmed.
        r.on_data(950, bytes(950..1100), true, None);
        assert_eq!(r.spans(10).last(), Some(&Span { left: 950, right: 1000 }));
        let o = r.on_data(0, bytes(0..100), false, Some(5));
        assert!(o.readable && !o.out_of_order && o.filled);
        assert_eq!(r.nxt, 300);
        assert_eq!(r.read_chunk().map(|c| (c.seq, c.btag)), Some((0, Some(5))));
        assert_eq!(r.alloc(), 1100);
        assert_eq!(r.span_count(), 3);
    }

    #[test]
    fn buffer_grows_up_to_its_maximum() {
        let mut r = RecvBuf::new(1000, 4000, false);
        assert!(!r.grow_to(500), "never shrinks");
        assert!(r.grow_to(3000));
        assert_eq!(r.alloc(), 3000);
        assert!(r.grow_to(9000));
        assert_eq!(r.buffer(), 4000);
    }

    #[test]
    fn noerr_reports_gaps_and_drops_late_data() {
        let mut r = RecvBuf::new(1000, 1000, true);
        assert_eq!(r.on_data(0, bytes(0..10), false, None).gap, None);
        assert_eq!(r.on_data(20, bytes(20..30), false, None).gap, Some((10, 10)));
        assert!(!r.on_data(10, bytes(10..20), false, None).new_data);
        assert_eq!(r.nxt, 30);
    }
}
