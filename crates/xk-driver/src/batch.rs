//! Batched datagram I/O on a UDP socket: the system calls that make user-space
//! transport cheap, each with a fallback.
//!
//! * Send: runs of equal-sized datagrams to one destination are cut by the
//!   kernel (`UDP_SEGMENT`, GSO); consecutive runs whose datagrams share a
//!   segment size leave together in one `sendmmsg` (one run: `sendmsg`).
//!   Without GSO (old kernel, or the first GSO send fails) every datagram goes
//!   through `sendmmsg`.
//! * Receive: [`BatchSocket::recv_gro`] reads one (possibly coalesced)
//!   datagram with `recvmsg` and the `UDP_GRO` segment size, splitting it into
//!   the original datagrams as zero-copy slices of one buffer;
//!   [`BatchSocket::recv_many`] reads up to [`BATCH`] datagrams with one
//!   `recvmmsg` (used where GRO does not apply, e.g. the relay).
//! * Waiting: [`BatchSocket::wait`] is `ppoll` with a nanosecond timeout, so
//!   timers fire on time without per-turn `setsockopt` calls.
//! * Kernel drops: [`socket_drops`] reads the socket's drop counter from
//!   `/proc/net/udp` (datagrams the kernel discarded because our receive
//!   buffer was full).
//!
//! All through `nix`'s safe wrappers: this crate keeps `unsafe` forbidden.

use std::io;
use std::io::{IoSlice, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};

use bytes::{Bytes, BytesMut};
use nix::errno::Errno;
use nix::sys::socket::{
    ControlMessage, ControlMessageOwned, MsgFlags, MultiHeaders, SockaddrStorage, recvmmsg, recvmsg,
    sendmmsg, sendmsg, setsockopt, sockopt,
};
use socket2::{Domain, Protocol, Socket, Type};
use xk_time::Duration;

use crate::transport::Transport;

/// Most datagrams moved by one `sendmmsg` / `recvmmsg`.
pub const BATCH: usize = 32;
/// Most segments the kernel accepts in one GSO send (`UDP_MAX_SEGMENTS`).
const GSO_MAX_SEGMENTS: usize = 64;
/// Largest datagram (and GSO/GRO super-datagram) on the wire.
pub const MAX_DATAGRAM: usize = 65_535;
/// Longest a blocking receive waits before returning empty-handed. The
/// kernel rounds socket timeouts to its tick (up to 4 ms late), so callers
/// block this way only when their next deadline is further off than
/// `TICK` + 5 ms and use [`BatchSocket::wait`] (exact) otherwise.
pub const TICK: Duration = Duration::from_millis(10);
/// Receive buffer refill size: one allocation serves many datagrams.
const RX_CHUNK: usize = 1 << 20;

/// Counters of what the socket did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoCounters {
    /// Datagrams handed to the kernel.
    pub sent: u64,
    /// Datagrams received (after GRO splitting).
    pub received: u64,
    /// Datagrams the kernel refused (full buffer, no route, ICMP error).
    pub send_errors: u64,
    /// Send system calls.
    pub send_calls: u64,
    /// Receive system calls (including those that found nothing).
    pub recv_calls: u64,
}

/// A UDP socket with batched send and receive.
pub struct BatchSocket {
    sock: UdpSocket,
    gso: bool,
    gro: bool,
    /// `recv_gro` receives here (kept `MAX_DATAGRAM` long between calls).
    rx: BytesMut,
    /// `recv_many` copies datagrams here, back to back.
    compact: BytesMut,
    /// `recv_many` scratch: `BATCH` slots of `MAX_DATAGRAM` bytes.
    scratch: Vec<u8>,
    cmsg: Vec<u8>,
    /// What the socket did.
    pub counters: IoCounters,
}

/// One datagram to send: a range of the caller's transmit arena.
#[derive(Clone, Copy, Debug)]
pub struct Outgoing {
    /// Destination.
    pub dst: SocketAddr,
    /// Start in the arena.
    pub start: usize,
    /// Length.
    pub len: usize,
}

