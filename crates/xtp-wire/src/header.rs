//! The 32-byte common header (digest §2): a zero-copy view and a representation.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-------------------------------------------------------------+
//! |R|                     key (64 bits, R = RTN)                  |
//! +-+                                                             +
//! |                                                               |
//! +-----------------------------------------------+-----+---------+
//! |              options (24 bits)                | ver |  ptype  |
//! +-----------------------------------------------+-----+---------+
//! |                      dlen (bytes after header)                |
//! +-------------------------------+-------------------------------+
//! |             check             |             sort              |
//! +-------------------------------+-------------------------------+
//! |                             sync                              |
//! +---------------------------------------------------------------+
//! |                        seq (64 bits)                          |
//! +                                                               +
//! |                                                               |
//! +---------------------------------------------------------------+
//! ```

use core::fmt;
use core::ops::{BitAnd, BitOr, BitOrAssign, Not, Range};

use crate::checksum::ones_complement_sum;
use crate::error::ParseError;

/// Byte ranges of the header fields.
pub mod field {
    use core::ops::Range;
    /// Context key; bit 63 is RTN.
    pub const KEY: Range<usize> = 0..8;
    /// Options (24 bits), version (3 bits), packet type (5 bits).
    pub const CMD: Range<usize> = 8..12;
    /// Bytes after the header.
    pub const DLEN: Range<usize> = 12..16;
    /// Internet checksum.
    pub const CHECK: Range<usize> = 16..18;
    /// Priority.
    pub const SORT: Range<usize> = 18..20;
    /// Synchronising-handshake number.
    pub const SYNC: Range<usize> = 20..24;
    /// Sequence number.
    pub const SEQ: Range<usize> = 24..32;
}

/// Length of the common header.
pub const HEADER_LEN: usize = 32;
/// The RTN ("return key") bit of `key`.
pub const RTN: u64 = 1 << 63;
/// The version field value of XTP 4.0.
pub const VERSION: u8 = 1;

/// The 24 option bits of the header (digest §2.1).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Options(u32);

impl Options {
    /// Checksum covers the header only.
    pub const NOCHECK: Options = Options(0x40_0000);
    /// Meaning not found in any source; never set (digest G8).
    pub const EDGE: Options = Options(0x20_0000);
    /// No error control / retransmission.
    pub const NOERR: Options = Options(0x10_0000);
    /// Multicast association.
    pub const MULTI: Options = Options(0x08_0000);
    /// Reservation mode for flow control.
    pub const RES: Options = Options(0x04_0000);
    /// The `sort` field is meaningful.
    pub const SORT: Options = Options(0x02_0000);
    /// Flow control disabled.
    pub const NOFLOW: Options = Options(0x01_0000);
    /// Receiver reports gaps immediately.
    pub const FASTNAK: Options = Options(0x00_8000);
    /// Status request: answer now.
    pub const SREQ: Options = Options(0x00_4000);
    /// Delivered-status request: answer once delivered.
    pub const DREQ: Options = Options(0x00_2000);
    /// Sender's reading side closed.
    pub const RCLOSE: Options = Options(0x00_1000);
    /// Sender's writing side closed.
    pub const WCLOSE: Options = Options(0x00_0800);
    /// End of message at the last data byte.
    pub const EOM: Options = Options(0x00_0400);
    /// Sender releases the context.
    pub const END: Options = Options(0x00_0200);
    /// An 8-byte beginning tag precedes the data.
    pub const BTAG: Options = Options(0x00_0100);
    /// No option.
    pub const EMPTY: Options = Options(0);

