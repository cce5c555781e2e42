//! The sending half of a context: data held until acknowledged, what to send
//! next, and what a status report says was lost.
//!
//! Data is kept as the application's own `Bytes` (no copy) in chunks, one per
//! write. A packet never spans a message boundary, so EOM always falls at a
//! packet end and a BTAG always rides on the packet that starts its message
//! — also when the data is retransmitted (digest G5). Within a message (or
//! an unbroken stream) a packet continues into the next chunks until it is
//! full: a stream written in small pieces still leaves in full packets, as
//! TCP coalesces writes. That costs one copy of those packets' data; a
//! packet from a single chunk is a slice of it, no copy.
//!
//! Which holes are lost is decided in `recovery.rs`; this file keeps the
//! byte-level scoreboard: what the peer holds (`sacked`, from spans and
//! `rseq`) and what waits to be retransmitted (`retx`).

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use xtp_wire::Span;

use crate::ranges::RangeSet;

struct Chunk {
    seq: u64,
    data: Bytes,
    /// The chunk starts a message.
    msg_start: bool,
    /// The chunk ends a message.
    eom: bool,
    btag: Option<u64>,
}

impl Chunk {
    fn end(&self) -> u64 {
        self.seq + self.data.len() as u64
    }
}

/// One packet's worth of data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) seq: u64,
    pub(crate) data: Bytes,
    /// Whether `data` was copied together from several written pieces
    /// (else it is a slice of one, uncopied).
    pub(crate) joined: bool,
    pub(crate) eom: bool,
    pub(crate) btag: Option<u64>,
    pub(crate) retransmit: bool,
}

/// A report pointed outside what we sent.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct InvalidReport;

pub(crate) struct SendBuf {
    chunks: VecDeque<Chunk>,
    /// Lowest unacknowledged byte.
    pub(crate) una: u64,
    /// Next byte never sent.
    pub(crate) nxt: u64,
    /// End of the data written so far.
    pub(crate) end: u64,
    /// Where the data ends once the application closed its writing side.
    pub(crate) fin: Option<u64>,
    /// Lost, waiting to be retransmitted.
    retx: RangeSet,
    /// Held by the peer beyond `una` (from spans).
    sacked: RangeSet,
    /// The spans of the last report applied, as it listed them: already in
    /// `sacked`, so the next report's copies of them cost a comparison, not
    /// two tree operations.
    last_spans: Vec<(u64, u64)>,
    at_msg_start: bool,
    /// NOERR: keep nothing once sent.
    noerr: bool,
}

impl SendBuf {
    pub(crate) fn new(noerr: bool) -> Self {
        SendBuf {
            chunks: VecDeque::new(),
            una: 0,
            nxt: 0,
            end: 0,
            fin: None,
            retx: RangeSet::new(),
            sacked: RangeSet::new(),
            last_spans: Vec::new(),
            at_msg_start: true,
            noerr,
        }
    }

    /// Queues data; `eom` ends a message, `btag` tags the message this write
    /// starts (ignored when the write continues a message).
    ///
    /// An empty write with `eom` ends the current message if its last byte has
    /// not left yet; otherwise it is ignored (a message is at least one byte).
    pub(crate) fn write(&mut self, data: Bytes, eom: bool, btag: Option<u64>) {
        if data.is_empty() {
            if eom
                && let Some(last) = self.chunks.back_mut()
                && last.end() > self.nxt
            {
                last.eom = true;
                self.at_msg_start = true;
            }
            return;
        }
        let msg_start = self.at_msg_start;
        let len = data.len() as u64;
        self.chunks.push_back(Chunk {
            seq: self.end,
            data,
            msg_start,
            eom,
            btag: if msg_start { btag } else { None },
        });
        self.end += len;
        self.at_msg_start = eom;
    }

    /// Bytes written but not yet acknowledged.
    pub(crate) fn unacked(&self) -> u64 {
        self.end - self.una
    }

    /// Bytes written and never sent.
    pub(crate) fn unsent(&self) -> u64 {
        self.end - self.nxt
    }

    /// Bytes sent, not acknowledged, not known held and not known lost.
    pub(crate) fn in_flight(&self) -> u64 {
        (self.nxt - self.una).saturating_sub(self.sacked.covered() + self.retx.covered())
    }

    /// Whether anything waits to be retransmitted.
    pub(crate) fn has_retransmit(&self) -> bool {
        !self.retx.is_empty()
    }

    /// Whether new data waits to be sent.
    pub(crate) fn has_new(&self) -> bool {
        self.nxt < self.end
    }

