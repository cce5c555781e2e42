//! A pcap writer that frames XTP packets as IPv4 protocol 36, so captures open
//! in Wireshark / tshark and its own XTP dissector decodes them.
//!
//! File format: classic pcap with nanosecond timestamps (magic `a1b23c4d`),
//! link type 101 (LINKTYPE_RAW: each record starts with an IP header). Each
//! record gets a 20-byte IPv4 header: version 4, IHL 5, DF, TTL 64, protocol 36,
//! a correct header checksum, and an identification that counts up.

use std::io::{self, Write};
use std::net::Ipv4Addr;

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
    /// epoch; the simulator's virtual time is fine).
    pub fn write_packet(
        &mut self,
        ts_nanos: u64,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        xtp: &[u8],
    ) -> io::Result<()> {
        let ip = ipv4_header(src, dst, self.next_id, xtp.len())?;
        self.next_id = self.next_id.wrapping_add(1);
        let len = (ip.len() + xtp.len()) as u32;
        let secs = u32::try_from(ts_nanos / 1_000_000_000).unwrap_or(u32::MAX);
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&secs.to_le_bytes());
        rec[4..8].copy_from_slice(&((ts_nanos % 1_000_000_000) as u32).to_le_bytes());
        rec[8..12].copy_from_slice(&len.to_le_bytes());
        rec[12..16].copy_from_slice(&len.to_le_bytes());
        self.out.write_all(&rec)?;
        self.out.write_all(&ip)?;
        self.out.write_all(xtp)
    }

    /// Appends a whole IP packet (it brings its own header: what a TUN
    /// device or a raw socket carries, of any protocol) at `ts_nanos`.
    pub fn write_ip(&mut self, ts_nanos: u64, ip: &[u8]) -> io::Result<()> {
        let len = u32::try_from(ip.len().min(SNAPLEN as usize)).unwrap_or(SNAPLEN);
        let secs = u32::try_from(ts_nanos / 1_000_000_000).unwrap_or(u32::MAX);
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&secs.to_le_bytes());
        rec[4..8].copy_from_slice(&((ts_nanos % 1_000_000_000) as u32).to_le_bytes());
        rec[8..12].copy_from_slice(&len.to_le_bytes());
        rec[12..16].copy_from_slice(&u32::try_from(ip.len()).unwrap_or(u32::MAX).to_le_bytes());
        self.out.write_all(&rec)?;
        self.out.write_all(&ip[..len as usize])
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
