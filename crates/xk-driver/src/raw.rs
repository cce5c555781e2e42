//! XTP directly over IP, protocol 36 — the transport XTP was designed for
//! (digest §1): the same XTP bytes as over UDP, in an IPv4 packet the kernel
//! builds. Needs root (`CAP_NET_RAW`); without it, [`RawSocket::bind`] says so.
//!
//! A raw socket receives every protocol-36 packet addressed to its bound
//! address, IP header included; the source address comes from that header
//! and the payload is handed on as a slice of the receive buffer. There are
//! no ports: peers are `IP:0`. Two endpoints on one host must bind different
//! addresses (127.0.0.1 and 127.0.0.2, say), or each would see the other's
//! packets. One datagram per system call: raw sockets have no GSO/GRO and no
//! benefit from `sendmmsg` worth its complexity here.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd};

use bytes::{Bytes, BytesMut};
use nix::errno::Errno;
use nix::sys::socket::{MsgFlags, recv};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use xk_time::Duration;

use crate::batch::{IoCounters, MAX_DATAGRAM, Outgoing, TICK};
use crate::transport::{Transport, wait_readable};

/// XTP's IP protocol number.
pub const IPPROTO_XTP: i32 = 36;
const RX_CHUNK: usize = 1 << 20;

/// A raw IPv4 socket for protocol 36, bound to one local address.
pub struct RawSocket {
    sock: Socket,
    local: Ipv4Addr,
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

impl Transport for RawSocket {
    fn send(&mut self, arena: &[u8], out: &[Outgoing]) -> io::Result<usize> {
        let mut sent = 0;
        for o in out {
            let dst = SockAddr::from(SocketAddr::new(o.dst.ip(), 0));
            self.counters.send_calls += 1;
            match self.sock.send_to_with_flags(&arena[o.start..o.start + o.len], &dst, libc_dontwait()) {
                Ok(_) => {
                    sent += 1;
                    self.counters.sent += 1;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::Interrupted
                            | io::ErrorKind::ConnectionRefused
                    ) || e.raw_os_error() == Some(Errno::ENOBUFS as i32) =>
                {
                    self.counters.send_errors += 1
                }
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }

    fn recv(&mut self, block: bool, f: &mut dyn FnMut(SocketAddr, Bytes)) -> io::Result<usize> {
        let mut count = 0;
        let mut block = block;
        loop {
            if self.rx.capacity() < MAX_DATAGRAM {
                self.rx = BytesMut::with_capacity(RX_CHUNK);
            }
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
            // IPv4 header: version 4, IHL words, total length, source address.
            let ihl = usize::from(packet.first().copied().unwrap_or(0) & 0x0f) * 4;
            if packet.len() < 20 || packet[0] >> 4 != 4 || ihl < 20 || ihl > packet.len() {
                self.malformed += 1;
                continue;
            }
            let src = Ipv4Addr::new(packet[12], packet[13], packet[14], packet[15]);
            self.counters.received += 1;
            count += 1;
            f(SocketAddr::new(IpAddr::V4(src), 0), packet.slice(ihl..));
            if count >= crate::batch::BATCH {
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

/// `MSG_DONTWAIT` as socket2 wants it (a C int).
fn libc_dontwait() -> i32 {
    MsgFlags::MSG_DONTWAIT.bits()
}
