//! The packet size a route carries, so the tools size XTP's packets from the
//! path as TCP sizes its MSS from the route's MTU (issue #12 item 3): over
//! `xpress netns --link "profile packet-radio-9600"` (TUN MTU 238) a full
//! XTP packet must fit one radio frame without anyone passing `--mss`.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};

use crate::driver::UDP_HEADER;

/// The IPv4 header's bytes (no options). `EndpointConfig::max_packet` is
/// measured over IPv4 and UDP; the engine takes IPv6's 20 further bytes
/// itself for an IPv6 peer.
const IPV4_HEADER: usize = 20;

/// The MTU of the route to `to`, as the kernel reports it for a UDP socket
/// connected there (`IP_MTU` / `IPV6_MTU`; connecting a UDP socket sends
/// nothing). It includes the cached path MTU when PMTU discovery lowered it.
pub fn route_mtu(to: IpAddr) -> io::Result<usize> {
    let local: SocketAddr = match to {
        IpAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = UdpSocket::bind(local)?;
    // Any port routes the same; 9 (discard) in case one is ever logged.
    s.connect((to, 9))?;
    let mtu = match to {
        IpAddr::V4(_) => rustix::net::sockopt::ip_mtu(&s)?,
        IpAddr::V6(_) => rustix::net::sockopt::ipv6_mtu(&s)?,
    };
    Ok(mtu as usize)
}

/// `EndpointConfig::max_packet` for a route of `mtu` bytes: the MTU less
/// IPv4's and UDP's headers (for an IPv6 peer the engine takes 20 more,
/// so IPv6 + UDP are counted too; over raw IP the driver gives the 8 UDP
/// bytes back). Never more than the engine's default (a 1,500-byte MTU):
/// loopback's 65,536 would make 64 KB packets that no real path carries
/// and no measurement of the lab uses.
pub fn max_packet_for_mtu(mtu: usize) -> usize {
    let default = xtp_proto::EndpointConfig::default().max_packet;
    mtu.saturating_sub(IPV4_HEADER + UDP_HEADER).min(default)
}

/// Whether [`max_packet_for_mtu`] is the 1,500-byte cap rather than the
/// route's own figure (loopback, jumbo frames), so an error naming the
/// limit can say where it comes from.
pub fn is_capped(mtu: usize) -> bool {
    mtu.saturating_sub(IPV4_HEADER + UDP_HEADER) > max_packet_for_mtu(mtu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_packet_is_the_mtu_less_ipv4_and_udp_capped_at_ethernet() {
        assert_eq!(max_packet_for_mtu(238), 210);
        assert_eq!(max_packet_for_mtu(1500), 1472);
        assert_eq!(max_packet_for_mtu(65_536), 1472);
        assert_eq!(max_packet_for_mtu(10), 0);
        assert!(is_capped(65_536) && is_capped(1501));
        assert!(!is_capped(1500) && !is_capped(238));
    }

    #[test]
    fn loopback_has_a_route_mtu() {
        let mtu = route_mtu(IpAddr::from([127, 0, 0, 1])).unwrap();
        assert!(mtu >= 1500, "{mtu}");
        assert_eq!(max_packet_for_mtu(mtu), 1472);
    }
}
