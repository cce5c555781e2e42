//! [`XtpStream`]: a reliable XTP context as a byte stream and as messages.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};

use bytes::Bytes;
use xk_time::{Duration, Instant};
use xk_trace::Point;
use xtp_proto::{ContextConfig, EndpointConfig};

use super::{Cid, Handle, Mode, RingStats, Shared, TURN, close_error, timed_out};
use crate::trace;

/// Bytes written and not yet sent once above which `write` waits (with the
/// engine's own bound on unacknowledged bytes, this bounds the memory a fast
/// writer can queue). Unsent, not unacknowledged: see
/// [`xtp_proto::Endpoint::writable`].
const WRITE_BUFFER: u64 = 4 << 20;

/// One message: bytes up to an EOM, with the BTAG it started with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The message.
    pub data: Vec<u8>,
    /// The tag the sender attached, if any.
    pub btag: Option<u64>,
}

/// A reliable XTP stream (service 4) over UDP.
///
/// `Read` returns bytes in order and `Ok(0)` once the peer closed its side;
/// `Write` queues bytes (waiting while more than 4 MiB are unacknowledged).
/// Dropping the stream closes it gracefully and waits, bounded by the
/// stream's timeout, for the close to complete.
pub struct XtpStream {
    shared: Handle,
    ctx: Cid,
    peer: SocketAddr,
    /// Part of a chunk `read` has not returned yet.
    pending: Bytes,
    /// EOM and BTAG of the chunk in `pending`.
    pending_meta: (bool, Option<u64>),
    timeout: Option<Duration>,
    closed_write: bool,
    /// `close` or `abort` ran: nothing left for `drop` to do.
    finished: bool,
    /// Inside `recv_message`: only a message's end is worth waking for.
    want_message_end: bool,
}

impl XtpStream {
    /// Opens a stream to the XTP `port` at `addr` (an `xpress serve`, or an
    /// [`super::XtpListener`]). Returns at once: XTP needs no handshake before
    /// the first byte; a refusal surfaces on the first read or write.
    pub fn connect(addr: impl ToSocketAddrs, port: u16) -> io::Result<XtpStream> {
        XtpStream::connect_with(addr, port, super::client_config(), ContextConfig::stream())
    }

    /// As [`XtpStream::connect`], with the endpoint's and the context's
    /// settings (retry limit, NOCHECK, rate, window, …).
    pub fn connect_with(
        addr: impl ToSocketAddrs,
        port: u16,
        ep: EndpointConfig,
        cfg: ContextConfig,
    ) -> io::Result<XtpStream> {
        XtpStream::open(Mode::integrated(), addr, port, ep, cfg)
    }

    /// Opens a stream with its endpoint in `mode` (see [`super::Xtp`]).
    pub(super) fn open(
        mode: Mode,
        addr: impl ToSocketAddrs,
        port: u16,
        ep: EndpointConfig,
        cfg: ContextConfig,
    ) -> io::Result<XtpStream> {
        let peer = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to connect to"))?;
        let shared = Shared::bind(super::any_local(peer), ep, mode)?;
        let ctx = {
            let mut s = shared.borrow_mut();
            let ctx = s.core.connect(peer, port, cfg)?;
            s.opened(ctx)
        };
        Ok(XtpStream::from_parts(shared, ctx, peer))
    }

    pub(super) fn from_parts(shared: Handle, ctx: Cid, peer: SocketAddr) -> XtpStream {
        XtpStream {
            shared,
            ctx,
            peer,
            pending: Bytes::new(),
            pending_meta: (false, None),
            timeout: Some(Duration::from_secs(300)),
            closed_write: false,
            finished: false,
            want_message_end: false,
        }
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The engine thread's wake-up counters (None in the integrated mode).
    pub fn ring_stats(&self) -> Option<RingStats> {
        self.shared.borrow().ring_stats()
    }

    /// Longest a blocking call waits (None: forever). Default 300 s.
    pub fn set_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.timeout = timeout.map(|d| Duration::from_nanos(d.as_nanos() as u64));
    }

    fn deadline(&self, now: Instant) -> Option<Instant> {
        self.timeout.map(|t| now + t)
    }

    /// Turns the driver until `done` holds; errors when the context ended
    /// badly or the deadline passed.
    fn drive(&mut self, what: &str, mut done: impl FnMut(&mut Shared, Cid) -> bool) -> io::Result<()> {
        let mut s = self.shared.borrow_mut();
        let deadline = self.deadline(s.now());
        loop {
            if done(&mut s, self.ctx) {
                return Ok(());
            }
            if let Some(e) = s.failure(self.ctx) {
                return Err(e);
            }
            if let (_, Some(reason)) = s.status(self.ctx) {
                return Err(close_error(reason).unwrap_or_else(|| {
                    io::Error::new(io::ErrorKind::NotConnected, format!("{what}: closed"))
                }));
            }
            if deadline.is_some_and(|d| s.now() >= d) {
                return Err(timed_out(what));
            }
            s.pump_for(TURN, self.want_message_end)?;
        }
    }