fn io_err(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

fn to_std(a: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    a.as_sockaddr_in6().map(|v6| SocketAddr::V6((*v6).into()))
}

/// Errors after which the datagram is lost but the socket is fine: the
/// protocol above recovers as from a lossy link.
fn transient(e: Errno) -> bool {
    matches!(
        e,
        Errno::EAGAIN
            | Errno::ENOBUFS
            | Errno::ECONNREFUSED
            | Errno::EHOSTUNREACH
            | Errno::ENETUNREACH
            | Errno::EINTR
    )
}

impl BatchSocket {
    /// Wraps a bound socket and turns on GSO/GRO when the kernel has them
    /// (`use_offload` false forces the fallbacks). The socket is left
    /// blocking with a receive timeout of [`TICK`]: a blocking receive is one
    /// system call and wakes at least every tick; non-blocking calls pass
    /// `MSG_DONTWAIT`. Sends never block.
    pub fn new(sock: UdpSocket, use_offload: bool) -> io::Result<Self> {
        Self::with_offload(sock, use_offload, use_offload)
    }

    /// As [`BatchSocket::new`], choosing GSO and GRO separately.
    pub fn with_offload(sock: UdpSocket, want_gso: bool, want_gro: bool) -> io::Result<Self> {
        sock.set_nonblocking(false)?;
        sock.set_read_timeout(Some(std::time::Duration::from_nanos(TICK.as_nanos() as u64)))?;
        // GSO needs no socket option to send; probe that the kernel knows it.
        let gso = want_gso && nix::sys::socket::getsockopt(&sock, sockopt::UdpGsoSegment).is_ok();
        let gro = want_gro && setsockopt(&sock, sockopt::UdpGroSegment, &true).is_ok();
        Ok(BatchSocket {
            sock,
            gso,
            gro,
            rx: BytesMut::new(),
            compact: BytesMut::new(),
            scratch: Vec::new(),
            cmsg: nix::cmsg_space!(i32),
            counters: IoCounters::default(),
        })
    }

    /// The socket.
    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// Whether sends use UDP GSO and receives UDP GRO.
    pub fn offload(&self) -> (bool, bool) {
        (self.gso, self.gro)
    }

    /// Asks for `bytes` of kernel buffer each way; returns what the kernel
    /// granted (Linux reports double the request, capped by
    /// `net.core.rmem_max` / `wmem_max` unless [`size_socket_buffers`] could
    /// force it).
    pub fn size_buffers(&self, bytes: usize) -> (usize, usize) {
        size_socket_buffers(&self.sock, bytes)
    }

    /// Sends `out` (ranges of `arena`). Returns how many left; the rest found
    /// the socket buffer full (counted as send errors: dropped, like on a
    /// congested link). Hard errors are returned.
    pub fn send(&mut self, arena: &[u8], out: &[Outgoing]) -> io::Result<usize> {
        let mut i = 0;
        let mut sent = 0;
        while i < out.len() {
            if !self.gso {
                let j = (i + BATCH).min(out.len());
                sent += self.send_singles(arena, &out[i..j])?;
                i = j;
                continue;
            }
            // GSO runs (same destination, same size, the last may be shorter)
            // whose first datagrams have one size share one segment-size
            // control message, so consecutive runs leave in one `sendmmsg` —
            // messages that end in a shorter packet (EOM) break a run each,
            // and would otherwise cost one system call per message. A lone
            // datagram no longer than the segment size is sent whole.
            let seg = out[i].len;
            if seg == 0 || seg > usize::from(u16::MAX) {
                sent += self.send_singles(arena, &out[i..=i])?;
                i += 1;
                continue;
            }
            let mut runs: Vec<(usize, usize)> = Vec::new();
            let mut j = i;
            while j < out.len() && runs.len() < BATCH && out[j].len == seg {
                let n = gso_run(out, j);
                runs.push((j, n));
                j += n;
            }
            if let [(k, 1)] = runs[..] {
                // One lone datagram (request/response traffic): plain
                // sendmsg, no control message for the kernel to parse.
                sent += self.send_singles(arena, &out[k..=k])?;
                i = j;
                continue;
            }
            match self.send_runs(arena, out, &runs, seg) {
                Ok(n) => {
                    sent += n;
                    i = j;
                }
                Err(Errno::EIO | Errno::EINVAL | Errno::EOPNOTSUPP) => {
                    // The device or kernel cannot segment: fall back for good.
                    self.gso = false;
                }
                Err(e) => return Err(io_err(e)),
            }
        }
        Ok(sent)
    }

    /// Sends GSO runs (start index, length in `out`) whose datagrams are at
    /// most `seg` bytes, all with segment size `seg`: one `sendmsg` for a
    /// single run, one `sendmmsg` for several. Returns the datagrams sent;
    /// those that found the socket buffer full count as send errors.
    fn send_runs(
        &mut self,
        arena: &[u8],
        out: &[Outgoing],
        runs: &[(usize, usize)],
        seg: usize,
    ) -> Result<usize, Errno> {
        let seg = u16::try_from(seg).unwrap_or(u16::MAX);
        let bytes = |&(k, n): &(usize, usize)| {
            let (first, last) = (out[k], out[k + n - 1]);
            &arena[first.start..last.start + last.len]
        };
        let cmsg = [ControlMessage::UdpGsoSegments(&seg)];
        if let [run] = runs {
            let iov = [IoSlice::new(bytes(run))];
            let dst = SockaddrStorage::from(out[run.0].dst);
            self.counters.send_calls += 1;
            return match sendmsg(self.sock.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_DONTWAIT, Some(&dst)) {
                Ok(_) => {
                    self.counters.sent += run.1 as u64;
                    trace_trains(out, runs);
                    Ok(run.1)
                }
                Err(e) if transient(e) => {
                    self.counters.send_errors += run.1 as u64;
                    Ok(0)
                }
                Err(e) => Err(e),
            };
        }
        let mut done = 0; // runs
        let mut sent = 0; // datagrams
        while done < runs.len() {
            let part = &runs[done..];
            let slices: Vec<[IoSlice<'_>; 1]> = part.iter().map(|r| [IoSlice::new(bytes(r))]).collect();
            let addrs: Vec<Option<SockaddrStorage>> =
                part.iter().map(|r| Some(SockaddrStorage::from(out[r.0].dst))).collect();
            let mut hdrs =
                MultiHeaders::<SockaddrStorage>::preallocate(part.len(), Some(nix::cmsg_space!(u16)));
            self.counters.send_calls += 1;
            match sendmmsg(self.sock.as_raw_fd(), &mut hdrs, &slices, &addrs, cmsg, MsgFlags::MSG_DONTWAIT) {
                Ok(res) => {
                    let n = res.count();
                    let datagrams: usize = part[..n].iter().map(|r| r.1).sum();
                    self.counters.sent += datagrams as u64;
                    trace_trains(out, &part[..n]);
                    sent += datagrams;
                    if n == 0 {
                        self.counters.send_errors += part.iter().map(|r| r.1 as u64).sum::<u64>();
                        return Ok(sent);
                    }
                    done += n;
                }
                Err(e) if transient(e) => {
                    // The first run failed: drop it; on a full buffer the
                    // rest would fail the same way.
                    if e == Errno::EAGAIN {
                        self.counters.send_errors += part.iter().map(|r| r.1 as u64).sum::<u64>();
                        return Ok(sent);
                    }
                    self.counters.send_errors += part[0].1 as u64;
                    done += 1;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }

    fn send_singles(&mut self, arena: &[u8], out: &[Outgoing]) -> io::Result<usize> {
        if let [o] = out {
            // One datagram (request/response traffic): plain sendmsg, without
            // the header tables sendmmsg needs.
            self.counters.send_calls += 1;
            let iov = [IoSlice::new(&arena[o.start..o.start + o.len])];
            let dst = SockaddrStorage::from(o.dst);
            return match sendmsg(self.sock.as_raw_fd(), &iov, &[], MsgFlags::MSG_DONTWAIT, Some(&dst)) {
                Ok(_) => {
                    self.counters.sent += 1;
                    Ok(1)
                }
                Err(e) if transient(e) => {
                    self.counters.send_errors += 1;
                    Ok(0)
                }
                Err(e) => Err(io_err(e)),
            };
        }
        let mut done = 0;
        while done < out.len() {
            let part = &out[done..];
            let slices: Vec<[IoSlice<'_>; 1]> =
                part.iter().map(|o| [IoSlice::new(&arena[o.start..o.start + o.len])]).collect();
            let addrs: Vec<Option<SockaddrStorage>> =
                part.iter().map(|o| Some(SockaddrStorage::from(o.dst))).collect();
            let mut hdrs = MultiHeaders::<SockaddrStorage>::preallocate(part.len(), None);
            self.counters.send_calls += 1;
            let r = sendmmsg(self.sock.as_raw_fd(), &mut hdrs, &slices, &addrs, [], MsgFlags::MSG_DONTWAIT);
            match r {
                Ok(res) => {
                    let n = res.count();
                    self.counters.sent += n as u64;
                    if n == 0 {
                        self.counters.send_errors += part.len() as u64;
                        return Ok(done);
                    }
                    done += n;
                }
                Err(e) if transient(e) => {
                    // The first datagram failed: drop it and go on with the rest.
                    self.counters.send_errors += 1;
                    done += 1;
                    if e == Errno::EAGAIN {
                        // Buffer full: the rest would fail the same way.
                        self.counters.send_errors += (part.len() - 1) as u64;
                        return Ok(done - 1);
                    }
                }
                Err(e) => return Err(io_err(e)),
            }
        }
        Ok(done)
    }

    /// Receives one datagram — with GRO possibly many coalesced ones — and
    /// hands each to `f` as a slice of the receive buffer. `block`: wait up to
    /// [`TICK`] for it. Returns the number handed over (0: nothing came).
    pub fn recv_gro(&mut self, block: bool, f: &mut dyn FnMut(SocketAddr, Bytes)) -> io::Result<usize> {
        let flags = if block { MsgFlags::empty() } else { MsgFlags::MSG_DONTWAIT };
        if self.rx.capacity() < MAX_DATAGRAM {
            self.rx = BytesMut::with_capacity(RX_CHUNK);
        }
        // `resize` zeroes only the bytes it adds: those split off last time.
        self.rx.resize(MAX_DATAGRAM, 0);
        self.counters.recv_calls += 1;
        let (n, from, seg) = {
            let mut iov = [IoSliceMut::new(&mut self.rx[..])];
            let cmsg = if self.gro { Some(&mut self.cmsg[..]) } else { None };
            match recvmsg::<SockaddrStorage>(self.sock.as_raw_fd(), &mut iov, cmsg, flags) {
                Ok(m) => {
                    let mut seg = None;
                    if let Ok(cm) = m.cmsgs() {
                        for c in cm {
                            if let ControlMessageOwned::UdpGroSegments(s) = c {
                                seg = usize::try_from(s).ok().filter(|&s| s > 0);
                            }
                        }
                    }
                    (m.bytes, m.address.as_ref().and_then(to_std), seg)
                }
                Err(Errno::EAGAIN | Errno::EINTR | Errno::ECONNREFUSED) => return Ok(0),
                Err(e) => return Err(io_err(e)),
            }
        };
        // The rest of `rx` stays filled: the next call re-zeroes only the
        // `n` bytes split off here, not 64 KiB (that memset cost 10 µs per
        // 1,000-byte ping round trip when it was done every time).
        let mut data = self.rx.split_to(n).freeze();
        let Some(from) = from else { return Ok(0) };
        let seg = seg.unwrap_or(n.max(1));
        let mut count = 0;
        while !data.is_empty() {
            let take = seg.min(data.len());
            f(from, data.split_to(take));
            count += 1;
        }
        self.counters.received += count as u64;
        Ok(count)
    }

    /// Receives up to [`BATCH`] datagrams with one `recvmmsg`, without
    /// blocking; each is copied into a compact buffer (one allocation per
    /// megabyte of datagrams) and handed to `f`. Returns how many. On a socket
    /// with GRO this is [`BatchSocket::recv_gro`]: `recvmmsg` would return
    /// coalesced datagrams without their segment size.
    pub fn recv_many(&mut self, block: bool, f: &mut dyn FnMut(SocketAddr, Bytes)) -> io::Result<usize> {
        if self.gro {
            return self.recv_gro(block, f);
        }
        // MSG_WAITFORONE: block (up to the tick) for the first, take the rest
        // that are already queued.
        let flags = if block { MsgFlags::MSG_WAITFORONE } else { MsgFlags::MSG_DONTWAIT };
        if self.scratch.is_empty() {
            self.scratch = vec![0u8; BATCH * MAX_DATAGRAM];
        }
        self.counters.recv_calls += 1;
        let got: Vec<(usize, Option<SocketAddr>)> = {
            let mut hdrs = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
            let mut slices: Vec<[IoSliceMut<'_>; 1]> =
                self.scratch.chunks_mut(MAX_DATAGRAM).map(|c| [IoSliceMut::new(c)]).collect();
            match recvmmsg(self.sock.as_raw_fd(), &mut hdrs, slices.iter_mut(), flags, None) {
                Ok(res) => res.map(|m| (m.bytes, m.address.as_ref().and_then(to_std))).collect(),
                Err(Errno::EAGAIN | Errno::EINTR | Errno::ECONNREFUSED) => return Ok(0),
                Err(e) => return Err(io_err(e)),
            }
        };
        let mut count = 0;
        for (k, (len, from)) in got.into_iter().enumerate() {
            let Some(from) = from else { continue };
            if self.compact.capacity() - self.compact.len() < len {
                self.compact = BytesMut::with_capacity(RX_CHUNK.max(len));
            }
            let start = k * MAX_DATAGRAM;
            self.compact.extend_from_slice(&self.scratch[start..start + len]);
            f(from, self.compact.split().freeze());
            count += 1;
        }
        self.counters.received += count as u64;
        Ok(count)
    }

    /// Waits until a datagram is readable or `timeout` passes (None: forever).
    /// Returns whether the socket is readable.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        crate::transport::wait_readable(self.sock.as_fd(), timeout)
    }
}

impl Transport for BatchSocket {
    fn send(&mut self, arena: &[u8], out: &[Outgoing]) -> io::Result<usize> {
        BatchSocket::send(self, arena, out)
    }
    fn recv(&mut self, block: bool, f: &mut dyn FnMut(SocketAddr, Bytes)) -> io::Result<usize> {
        self.recv_gro(block, f)
    }
    fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        BatchSocket::wait(self, timeout)
    }
    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.sock.as_fd()
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }
    fn counters(&self) -> IoCounters {
        self.counters
    }
    fn offload(&self) -> (bool, bool) {
        (self.gso, self.gro)
    }
    fn size_buffers(&self, bytes: usize) -> (usize, usize) {
        BatchSocket::size_buffers(self, bytes)
    }
    fn open_lane(&self, peer: SocketAddr) -> io::Result<Self> {
        let local = self.sock.local_addr()?;
        let s = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))?;
        if local.is_ipv6() {
            // As the shared socket: a wildcard one may be dual-stack.
            s.set_only_v6(socket2::SockRef::from(&self.sock).only_v6()?)?;
        }
        s.set_reuse_port(true)?;
        s.bind(&local.into())?;
        s.connect(&peer.into())?;
        let lane = BatchSocket::with_offload(s.into(), self.gso, self.gro)?;
        lane.size_buffers(crate::driver::SOCKET_BUFFER);
        Ok(lane)
    }
}

/// A UDP socket bound to `addr` that lanes may share its port with
/// (`SO_REUSEPORT`: only sockets of the same user id can join; see
/// [`crate::lanes`]).
///
/// `SO_REUSEPORT` alone would let a second server of the same user bind the
/// same port without a word and take half its datagrams; so the address is
/// first bound plainly, which fails with "address in use" as for any
/// socket, and the shared socket takes its port (port 0: the one the
/// kernel picked).
pub fn bind_shared(addr: SocketAddr) -> io::Result<UdpSocket> {
    let addr = UdpSocket::bind(addr)?.local_addr()?;
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        // std's default for a wildcard IPv6 bind: dual-stack.
        s.set_only_v6(false)?;
    }
    s.set_reuse_port(true)?;
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// Records each GSO run the kernel took as a train (segments, bytes): the
/// monitor's view of how much one super-datagram carried.
#[inline]
fn trace_trains(out: &[Outgoing], runs: &[(usize, usize)]) {
    if crate::trace::active() {
        for &(k, n) in runs {
            let bytes: usize = out[k..k + n].iter().map(|o| o.len).sum();
            crate::trace::instant(
                xk_trace::Point::GsoTrain,
                0,
                n as u64,
                u32::try_from(bytes).unwrap_or(u32::MAX),
            );
        }
    }
}

/// How many datagrams from `out[i]` form one GSO send: same destination,
/// contiguous in the arena, all of the first one's size except possibly a
/// shorter last one, at most 64 segments and 64 KiB.
fn gso_run(out: &[Outgoing], i: usize) -> usize {
    let first = out[i];
    if first.len == 0 || first.len > usize::from(u16::MAX) {
        return 1;
    }
    let mut n = 1;
    let mut total = first.len;
    while i + n < out.len() && n < GSO_MAX_SEGMENTS {
        let next = out[i + n];
        let prev = out[i + n - 1];
        if next.dst != first.dst
            || next.start != prev.start + prev.len
            || next.len > first.len
            || next.len == 0
            || total + next.len > MAX_DATAGRAM - 8 - 40
        {
            break;
        }
        total += next.len;
        n += 1;
        if next.len < first.len {
            break; // a shorter segment can only be the last
        }
    }
    n
}

/// The kernel's count of datagrams dropped on the socket bound to `local`
/// (receive buffer full), from `/proc/net/udp` or `/proc/net/udp6`. None when
/// the file or the socket cannot be found.
pub fn socket_drops(local: SocketAddr) -> Option<u64> {
    let (path, want_port) = match local {
        SocketAddr::V4(_) => ("/proc/net/udp", local.port()),
        SocketAddr::V6(_) => ("/proc/net/udp6", local.port()),
    };
    let text = std::fs::read_to_string(path).ok()?;
    let mut total = None;
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
        let Some(port_hex) = f.get(1).and_then(|a| a.rsplit(':').next()) else { continue };
        if u16::from_str_radix(port_hex, 16).ok() != Some(want_port) {
            continue;
        }
        let drops = f.last().and_then(|d| d.parse::<u64>().ok())?;
        *total.get_or_insert(0) += drops;
    }
    total
}

/// Sizes `sock`'s kernel buffers to `bytes` each way and returns what the
/// kernel granted (receive, send; Linux reports double the request).
///
/// With `CAP_NET_ADMIN` (root) `SO_RCVBUFFORCE` / `SO_SNDBUFFORCE` go past
/// `net.core.rmem_max` / `wmem_max`: those are the host's and not per
/// network namespace, so inside `xpress netns` they cannot be raised for
/// one run, and at 1 Gbit/s × 500 ms a receiver capped at the host's 4 MiB
/// dropped 1,031 datagrams for a full buffer in one 25 s run (docs/PERF.md,
/// Session 16 follow-up). Without the capability the ordinary options are
/// used, capped as before.
pub fn size_socket_buffers<F: AsFd>(sock: &F, bytes: usize) -> (usize, usize) {
    if setsockopt(sock, sockopt::RcvBufForce, &bytes).is_err() {
        let _ = setsockopt(sock, sockopt::RcvBuf, &bytes);
    }
    if setsockopt(sock, sockopt::SndBufForce, &bytes).is_err() {
        let _ = setsockopt(sock, sockopt::SndBuf, &bytes);
    }
    let r = nix::sys::socket::getsockopt(sock, sockopt::RcvBuf).unwrap_or(0);
    let s = nix::sys::socket::getsockopt(sock, sockopt::SndBuf).unwrap_or(0);
    (r, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(dst: &str, start: usize, len: usize) -> Outgoing {
        Outgoing { dst: dst.parse().unwrap(), start, len }
    }

    #[test]
    fn gso_runs_group_equal_contiguous_datagrams() {
        let a = "127.0.0.1:1";
        let b = "127.0.0.1:2";
        let out =
            [o(a, 0, 100), o(a, 100, 100), o(a, 200, 60), o(a, 260, 100), o(b, 360, 100), o(b, 460, 100)];
        assert_eq!(gso_run(&out, 0), 3); // ends at the shorter one
        assert_eq!(gso_run(&out, 3), 1); // next destination differs
        assert_eq!(gso_run(&out, 4), 2);
        let gap = [o(a, 0, 100), o(a, 150, 100)];
        assert_eq!(gso_run(&gap, 0), 1); // not contiguous
        let bigger = [o(a, 0, 100), o(a, 100, 200)];
        assert_eq!(gso_run(&bigger, 0), 1);
        let many: Vec<Outgoing> = (0..100).map(|k| o(a, k * 10, 10)).collect();
        assert_eq!(gso_run(&many, 0), GSO_MAX_SEGMENTS);
    }

    /// Every path, with and without offload: what is sent arrives intact and
    /// in order, datagram boundaries kept.
    #[test]
    fn send_and_receive_on_loopback() {
        for offload in [false, true] {
            let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
            let to = rx.local_addr().unwrap();
            let mut rx = BatchSocket::new(rx, offload).unwrap();
            rx.size_buffers(4 << 20);
            let mut tx = BatchSocket::new(UdpSocket::bind("127.0.0.1:0").unwrap(), offload).unwrap();
            // 100 full datagrams, 3 short ones, 100 more full: GSO runs and singles.
            let mut arena = Vec::new();
            let mut out = Vec::new();
            for k in 0..203usize {
                let len = if (100..103).contains(&k) { 10 + k } else { 1200 };
                out.push(Outgoing { dst: to, start: arena.len(), len });
                arena.extend((0..len).map(|i| (k * 7 + i) as u8));
            }
            assert_eq!(tx.send(&arena, &out).unwrap(), out.len());
            let mut got: Vec<Bytes> = Vec::new();
            let mut tries = 0;
            let t0 = std::time::Instant::now();
            while got.len() < out.len() && t0.elapsed() < std::time::Duration::from_secs(5) {
                tries += 1;
                let n = if tries % 2 == 0 {
                    rx.recv_gro(false, &mut |_, d| got.push(d)).unwrap()
                } else {
                    rx.recv_many(tries % 3 == 0, &mut |_, d| got.push(d)).unwrap()
                };
                if n == 0 {
                    rx.wait(Some(Duration::from_millis(10))).unwrap();
                }
            }
            assert_eq!(got.len(), out.len(), "offload {offload}");
            for (g, o) in got.iter().zip(&out) {
                assert_eq!(&g[..], &arena[o.start..o.start + o.len], "offload {offload}");
            }
            if offload {
                assert!(tx.counters.send_calls < 20, "GSO used: {:?}", tx.counters);
            }
        }
    }

    #[test]
    fn drop_counter_is_found_for_a_bound_socket() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(socket_drops(s.local_addr().unwrap()), Some(0));
    }
}
