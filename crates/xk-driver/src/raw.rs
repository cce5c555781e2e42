//! XTP directly over IP, protocol 36 — the transport XTP was designed for
//! (digest §1): the same XTP bytes as over UDP, in an IPv4 packet the kernel
//! builds. Needs root (`CAP_NET_RAW`); without it, [`RawSocket::bind`] says so.
//!
//! A raw socket receives every protocol-36 packet addressed to its bound
//! address, IP header included; the source address comes from that header
//! and the payload is handed on as a slice of the receive buffer. There are
//! no ports: peers are `IP:0`. Two endpoints on one host must bind different
//! addresses (127.0.0.1 and 127.0.0.2, say), or each would see the other's
//! packets.
//!
//! Raw sockets have no GSO or GRO: the kernel builds, routes and queues one
//! IP packet per datagram whatever the call. What batching saves is the
//! system call around each one, so sends go out in one `sendmmsg` per batch
//! (against one `sendto` each, 11–16 % less sender CPU per byte at
//! 1 Gbit/s; docs/PERF.md, Session 19). Receives stay one `recv` each: a wake-up under
//! bulk load finds only 3–4 datagrams, and `recvmmsg` measured no cheaper.
//!
//! A connected socket would not save the route lookup: the kernel's raw
//! send routes every packet whether or not the socket is connected (it keeps
//! no cached route as UDP does), so sockets stay unconnected, one for all
//! peers.

use std::io;
use std::io::IoSlice;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd};

use bytes::{Bytes, BytesMut};
use nix::errno::Errno;
use nix::sys::socket::{MsgFlags, MultiHeaders, SockaddrStorage, recv, sendmmsg};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use xk_time::Duration;

use crate::batch::{BATCH, IoCounters, MAX_DATAGRAM, Outgoing, TICK};
use crate::transport::{Transport, wait_readable};

/// XTP's IP protocol number.
pub const IPPROTO_XTP: i32 = 36;
const RX_CHUNK: usize = 1 << 20;
/// Most datagrams one `sendmmsg` carries: the driver's whole batch.
const SEND_BATCH: usize = 64;

/// A raw IPv4 socket for protocol 36, bound to one local address.
pub struct RawSocket {
    sock: Socket,
    local: Ipv4Addr,
    /// Receive buffer; each datagram is split off and handed on.
    rx: BytesMut,
    counters: IoCounters,
    /// Packets that were not IPv4 or were cut short (counted, dropped).
    pub malformed: u64,
}

impl RawSocket {
    /// Opens and binds a protocol-36 socket on `local`.
    pub fn bind(local: Ipv4Addr) -> io::Result<Self> {
        let sock = open_ip36(local)?;
        sock.set_read_timeout(Some(std::time::Duration::from_nanos(TICK.as_nanos() as u64)))?;
        Ok(RawSocket { sock, local, rx: BytesMut::new(), counters: IoCounters::default(), malformed: 0 })
    }
}

/// A raw IPv4 protocol-36 socket bound to `local`; without root the error
/// says what to do instead.
pub(crate) fn open_ip36(local: Ipv4Addr) -> io::Result<Socket> {
    let sock = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(IPPROTO_XTP))).map_err(|e| {
        if e.kind() == io::ErrorKind::PermissionDenied {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                "raw IP protocol 36 needs root (CAP_NET_RAW): run as root, or use XTP over UDP (the default)",
            )
        } else {
            e
        }
    })?;
    sock.bind(&SockAddr::from(SocketAddrV4::new(local, 0)))?;
    Ok(sock)
}

/// The source address and header length of an IPv4 packet as a raw socket
/// hands it over; None when it is not IPv4 or is cut short (the caller
/// counts it as malformed).
pub(crate) fn ipv4_source(packet: &[u8]) -> Option<(Ipv4Addr, usize)> {
    let ihl = usize::from(packet.first().copied().unwrap_or(0) & 0x0f) * 4;
    if packet.len() < 20 || packet[0] >> 4 != 4 || ihl < 20 || ihl > packet.len() {
        return None;
    }
    Some((Ipv4Addr::new(packet[12], packet[13], packet[14], packet[15]), ihl))
}

/// Send errors after which the datagram is lost but the socket is fine.
fn transient(e: Errno) -> bool {
    matches!(e, Errno::EAGAIN | Errno::EINTR | Errno::ECONNREFUSED | Errno::ENOBUFS)
}

