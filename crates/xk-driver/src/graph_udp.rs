//! A protocol graph on a real socket (issue #16): the datagram device of
//! `app -> xtp -> udp` (a UDP socket) and `app -> xtp -> ip36` (a raw IP
//! socket, protocol 36, root only). One socket, one thread: the framework
//! path's real driver. Over UDP the frames a flush produces leave together
//! through `batch.rs`'s `BatchSocket::send` (GSO runs, `sendmmsg`; the same
//! code as the direct driver's): one `sendto` per datagram held `bulk
//! --graph` to a sixth of direct `bulk`. Receives are one call per
//! datagram (so the socket has no GRO).
//!
//! It drives any `xk_core::device::DeviceStack`: the run-time graph
//! (`GraphOn`, frames carry the peer's address in the device header, see
//! `xk_core::device`; over raw IP the port is 0) or the compiled stack (the
//! peer beside the frame). Received datagrams land in a shared arena behind
//! the composition's header room, so over UDP it gets them without a copy
//! after the kernel's; over raw IP the payload is moved once past the IPv4
//! header the kernel hands over. The arena is zeroed only where earlier
//! frames were split off (as `BatchSocket::recv_gro` does), not 256 KiB
//! at each refill.
//! Frames are gathered into one transmit arena (one copy each) and sent as
//! a batch.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};

use bytes::BytesMut;
use xk_core::device::DeviceStack;
use xk_msg::Msg;
use xk_time::Instant;

use crate::batch::{BatchSocket, Outgoing};
use crate::clock::Clock;

/// Largest datagram received (larger ones are cut by the kernel and then
/// refused by the protocol as malformed).
const MAX_DATAGRAM: usize = 65_535;
/// Receive arena allocated at a time.
const RX_ARENA: usize = 256 * 1024;

/// Counters of the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// Datagrams received and handed to the graph.
    pub received: u64,
    /// Frames sent.
    pub sent: u64,
    /// `send_to` failures (dropped; the protocol retransmits).
    pub send_errors: u64,
}

/// A datagram socket a graph device runs on.
pub trait FrameSocket {
    /// Sends one datagram to `dst`.
    fn send_frame(&mut self, buf: &[u8], dst: SocketAddr) -> io::Result<()>;
    /// Sends the datagrams `out` (ranges of `arena`); returns how many left.
    /// One call each unless the socket batches.
    fn send_frames(&mut self, arena: &[u8], out: &[Outgoing]) -> io::Result<usize> {
        let mut sent = 0;
        for o in out {
            if self.send_frame(&arena[o.start..o.start + o.len], o.dst).is_ok() {
                sent += 1;
            }
        }
        Ok(sent)
    }
    /// Receives one datagram's payload into `buf` without waiting
    /// (`WouldBlock` when none is queued): its length and source.
    fn recv_frame(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)>;
    /// The descriptor to wait on.
    fn fd(&self) -> std::os::fd::BorrowedFd<'_>;
    /// The local address.
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

impl FrameSocket for UdpSocket {
    fn send_frame(&mut self, buf: &[u8], dst: SocketAddr) -> io::Result<()> {
        self.send_to(buf, dst).map(|_| ())
    }
    fn recv_frame(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.recv_from(buf)
    }
    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self)
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        UdpSocket::local_addr(self)
    }
}

impl FrameSocket for BatchSocket {
    fn send_frame(&mut self, buf: &[u8], dst: SocketAddr) -> io::Result<()> {
        self.socket().send_to(buf, dst).map(|_| ())
    }
    fn send_frames(&mut self, arena: &[u8], out: &[Outgoing]) -> io::Result<usize> {
        self.send(arena, out)
    }
    fn recv_frame(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.socket().recv_from(buf)
    }
    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self.socket())
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket().local_addr()
    }
}

/// A raw IPv4 socket for protocol 36 bound to one address, as a graph's
/// device (peers are `IP:0`; see [`crate::raw`] for why two endpoints on
/// one host need different addresses).
pub struct Ip36Socket {
    sock: socket2::Socket,
    local: Ipv4Addr,
    /// What the kernel hands over: the IPv4 header, then XTP.
    scratch: Vec<u8>,
    /// Packets that were not IPv4 or were cut short (counted, dropped).
    pub malformed: u64,
}

impl Ip36Socket {
    /// Opens and binds a protocol-36 socket on `local` (root only; the
    /// error says so).
    pub fn bind(local: Ipv4Addr) -> io::Result<Self> {
        let sock = crate::raw::open_ip36(local)?;
        sock.set_nonblocking(true)?;
        Ok(Ip36Socket { sock, local, scratch: vec![0; MAX_DATAGRAM], malformed: 0 })
    }
}

impl FrameSocket for Ip36Socket {
    fn send_frame(&mut self, buf: &[u8], dst: SocketAddr) -> io::Result<()> {
        let dst = socket2::SockAddr::from(SocketAddr::new(dst.ip(), 0));
        self.sock.send_to(buf, &dst).map(|_| ())
    }
    fn recv_frame(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        loop {
            let n = std::io::Read::read(&mut self.sock, &mut self.scratch)?;
            let p = &self.scratch[..n];
            let Some((src, ihl)) = crate::raw::ipv4_source(p).filter(|&(_, ihl)| n - ihl <= buf.len()) else {
                self.malformed += 1;
                continue;
            };
            buf[..n - ihl].copy_from_slice(&p[ihl..]);
            return Ok((n - ihl, SocketAddr::new(IpAddr::V4(src), 0)));
        }
    }
    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.sock)
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(SocketAddr::V4(SocketAddrV4::new(self.local, 0)))
    }
}

