//! Information segments (digest §3): address, traffic, common control, error
//! control with spans, traffic control and diagnostic.
//!
//! Each segment has a representation with `parse` (from a [`Reader`]) and
//! `emit` (to a [`Writer`]) plus `buffer_len`. Lengths inside segments (`alen`,
//! `tlen`) are always honoured when stepping over a segment — never a fixed
//! size (the Wireshark slip noted as digest G19).

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::codec::{Reader, Writer};
use crate::error::{EmitError, ParseError};

/// `aformat` codes (digest §3.1).
pub mod aformat {
    /// Null address (4 opaque bytes).
    pub const NULL: u8 = 0;
    /// IPv4: dsthost, srchost, dstport, srcport.
    pub const IPV4: u8 = 1;
    /// ISO CLNP (layout unknown).
    pub const ISO: u8 = 2;
    /// Xerox NS (layout unknown).
    pub const XNS: u8 = 3;
    /// IPX (layout unknown).
    pub const IPX: u8 = 4;
    /// Local (layout unknown).
    pub const LOCAL: u8 = 5;
    /// IPv6, layout of digest G9: dsthost 16, srchost 16, dstport 2, srcport 2.
    pub const IPV6: u8 = 6;
}

/// An address; `dst`/`src` from the point of view of the packet's sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Address<'a> {
    /// Null address with its 4 opaque bytes.
    Null(u32),
    /// IPv4 hosts and XTP ports.
    Ipv4 {
        /// Responder host.
        dst: Ipv4Addr,
        /// Initiator host.
        src: Ipv4Addr,
        /// Responder XTP port.
        dport: u16,
        /// Initiator XTP port.
        sport: u16,
    },
    /// IPv6 hosts and XTP ports (digest G9).
    Ipv6 {
        /// Responder host.
        dst: Ipv6Addr,
        /// Initiator host.
        src: Ipv6Addr,
        /// Responder XTP port.
        dport: u16,
        /// Initiator XTP port.
        sport: u16,
    },
    /// A format whose layout is not known here (2–5, ≥ 7), kept opaque so the
    /// engine can answer "address format not supported".
    Other {
        /// The `aformat` code.
        format: u8,
        /// The bytes after the 4-byte segment prefix.
        body: &'a [u8],
    },
}

/// The address segment: `alen`, `adomain`, `aformat`, address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressSegment<'a> {
    /// `adomain` (values unknown; we send 0 and keep what we receive, G6).
    pub domain: u8,
    /// The address.
    pub addr: Address<'a>,
}

impl<'a> AddressSegment<'a> {
    /// Parses one address segment, advancing by exactly `alen` bytes.
    pub(crate) fn parse(r: &mut Reader<'a>) -> Result<Self, ParseError> {
        let alen = r.u16("address segment")? as usize;
        if alen < 4 {
            return Err(ParseError::SegmentLength { segment: "address", len: alen, reason: "below 4" });
        }
        if alen > r.remaining() + 2 {
            return Err(ParseError::SegmentLength {
                segment: "address",
                len: alen,
                reason: "longer than the packet",
            });
        }
        let domain = r.u8("address domain")?;
        let format = r.u8("address format")?;
        let body = r.bytes(alen - 4, "address body")?;
        let mut b = Reader::new(body);
        let want = |n: usize| {
            if alen == n {
                Ok(())
            } else {
                Err(ParseError::SegmentLength {
                    segment: "address",
                    len: alen,
                    reason: "does not match aformat",
                })
            }
        };
        let addr = match format {
            aformat::NULL => {
                want(8)?;
                Address::Null(b.u32("null address")?)
            }
            aformat::IPV4 => {
                want(16)?;
                Address::Ipv4 {
                    dst: Ipv4Addr::from(b.array::<4>("dsthost")?),
                    src: Ipv4Addr::from(b.array::<4>("srchost")?),
                    dport: b.u16("dstport")?,
                    sport: b.u16("srcport")?,
                }
            }
            aformat::IPV6 => {
                want(40)?;
                Address::Ipv6 {
                    dst: Ipv6Addr::from(b.array::<16>("dsthost")?),
                    src: Ipv6Addr::from(b.array::<16>("srchost")?),
                    dport: b.u16("dstport")?,
                    sport: b.u16("srcport")?,
                }
            }
            format => Address::Other { format, body },
        };
        Ok(AddressSegment { domain, addr })
    }

