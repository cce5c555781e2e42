//! Messages for the xpress framework (the x-kernel `Msg`, PIX's SingleBuffer and
//! BufferTree).
//!
//! # Contract
//!
//! A message is a byte string that travels down a protocol stack gaining headers
//! and up a stack losing them. Both forms implement the [`Msg`] trait:
//!
//! * [`Contig`] — one contiguous buffer with headroom in front. Headers are
//!   written into the headroom without moving the payload; popping a header just
//!   moves the start. Building it from a separate payload copies the payload once
//!   (that is the trade-off of a single buffer), and joining two buffers that are
//!   not adjacent pieces of one allocation copies the second.
//! * [`Rope`] — a small writable header area followed by a list of shared
//!   [`Bytes`] chunks. The payload is never copied: not to build the message, not
//!   to slice, split or join it. Popping a header that straddles chunks gathers
//!   just those header bytes ("pull-up").
//! * [`Limit<L>`] — deliberately slow: a `Contig` that copies a record of its
//!   maximum size `L` at every crossing between layers (seed 000's Estelle
//!   "Limit"), to measure what the other forms save.
//!
//! Every payload copy made by this crate is counted (see [`copy_stats`]), so
//! experiments can report copies per packet. Counters are per thread and cost a
//! thread-local add on the (already expensive) copy path only.
//!
//! No method panics on a length problem: operations that need more bytes than the
//! message holds return [`TooShort`].

mod contig;
mod copies;
mod limit;
mod rope;

use core::fmt;
use core::ops::Range;

pub use bytes::{Bytes, BytesMut};
pub use contig::Contig;
pub use copies::{CopyStats, copy_stats, reset_copy_stats};
pub use limit::Limit;
pub use rope::Rope;

/// Headroom reserved when a message has to grow its header area.
pub const DEFAULT_HEADROOM: usize = 128;

/// An operation needed more bytes than the message holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooShort {
    /// Bytes the operation needed.
    pub needed: usize,
    /// Bytes the message holds.
    pub available: usize,
}

impl fmt::Display for TooShort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "message too short: needed {} bytes, have {}", self.needed, self.available)
    }
}

impl std::error::Error for TooShort {}

/// The message interface shared by [`Contig`] and [`Rope`].
pub trait Msg: Sized + fmt::Debug {
    /// Whether this form copies a message at every layer crossing by design
    /// (the [`Limit`] form, seed 000's Estelle records). A layer that could
    /// write its output straight into a buffer the layer below lends
    /// (`xk_core::Layer::flush_into`) must then make a message of it
    /// instead, or the crossing's copy the form exists to show would vanish.
    const COPIES_AT_CROSSING: bool = false;

    /// An empty message with `headroom` bytes reserved for headers.
    fn with_headroom(headroom: usize) -> Self;

    /// A message around an application payload, with `headroom` for headers.
    fn from_payload(payload: Bytes, headroom: usize) -> Self;

    /// A message around a shared payload handed upward (a slice of a
    /// received buffer): no copy in either form. `Rope` holds it as one
    /// chunk; `Contig` shares it, and copies only if a header is pushed.
    fn from_shared(payload: Bytes) -> Self;

    /// A message around a buffer a driver received into (no copy).
    fn from_received(buf: BytesMut) -> Self;

    /// Length of the message in bytes.
    fn len(&self) -> usize;

    /// Whether the message is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Prepends `n` bytes and returns them for the caller to write (a header).
    /// Uses headroom when there is enough; otherwise grows the header area.
    fn push(&mut self, n: usize) -> &mut [u8];

    /// Makes the first `n` bytes contiguous and returns them without removing
    /// them.
    fn peek(&mut self, n: usize) -> Result<&[u8], TooShort>;

    /// Removes the first `n` bytes (a header) and returns them.
    fn pop(&mut self, n: usize) -> Result<&[u8], TooShort>;

    /// Appends bytes at the end (copies `data`; counted as a copy).
    fn extend_from_slice(&mut self, data: &[u8]);

    /// Shortens the message to `len` bytes (no-op if already shorter).
    fn truncate(&mut self, len: usize);

    /// Splits at `at`: `self` keeps `[0, at)`, the result is `[at, len)`.
    fn split_off(&mut self, at: usize) -> Result<Self, TooShort>;

    /// Splits at `at`: the result is `[0, at)`, `self` keeps `[at, len)`.
    fn split_to(&mut self, at: usize) -> Result<Self, TooShort>;

    /// Appends `tail` to `self`.
    fn join(&mut self, tail: Self);

    /// A new message sharing bytes `range` of this one.
    fn slice(&mut self, range: Range<usize>) -> Result<Self, TooShort>;

    /// Calls `f` with each contiguous piece, in order (for vectored I/O).
    fn for_each_chunk(&self, f: impl FnMut(&[u8]));

    /// Copies the whole message into `dst[..len]`; counted as a copy.
    fn copy_to_slice(&self, dst: &mut [u8]) -> Result<(), TooShort> {
        let len = self.frame_into(dst)?;
        copies::count_copy(len);
        Ok(())
    }

    /// Copies a frame into the buffer a device sends it from and returns
    /// its length; not counted, as a driver's copy to the kernel is not
    /// (the copy counts are the protocol path's, the same on every path).
    fn frame_into(&self, dst: &mut [u8]) -> Result<usize, TooShort> {
        let len = self.len();
        if dst.len() < len {
            return Err(TooShort { needed: len, available: dst.len() });
        }
        let mut off = 0;
        self.for_each_chunk(|c| {
            dst[off..off + c.len()].copy_from_slice(c);
            off += c.len();
        });
        Ok(len)
    }

    /// The message as one `Bytes`; free when it is one piece, else a counted copy.
    fn into_bytes(self) -> Bytes;

    /// The contents as a vector (tests and diagnostics; not counted).
    fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        self.for_each_chunk(|c| v.extend_from_slice(c));
        v
    }
}

fn check_range(range: &Range<usize>, len: usize) -> Result<(), TooShort> {
    if range.start > range.end || range.end > len {
        return Err(TooShort { needed: range.end.max(range.start), available: len });
    }
    Ok(())
}

fn check_len(needed: usize, available: usize) -> Result<(), TooShort> {
    if needed > available { Err(TooShort { needed, available }) } else { Ok(()) }
}

#[cfg(test)]
mod tests;
