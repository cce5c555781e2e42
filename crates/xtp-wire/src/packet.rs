//! Whole packets: header + body, parsed into and emitted from a representation.

use crate::codec::{Reader, Writer};
use crate::error::{EmitError, ParseError};
use crate::header::{HEADER_LEN, HeaderRepr, Options, Packet, PacketType, VERSION};
use crate::segment::{
    AddressSegment, ControlSegment, DiagSegment, ErrorControlSegment, TrafficControlSegment, TrafficSegment,
};

/// The body of a packet, by type (digest §2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body<'a> {
    /// DATA: optional beginning tag, user data.
    Data {
        /// The BTAG (present iff the BTAG option is set).
        btag: Option<u64>,
        /// User data.
        data: &'a [u8],
    },
    /// CNTL: common control segment.
    Cntl(ControlSegment),
    /// FIRST: address and traffic segments, then optional BTAG and data (G4).
    First {
        /// Who the association is between.
        address: AddressSegment<'a>,
        /// Requested service and limits.
        traffic: TrafficSegment,
        /// The BTAG (present iff the BTAG option is set).
        btag: Option<u64>,
        /// User data carried by the FIRST.
        data: &'a [u8],
    },
    /// ECNTL: error control segment with spans.
    Ecntl(ErrorControlSegment<'a>),
    /// TCNTL: traffic control segment and traffic segment.
    Tcntl {
        /// Control part with `xkey`.
        control: TrafficControlSegment,
        /// Traffic specification.
        traffic: TrafficSegment,
    },
    /// JCNTL: traffic control, address and traffic segments.
    Jcntl {
        /// Control part with `xkey`.
        control: TrafficControlSegment,
        /// Group address.
        address: AddressSegment<'a>,
        /// Traffic specification.
        traffic: TrafficSegment,
    },
    /// DIAG: diagnostic segment.
    Diag(DiagSegment<'a>),
}

impl Body<'_> {
    /// The packet type this body belongs to.
    pub fn ptype(&self) -> PacketType {
        match self {
            Body::Data { .. } => PacketType::Data,
            Body::Cntl(_) => PacketType::Cntl,
            Body::First { .. } => PacketType::First,
            Body::Ecntl(_) => PacketType::Ecntl,
            Body::Tcntl { .. } => PacketType::Tcntl,
            Body::Jcntl { .. } => PacketType::Jcntl,
            Body::Diag(_) => PacketType::Diag,
        }
    }

    /// Bytes of the body (the packet's `dlen`).
    pub fn buffer_len(&self) -> usize {
        let tag = |b: Option<u64>| if b.is_some() { 8 } else { 0 };
        match self {
            Body::Data { btag, data } => tag(*btag) + data.len(),
            Body::Cntl(_) => ControlSegment::LEN,
            Body::First { address, traffic, btag, data } => {
                address.buffer_len() + traffic.buffer_len() + tag(*btag) + data.len()
            }
            Body::Ecntl(e) => e.buffer_len(),
            Body::Tcntl { traffic, .. } => TrafficControlSegment::LEN + traffic.buffer_len(),
            Body::Jcntl { address, traffic, .. } => {
                TrafficControlSegment::LEN + address.buffer_len() + traffic.buffer_len()
            }
            Body::Diag(d) => d.buffer_len(),
        }
    }
}

/// A whole XTP packet as values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketRepr<'a> {
    /// The header fields (`ptype` must agree with the body; `emit` uses the
    /// body's).
    pub header: HeaderRepr,
    /// The body.
    pub body: Body<'a>,
}

/// Whether `parse` checked the checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    /// Reject a packet whose checksum does not verify.
    Checksum,
    /// Skip the check (monitors printing captured bad packets; the engine never
    /// uses this).
    Skip,
}

fn expect_end(r: &Reader<'_>, segment: &'static str) -> Result<(), ParseError> {
    if r.remaining() != 0 {
        return Err(ParseError::SegmentLength {
            segment,
            len: r.remaining(),
            reason: "trailing bytes inside dlen",
        });
    }
    Ok(())
}

