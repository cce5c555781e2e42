//! Frames between a graph and a datagram device.
//!
//! A *datagram device* is what sits below the bottom protocol of a graph that
//! talks to peers by socket address: a UDP socket, a raw IP protocol-36
//! socket, or a simulated link. It is the driver, not a protocol object (as
//! the x-kernel's `simeth` driver over Unix UDP sockets was). Every frame
//! crossing that boundary starts with an [`ADDR_HEADER`]-byte device header
//! naming the peer — the destination on the way out, the source on the way
//! in — so the graph's `receive` / `poll_transmit` keep carrying messages
//! only, and the driver writes or strips the header in the message's
//! headroom without moving the payload.
//!
//! Layout: 16 bytes of IPv6 address (an IPv4 peer as `::ffff:a.b.c.d`) and
//! the port, big-endian (0 for raw IP).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};

/// The first 12 bytes of an IPv4-mapped IPv6 address.
const V4_MAPPED: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

/// Length of the device header.
pub const ADDR_HEADER: usize = 18;

/// Writes `addr` as a device header into `out` (at least [`ADDR_HEADER`] bytes).
pub fn write_addr(out: &mut [u8], addr: SocketAddr) {
    // Per packet on every path through a device: the IPv4 case written
    // in place, without building an IPv6 address first.
    match addr {
        SocketAddr::V4(a) => {
            out[..12].copy_from_slice(&V4_MAPPED);
            out[12..16].copy_from_slice(&a.ip().octets());
        }
        SocketAddr::V6(a) => out[..16].copy_from_slice(&a.ip().octets()),
    }
    out[16..ADDR_HEADER].copy_from_slice(&addr.port().to_be_bytes());
}

/// Reads a device header; `None` if `h` is shorter than [`ADDR_HEADER`].
pub fn read_addr(h: &[u8]) -> Option<SocketAddr> {
    let h: &[u8; ADDR_HEADER] = h.get(..ADDR_HEADER)?.try_into().ok()?;
    let port = u16::from_be_bytes([h[16], h[17]]);
    // Per packet on every path through a device: the IPv4 case without
    // building an IPv6 address first.
    if h[..12] == V4_MAPPED {
        return Some(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(h[12], h[13], h[14], h[15]), port)));
    }
    let mut octets = [0u8; 16];
    octets.copy_from_slice(&h[..16]);
    let v6 = Ipv6Addr::from(octets);
    let ip = match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_and_short_headers_are_refused() {
        for a in ["10.0.0.1:7", "[2001:db8::5]:65535", "0.0.0.0:0"] {
            let a: SocketAddr = a.parse().unwrap();
            let mut h = [0u8; ADDR_HEADER];
            write_addr(&mut h, a);
            assert_eq!(read_addr(&h), Some(a));
        }
        assert_eq!(read_addr(&[0u8; ADDR_HEADER - 1]), None);
    }
}