    /// Fills `pending` with the next chunk; false at the end of the stream.
    fn next_chunk(&mut self) -> io::Result<bool> {
        let mut got = None;
        let mut end = false;
        self.drive("read", |s, ctx| {
            if let Some(c) = s.read_chunk(ctx) {
                got = Some(c);
                return true;
            }
            let (finished, closed) = s.status(ctx);
            end = finished || matches!(closed, Some(xtp_proto::CloseReason::Graceful));
            end
        })?;
        match got {
            Some(c) => {
                self.pending = c.data;
                self.pending_meta = (c.eom, c.btag);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Sends one message: `data` with EOM at its end, tagged with `btag`.
    pub fn send_message(&mut self, data: &[u8], btag: Option<u64>) -> io::Result<()> {
        let t0 = trace::span_start();
        trace::take_noted(); // a stale hand-off is not this write's
        let len = data.len();
        loop {
            self.wait_for_room()?;
            let mut s = self.shared.borrow_mut();
            let deadline = self.deadline(s.now());
            match s.write(self.ctx, data, true, btag, deadline) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => r?,
            }
            break;
        }
        let r = self.shared.borrow_mut().core.flush();
        trace::span_end_journey(t0, Point::AppWrite, trace::take_noted(), len as u64, 1);
        r
    }

    /// Receives the next whole message (None at the end of the stream). A
    /// message interrupted by the end of the stream is returned as it is.
    pub fn recv_message(&mut self) -> io::Result<Option<Message>> {
        let t0 = trace::span_start();
        self.want_message_end = true;
        let r = self.recv_message_inner();
        self.want_message_end = false;
        if let Ok(Some(m)) = &r {
            trace::span_end(t0, Point::AppRead, m.data.len() as u64, 1);
        }
        r
    }

    fn recv_message_inner(&mut self) -> io::Result<Option<Message>> {
        let mut data = Vec::new();
        let mut btag = None;
        let mut first = true;
        loop {
            if self.pending.is_empty() && !self.next_chunk()? {
                return Ok((!first).then_some(Message { data, btag }));
            }
            if first {
                btag = self.pending_meta.1;
                first = false;
            }
            data.extend_from_slice(&self.pending);
            self.pending = Bytes::new();
            if self.pending_meta.0 {
                return Ok(Some(Message { data, btag }));
            }
        }
    }

    fn wait_for_room(&mut self) -> io::Result<()> {
        if self.closed_write {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "write after shutdown"));
        }
        // Our own bound, and the engine's (its send buffer; `write` would
        // refuse with WouldBlock beyond it): wait, pumping the driver.
        self.drive("write", |s, ctx| s.core.has_room(ctx, WRITE_BUFFER))
    }

    /// Closes our sending side (the peer reads end-of-stream); reading goes on.
    pub fn shutdown_write(&mut self) -> io::Result<()> {
        if !self.closed_write {
            self.closed_write = true;
            let mut s = self.shared.borrow_mut();
            s.core.close(self.ctx)?;
            s.core.flush()?;
        }
        Ok(())
    }

    /// Closes gracefully and waits until both sides are done (everything we
    /// wrote acknowledged, the peer closed too). Unread data is discarded.
    pub fn close(mut self) -> io::Result<()> {
        self.close_inner()
    }

    fn close_inner(&mut self) -> io::Result<()> {
        self.finished = true;
        self.shutdown_write()?;
        let r = self.drive("close", |s, ctx| {
            while s.read_chunk(ctx).is_some() {}
            matches!(s.status(ctx).1, Some(xtp_proto::CloseReason::Graceful))
        });
        // The context is over either way; forget its status.
        self.shared.borrow_mut().forget(self.ctx);
        r
    }

    /// Aborts: the peer gets END and a DIAG; nothing more is delivered.
    pub fn abort(mut self) {
        self.finished = true;
        let mut s = self.shared.borrow_mut();
        let _ = s.core.abort(self.ctx);
        let _ = s.core.flush();
        s.forget(self.ctx);
    }
}

impl Read for XtpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let t0 = trace::span_start();
        if self.pending.is_empty() && !self.next_chunk()? {
            return Ok(0);
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        let _ = self.pending.split_to(n);
        trace::span_end(t0, Point::AppRead, n as u64, 0);
        Ok(n)
    }
}

impl Write for XtpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let t0 = trace::span_start();
        trace::take_noted(); // a stale hand-off is not this write's
        loop {
            self.wait_for_room()?;
            let mut s = self.shared.borrow_mut();
            let deadline = self.deadline(s.now());
            match s.write(self.ctx, buf, false, None, deadline) {
                // Full again between the wait and the write: wait more.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => r?,
            }
            trace::span_end_journey(t0, Point::AppWrite, trace::take_noted(), buf.len() as u64, 0);
            return Ok(buf.len());
        }
    }

    /// Hands queued packets to the kernel (does not wait for acknowledgement).
    fn flush(&mut self) -> io::Result<()> {
        self.shared.borrow_mut().core.flush()
    }
}

impl Drop for XtpStream {
    fn drop(&mut self) {
        let over = self.finished || self.shared.borrow().status(self.ctx).1.is_some();
        if !over {
            let _ = self.close_inner();
        } else {
            self.shared.borrow_mut().forget(self.ctx);
        }
    }
}