    /// Bytes this segment occupies (`alen`).
    pub fn buffer_len(&self) -> usize {
        4 + match self.addr {
            Address::Null(_) => 4,
            Address::Ipv4 { .. } => 12,
            Address::Ipv6 { .. } => 36,
            Address::Other { body, .. } => body.len(),
        }
    }

    /// The `aformat` code.
    pub fn format(&self) -> u8 {
        match self.addr {
            Address::Null(_) => aformat::NULL,
            Address::Ipv4 { .. } => aformat::IPV4,
            Address::Ipv6 { .. } => aformat::IPV6,
            Address::Other { format, .. } => format,
        }
    }

    pub(crate) fn emit(&self, w: &mut Writer<'_>) -> Result<(), EmitError> {
        let alen = u16::try_from(self.buffer_len()).map_err(|_| EmitError::TooLong("address segment"))?;
        w.u16(alen)?;
        w.u8(self.domain)?;
        w.u8(self.format())?;
        match self.addr {
            Address::Null(v) => w.u32(v),
            Address::Ipv4 { dst, src, dport, sport } => {
                w.put(&dst.octets())?;
                w.put(&src.octets())?;
                w.u16(dport)?;
                w.u16(sport)
            }
            Address::Ipv6 { dst, src, dport, sport } => {
                w.put(&dst.octets())?;
                w.put(&src.octets())?;
                w.u16(dport)?;
                w.u16(sport)
            }
            Address::Other { body, .. } => w.put(body),
        }
    }
}

impl fmt::Display for AddressSegment<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            Address::Null(v) => write!(f, "null({v:#x})")?,
            Address::Ipv4 { dst, src, dport, sport } => write!(f, "{src}:{sport} > {dst}:{dport}")?,
            Address::Ipv6 { dst, src, dport, sport } => write!(f, "[{src}]:{sport} > [{dst}]:{dport}")?,
            Address::Other { format, body } => write!(f, "aformat {format} ({} bytes)", body.len())?,
        }
        if self.domain != 0 {
            write!(f, " adomain {}", self.domain)?;
        }
        Ok(())
    }
}

/// Service types of the traffic segment (digest §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Service {
    /// 0: unspecified.
    Unspecified,
    /// 1: traditional unacknowledged datagram.
    Datagram,
    /// 2: acknowledged datagram.
    AckedDatagram,
    /// 3: transaction.
    Transaction,
    /// 4: traditional reliable unicast stream.
    Stream,
    /// 5: unacknowledged multicast stream.
    UnackedMulticast,
    /// 6: reliable multicast stream.
    ReliableMulticast,
    /// Any other code.
    Other(u8),
}

impl Service {
    /// The wire code.
    pub fn code(self) -> u8 {
        match self {
            Service::Unspecified => 0,
            Service::Datagram => 1,
            Service::AckedDatagram => 2,
            Service::Transaction => 3,
            Service::Stream => 4,
            Service::UnackedMulticast => 5,
            Service::ReliableMulticast => 6,
            Service::Other(c) => c,
        }
    }

    /// The service for a wire code.
    pub fn from_code(c: u8) -> Service {
        match c {
            0 => Service::Unspecified,
            1 => Service::Datagram,
            2 => Service::AckedDatagram,
            3 => Service::Transaction,
            4 => Service::Stream,
            5 => Service::UnackedMulticast,
            6 => Service::ReliableMulticast,
            c => Service::Other(c),
        }
    }
}

