//! The deliberately copying message form: seed 000's Estelle "Limit".
//!
//! Estelle has no arrays of variable size, so the implementations the
//! Estelle compilers generated from the XTP specification carried every
//! packet in a record of the maximum payload fixed when the code was
//! generated (the "Limit": 10, 1,000 or 10,000 bytes), and every crossing of
//! an interaction point copied the whole record, used or not (seed 000,
//! §4.1.2 and Tables 2–3). [`Limit<L>`] reproduces that cost inside this
//! framework so it can be measured beside the zero-copy forms (experiment
//! E10): it is a [`Contig`] inside a protocol, and each time a message is
//! made from a payload, a shared chunk or a received buffer
//! (`from_payload`, `from_shared`, `from_received`) or turned into `Bytes`
//! (`into_bytes`) it copies a record of `max(L, len)` bytes: the message's
//! own bytes and then the unused rest of the record. With XTP in the graph
//! (`xtp_proto::layer`) that makes two records per message going into XTP
//! — from the application (made by `from_shared`, then `into_bytes` when
//! XTP takes it) and from the device (`from_received`, then `into_bytes`)
//! — and one per message coming out of XTP, to the device
//! (`from_received` of the frame) and to the application (`from_shared` of
//! the delivered chunk). Nothing else differs, so the packets on the wire
//! are those of the other forms.
//!
//! Every record copy is counted ([`crate::copy_stats`]) at its full size.

use core::fmt;
use core::ops::Range;
use std::cell::RefCell;

use bytes::{Bytes, BytesMut};

use crate::copies::count_copy;
use crate::{Contig, Msg, TooShort};

thread_local! {
    /// The unused part of a record: copied after the message's bytes so
    /// that each crossing moves the whole record, as the generated code did.
    static RECORD_TAIL: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A message copied at its maximum size `L` at every crossing.
pub struct Limit<const L: usize>(Contig);

impl<const L: usize> Limit<L> {
    /// Copies `len` bytes given as chunks into a fresh record of
    /// `max(L, len)` bytes behind `headroom`, then drops the unused tail
    /// (it was copied, which is the point, but is not message content).
    fn cross(headroom: usize, len: usize, chunks: impl FnOnce(&mut BytesMut)) -> Self {
        let record = L.max(len);
        let mut buf = BytesMut::with_capacity(headroom + record);
        buf.resize(headroom, 0);
        chunks(&mut buf);
        RECORD_TAIL.with(|t| {
            let mut t = t.borrow_mut();
            if t.len() < record - len {
                t.resize(record - len, 0);
            }
            buf.extend_from_slice(&t[..record - len]);
        });
        count_copy(record);
        buf.truncate(headroom + len);
        let mut c = Contig::from_received(buf);
        // Cannot fail: the buffer holds `headroom` bytes before the message.
        let _ = c.pop(headroom);
        Limit(c)
    }

    /// The maximum size of a record.
    pub const LIMIT: usize = L;
}

impl<const L: usize> fmt::Debug for Limit<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limit").field("limit", &L).field("len", &self.0.len()).finish()
    }
}

impl<const L: usize> Msg for Limit<L> {
    const COPIES_AT_CROSSING: bool = true;

    fn with_headroom(headroom: usize) -> Self {
        Limit(Contig::with_headroom(headroom))
    }

    fn from_payload(payload: Bytes, headroom: usize) -> Self {
        Self::cross(headroom, payload.len(), |b| b.extend_from_slice(&payload))
    }

    fn from_shared(payload: Bytes) -> Self {
        Self::cross(0, payload.len(), |b| b.extend_from_slice(&payload))
    }

    fn from_received(buf: BytesMut) -> Self {
        Self::cross(0, buf.len(), |b| b.extend_from_slice(&buf))
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn push(&mut self, n: usize) -> &mut [u8] {
        self.0.push(n)
    }

    fn peek(&mut self, n: usize) -> Result<&[u8], TooShort> {
        self.0.peek(n)
    }

    fn pop(&mut self, n: usize) -> Result<&[u8], TooShort> {
        self.0.pop(n)
    }

    fn extend_from_slice(&mut self, data: &[u8]) {
        self.0.extend_from_slice(data)
    }

    fn truncate(&mut self, len: usize) {
        self.0.truncate(len)
    }

    fn split_off(&mut self, at: usize) -> Result<Self, TooShort> {
        self.0.split_off(at).map(Limit)
    }

    fn split_to(&mut self, at: usize) -> Result<Self, TooShort> {
        self.0.split_to(at).map(Limit)
    }

    fn join(&mut self, tail: Self) {
        self.0.join(tail.0)
    }

    fn slice(&mut self, range: Range<usize>) -> Result<Self, TooShort> {
        self.0.slice(range).map(Limit)
    }

    fn for_each_chunk(&self, f: impl FnMut(&[u8])) {
        self.0.for_each_chunk(f)
    }

    fn into_bytes(self) -> Bytes {
        let len = self.0.len();
        Self::cross(0, len, |b| self.0.for_each_chunk(|c| b.extend_from_slice(c))).0.into_bytes()
    }
}
