//! Why a packet was rejected.

use core::fmt;

/// A reason to reject bytes as an XTP 4.0 packet. Every variant names what was
/// wrong; the engine counts them and may answer with a DIAG packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Fewer bytes than a field or segment needs.
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// The 3-bit version is not 1 (XTP 4.0).
    BadVersion(u8),
    /// `dlen` disagrees with the number of bytes after the header (more than
    /// the 7 trailing pad bytes tolerated by digest G3, or fewer than `dlen`).
    DlenMismatch {
        /// The header's `dlen`.
        dlen: u32,
        /// Bytes actually following the header.
        available: usize,
    },
    /// `ptype` is 4, 6 (JOIN, obsolete) or unassigned (digest G15).
    UnknownPacketType(u8),
    /// A segment's own length field is impossible or disagrees with its format
    /// or with the packet.
    SegmentLength {
        /// The segment.
        segment: &'static str,
        /// The length found.
        len: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An address or traffic format this implementation does not know.
    UnknownFormat {
        /// The segment.
        segment: &'static str,
        /// The format code.
        format: u8,
    },
    /// `nspan` does not match the ECNTL body length.
    SpanCount {
        /// The `nspan` field.
        nspan: u32,
        /// Bytes of spans present.
        span_bytes: usize,
    },
    /// The Internet checksum does not verify.
    Checksum {
        /// The stored `check` field.
        stored: u16,
        /// The value the field should hold.
        expected: u16,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ParseError::Truncated { what, needed, available } => {
                write!(f, "truncated {what}: need {needed} bytes, have {available}")
            }
            ParseError::BadVersion(v) => write!(f, "bad version {v} (XTP 4.0 is 1)"),
            ParseError::DlenMismatch { dlen, available } => {
                write!(f, "dlen {dlen} does not match the {available} bytes after the header")
            }
            ParseError::UnknownPacketType(t) => write!(f, "unknown packet type {t}"),
            ParseError::SegmentLength { segment, len, reason } => {
                write!(f, "inconsistent {segment} segment length {len}: {reason}")
            }
            ParseError::UnknownFormat { segment, format } => write!(f, "unknown {segment} format {format}"),
            ParseError::SpanCount { nspan, span_bytes } => {
                write!(f, "nspan {nspan} does not match {span_bytes} bytes of spans")
            }
            ParseError::Checksum { stored, expected } => {
                write!(f, "checksum failure: stored {stored:#06x}, expected {expected:#06x}")
            }
        }
    }
}

impl std::error::Error for ParseError {}

/// Why a representation could not be emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmitError {
    /// The buffer is shorter than [`buffer_len`](crate::PacketRepr::buffer_len).
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// A length does not fit its field (e.g. a segment over 65,535 bytes).
    TooLong(&'static str),
}

impl fmt::Display for EmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EmitError::BufferTooSmall { needed, available } => {
                write!(f, "buffer too small: need {needed} bytes, have {available}")
            }
            EmitError::TooLong(what) => write!(f, "{what} too long for its length field"),
        }
    }
}

impl std::error::Error for EmitError {}
