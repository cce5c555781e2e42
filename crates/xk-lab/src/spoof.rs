//! Spoofed XTP FIRSTs on loopback: UDP datagrams built by hand (IPv4
//! header with `IP_HDRINCL`, UDP header without checksum) from random
//! 127.16–254.x.y sources, each carrying the same real, valid FIRST (made
//! by an `xtp_proto::Endpoint` connecting and writing 64 bytes, as a
//! client's first packet). Needs a raw socket (root, or CAP_NET_RAW).
//! The legitimate client stays on 127.0.0.1, so nothing the server sends
//! to a spoofed source reaches it.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use bytes::Bytes;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use xtp_proto::{ContextConfig, Endpoint, EndpointConfig};

/// A real FIRST to XTP `port` at `server`, carrying `data` bytes and no
/// close (a client that goes on sending), as the engine emits it.
pub fn first_packet(server: SocketAddr, port: u16, data: usize) -> Vec<u8> {
    let mut ep = Endpoint::new(EndpointConfig::default(), 0x5b00f);
    let now = xk_time::Instant::ZERO;
    let ctx = ep.connect(now, server, port, ContextConfig::stream()).expect("a fresh endpoint connects");
    ep.write(now, ctx, Bytes::from(vec![0x5a; data]), false, None).expect("room for 64 bytes");
    let mut buf = vec![0u8; 2048];
    let t = ep.poll_transmit(now, &mut buf).expect("the FIRST");
    buf.truncate(t.len);
    buf
}

/// What a flood sent.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sent {
    /// Datagrams.
    pub datagrams: u64,
    /// XTP bytes (UDP payload) in them.
    pub bytes: u64,
    /// Send errors (e.g. ENOBUFS).
    pub errors: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// A raw IPv4 socket that sends hand-built UDP datagrams.
pub struct Spoofer {
    sock: Socket,
    rng: u64,
}

impl Spoofer {
    /// Opens the raw socket, or says why not (not root).
    pub fn new(seed: u64) -> Result<Spoofer, String> {
        let sock = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(255)))
            .map_err(|e| format!("raw IPv4 socket: {e} (spoofing needs root or CAP_NET_RAW)"))?;
        sock.set_header_included_v4(true).map_err(|e| format!("IP_HDRINCL: {e}"))?;
        let _ = sock.set_send_buffer_size(4 << 20);
        Ok(Spoofer { sock, rng: seed | 1 })
    }

    fn next(&mut self) -> u64 {
        // SplitMix64: a seeded stream of addresses.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A random spoofed source: 127.16–254.x.y, port 1024–65535.
    pub fn source(&mut self) -> SocketAddrV4 {
        let r = self.next();
        let ip = Ipv4Addr::new(127, 16 + (r % 239) as u8, (r >> 8) as u8, (r >> 16) as u8 | 1);
        SocketAddrV4::new(ip, 1024 + ((r >> 24) % 64_512) as u16)
    }

    /// Sends `payload` in a UDP datagram from `from` to `to`.
    pub fn send(&self, from: SocketAddrV4, to: SocketAddrV4, payload: &[u8]) -> std::io::Result<usize> {
        let pkt = udp_datagram(from, to, payload);
        self.sock.send_to(&pkt, &SockAddr::from(to))
    }

    /// Sends `count` copies of `payload` to `to`, each from a new random
    /// source, `rate` per second (0: as fast as the socket takes them),
    /// for at most `limit`.
    pub fn flood(
        &mut self,
        to: SocketAddrV4,
        payload: &[u8],
        count: u64,
        rate: u64,
        limit: Duration,
    ) -> Sent {
        let start = Instant::now();
        let mut s = Sent::default();
        while s.datagrams < count {
            // The clock only every 64 datagrams: it costs as much as a send.
            if s.datagrams.is_multiple_of(64) {
                let t = start.elapsed();
                if t >= limit {
                    break;
                }
                if rate > 0 {
                    let due = Duration::from_secs_f64(s.datagrams as f64 / rate as f64);
                    if due > t {
                        std::thread::sleep(due - t);
                    }
                }
            }
            let from = self.source();
            match self.send(from, to, payload) {
                Ok(_) => {
                    s.datagrams += 1;
                    s.bytes += payload.len() as u64;
                }
                Err(_) => {
                    s.errors += 1;
                    // A full queue: let the receiver drain it.
                    std::thread::yield_now();
                    if s.errors > 10 * count.max(1000) {
                        break;
                    }
                }
            }
        }
        s.seconds = start.elapsed().as_secs_f64();
        s
    }
}

/// An IPv4 header (checksum and id left 0: the kernel fills them for
/// `IP_HDRINCL`), a UDP header (checksum 0: none, allowed over IPv4) and
/// `payload`.
fn udp_datagram(from: SocketAddrV4, to: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let total = 20 + udp_len;
    let mut p = Vec::with_capacity(total);
    p.extend_from_slice(&[0x45, 0]);
    p.extend_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
    p.extend_from_slice(&from.ip().octets());
    p.extend_from_slice(&to.ip().octets());
    p.extend_from_slice(&from.port().to_be_bytes());
    p.extend_from_slice(&to.port().to_be_bytes());
    p.extend_from_slice(&(udp_len as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_parses_and_the_datagram_is_well_formed() {
        let server: SocketAddr = "127.0.0.1:3636".parse().unwrap();
        let f = first_packet(server, 9, 64);
        let p = xtp_wire::PacketRepr::parse(&f).expect("a valid FIRST");
        assert_eq!(p.header.ptype, xtp_wire::PacketType::First);
        let from = SocketAddrV4::new(Ipv4Addr::new(127, 20, 1, 2), 5000);
        let d = udp_datagram(from, "127.0.0.1:3636".parse().unwrap(), &f);
        assert_eq!(d.len(), 28 + f.len());
        assert_eq!(&d[12..16], &[127, 20, 1, 2]);
        assert_eq!(u16::from_be_bytes([d[22], d[23]]), 3636);
        assert_eq!(&d[28..], &f[..]);
        let mut s = Spoofer { sock: Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap(), rng: 7 };
        for _ in 0..1000 {
            let a = s.source();
            assert!(a.ip().octets()[0] == 127 && a.ip().octets()[1] >= 16 && *a.ip() != Ipv4Addr::LOCALHOST);
        }
    }
}