    /// Every named option with its name, most significant first.
    pub const NAMED: [(Options, &'static str); 15] = [
        (Options::NOCHECK, "NOCHECK"),
        (Options::EDGE, "EDGE"),
        (Options::NOERR, "NOERR"),
        (Options::MULTI, "MULTI"),
        (Options::RES, "RES"),
        (Options::SORT, "SORT"),
        (Options::NOFLOW, "NOFLOW"),
        (Options::FASTNAK, "FASTNAK"),
        (Options::SREQ, "SREQ"),
        (Options::DREQ, "DREQ"),
        (Options::RCLOSE, "RCLOSE"),
        (Options::WCLOSE, "WCLOSE"),
        (Options::EOM, "EOM"),
        (Options::END, "END"),
        (Options::BTAG, "BTAG"),
    ];

    /// Options from the 24-bit field value (higher bits are dropped).
    pub const fn from_bits(bits: u32) -> Options {
        Options(bits & 0xff_ffff)
    }

    /// The 24-bit field value.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: Options) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any bit of `other` is set.
    pub const fn intersects(self, other: Options) -> bool {
        self.0 & other.0 != 0
    }

    /// Sets or clears the bits of `other`.
    pub fn set(&mut self, other: Options, on: bool) {
        if on {
            self.0 |= other.0;
        } else {
            self.0 &= !other.0;
        }
    }

    /// Bits set that have no name (reserved: sent as 0, ignored on receipt).
    pub const fn reserved_bits(self) -> u32 {
        self.0 & (0x80_0000 | 0x00_00ff)
    }
}

impl BitOr for Options {
    type Output = Options;
    fn bitor(self, rhs: Options) -> Options {
        Options(self.0 | rhs.0)
    }
}

impl BitOrAssign for Options {
    fn bitor_assign(&mut self, rhs: Options) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for Options {
    type Output = Options;
    fn bitand(self, rhs: Options) -> Options {
        Options(self.0 & rhs.0)
    }
}

impl Not for Options {
    type Output = Options;
    fn not(self) -> Options {
        Options(!self.0 & 0xff_ffff)
    }
}

impl fmt::Display for Options {
    /// `SREQ|EOM`, `-` when empty, reserved bits as hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (o, name) in Options::NAMED {
            if self.contains(o) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if self.reserved_bits() != 0 {
            if !first {
                f.write_str("|")?;
            }
            write!(f, "{:#x}", self.reserved_bits())?;
            first = false;
        }
        if first {
            f.write_str("-")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Options({self})")
    }
}

/// Packet types of XTP 4.0 (digest §2.2). Codes 4 and 6 (JOIN, obsolete) and
/// 9–31 are refused by the parser (digest G15).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PacketType {
    /// User data.
    Data = 0,
    /// Common control.
    Cntl = 1,
    /// First packet of an association: address + traffic segments (+ data).
    First = 2,
    /// Error control with spans.
    Ecntl = 3,
    /// Traffic control (key exchange) + traffic segment.
    Tcntl = 5,
    /// Join control: traffic control + address + traffic segments.
    Jcntl = 7,
    /// Diagnostic.
    Diag = 8,
}

impl PacketType {
    /// The type for a 5-bit code.
    pub fn from_code(code: u8) -> Result<PacketType, ParseError> {
        Ok(match code {
            0 => PacketType::Data,
            1 => PacketType::Cntl,
            2 => PacketType::First,
            3 => PacketType::Ecntl,
            5 => PacketType::Tcntl,
            7 => PacketType::Jcntl,
            8 => PacketType::Diag,
            other => return Err(ParseError::UnknownPacketType(other)),
        })
    }

    /// The 5-bit code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Upper-case name as in the specification.
    pub fn name(self) -> &'static str {
        match self {
            PacketType::Data => "DATA",
            PacketType::Cntl => "CNTL",
            PacketType::First => "FIRST",
            PacketType::Ecntl => "ECNTL",
            PacketType::Tcntl => "TCNTL",
            PacketType::Jcntl => "JCNTL",
            PacketType::Diag => "DIAG",
        }
    }
}

