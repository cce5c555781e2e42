//! One line per packet, tcpdump style. Used by tests now and the monitor later.
//!
//! ```text
//! FIRST key=0x1234 seq=0 sync=1 [SREQ] 192.0.2.1:40000 > 192.0.2.2:7000 svc 4 maxdata 1400 in 1000000B/s/65536 out 1000000B/s/65536 data=5 "hello"
//! ECNTL key=0x8000000000001234 rtn seq=0 sync=0 [-] rseq 10 alloc 70000 echo 2 spans [20,30) [40,50)
//! ```

use core::fmt;

use crate::header::{Packet, RTN};
use crate::packet::{Body, PacketRepr, Verify};
use crate::segment::{diag_code_name, diag_value_name};

/// Spans shown before eliding the rest.
const MAX_SPANS_SHOWN: usize = 8;
/// Data bytes shown as text.
const MAX_DATA_SHOWN: usize = 24;

fn preview(f: &mut fmt::Formatter<'_>, data: &[u8]) -> fmt::Result {
    write!(f, "data={}", data.len())?;
    if data.is_empty() {
        return Ok(());
    }
    f.write_str(" \"")?;
    for &b in data.iter().take(MAX_DATA_SHOWN) {
        if b.is_ascii_graphic() || b == b' ' {
            write!(f, "{}", b as char)?;
        } else {
            write!(f, "\\x{b:02x}")?;
        }
    }
    f.write_str(if data.len() > MAX_DATA_SHOWN { "\"…" } else { "\"" })
}

impl fmt::Display for PacketRepr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = &self.header;
        write!(f, "{} key={:#x}", self.body.ptype().name(), h.key)?;
        if h.key & RTN != 0 {
            f.write_str(" rtn")?;
        }
        write!(f, " seq={} sync={} [{}]", h.seq, h.sync, h.options)?;
        if h.options.contains(crate::Options::SORT) {
            write!(f, " sort={}", h.sort)?;
        }
        let tag = |f: &mut fmt::Formatter<'_>, b: Option<u64>| match b {
            Some(t) => write!(f, " btag={t:#x}"),
            None => Ok(()),
        };
        match &self.body {
            Body::Data { btag, data } => {
                tag(f, *btag)?;
                f.write_str(" ")?;
                preview(f, data)
            }
            Body::Cntl(c) => write!(f, " {c}"),
            Body::First { address, traffic, btag, data } => {
                write!(f, " {address} {traffic}")?;
                tag(f, *btag)?;
                f.write_str(" ")?;
                preview(f, data)
            }
            Body::Ecntl(e) => {
                write!(f, " {} spans", e.control)?;
                for s in e.spans.iter().take(MAX_SPANS_SHOWN) {
                    write!(f, " [{},{})", s.left, s.right)?;
                }
                if e.spans.len() > MAX_SPANS_SHOWN {
                    write!(f, " …{} more", e.spans.len() - MAX_SPANS_SHOWN)?;
                }
                if e.spans.is_empty() {
                    f.write_str(" none")?;
                }
                Ok(())
            }
            Body::Tcntl { control, traffic } => {
                write!(f, " {} xkey={:#x} {traffic}", control.control, control.xkey)
            }
            Body::Jcntl { control, address, traffic } => {
                write!(f, " {} xkey={:#x} {address} {traffic}", control.control, control.xkey)
            }
            Body::Diag(d) => {
                write!(f, " code {}", d.code)?;
                if let Some(n) = diag_code_name(d.code) {
                    write!(f, " ({n})")?;
                }
                write!(f, " value {}", d.value)?;
                if let Some(n) = diag_value_name(d.value) {
                    write!(f, " ({n})")?;
                }
                write!(f, " \"{}\"", String::from_utf8_lossy(d.text).escape_debug())
            }
        }
    }
}

/// Displays any bytes as one line: the parsed packet, or what is wrong with it
/// (with the header fields when at least the header is there).
pub struct Pretty<'a>(pub &'a [u8]);

impl fmt::Display for Pretty<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match PacketRepr::parse_with(self.0, Verify::Checksum) {
            Ok(p) => write!(f, "{p}"),
            Err(e) => {
                write!(f, "MALFORMED ({e}) len={}", self.0.len())?;
                if self.0.len() >= crate::HEADER_LEN {
                    let p = Packet::new_unchecked(self.0);
                    write!(
                        f,
                        " key={:#x} ptype={} ver={} dlen={} seq={} [{}]",
                        p.key(),
                        p.ptype_code(),
                        p.version(),
                        p.dlen(),
                        p.seq(),
                        p.options()
                    )?;
                }
                Ok(())
            }
        }
    }
}