impl<'a> PacketRepr<'a> {
    /// Parses and verifies a packet. Never panics, whatever the bytes.
    pub fn parse(bytes: &'a [u8]) -> Result<PacketRepr<'a>, ParseError> {
        Self::parse_with(bytes, Verify::Checksum)
    }

    /// Parses a packet, checking the checksum or not.
    pub fn parse_with(bytes: &'a [u8], verify: Verify) -> Result<PacketRepr<'a>, ParseError> {
        Self::parse_observed(bytes, verify, |_| {})
    }

    /// [`PacketRepr::parse_with`], calling `around_checksum(true)` just
    /// before the checksum is verified and `around_checksum(false)` just
    /// after — so a monitor can time the checksum apart from the rest of
    /// the parse (this crate reads no clock). With a closure that does
    /// nothing it is `parse_with`, instruction for instruction.
    #[inline]
    pub fn parse_observed(
        bytes: &'a [u8],
        verify: Verify,
        mut around_checksum: impl FnMut(bool),
    ) -> Result<PacketRepr<'a>, ParseError> {
        let p = Packet::new_checked(bytes)?;
        if verify == Verify::Checksum {
            around_checksum(true);
            let ok = p.verify_checksum();
            around_checksum(false);
            if !ok {
                return Err(ParseError::Checksum { stored: p.check(), expected: p.expected_checksum() });
            }
        }
        let ptype = PacketType::from_code(p.ptype_code())?;
        let options = p.options();
        let header =
            HeaderRepr { key: p.key(), options, ptype, sort: p.sort(), sync: p.sync(), seq: p.seq() };
        let body_bytes = bytes.get(HEADER_LEN..HEADER_LEN + p.dlen() as usize).unwrap_or(&[]);
        let mut r = Reader::new(body_bytes);
        let has_btag = options.contains(Options::BTAG);
        let body = match ptype {
            PacketType::Data => {
                let btag = if has_btag { Some(r.u64("btag")?) } else { None };
                Body::Data { btag, data: r.rest() }
            }
            PacketType::Cntl => {
                // Digest G3: accept 20 bytes, or 24 with 4 trailing pad bytes.
                let n = r.remaining();
                if n != 20 && n != 24 {
                    return Err(ParseError::SegmentLength {
                        segment: "control",
                        len: n,
                        reason: "CNTL body must be 20 (or padded 24) bytes",
                    });
                }
                Body::Cntl(ControlSegment::parse(&mut r)?)
            }
            PacketType::First => {
                let address = AddressSegment::parse(&mut r)?;
                let traffic = TrafficSegment::parse(&mut r)?;
                let btag = if has_btag { Some(r.u64("btag")?) } else { None };
                Body::First { address, traffic, btag, data: r.rest() }
            }
            PacketType::Ecntl => Body::Ecntl(ErrorControlSegment::parse(&mut r)?),
            PacketType::Tcntl => {
                let control = TrafficControlSegment::parse(&mut r)?;
                let traffic = TrafficSegment::parse(&mut r)?;
                expect_end(&r, "traffic")?;
                Body::Tcntl { control, traffic }
            }
            PacketType::Jcntl => {
                let control = TrafficControlSegment::parse(&mut r)?;
                let address = AddressSegment::parse(&mut r)?;
                let traffic = TrafficSegment::parse(&mut r)?;
                expect_end(&r, "traffic")?;
                Body::Jcntl { control, address, traffic }
            }
            PacketType::Diag => Body::Diag(DiagSegment::parse(&mut r)?),
        };
        Ok(PacketRepr { header, body })
    }

    /// Bytes `emit` writes: 32 + `dlen`.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.body.buffer_len()
    }

