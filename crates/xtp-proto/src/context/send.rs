//! The sending half of a context: data held until acknowledged, what to send
//! next, and what a status report says was lost.
//!
//! Data is kept as the application's own `Bytes` (no copy) in chunks, one per
//! write. A packet never spans two chunks, so message boundaries (EOM) always
//! fall at a packet end and a BTAG always rides on the packet that starts its
//! message — also when the data is retransmitted (digest G5).
//!
//! Loss detection uses the synchronising handshake (digest §5.3): every packet
//! carries the current `sync`, and each transmitted range remembers the `sync`
//! it last went out with. A report echoing `e` reflects every packet sent with
//! `sync <= e`, so a hole whose data last left with `sync <= e` is lost, and
//! one sent later is still in flight. With spans this is selective repeat;
//! without spans (a CNTL behind the send point) it degenerates to go-back-N
//! from `rseq`.

use std::collections::VecDeque;

use bytes::Bytes;
use xtp_wire::Span;

use crate::ranges::RangeSet;

/// `a <= b` in 32-bit serial-number arithmetic (digest G11).
pub(crate) fn sync_le(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

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
    pub(crate) eom: bool,
    pub(crate) btag: Option<u64>,
    pub(crate) retransmit: bool,
}

/// What a status report changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ReportOutcome {
    /// Bytes newly acknowledged cumulatively or held by the peer.
    pub(crate) newly_acked: u64,
    /// Lowest sequence number found lost, if any.
    pub(crate) first_lost: Option<u64>,
    /// Bytes newly marked for retransmission.
    pub(crate) lost_bytes: u64,
    /// The report pointed outside what we sent.
    pub(crate) invalid: bool,
}

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
    retx: RangeSet,
    sacked: RangeSet,
    /// `(start, end, sync of the last transmission)` covering `[una, nxt)`,
    /// sorted and disjoint. New data appends (O(1)), acknowledgement pops from
    /// the front; only retransmissions splice in the middle.
    sent: VecDeque<(u64, u64, u32)>,
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
            sent: VecDeque::new(),
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

    /// The bytes from `seq`, at most `max` long, within one chunk.
    fn cut(&self, seq: u64, max: u64, retransmit: bool) -> Option<Segment> {
        let c = &self.chunks[self.chunk_index(seq)?];
        let off = (seq - c.seq) as usize;
        let len = (c.data.len() - off).min(max as usize);
        if len == 0 {
            return None;
        }
        let end = off + len;
        Some(Segment {
            seq,
            data: c.data.slice(off..end),
            eom: c.eom && end == c.data.len(),
            btag: if off == 0 && c.msg_start { c.btag } else { None },
            retransmit,
        })
    }

    /// The next segment to send: the lowest hole to retransmit, else new data
    /// below `limit` (the flow/congestion edge). At most `max` bytes.
    pub(crate) fn next_segment(&self, max: usize, limit: u64) -> Option<Segment> {
        let max = max as u64;
        if let Some((s, e)) = self.retx.first() {
            return self.cut(s, max.min(e - s), true);
        }
        if self.nxt < self.end && self.nxt < limit {
            return self.cut(self.nxt, max.min(limit - self.nxt), false);
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

    /// Records that `seg` left with `sync`.
    pub(crate) fn on_sent(&mut self, seg: &Segment, sync: u32) {
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
            return;
        }
        self.stamp(s, e, sync);
    }

    fn stamp(&mut self, s: u64, e: u64, sync: u32) {
        if self.sent.back().is_none_or(|&(_, b, _)| b <= s) {
            self.sent.push_back((s, e, sync));
            return;
        }
        // Replace whatever overlaps [s, e), keeping the parts outside it.
        let first = self.sent.partition_point(|&(_, b, _)| b <= s);
        let last = self.sent.partition_point(|&(a, _, _)| a < e);
        let mut repl: Vec<(u64, u64, u32)> = Vec::with_capacity(3);
        if let Some(&(a, _, y)) = self.sent.get(first)
            && a < s
        {
            repl.push((a, s, y));
        }
        repl.push((s, e, sync));
        if last > first
            && let Some(&(_, b, y)) = self.sent.get(last - 1)
            && b > e
        {
            repl.push((e, b, y));
        }
        self.sent.drain(first..last);
        for (i, r) in repl.into_iter().enumerate() {
            self.sent.insert(first + i, r);
        }
    }

    /// Drops chunks and bookkeeping below `una`.
    fn release(&mut self) {
        while self.chunks.front().is_some_and(|c| c.end() <= self.una) {
            self.chunks.pop_front();
        }
        self.retx.clear_below(self.una);
        self.sacked.clear_below(self.una);
        while let Some(&(a, b, y)) = self.sent.front() {
            if b <= self.una {
                self.sent.pop_front();
            } else {
                if a < self.una {
                    self.sent[0] = (self.una, b, y);
                }
                break;
            }
        }
    }
    /// Applies a status report: cumulative `rseq`, `spans` held beyond it, and
    /// the `echo` telling which of our packets the report reflects (`None`:
    /// the report answers no request of ours, so only acknowledgement is
    /// taken from it).
    pub(crate) fn on_report(&mut self, rseq: u64, spans: &[Span], echo: Option<u32>) -> ReportOutcome {
        let mut out = ReportOutcome::default();
        if rseq > self.nxt || spans.iter().any(|s| s.right > self.nxt || s.left < rseq || s.left >= s.right) {
            out.invalid = true;
            return out;
        }
        if self.noerr {
            return out;
        }
        let before = self.una + self.sacked.covered();
        if rseq > self.una {
            self.una = rseq;
            self.release();
        }
        for s in spans {
            self.sacked.insert(s.left.max(self.una), s.right);
            self.retx.remove(s.left, s.right);
        }
        out.newly_acked = (self.una + self.sacked.covered()).saturating_sub(before);
        let Some(echo) = echo else { return out };
        // Holes: [una, nxt) minus what the peer holds; lost if last sent with
        // sync <= echo.
        let mut holes = RangeSet::new();
        holes.insert(self.una, self.nxt);
        for (a, b) in self.sacked.iter() {
            holes.remove(a, b);
        }
        let mut lost: Vec<(u64, u64)> = Vec::new();
        for (hs, he) in holes.iter() {
            let first = self.sent.partition_point(|&(_, b, _)| b <= hs);
            for &(a, b, y) in self.sent.range(first..).take_while(|&&(a, _, _)| a < he) {
                let (ls, le) = (a.max(hs), b.min(he));
                if ls < le && sync_le(y, echo) {
                    lost.push((ls, le));
                }
            }
        }
        for (a, b) in lost {
            if !self.retx.contains_range(a, b) {
                out.lost_bytes += b - a;
                out.first_lost = Some(out.first_lost.map_or(a, |f: u64| f.min(a)));
                self.retx.insert(a, b);
            }
        }
        out
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

    fn send_all(b: &mut SendBuf, mss: usize, sync: u32) -> Vec<Segment> {
        let mut out = Vec::new();
        while let Some(s) = b.next_segment(mss, u64::MAX) {
            b.on_sent(&s, sync);
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
        let segs = send_all(&mut b, 4, 1);
        let shape: Vec<(u64, usize, bool, Option<u64>)> =
            segs.iter().map(|s| (s.seq, s.data.len(), s.eom, s.btag)).collect();
        assert_eq!(
            shape,
            vec![
                (0, 4, false, Some(1)),
                (4, 2, false, None),
                (6, 4, false, None),
                (10, 1, true, None),
                (11, 4, true, Some(3))
            ]
        );
    }

    #[test]
    fn selective_and_go_back_n_recovery() {
        let mut b = buf_with(10_000);
        send_all(&mut b, 1000, 5); // ten packets with sync 5
        // The peer holds [3000, 5000) and [7000, 10000): holes [0,3000) [5000,7000).
        let spans = [Span { left: 3000, right: 5000 }, Span { left: 7000, right: 10_000 }];
        let out = b.on_report(0, &spans, Some(5));
        assert_eq!(out.lost_bytes, 5000);
        assert_eq!(
            b.next_segment(1000, u64::MAX).map(|s| (s.seq, s.retransmit, s.btag)),
            Some((0, true, Some(99)))
        );
        // A repeated report does not double-count.
        assert_eq!(b.on_report(0, &spans, Some(5)).lost_bytes, 0);
        // Retransmit [0, 3000) with sync 6; a report echoing 5 must not mark it lost again.
        for _ in 0..3 {
            let s = b.next_segment(1000, u64::MAX).unwrap();
            b.on_sent(&s, 6);
        }
        assert_eq!(b.on_report(0, &spans, Some(5)).lost_bytes, 0);
        // Go-back-N: a CNTL at 3000 echoing 6 (no spans) marks [3000, 10000) lost
        // except what was sent after... everything here was sent with sync <= 6.
        let mut g = buf_with(5000);
        send_all(&mut g, 1000, 1);
        let out = g.on_report(2000, &[], Some(1));
        assert_eq!((out.newly_acked, out.lost_bytes, out.first_lost), (2000, 3000, Some(2000)));
        // Invalid: rseq beyond what was sent.
        assert!(g.on_report(9000, &[], Some(1)).invalid);
    }

    #[test]
    fn ack_releases_and_in_flight_counts() {
        let mut b = buf_with(4000);
        send_all(&mut b, 1000, 1);
        assert_eq!(b.in_flight(), 4000);
        let out = b.on_report(1000, &[Span { left: 2000, right: 3000 }], None);
        assert_eq!(out.newly_acked, 2000);
        assert_eq!(b.in_flight(), 2000);
        b.on_report(4000, &[], None);
        assert!(b.all_acked());
        assert_eq!(b.in_flight(), 0);
        assert!(b.chunks.is_empty());
    }
}