/// A zero-copy view of a packet's common header.
///
/// After [`Packet::new_checked`] succeeds, no getter panics. With
/// [`Packet::new_unchecked`] the caller promises at least 32 bytes.
#[derive(Clone, Copy, Debug)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn get<const N: usize>(b: &[u8], r: Range<usize>) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&b[r]);
    out
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after [`Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Packet<T>, ParseError> {
        let p = Packet { buffer };
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the header is present, the version is 4.0 and `dlen` fits
    /// the buffer (allowing up to 7 trailing pad bytes, digest G3).
    pub fn check_len(&self) -> Result<(), ParseError> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(ParseError::Truncated { what: "header", needed: HEADER_LEN, available: len });
        }
        if self.version() != VERSION {
            return Err(ParseError::BadVersion(self.version()));
        }
        let available = len - HEADER_LEN;
        let dlen = self.dlen();
        if dlen as usize > available || available - dlen as usize > 7 {
            return Err(ParseError::DlenMismatch { dlen, available });
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The `key` field (RTN bit included).
    pub fn key(&self) -> u64 {
        u64::from_be_bytes(get(self.buffer.as_ref(), field::KEY))
    }

    /// Whether the RTN bit is set.
    pub fn is_rtn(&self) -> bool {
        self.key() & RTN != 0
    }

    fn cmd(&self) -> u32 {
        u32::from_be_bytes(get(self.buffer.as_ref(), field::CMD))
    }

    /// The option bits.
    pub fn options(&self) -> Options {
        Options::from_bits(self.cmd() >> 8)
    }

    /// The 3-bit version.
    pub fn version(&self) -> u8 {
        ((self.cmd() >> 5) & 0x7) as u8
    }

    /// The 5-bit packet type code.
    pub fn ptype_code(&self) -> u8 {
        (self.cmd() & 0x1f) as u8
    }

    /// The `dlen` field.
    pub fn dlen(&self) -> u32 {
        u32::from_be_bytes(get(self.buffer.as_ref(), field::DLEN))
    }

    /// The `check` field.
    pub fn check(&self) -> u16 {
        u16::from_be_bytes(get(self.buffer.as_ref(), field::CHECK))
    }

    /// The `sort` field.
    pub fn sort(&self) -> u16 {
        u16::from_be_bytes(get(self.buffer.as_ref(), field::SORT))
    }

    /// The `sync` field.
    pub fn sync(&self) -> u32 {
        u32::from_be_bytes(get(self.buffer.as_ref(), field::SYNC))
    }

    /// The `seq` field.
    pub fn seq(&self) -> u64 {
        u64::from_be_bytes(get(self.buffer.as_ref(), field::SEQ))
    }

    /// Bytes covered by the checksum: the header under NOCHECK, else header +
    /// `dlen`.
    pub fn checksum_coverage(&self) -> usize {
        if self.options().contains(Options::NOCHECK) { HEADER_LEN } else { HEADER_LEN + self.dlen() as usize }
    }

    /// The value `check` should hold for the current contents.
    pub fn expected_checksum(&self) -> u16 {
        let b = &self.buffer.as_ref()[..self.checksum_coverage()];
        // Sum with the check field left out; the part before it has even length,
        // so the two partial sums combine exactly.
        let before = ones_complement_sum(&b[..field::CHECK.start]);
        let after = ones_complement_sum(&b[field::CHECK.end..]);
        !crate::checksum::add(before, after)
    }

    /// Whether the stored checksum verifies. Always true when built for fuzzing
    /// (`cfg(fuzzing)`), so fuzzers reach the parsers behind it.
    pub fn verify_checksum(&self) -> bool {
        if cfg!(fuzzing) {
            return true;
        }
        ones_complement_sum(&self.buffer.as_ref()[..self.checksum_coverage()]) == 0xffff
    }

    /// The bytes after the header, `dlen` long.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + self.dlen() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn put(&mut self, r: Range<usize>, v: &[u8]) {
        self.buffer.as_mut()[r].copy_from_slice(v);
    }

    /// Sets the `key` field.
    pub fn set_key(&mut self, key: u64) {
        self.put(field::KEY, &key.to_be_bytes());
    }

    /// Sets options, version 1 and the packet type.
    pub fn set_cmd(&mut self, options: Options, ptype: PacketType) {
        let cmd = (options.bits() << 8) | (u32::from(VERSION) << 5) | u32::from(ptype.code());
        self.put(field::CMD, &cmd.to_be_bytes());
    }

    /// Sets `dlen`.
    pub fn set_dlen(&mut self, dlen: u32) {
        self.put(field::DLEN, &dlen.to_be_bytes());
    }

    /// Sets `sort`.
    pub fn set_sort(&mut self, sort: u16) {
        self.put(field::SORT, &sort.to_be_bytes());
    }

    /// Sets `sync`.
    pub fn set_sync(&mut self, sync: u32) {
        self.put(field::SYNC, &sync.to_be_bytes());
    }

    /// Sets `seq`.
    pub fn set_seq(&mut self, seq: u64) {
        self.put(field::SEQ, &seq.to_be_bytes());
    }

    /// Computes and stores the checksum over the current coverage.
    pub fn fill_checksum(&mut self) {
        self.put(field::CHECK, &[0, 0]);
        let cov = self.checksum_coverage();
        let c = crate::checksum::checksum(&self.buffer.as_ref()[..cov]);
        self.put(field::CHECK, &c.to_be_bytes());
    }
}

/// The header as values. `dlen` and `check` are not here: `emit` derives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderRepr {
    /// Context key including the RTN bit.
    pub key: u64,
    /// Option bits. `BTAG` is derived from the body on emit.
    pub options: Options,
    /// Packet type.
    pub ptype: PacketType,
    /// Priority (meaningful with `SORT`).
    pub sort: u16,
    /// Synchronising-handshake number.
    pub sync: u32,
    /// Sequence number.
    pub seq: u64,
}