/// A graph's device: a socket and the clock that drives the graph.
pub struct GraphDevice<S> {
    sock: S,
    clock: Clock,
    rx: BytesMut,
    /// The frames of one batch, back to back (room for `BATCH` of the
    /// largest datagrams), and where each goes.
    tx: Vec<u8>,
    out: Vec<Outgoing>,
    /// Counters.
    pub stats: DeviceStats,
}

/// The `udp` device.
pub type GraphUdp = GraphDevice<BatchSocket>;
/// The `ip36` device.
pub type GraphIp36 = GraphDevice<Ip36Socket>;

impl GraphUdp {
    /// Binds a UDP socket at `bind`.
    pub fn bind(bind: SocketAddr) -> io::Result<Self> {
        // GSO for the batched sends; no GRO: receives are one `recv_from`
        // per datagram, which would read a coalesced train as one frame.
        let sock = BatchSocket::with_offload(UdpSocket::bind(bind)?, true, false)?;
        // The device waits with `ppoll` (see `on`); receives must not wait.
        sock.socket().set_nonblocking(true)?;
        Ok(GraphDevice::on(sock))
    }
}

impl GraphIp36 {
    /// Opens a raw IP protocol-36 socket on `local` (root only).
    pub fn bind(local: Ipv4Addr) -> io::Result<Self> {
        Ok(GraphDevice::on(Ip36Socket::bind(local)?))
    }
}

impl<S: FrameSocket> GraphDevice<S> {
    /// A device on `sock`, which must not block (the device waits with
    /// `ppoll`, exact to the nanosecond; a socket's receive timeout is
    /// counted in scheduler ticks, 4 ms here, and held every timer-driven
    /// packet — a paced one, say — that long: ping over the graph showed a
    /// 5-9 ms round trip among 30 µs ones).
    pub fn on(sock: S) -> Self {
        GraphDevice {
            sock,
            clock: Clock::new(),
            rx: BytesMut::new(),
            tx: Vec::new(),
            out: Vec::new(),
            stats: DeviceStats::default(),
        }
    }

    /// The socket's address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// The time now, as the graph counts it.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Sends every frame the composition has for the device, in batches
    /// of at most [`crate::batch::BATCH`] frames.
    pub fn flush<M: Msg, G: DeviceStack<M>>(&mut self, g: &mut G) {
        g.advance(self.clock.now());
        // Room for a batch of the largest datagrams, allocated once (its
        // pages are touched only as far as frames reach).
        let room = crate::batch::BATCH * crate::batch::MAX_DATAGRAM;
        if self.tx.len() < room {
            self.tx = vec![0; room];
        }
        loop {
            self.out.clear();
            let mut used = 0;
            while self.out.len() < crate::batch::BATCH {
                // Each frame is written where it is sent from, back to back
                // (the compiled stack's protocol writes there itself, as the
                // direct driver's endpoint writes into its arena).
                // At most `BATCH` - 1 frames precede this one, so a whole
                // largest datagram's room is always left; lending no more
                // than that makes a longer frame a counted drop
                // (`DeviceDrops::bad_frames`), not a failed send.
                let room = &mut self.tx[used..used + crate::batch::MAX_DATAGRAM];
                let Some((dst, len)) = g.poll_transmit_into(room) else { break };
                self.out.push(Outgoing { dst, start: used, len });
                used += len;
                g.advance(self.clock.now());
            }
            if self.out.is_empty() {
                return;
            }
            let n = self.out.len() as u64;
            match self.sock.send_frames(&self.tx, &self.out) {
                Ok(sent) => {
                    self.stats.sent += sent as u64;
                    self.stats.send_errors += n - sent as u64;
                }
                Err(_) => self.stats.send_errors += n,
            }
        }
    }

    /// Runs the graph on the socket until `until` (or until `stop` says so,
    /// checked after every datagram and timer): sends what the graph has,
    /// waits for a datagram or the graph's next timer, hands it in.
    pub fn run_until<M: Msg, G: DeviceStack<M>>(
        &mut self,
        g: &mut G,
        until: Instant,
        mut stop: impl FnMut(&mut G) -> bool,
    ) -> io::Result<()> {
        let room = G::HEADROOM;
        loop {
            self.flush(g);
            if stop(g) {
                return Ok(());
            }
            // What `stop` pushed (an echo) leaves now, not after the wait.
            self.flush(g);
            let now = self.clock.now();
            if now >= until {
                return Ok(());
            }
            let wake = g.poll_timeout().map_or(until, |t| t.min(until));
            if wake <= now {
                g.handle_timeout(now);
                continue;
            }
            if !crate::transport::wait_readable(self.sock.fd(), Some(wake - now))? {
                g.handle_timeout(self.clock.now());
                continue;
            }
            if self.rx.capacity() < room + MAX_DATAGRAM {
                self.rx = BytesMut::with_capacity(RX_ARENA);
            }
            // Zeroes only what the last frame took from the arena: the rest
            // is still filled (`split_to` leaves it behind).
            self.rx.resize(room + MAX_DATAGRAM, 0);
            match self.sock.recv_frame(&mut self.rx[room..room + MAX_DATAGRAM]) {
                Ok((n, from)) => {
                    let frame = self.rx.split_to(room + n);
                    self.stats.received += 1;
                    g.advance(self.clock.now());
                    g.receive_from(from, frame);
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    g.handle_timeout(self.clock.now());
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {} // ICMP from an earlier send
                Err(e) => return Err(e),
            }
        }
    }
}