impl Transport for RawSocket {
    /// One `sendmmsg` per [`SEND_BATCH`] datagrams. A datagram the kernel
    /// refuses (full buffer, ICMP error) is counted as a send error and
    /// skipped, and the rest go on in the next call — as when each had its
    /// own `sendto`; any other error is returned.
    fn send(&mut self, arena: &[u8], out: &[Outgoing]) -> io::Result<usize> {
        let mut sent = 0;
        let mut i = 0;
        while i < out.len() {
            let part = &out[i..out.len().min(i + SEND_BATCH)];
            let slices: Vec<[IoSlice<'_>; 1]> =
                part.iter().map(|o| [IoSlice::new(&arena[o.start..o.start + o.len])]).collect();
            let addrs: Vec<Option<SockaddrStorage>> =
                part.iter().map(|o| Some(SockaddrStorage::from(SocketAddr::new(o.dst.ip(), 0)))).collect();
            let mut hdrs = MultiHeaders::<SockaddrStorage>::preallocate(part.len(), None);
            self.counters.send_calls += 1;
            let r = sendmmsg(self.sock.as_raw_fd(), &mut hdrs, &slices, &addrs, [], MsgFlags::MSG_DONTWAIT)
                .map(|res| res.count());
            match r {
                // The kernel stops at the first datagram that fails and
                // returns the count before it (the error comes back from the
                // next call, which starts at that datagram).
                Ok(n) if n > 0 => {
                    sent += n;
                    self.counters.sent += n as u64;
                    i += n;
                }
                Ok(_) => {
                    self.counters.send_errors += 1;
                    i += 1;
                }
                Err(e) if transient(e) => {
                    self.counters.send_errors += 1;
                    i += 1;
                }
                Err(e) => return Err(io::Error::from_raw_os_error(e as i32)),
            }
        }
        Ok(sent)
    }

    /// One `recv` per datagram, up to [`BATCH`]. `recvmmsg` was measured
    /// and not kept: a wake-up under bulk load finds 3–4 datagrams, and the
    /// receiver's CPU per byte was the same with it (docs/PERF.md,
    /// Session 19).
    fn recv(&mut self, block: bool, f: &mut dyn FnMut(SocketAddr, Bytes)) -> io::Result<usize> {
        let mut count = 0;
        let mut block = block;
        loop {
            if self.rx.capacity() < MAX_DATAGRAM {
                self.rx = BytesMut::with_capacity(RX_CHUNK);
            }
            // `resize` zeroes only the bytes split off last time.
            self.rx.resize(MAX_DATAGRAM, 0);
            self.counters.recv_calls += 1;
            let flags = if block { MsgFlags::empty() } else { MsgFlags::MSG_DONTWAIT };
            let n = match recv(self.sock.as_raw_fd(), &mut self.rx[..], flags) {
                Ok(n) => n,
                Err(Errno::EAGAIN | Errno::EINTR) => return Ok(count),
                Err(e) => return Err(io::Error::from_raw_os_error(e as i32)),
            };
            block = false;
            let packet = self.rx.split_to(n).freeze();
            let Some((src, ihl)) = ipv4_source(&packet) else {
                self.malformed += 1;
                continue;
            };
            self.counters.received += 1;
            count += 1;
            f(SocketAddr::new(IpAddr::V4(src), 0), packet.slice(ihl..));
            if count >= BATCH {
                return Ok(count);
            }
        }
    }

    fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        wait_readable(self.sock.as_fd(), timeout)
    }

    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.sock.as_fd()
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(SocketAddr::new(IpAddr::V4(self.local), 0))
    }

    fn counters(&self) -> IoCounters {
        self.counters
    }

    fn size_buffers(&self, bytes: usize) -> (usize, usize) {
        crate::batch::size_socket_buffers(&self.sock, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_ipv4_headers_give_a_source() {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[12..16].copy_from_slice(&[10, 0, 0, 7]);
        assert_eq!(ipv4_source(&p), Some((Ipv4Addr::new(10, 0, 0, 7), 20)));
        p[0] = 0x47; // 28-byte header: all of it
        assert_eq!(ipv4_source(&p).map(|s| s.1), Some(28));
        p[0] = 0x48; // 32-byte header in 28 bytes
        assert_eq!(ipv4_source(&p), None);
        p[0] = 0x44; // header shorter than IPv4's fixed part
        assert_eq!(ipv4_source(&p), None);
        p[0] = 0x65; // IPv6
        assert_eq!(ipv4_source(&p), None);
        assert_eq!(ipv4_source(&p[..19]), None);
        assert_eq!(ipv4_source(&[]), None);
    }

    /// Root only (skips, saying so, without it). 200 datagrams between two
    /// raw sockets on loopback — full 1,448-byte payloads, short ones, and
    /// 3,000-byte ones (loopback carries them whole) — arrive intact, in
    /// order, from the sender's address, and the sends batch: at most one
    /// send call per 64 datagrams (one `sendto` each made 200).
    #[test]
    fn batched_send_and_receive_on_loopback() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: raw IP protocol 36 needs root");
            return;
        }
        let (a, b) = (Ipv4Addr::new(127, 0, 19, 1), Ipv4Addr::new(127, 0, 19, 2));
        let mut tx = RawSocket::bind(a).unwrap();
        let mut rx = RawSocket::bind(b).unwrap();
        rx.size_buffers(8 << 20);
        let to = SocketAddr::new(IpAddr::V4(b), 0);
        let mut arena = Vec::new();
        let mut out = Vec::new();
        for k in 0..200usize {
            let len = match k % 10 {
                3 => 3_000,
                7 => 40 + k,
                _ => 1_448,
            };
            out.push(Outgoing { dst: to, start: arena.len(), len });
            arena.extend((0..len).map(|i| (k * 7 + i) as u8));
        }
        assert_eq!(tx.send(&arena, &out).unwrap(), out.len());
        assert_eq!(tx.counters().sent, 200);
        assert!(tx.counters().send_calls <= 4, "sends batched: {:?}", tx.counters());
        assert!(rx.wait(Some(Duration::from_millis(2_000))).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut got: Vec<(SocketAddr, Bytes)> = Vec::new();
        for _ in 0..100 {
            if rx.recv(false, &mut |from, d| got.push((from, d))).unwrap() == 0 {
                break;
            }
        }
        assert_eq!(got.len(), out.len());
        for ((from, g), o) in got.iter().zip(&out) {
            assert_eq!(from.ip(), IpAddr::V4(a));
            assert_eq!(&g[..], &arena[o.start..o.start + o.len]);
        }
        assert_eq!(rx.malformed, 0);
    }
}