    /// Whether everything written has been acknowledged.
    pub(crate) fn all_acked(&self) -> bool {
        self.una == self.end
    }

    fn chunk_index(&self, seq: u64) -> Option<usize> {
        let i = self.chunks.partition_point(|c| c.end() <= seq);
        (i < self.chunks.len() && self.chunks[i].seq <= seq).then_some(i)
    }

    /// The bytes from `seq` up to the end of its message: at most `max` of
    /// data, and the data plus its BTAG (8 bytes, when the segment starts a
    /// tagged message) at most `room`, so the tag is counted in the packet
    /// size (G5).
    fn cut(&self, seq: u64, max: u64, room: u64, retransmit: bool) -> Option<Segment> {
        let i = self.chunk_index(seq)?;
        let c = &self.chunks[i];
        let off = (seq - c.seq) as usize;
        let btag = if off == 0 && c.msg_start { c.btag } else { None };
        let room = room.saturating_sub(if btag.is_some() { 8 } else { 0 });
        let want = max.min(room) as usize;
        let len = (c.data.len() - off).min(want);
        if len == 0 {
            return None;
        }
        let end = off + len;
        let eom = c.eom && end == c.data.len();
        let continues = self.chunks.get(i + 1).is_some_and(|n| !n.msg_start);
        if len == want || eom || !continues {
            return Some(Segment { seq, data: c.data.slice(off..end), joined: false, eom, btag, retransmit });
        }
        // The packet has room left and the message goes on in the next
        // chunk: fill it from the chunks that follow, up to a message's end.
        let mut data = BytesMut::with_capacity(want);
        data.extend_from_slice(&c.data[off..]);
        let mut eom = false;
        for n in self.chunks.range(i + 1..) {
            if n.msg_start || data.len() == want {
                break;
            }
            let take = n.data.len().min(want - data.len());
            data.extend_from_slice(&n.data[..take]);
            if take == n.data.len() && n.eom {
                eom = true;
                break;
            }
        }
        Some(Segment { seq, data: data.freeze(), joined: true, eom, btag, retransmit })
    }

    /// The next segment to send: the lowest hole to retransmit, else new data
    /// below `limit` (the flow/congestion edge). At most `max` bytes of data,
    /// and at most `room` bytes of data and BTAG together. Retransmissions
    /// only if `retransmit` (the congestion window has room).
    pub(crate) fn next_segment(
        &self,
        max: usize,
        room: usize,
        limit: u64,
        retransmit: bool,
    ) -> Option<Segment> {
        let (max, room) = (max as u64, room as u64);
        if let Some((s, e)) = self.retx.first() {
            // Lost data goes first; if the window has no room now, nothing
            // new may overtake it.
            return if retransmit { self.cut(s, max.min(e - s), room, true) } else { None };
        }
        if self.nxt < self.end && self.nxt < limit {
            return self.cut(self.nxt, max.min(limit - self.nxt), room, false);
        }
        None
    }

    /// Whether another segment would follow `seg` (sent under `limit`).
    pub(crate) fn more_after(&self, seg: &Segment, limit: u64) -> bool {
        let end = seg.seq + seg.data.len() as u64;
        if seg.retransmit {
            return self.retx.covered() > seg.data.len() as u64 || (self.nxt < self.end && self.nxt < limit);
        }
        end < self.end && end < limit
    }

    /// Records that `seg` left.
    pub(crate) fn on_sent(&mut self, seg: &Segment) {
        let (s, e) = (seg.seq, seg.seq + seg.data.len() as u64);
        if seg.retransmit {
            self.retx.remove(s, e);
        } else {
            self.nxt = self.nxt.max(e);
        }
        if self.noerr {
            // Nothing is kept for retransmission: the data counts as delivered.
            self.una = self.nxt;
            self.release();
        }
    }

    /// Drops chunks and bookkeeping below `una`.
    fn release(&mut self) {
        while self.chunks.front().is_some_and(|c| c.end() <= self.una) {
            self.chunks.pop_front();
        }
        self.retx.clear_below(self.una);
        self.sacked.clear_below(self.una);
    }

