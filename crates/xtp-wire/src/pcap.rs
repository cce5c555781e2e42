//! A pcap writer that frames XTP packets as IP protocol 36, so captures open
//! in Wireshark / tshark and its own XTP dissector decodes them.
//!
//! File format: classic pcap with nanosecond timestamps (magic `a1b23c4d`),
//! link type 101 (LINKTYPE_RAW: each record starts with an IP header). Each
//! record gets a 20-byte IPv4 header (version 4, IHL 5, DF, TTL 64, protocol
//! 36, a correct header checksum, an identification that counts up) or,
//! when either address is IPv6, a 40-byte IPv6 header (next header 36, hop
//! limit 64; an IPv4 address shown IPv4-mapped).

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::checksum::checksum;

/// IP protocol number of XTP.
pub const IPPROTO_XTP: u8 = 36;
/// LINKTYPE_RAW.
pub const LINKTYPE_RAW: u32 = 101;
const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
const SNAPLEN: u32 = 65_535;

/// The 20-byte IPv4 header for an XTP packet of `xtp_len` bytes.
pub fn ipv4_header(src: Ipv4Addr, dst: Ipv4Addr, id: u16, xtp_len: usize) -> io::Result<[u8; 20]> {
    let total = u16::try_from(20 + xtp_len).map_err(|_| {
        io::Error::new(io::ErrorKind::InvalidInput, "XTP packet too long for one IPv4 datagram")
    })?;
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[4..6].copy_from_slice(&id.to_be_bytes());
    h[6] = 0x40; // DF
    h[8] = 64;
    h[9] = IPPROTO_XTP;
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    let c = checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    Ok(h)
}

/// The 40-byte IPv6 header for an XTP packet of `xtp_len` bytes.
pub fn ipv6_header(src: Ipv6Addr, dst: Ipv6Addr, xtp_len: usize) -> io::Result<[u8; 40]> {
    let payload = u16::try_from(xtp_len).map_err(|_| {
        io::Error::new(io::ErrorKind::InvalidInput, "XTP packet too long for one IPv6 datagram")
    })?;
    let mut h = [0u8; 40];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&payload.to_be_bytes());
    h[6] = IPPROTO_XTP;
    h[7] = 64;
    h[8..24].copy_from_slice(&src.octets());
    h[24..40].copy_from_slice(&dst.octets());
    Ok(h)
}

/// Writes pcap records to any `io::Write` (a file, a `Vec<u8>`, a pipe).
pub struct PcapWriter<W: Write> {
    out: W,
    next_id: u16,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header and returns the writer.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&MAGIC_NANOS.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        h.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        h.extend_from_slice(&SNAPLEN.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out, next_id: 1 })
    }

    /// Appends one XTP packet sent from `src` to `dst` at `ts_nanos` (any
    /// epoch; the simulator's virtual time is fine), under an IPv4 header,
    /// or an IPv6 one when either address is IPv6.
    pub fn write_packet(
        &mut self,
        ts_nanos: u64,
        src: impl Into<IpAddr>,
        dst: impl Into<IpAddr>,
        xtp: &[u8],
    ) -> io::Result<()> {
        let (src, dst) = (src.into(), dst.into());
        let mut ip = [0u8; 40];
        let n = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                ip[..20].copy_from_slice(&ipv4_header(s, d, self.next_id, xtp.len())?);
                self.next_id = self.next_id.wrapping_add(1);
                20
            }
            _ => {
                let v6 = |a: IpAddr| match a {
                    IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                    IpAddr::V6(v6) => v6,
                };
                ip.copy_from_slice(&ipv6_header(v6(src), v6(dst), xtp.len())?);
                40
            }
        };
        let len = (n + xtp.len()) as u32;
        self.record_header(ts_nanos, len, len)?;
        self.out.write_all(&ip[..n])?;
        self.out.write_all(xtp)
    }

    /// The 16-byte record header: time, captured length, original length.
    fn record_header(&mut self, ts_nanos: u64, captured: u32, original: u32) -> io::Result<()> {
        let secs = u32::try_from(ts_nanos / 1_000_000_000).unwrap_or(u32::MAX);
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&secs.to_le_bytes());
        rec[4..8].copy_from_slice(&((ts_nanos % 1_000_000_000) as u32).to_le_bytes());
        rec[8..12].copy_from_slice(&captured.to_le_bytes());
        rec[12..16].copy_from_slice(&original.to_le_bytes());
        self.out.write_all(&rec)
    }

    /// Appends a whole IP packet (it brings its own header: what a TUN
    /// device or a raw socket carries, of any protocol) at `ts_nanos`.
    pub fn write_ip(&mut self, ts_nanos: u64, ip: &[u8]) -> io::Result<()> {
        let len = u32::try_from(ip.len().min(SNAPLEN as usize)).unwrap_or(SNAPLEN);
        self.record_header(ts_nanos, len, u32::try_from(ip.len()).unwrap_or(u32::MAX))?;
        self.out.write_all(&ip[..len as usize])
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