/// The traffic specification carried in a traffic segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrafficSpec {
    /// `tformat` 0: one opaque 32-bit word.
    Null(u32),
    /// `tformat` 1: explicit limits (rates in bytes/s, bursts in bytes; 0 = none).
    Explicit {
        /// Largest data segment accepted.
        maxdata: u32,
        /// Incoming rate.
        inrate: u32,
        /// Incoming burst.
        inburst: u32,
        /// Outgoing rate.
        outrate: u32,
        /// Outgoing burst.
        outburst: u32,
    },
}

/// The traffic segment: `tlen`, `service`, `tformat`, spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrafficSegment {
    /// Requested service.
    pub service: Service,
    /// The specification.
    pub spec: TrafficSpec,
}

impl TrafficSegment {
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        let tlen = r.u16("traffic segment")? as usize;
        let service = Service::from_code(r.u8("service")?);
        let format = r.u8("traffic format")?;
        let want = match format {
            0 => 8,
            1 => 24,
            format => return Err(ParseError::UnknownFormat { segment: "traffic", format }),
        };
        if tlen != want {
            return Err(ParseError::SegmentLength {
                segment: "traffic",
                len: tlen,
                reason: "does not match tformat",
            });
        }
        let spec = if format == 0 {
            TrafficSpec::Null(r.u32("traffic spec")?)
        } else {
            TrafficSpec::Explicit {
                maxdata: r.u32("maxdata")?,
                inrate: r.u32("inrate")?,
                inburst: r.u32("inburst")?,
                outrate: r.u32("outrate")?,
                outburst: r.u32("outburst")?,
            }
        };
        Ok(TrafficSegment { service, spec })
    }

    /// Bytes this segment occupies (`tlen`).
    pub fn buffer_len(&self) -> usize {
        match self.spec {
            TrafficSpec::Null(_) => 8,
            TrafficSpec::Explicit { .. } => 24,
        }
    }

    pub(crate) fn emit(&self, w: &mut Writer<'_>) -> Result<(), EmitError> {
        w.u16(self.buffer_len() as u16)?;
        w.u8(self.service.code())?;
        match self.spec {
            TrafficSpec::Null(v) => {
                w.u8(0)?;
                w.u32(v)
            }
            TrafficSpec::Explicit { maxdata, inrate, inburst, outrate, outburst } => {
                w.u8(1)?;
                for v in [maxdata, inrate, inburst, outrate, outburst] {
                    w.u32(v)?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for TrafficSegment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "svc {}", self.service.code())?;
        match self.spec {
            TrafficSpec::Null(v) => write!(f, " null({v:#x})"),
            TrafficSpec::Explicit { maxdata, inrate, inburst, outrate, outburst } => {
                write!(f, " maxdata {maxdata} in {inrate}B/s/{inburst} out {outrate}B/s/{outburst}")
            }
        }
    }
}

/// The common control segment (20 bytes): cumulative ack, allocation, echo.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ControlSegment {
    /// Every byte below this has been received.
    pub rseq: u64,
    /// The peer may send bytes below this (absolute flow-control edge).
    pub alloc: u64,
    /// The `sync` of the packet that solicited this report.
    pub echo: u32,
}

impl ControlSegment {
    /// Encoded length.
    pub const LEN: usize = 20;

    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        Ok(ControlSegment { rseq: r.u64("rseq")?, alloc: r.u64("alloc")?, echo: r.u32("echo")? })
    }

    pub(crate) fn emit(&self, w: &mut Writer<'_>) -> Result<(), EmitError> {
        w.u64(self.rseq)?;
        w.u64(self.alloc)?;
        w.u32(self.echo)
    }
}

impl fmt::Display for ControlSegment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rseq {} alloc {} echo {}", self.rseq, self.alloc, self.echo)
    }
}

/// A span of data the receiver holds beyond `rseq`: the half-open byte range
/// `[left, right)` (digest G2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    /// First byte held.
    pub left: u64,
    /// One past the last byte held.
    pub right: u64,
}