    /// Applies the acknowledgement part of a status report: cumulative
    /// `rseq` and the `spans` held beyond it. Calls `covered` for every range
    /// the report newly shows held; returns the bytes newly acknowledged and
    /// the bytes it took off the retransmit queue (marked lost, not yet
    /// resent, but held after all: the loss was reordering).
    pub(crate) fn apply_report(
        &mut self,
        rseq: u64,
        spans: &[Span],
        mut covered: impl FnMut(u64, u64),
    ) -> Result<(u64, u64), InvalidReport> {
        if rseq > self.nxt || spans.iter().any(|s| s.right > self.nxt || s.left < rseq || s.left >= s.right) {
            return Err(InvalidReport);
        }
        if self.noerr {
            return Ok((0, 0));
        }
        let marked = self.retx.covered();
        let mut newly = 0;
        if rseq > self.una {
            self.sacked.for_each_gap(self.una, rseq, |a, b| {
                newly += b - a;
                covered(a, b);
            });
            self.una = rseq;
            self.release();
        }
        // A report lists every span the peer holds (up to what fits), so at
        // a large window with a few hundred holes consecutive reports repeat
        // nearly all of them: re-inserting each was O(spans · log n) per
        // report, 10× the report's other work at 64 MB and 1 % loss
        // (`benches/window.rs`). A span inside one the last report listed is
        // already held and not marked for retransmission (losses are marked
        // only in gaps of `sacked`, and `sacked` only grows above `una`):
        // skip it. Both lists come in ascending order from a well-behaved
        // peer; a disordered one only loses the shortcut.
        let mut j = 0;
        let mut last = std::mem::take(&mut self.last_spans);
        for s in spans {
            while j < last.len() && last[j].1 <= s.left {
                j += 1;
            }
            if j < last.len() && last[j].0 <= s.left && s.right <= last[j].1 {
                debug_assert!(
                    s.right <= self.una || self.sacked.contains_range(s.left.max(self.una), s.right),
                    "a span skipped as already held is not in the scoreboard"
                );
                continue;
            }
            let left = s.left.max(self.una);
            newly += self.sacked.insert_with(left, s.right, &mut covered);
            self.retx.remove(left, s.right);
        }
        // A report without spans (a CNTL, a TCNTL) says nothing new about
        // what lies beyond rseq: keep the last list, still all held.
        if !spans.is_empty() {
            last.clear();
            last.extend(spans.iter().map(|s| (s.left, s.right)));
        }
        self.last_spans = last;
        Ok((newly, marked - self.retx.covered()))
    }

    /// Whether the peer holds all of `[seq, end)`.
    pub(crate) fn holds(&self, seq: u64, end: u64) -> bool {
        end <= self.una || self.sacked.contains_range(seq.max(self.una), end)
    }

