//! What the driver needs from a socket: batched sends from an arena, receives
//! handed over as shared slices, and an exact wait. Implemented by UDP
//! ([`crate::batch::BatchSocket`]) and raw IP protocol 36
//! ([`crate::raw::RawSocket`]), so one driver loop serves both.

use std::io;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;

use bytes::Bytes;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;
use xk_time::Duration;

use crate::batch::{IoCounters, Outgoing};

/// A datagram socket the driver can run an endpoint on.
pub trait Transport {
    /// Sends `out` (ranges of `arena`); returns how many left. Datagrams the
    /// kernel refused for lack of buffer are counted as errors, not returned.
    fn send(&mut self, arena: &[u8], out: &[Outgoing]) -> io::Result<usize>;
    /// Receives what is waiting (`block`: waits up to [`crate::batch::TICK`])
    /// and hands each datagram to `f`. Returns how many.
    fn recv(&mut self, block: bool, f: &mut dyn FnMut(SocketAddr, Bytes)) -> io::Result<usize>;
    /// Waits until readable or `timeout` passes; true when readable.
    fn wait(&self, timeout: Option<Duration>) -> io::Result<bool>;
    /// The descriptor that becomes readable when a datagram waits (for a
    /// caller that waits on it together with others: the engine thread).
    fn fd(&self) -> BorrowedFd<'_>;
    /// The local address.
    fn local_addr(&self) -> io::Result<SocketAddr>;
    /// What the socket did.
    fn counters(&self) -> IoCounters;
    /// Whether GSO / GRO are in use.
    fn offload(&self) -> (bool, bool) {
        (false, false)
    }
    /// Asks for kernel buffers of `bytes` each way; returns what was granted.
    fn size_buffers(&self, bytes: usize) -> (usize, usize);
    /// A socket on this one's address that receives only what `peer` sends
    /// (see [`crate::lanes`]); `Unsupported` where the kernel cannot steer
    /// by peer (raw IP sockets all see every packet).
    fn open_lane(&self, peer: SocketAddr) -> io::Result<Self>
    where
        Self: Sized,
    {
        let _ = peer;
        Err(io::Error::new(io::ErrorKind::Unsupported, "peer lanes need UDP"))
    }
}

/// `ppoll` on one descriptor with a nanosecond timeout.
pub(crate) fn wait_readable(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<bool> {
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    let ts = timeout.map(|d| TimeSpec::from_duration(std::time::Duration::from_nanos(d.as_nanos() as u64)));
    let t0 = crate::trace::span_start();
    let r = ppoll(&mut fds, ts, None);
    crate::trace::park_end(t0, timeout, &r, fds.iter().map(|p| p.any().unwrap_or(false)), 0..0);
    match r {
        Ok(n) => Ok(n > 0),
        Err(Errno::EINTR) => Ok(false),
        Err(e) => Err(io::Error::from_raw_os_error(e as i32)),
    }
}