    /// Writes the packet into `buf[..buffer_len()]`, filling `dlen`, version,
    /// the BTAG option (from the body) and the checksum. Returns the length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        self.emit_observed(buf, |_| {})
    }

    /// [`PacketRepr::emit`], calling `around_checksum(true)` just before the
    /// checksum is computed and `around_checksum(false)` just after (as
    /// [`PacketRepr::parse_observed`]).
    #[inline]
    pub fn emit_observed(
        &self,
        buf: &mut [u8],
        mut around_checksum: impl FnMut(bool),
    ) -> Result<usize, EmitError> {
        let len = self.buffer_len();
        if buf.len() < len {
            return Err(EmitError::BufferTooSmall { needed: len, available: buf.len() });
        }
        let dlen = u32::try_from(self.body.buffer_len()).map_err(|_| EmitError::TooLong("packet body"))?;
        // BTAG says whether a DATA or FIRST body starts with a tag, so the body
        // decides it there; on other types the bit means nothing and is kept
        // as given (a parsed packet re-emits to the same representation).
        let mut options = self.header.options;
        if let Body::Data { btag, .. } | Body::First { btag, .. } = self.body {
            options.set(Options::BTAG, btag.is_some());
        }
        let cmd = (options.bits() << 8) | (u32::from(VERSION) << 5) | u32::from(self.body.ptype().code());
        let out = &mut buf[..len];
        let mut w = Writer::new(out);
        w.u64(self.header.key)?;
        w.u32(cmd)?;
        w.u32(dlen)?;
        w.u16(0)?; // check, filled below
        w.u16(self.header.sort)?;
        w.u32(self.header.sync)?;
        w.u64(self.header.seq)?;
        match &self.body {
            Body::Data { btag, data } => {
                if let Some(t) = btag {
                    w.u64(*t)?;
                }
                w.put(data)?;
            }
            Body::Cntl(c) => c.emit(&mut w)?,
            Body::First { address, traffic, btag, data } => {
                address.emit(&mut w)?;
                traffic.emit(&mut w)?;
                if let Some(t) = btag {
                    w.u64(*t)?;
                }
                w.put(data)?;
            }
            Body::Ecntl(e) => e.emit(&mut w)?,
            Body::Tcntl { control, traffic } => {
                control.emit(&mut w)?;
                traffic.emit(&mut w)?;
            }
            Body::Jcntl { control, address, traffic } => {
                control.emit(&mut w)?;
                address.emit(&mut w)?;
                traffic.emit(&mut w)?;
            }
            Body::Diag(d) => d.emit(&mut w)?,
        }
        debug_assert_eq!(w.pos(), len);
        around_checksum(true);
        Packet::new_unchecked(&mut buf[..len]).fill_checksum();
        around_checksum(false);
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checksum hooks a monitor times the checksum with: called around
    /// the checksum, and only there — the checksum is already filled when
    /// the closing call comes, and a parse that skips it calls nothing.
    #[test]
    fn observed_emit_and_parse_bracket_the_checksum() {
        let p = PacketRepr {
            header: HeaderRepr {
                key: 9,
                options: Options::default(),
                ptype: PacketType::Data,
                sort: 0,
                sync: 1,
                seq: 100,
            },
            body: Body::Data { btag: None, data: &[1, 2, 3, 4, 5] },
        };
        let mut buf = [0u8; 64];
        let mut calls = Vec::new();
        let n = p
            .emit_observed(&mut buf, |begin| {
                calls.push(begin);
            })
            .unwrap();
        assert_eq!(calls, [true, false]);
        assert!(Packet::new_checked(&buf[..n]).unwrap().verify_checksum());
        calls.clear();
        let back = PacketRepr::parse_observed(&buf[..n], Verify::Checksum, |b| calls.push(b)).unwrap();
        assert_eq!(back, p);
        assert_eq!(calls, [true, false]);
        calls.clear();
        PacketRepr::parse_observed(&buf[..n], Verify::Skip, |b| calls.push(b)).unwrap();
        assert!(calls.is_empty());
        // A bad checksum is still bracketed, then refused.
        buf[n - 1] ^= 0xff;
        let e = PacketRepr::parse_observed(&buf[..n], Verify::Checksum, |b| calls.push(b));
        assert!(matches!(e, Err(ParseError::Checksum { .. })));
        assert_eq!(calls, [true, false]);
    }
}
