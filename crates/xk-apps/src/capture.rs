//! `--pcap FILE`: every XTP packet a driver sends and receives, written as
//! IPv4 protocol 36 (XTP's own IP protocol number), so stock Wireshark and
//! tshark decode the file with their XTP dissector — no plugin, no
//! "bogus length" from unsplit GSO trains (the driver hands each packet of
//! a train separately).
//!
//! The IPv4 header is made up from the UDP addresses (the ports are not
//! kept: XTP's keys identify its contexts). IPv6 paths are refused.

use std::fs::File;
use std::io::BufWriter;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;

use xk_driver::driver::{Driver, TapDir};
use xk_driver::transport::Transport as Io;
use xtp_wire::pcap::PcapWriter;

/// The IPv4 address to show for `a`: itself, or for an unspecified local
/// address the loopback address when the peer is on loopback.
fn v4(flag: &str, a: IpAddr, peer_hint: Option<IpAddr>) -> Result<Ipv4Addr, String> {
    match a {
        IpAddr::V4(ip) if ip.is_unspecified() && peer_hint.is_some_and(|p| p.is_loopback()) => {
            Ok(Ipv4Addr::LOCALHOST)
        }
        IpAddr::V4(ip) => Ok(ip),
        IpAddr::V6(_) => {
            Err(format!("{flag}: IPv4 paths only (the capture frames packets as IPv4 protocol 36)"))
        }
    }
}

/// Starts writing `path` with every packet `d` sends and receives; `peer`
/// is the address the client talks to (none for a server). The file is
/// complete when the driver is dropped.
pub(crate) fn install<X: Io>(d: &mut Driver<X>, path: &Path, peer: Option<SocketAddr>) -> Result<(), String> {
    let what = format!("--pcap {}", path.display());
    let local_addr = d.local_addr().map_err(|e| format!("{what}: {e}"))?;
    let local = v4(&what, local_addr.ip(), peer.map(|p| p.ip()))?;
    if let Some(p) = peer {
        v4(&what, p.ip(), None)?;
    }
    let file = File::create(path).map_err(|e| format!("{what}: {e}"))?;
    let mut w = PcapWriter::new(BufWriter::new(file)).map_err(|e| format!("{what}: {e}"))?;
    // Driver time is since its creation; the file wants time since 1970.
    let unix =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |t| t.as_nanos() as u64);
    let base = unix.saturating_sub(d.now().as_nanos());
    let mut failed = false;
    d.set_tap(Some(Box::new(move |dir, now, peer, packet| {
        let other = match peer.ip() {
            IpAddr::V4(ip) => ip,
            IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
        };
        let (src, dst) = match dir {
            TapDir::Sent => (local, other),
            TapDir::Received => (other, local),
        };
        // A full disk ends the capture, not the transfer.
        if !failed && w.write_packet(base + now.as_nanos(), src, dst, packet).is_err() {
            failed = true;
        }
    })));
    Ok(())
}