    /// Marks what the peer does not hold of `[seq, end)` for retransmission;
    /// returns the bytes newly marked.
    pub(crate) fn mark_lost(&mut self, seq: u64, end: u64) -> u64 {
        let mut gaps = Vec::new();
        self.sacked.for_each_gap(seq.max(self.una), end, |a, b| gaps.push((a, b)));
        gaps.into_iter().map(|(a, b)| self.retx.insert_with(a, b, |_, _| {})).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf_with(n: usize) -> SendBuf {
        let mut b = SendBuf::new(false);
        b.write(Bytes::from(vec![7u8; n]), true, Some(99));
        b
    }

    fn send_all(b: &mut SendBuf, mss: usize) -> Vec<Segment> {
        let mut out = Vec::new();
        while let Some(s) = b.next_segment(mss, usize::MAX, u64::MAX, true) {
            b.on_sent(&s);
            out.push(s);
        }
        out
    }

    #[test]
    fn segments_respect_messages_and_tags() {
        let mut b = SendBuf::new(false);
        b.write(Bytes::from_static(b"hello "), false, Some(1));
        b.write(Bytes::from_static(b"world"), true, Some(2)); // continues the message: tag ignored
        b.write(Bytes::from_static(b"next"), true, Some(3));
        let segs = send_all(&mut b, 4);
        let shape: Vec<(u64, usize, bool, Option<u64>)> =
            segs.iter().map(|s| (s.seq, s.data.len(), s.eom, s.btag)).collect();
        assert_eq!(
            shape,
            vec![
                (0, 4, false, Some(1)),
                // Within a message a packet runs on into the next write.
                (4, 4, false, None),
                (8, 3, true, None),
                (11, 4, true, Some(3))
            ]
        );
        assert_eq!(&segs[1].data[..], b"o wo");
        // Only the packet that runs on into the next write was copied
        // together (E9 counts it); the others are slices of one write.
        let joined: Vec<bool> = segs.iter().map(|s| s.joined).collect();
        assert_eq!(joined, vec![false, true, false, false]);
    }

    /// A stream written in small pieces leaves in full packets (the writes
    /// of a sender topping up its queue as reports free room), and a
    /// retransmission spanning two writes is one packet again.
    #[test]
    fn small_writes_coalesce_into_full_packets() {
        let mut b = SendBuf::new(false);
        let mut expect = Vec::new();
        for i in 0..100u8 {
            let piece = vec![i; 37 + usize::from(i % 5)];
            expect.extend_from_slice(&piece);
            b.write(Bytes::from(piece), false, None);
        }
        let segs = send_all(&mut b, 1000);
        let sizes: Vec<usize> = segs.iter().map(|s| s.data.len()).collect();
        assert_eq!(sizes, vec![1000, 1000, 1000, 900], "full packets, the rest last");
        let joined: Vec<u8> = segs.iter().flat_map(|s| s.data.iter().copied()).collect();
        assert_eq!(joined, expect, "the bytes in order");
        assert!(segs.iter().all(|s| !s.eom && s.btag.is_none()));
        // Bytes 950..1950 lost: resent as one packet across several writes.
        b.apply_report(0, &[Span { left: 1950, right: 3900 }], |_, _| {}).unwrap();
        b.mark_lost(950, 1950);
        let r = b.next_segment(1000, usize::MAX, u64::MAX, true).unwrap();
        assert_eq!((r.seq, r.data.len(), r.retransmit), (950, 1000, true));
        assert_eq!(&r.data[..], &expect[950..1950]);
    }

    #[test]
    fn btag_counts_in_the_packet_size() {
        let mut b = SendBuf::new(false);
        b.write(Bytes::from(vec![1u8; 100]), true, Some(5));
        b.write(Bytes::from(vec![2u8; 100]), true, None);
        let s = b.next_segment(1000, 58, u64::MAX, true).unwrap();
        assert_eq!((s.data.len(), s.btag), (50, Some(5)), "50 bytes of data + 8 of tag in 58");
        b.on_sent(&s);
        assert_eq!(
            b.next_segment(1000, 58, u64::MAX, true).map(|s| s.data.len()),
            Some(50),
            "the rest, untagged"
        );
    }

    #[test]
    fn scoreboard_marks_only_what_the_peer_lacks() {
        let mut b = buf_with(10_000);
        send_all(&mut b, 1000);
        let spans = [Span { left: 3000, right: 5000 }, Span { left: 7000, right: 10_000 }];
        let mut covered = Vec::new();
        assert_eq!(b.apply_report(1000, &spans, |a, z| covered.push((a, z))), Ok((6000, 0)));
        assert_eq!(covered, vec![(0, 1000), (3000, 5000), (7000, 10_000)]);
        assert!(b.holds(3000, 4000) && !b.holds(2000, 4000));
        // A packet covering [2000, 8000) was lost: only the holes are resent.
        assert_eq!(b.mark_lost(2000, 8000), 3000);
        assert_eq!(b.mark_lost(2000, 8000), 0, "already marked");
        assert_eq!(
            b.next_segment(1000, usize::MAX, u64::MAX, true).map(|s| (s.seq, s.retransmit)),
            Some((2000, true))
        );
        assert_eq!(b.in_flight(), 9000 - 5000 - 3000);
        // The same report again changes nothing; one beyond what was sent is refused.
        assert_eq!(b.apply_report(1000, &spans, |_, _| {}), Ok((0, 0)));
        assert_eq!(b.apply_report(20_000, &[], |_, _| {}), Err(InvalidReport));
        // A retransmitted range reported held leaves the retransmit queue.
        assert_eq!(
            b.apply_report(1000, &[Span { left: 1000, right: 3000 }], |_, _| {}),
            Ok((2000, 1000)),
            "[2000, 3000) was marked lost, not yet resent"
        );
        assert_eq!(b.next_segment(1000, usize::MAX, u64::MAX, true).map(|s| s.seq), Some(5000));
    }

    #[test]
    fn ack_releases_and_in_flight_counts() {
        let mut b = buf_with(4000);
        send_all(&mut b, 1000);
        assert_eq!(b.in_flight(), 4000);
        assert_eq!(b.apply_report(1000, &[Span { left: 2000, right: 3000 }], |_, _| {}), Ok((2000, 0)));
        assert_eq!(b.in_flight(), 2000);
        assert_eq!(b.apply_report(4000, &[], |_, _| {}), Ok((2000, 0)));
        assert!(b.all_acked());
        assert_eq!(b.in_flight(), 0);
        assert!(b.chunks.is_empty());
    }
}