/// The span list of an ECNTL: either the bytes of a received packet (parsed
/// lazily, no allocation) or a list to send.
#[derive(Clone, Copy, Debug)]
pub enum Spans<'a> {
    /// 16 bytes per span, big-endian `left` then `right` (digest G1).
    Wire(&'a [u8]),
    /// Spans to emit.
    List(&'a [Span]),
}

impl<'a> Spans<'a> {
    /// Number of spans.
    pub fn len(&self) -> usize {
        match self {
            Spans::Wire(b) => b.len() / 16,
            Spans::List(l) => l.len(),
        }
    }

    /// Whether there is no span.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The spans in order.
    pub fn iter(&self) -> impl Iterator<Item = Span> + 'a {
        let (wire, list): (&'a [u8], &'a [Span]) = match *self {
            Spans::Wire(b) => (b, &[]),
            Spans::List(l) => (&[], l),
        };
        let be = |b: &[u8]| u64::from_be_bytes(b.try_into().unwrap_or([0; 8]));
        wire.chunks_exact(16)
            .map(move |c| Span { left: be(&c[..8]), right: be(&c[8..]) })
            .chain(list.iter().copied())
    }

    /// Checks the shape digest G2 requires of a span list: each span non-empty,
    /// sorted, non-overlapping, non-adjacent, and wholly above `rseq`. The
    /// engine answers a violation with DIAG "invalid retransmission request".
    pub fn validate(&self, rseq: u64) -> Result<(), &'static str> {
        let mut floor = rseq;
        let mut first = true;
        for s in self.iter() {
            if s.left >= s.right {
                return Err("empty or reversed span");
            }
            if s.left < floor || (!first && s.left == floor) {
                return Err(if first {
                    "span below rseq"
                } else {
                    "spans unsorted, overlapping or adjacent"
                });
            }
            floor = s.right;
            first = false;
        }
        Ok(())
    }
}

impl PartialEq for Spans<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Spans<'_> {}

/// The error control segment: control segment + `nspan` + spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorControlSegment<'a> {
    /// The common control part.
    pub control: ControlSegment,
    /// Data held beyond `rseq`.
    pub spans: Spans<'a>,
}

impl<'a> ErrorControlSegment<'a> {
    /// Parses the whole ECNTL body: `nspan` must match its length exactly.
    pub(crate) fn parse(r: &mut Reader<'a>) -> Result<Self, ParseError> {
        let control = ControlSegment::parse(r)?;
        let nspan = r.u32("nspan")?;
        let rest = r.remaining();
        if !rest.is_multiple_of(16) || (rest / 16) as u64 != u64::from(nspan) {
            return Err(ParseError::SpanCount { nspan, span_bytes: rest });
        }
        let spans = Spans::Wire(r.bytes(rest, "spans")?);
        Ok(ErrorControlSegment { control, spans })
    }

    /// Encoded length.
    pub fn buffer_len(&self) -> usize {
        24 + 16 * self.spans.len()
    }

    pub(crate) fn emit(&self, w: &mut Writer<'_>) -> Result<(), EmitError> {
        self.control.emit(w)?;
        let n = u32::try_from(self.spans.len()).map_err(|_| EmitError::TooLong("span list"))?;
        w.u32(n)?;
        for s in self.spans.iter() {
            w.u64(s.left)?;
            w.u64(s.right)?;
        }
        Ok(())
    }
}

/// The traffic control segment (32 bytes): control segment, reserved, `xkey`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TrafficControlSegment {
    /// The common control part.
    pub control: ControlSegment,
    /// Reserved 32 bits (sent as 0, kept on receipt for exact re-emission).
    pub reserved: u32,
    /// Exchange key: the sender's own local key (digest §4.2).
    pub xkey: u64,
}

impl TrafficControlSegment {
    /// Encoded length.
    pub const LEN: usize = 32;

    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        Ok(TrafficControlSegment {
            control: ControlSegment::parse(r)?,
            reserved: r.u32("reserved")?,
            xkey: r.u64("xkey")?,
        })
    }

    pub(crate) fn emit(&self, w: &mut Writer<'_>) -> Result<(), EmitError> {
        self.control.emit(w)?;
        w.u32(self.reserved)?;
        w.u64(self.xkey)
    }
}

