//! XTP 4.0 on the wire: every packet and segment of `xtp4-digest.md` §2–§3, the
//! Internet checksum of §4.1, a one-line pretty printer and pcap framing.
//!
//! # Panic contract
//!
//! No input, however malformed, makes this crate panic. [`PacketRepr::parse`]
//! reads through a bounds-checked cursor and returns a [`ParseError`] naming
//! the problem; [`Pretty`] prints anything. The zero-copy header view
//! [`Packet`] follows smoltcp's rule: after [`Packet::new_checked`] (or
//! [`Packet::check_len`]) succeeds no accessor panics; with
//! [`Packet::new_unchecked`] the caller promises at least 32 bytes. `emit`
//! needs a buffer of at least [`PacketRepr::buffer_len`] bytes and says so with
//! an error otherwise. Property tests feed arbitrary bytes to the parser and a
//! cargo-fuzz target (in `fuzz/`) does the same at scale.
//!
//! # Shape
//!
//! Views over bytes ([`Packet`]) and small representations ([`PacketRepr`],
//! [`HeaderRepr`], the segment structs) with `parse`, `emit` and `buffer_len`,
//! in the smoltcp style. Parsing allocates nothing and borrows user data and
//! span lists from the input. Built with `--cfg fuzzing`, checksum verification
//! always succeeds so fuzzers get past it.
//!
//! # Decisions where the sources are silent
//!
//! Big-endian span edges (G1), half-open spans `[left, right)` (G2), CNTL body 20
//! bytes with 24 accepted and up to 7 trailing pad bytes ignored (G3), data and
//! BTAG allowed in FIRST (G4), IPv6 address segment of 40 bytes (G9), packet
//! types 4 and 6 refused (G15), every segment stepped over by its own length
//! field (G19). `docs/PROTOCOL.md` gives the reasons.
//!
//! # Example
//!
//! ```
//! use xtp_wire::{Body, HeaderRepr, Options, PacketRepr, PacketType};
//!
//! let repr = PacketRepr {
//!     header: HeaderRepr { key: 0x8000_0000_00ab_cdef, options: Options::EOM | Options::SREQ,
//!                          ptype: PacketType::Data, sort: 0, sync: 2, seq: 5 },
//!     body: Body::Data { btag: None, data: b"world" },
//! };
//! let mut buf = [0u8; 64];
//! let n = repr.emit(&mut buf).unwrap();
//! assert_eq!(PacketRepr::parse(&buf[..n]).unwrap(), repr);
//! assert_eq!(repr.to_string(), "DATA key=0x8000000000abcdef rtn seq=5 sync=2 [SREQ|EOM] data=5 \"world\"");
//! ```

pub mod checksum;
mod codec;
mod error;
mod header;
mod packet;
pub mod pcap;
mod pretty;
mod segment;

pub use error::{EmitError, ParseError};
pub use header::{HEADER_LEN, HeaderRepr, Options, Packet, PacketType, RTN, VERSION, field};
pub use packet::{Body, PacketRepr, Verify};
pub use pretty::Pretty;
pub use segment::{
    Address, AddressSegment, ControlSegment, DiagSegment, ErrorControlSegment, Service, Span, Spans,
    TrafficControlSegment, TrafficSegment, TrafficSpec, aformat, diag_code, diag_code_name, diag_value,
    diag_value_name,
};

/// The checks the fuzz target runs on every input, shared with the ordinary
/// test that replays the fuzz corpus.
#[doc(hidden)]
pub mod fuzzing {
    use crate::{PacketRepr, Pretty, Verify};

    /// Parses `data` every way the crate offers; a packet that parses must
    /// re-emit to bytes that parse to the same representation.
    pub fn check_packet_bytes(data: &[u8]) {
        let _ = Pretty(data).to_string();
        let _ = PacketRepr::parse_with(data, Verify::Skip);
        if let Ok(p) = PacketRepr::parse(data) {
            let _ = p.to_string();
            let mut buf = vec![0u8; p.buffer_len()];
            let n = p.emit(&mut buf).expect("a parsed packet re-emits");
            let again = PacketRepr::parse(&buf[..n]).expect("re-emitted packet parses");
            assert_eq!(again, p, "re-emitted packet parses differently");
        }
    }
}
