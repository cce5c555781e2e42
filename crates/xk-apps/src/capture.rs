//! `--pcap FILE`: every XTP packet a driver sends and receives, written as
//! IP protocol 36 (XTP's own IP protocol number), so stock Wireshark and
//! tshark decode the file with their XTP dissector — no plugin, no
//! "bogus length" from unsplit GSO trains (the driver hands each packet of
//! a train separately).
//!
//! The IP header (IPv4, or IPv6 on an IPv6 path) is made up from the UDP
//! addresses; the ports are not kept (XTP's keys identify its contexts).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

use xk_driver::driver::{Driver, TapDir};
use xk_driver::transport::Transport as Io;

/// The address to show for the local address `a`: itself, or for an
/// unspecified one the loopback address when the peer is on loopback.
fn shown(a: IpAddr, peer_hint: Option<IpAddr>) -> IpAddr {
    let on_loopback = peer_hint.is_some_and(|p| p.is_loopback());
    match a {
        IpAddr::V4(ip) if ip.is_unspecified() && on_loopback => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() && on_loopback => IpAddr::V6(Ipv6Addr::LOCALHOST),
        a => a,
    }
}

/// Starts writing `path` with every packet `d` sends and receives; `peer`
/// is the address the client talks to (none for a server). The file is
/// complete when the driver is dropped.
pub(crate) fn install<X: Io>(d: &mut Driver<X>, path: &Path, peer: Option<SocketAddr>) -> Result<(), String> {
    let what = format!("--pcap {}", path.display());
    let local_addr = d.local_addr().map_err(|e| format!("{what}: {e}"))?;
    let local = shown(local_addr.ip(), peer.map(|p| p.ip()));
    let mut w = crate::pcap_file::create(path)?;
    // Driver time is since its creation; the file wants time since 1970.
    let unix =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |t| t.as_nanos() as u64);
    let base = unix.saturating_sub(d.now().as_nanos());
    let mut failed = false;
    d.set_tap(Some(Box::new(move |dir, now, peer, packet| {
        let other = peer.ip();
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