/// DIAG `code` values (digest §3.6).
pub mod diag_code {
    /// Context refused.
    pub const CONTEXT_REFUSED: u32 = 1;
    /// Context abandoned.
    pub const CONTEXT_ABANDONED: u32 = 2;
    /// Invalid context.
    pub const INVALID_CONTEXT: u32 = 3;
    /// Request refused.
    pub const REQUEST_REFUSED: u32 = 4;
    /// Join refused.
    pub const JOIN_REFUSED: u32 = 5;
    /// Protocol error.
    pub const PROTOCOL_ERROR: u32 = 6;
    /// Maximum packet size error.
    pub const MAX_PACKET_SIZE: u32 = 7;
}

/// DIAG `value` values (digest §3.6).
pub mod diag_value {
    /// Unspecified.
    pub const UNSPECIFIED: u32 = 0;
    /// No listener.
    pub const NO_LISTENER: u32 = 1;
    /// Options refused.
    pub const OPTIONS_REFUSED: u32 = 2;
    /// Address format not supported.
    pub const ADDRESS_FORMAT_UNSUPPORTED: u32 = 3;
    /// Malformed address format.
    pub const MALFORMED_ADDRESS: u32 = 4;
    /// Traffic format not supported.
    pub const TRAFFIC_FORMAT_UNSUPPORTED: u32 = 5;
    /// Traffic specification refused.
    pub const TRAFFIC_SPEC_REFUSED: u32 = 6;
    /// Malformed traffic format.
    pub const MALFORMED_TRAFFIC: u32 = 7;
    /// No provider for service.
    pub const NO_PROVIDER: u32 = 8;
    /// No resource.
    pub const NO_RESOURCE: u32 = 9;
    /// Host going down.
    pub const HOST_GOING_DOWN: u32 = 10;
    /// Invalid retransmission request.
    pub const INVALID_RETRANSMISSION: u32 = 11;
    /// Context in improper state.
    pub const IMPROPER_STATE: u32 = 12;
    /// Join request denied.
    pub const JOIN_DENIED: u32 = 13;
}

/// Name of a DIAG code, if assigned.
pub fn diag_code_name(code: u32) -> Option<&'static str> {
    Some(match code {
        1 => "context refused",
        2 => "context abandoned",
        3 => "invalid context",
        4 => "request refused",
        5 => "join refused",
        6 => "protocol error",
        7 => "maximum packet size error",
        _ => return None,
    })
}

/// Name of a DIAG value, if assigned.
pub fn diag_value_name(value: u32) -> Option<&'static str> {
    Some(match value {
        0 => "unspecified",
        1 => "no listener",
        2 => "options refused",
        3 => "address format not supported",
        4 => "malformed address format",
        5 => "traffic format not supported",
        6 => "traffic specification refused",
        7 => "malformed traffic format",
        8 => "no provider for service",
        9 => "no resource",
        10 => "host going down",
        11 => "invalid retransmission request",
        12 => "context in improper state",
        13 => "join request denied",
        _ => return None,
    })
}

/// The diagnostic segment: `code`, `value`, message text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiagSegment<'a> {
    /// What went wrong (see [`diag_code`]).
    pub code: u32,
    /// Detail (see [`diag_value`]).
    pub value: u32,
    /// Free text (ASCII, not NUL-terminated).
    pub text: &'a [u8],
}

impl<'a> DiagSegment<'a> {
    pub(crate) fn parse(r: &mut Reader<'a>) -> Result<Self, ParseError> {
        let code = r.u32("diag code")?;
        let value = r.u32("diag value")?;
        let n = r.remaining();
        Ok(DiagSegment { code, value, text: r.bytes(n, "diag text")? })
    }

    /// Encoded length.
    pub fn buffer_len(&self) -> usize {
        8 + self.text.len()
    }

    pub(crate) fn emit(&self, w: &mut Writer<'_>) -> Result<(), EmitError> {
        w.u32(self.code)?;
        w.u32(self.value)?;
        w.put(self.text)
    }
}
