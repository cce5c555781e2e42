//! The async API on tokio (feature `tokio`): [`AsyncXtpStream`] implements
//! `tokio::io::AsyncRead` and `AsyncWrite`; [`AsyncXtpListener`] accepts them.
//!
//! One task per socket drives the sans-I/O endpoint: it sends what the
//! endpoint has, then waits for a datagram, the endpoint's next timer, or a
//! nudge from an application call, whichever comes first. The endpoint sits
//! behind a mutex shared with the stream handles; nobody holds the lock
//! across an `.await`. A handle that cannot progress registers its waker; the
//! driver task wakes the handles of a context when its events arrive. When
//! every handle is gone and no context is left, the task ends (it lingers as
//! long as closed contexts do, like TCP's TIME_WAIT).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context as TaskCx, Poll, Waker};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{ToSocketAddrs, UdpSocket};
use tokio::sync::Notify;
use xk_time::{Duration, Instant};
use xtp_proto::{CloseReason, ContextConfig, ContextId, Endpoint, EndpointConfig, Event};

use crate::api::{reason_error, time_seed};
use crate::clock::Clock;

/// Unsent bytes above which `poll_write` waits (see
/// [`xtp_proto::Endpoint::writable`]).
const WRITE_BUFFER: u64 = 4 << 20;

#[derive(Default)]
struct CtxState {
    peer_finished: bool,
    closed: Option<CloseReason>,
    reader: Option<Waker>,
    writer: Option<Waker>,
    /// Handles alive for this context.
    handles: usize,
}

struct State {
    ep: Endpoint,
    ctxs: HashMap<ContextId, CtxState>,
    incoming: VecDeque<(ContextId, SocketAddr)>,
    acceptor: Option<Waker>,
    /// Writers waiting for unsent bytes to leave: woken once transmissions
    /// bring them under the bound (acknowledgements alone would not: during
    /// a recovery the cumulative acknowledgement stands still).
    unsent_waiters: Vec<ContextId>,
    /// Handles alive in total (streams and the listener).
    handles: usize,
}

struct Shared {
    state: Mutex<State>,
    nudge: Notify,
    clock: Clock,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the endpoint as it was; go on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }
}

/// Starts the driver task for a bound socket.
fn spawn(sock: UdpSocket, cfg: EndpointConfig, seed: u64) -> Arc<Shared> {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            ep: Endpoint::new(cfg, seed),
            ctxs: HashMap::new(),
            incoming: VecDeque::new(),
            acceptor: None,
            unsent_waiters: Vec::new(),
            // The creator's reservation, released once its handle exists:
            // on a multi-threaded runtime the driver task may run before
            // `connect` or `bind` has registered anything, and with no
            // handle and no context it would take itself for finished and
            // end — leaving the stream or listener without a driver (found
            // by the FTP tests: a hang at connect, or a passive data
            // listener that never accepted).
            handles: 1,
        }),
        nudge: Notify::new(),
        clock: Clock::new(),
    });
    tokio::spawn(drive(sock, shared.clone()));
    shared
}

async fn drive(sock: UdpSocket, shared: Arc<Shared>) {
    let mut tx = vec![0u8; 65_536];
    let mut rx = BytesMut::new();
    loop {
        // Send everything queued.
        loop {
            let out = {
                let mut st = shared.lock();
                let now = shared.now();
                st.ep.poll_transmit(now, &mut tx).map(|t| (t.dst, t.len))
            };
            let Some((dst, len)) = out else { break };
            // A full buffer or an ICMP error loses the datagram; XTP recovers.
            let _ = sock.send_to(&tx[..len], dst).await;
        }
        wake_unsent_waiters(&mut shared.lock());
        let (deadline, done) = {
            let mut st = shared.lock();
            (st.ep.poll_timeout(), st.handles == 0 && st.ep.context_count() == 0)
        };
        if done {
            return;
        }
        let sleep = match deadline {
            Some(t) => t.saturating_since(shared.now()),
            None => Duration::from_secs(3600),
        };
        if rx.capacity() < 65_536 {
            rx = BytesMut::with_capacity(1 << 20);
        }
        rx.resize(65_536, 0);
        tokio::select! {
            r = sock.recv_from(&mut rx[..]) => {
                if let Ok((n, from)) = r {
                    let data = rx.split_to(n).freeze();
                    let mut st = shared.lock();
                    let now = shared.now();
                    st.ep.handle_datagram(now, from, data);
                }
            }
            () = tokio::time::sleep(std::time::Duration::from_nanos(sleep.as_nanos() as u64)) => {}
            () = shared.nudge.notified() => {}
        }
        let mut st = shared.lock();
        let now = shared.now();
        st.ep.handle_timeout(now);
        dispatch(&mut st);
    }
}

/// Wakes the writers whose unsent bytes have left (and who have room).
fn wake_unsent_waiters(st: &mut State) {
    let State { ep, ctxs, unsent_waiters, .. } = st;
    unsent_waiters.retain(|ctx| {
        if ep.writable(*ctx, WRITE_BUFFER) || !ep.can_write(*ctx) {
            // Room, or waiting on acknowledgements (or closed) now: either
            // way the Acked/Closed dispatch or this wake-up serves it.
            if let Some(w) = ctxs.get_mut(ctx).and_then(|c| c.writer.take()) {
                w.wake();
            }
            false
        } else {
            true
        }
    });
}

/// Files the endpoint's events by context and wakes whoever waits on them.
fn dispatch(st: &mut State) {
    while let Some(ev) = st.ep.poll_event() {
        let (ctx, wake_all) = match ev {
            Event::Incoming { ctx, peer, .. } => {
                st.ctxs.entry(ctx).or_default();
                st.incoming.push_back((ctx, peer));
                if let Some(w) = st.acceptor.take() {
                    w.wake();
                }
                continue;
            }
            Event::Readable { ctx } | Event::Gap { ctx, .. } => (ctx, false),
            Event::Acked { ctx, .. } => (ctx, true),
            Event::PeerFinished { ctx } => {
                st.ctxs.entry(ctx).or_default().peer_finished = true;
                (ctx, false)
            }
            Event::Closed { ctx, reason } => {
                st.ctxs.entry(ctx).or_default().closed = Some(reason);
                (ctx, true)
            }
        };
        let c = st.ctxs.entry(ctx).or_default();
        if let Some(w) = c.reader.take() {
            w.wake();
        }
        if wake_all && let Some(w) = c.writer.take() {
            w.wake();
        }
    }
}

/// A reliable XTP stream over UDP for tokio.
pub struct AsyncXtpStream {
    shared: Arc<Shared>,
    ctx: ContextId,
    peer: SocketAddr,
    pending: Bytes,
    shut: bool,
}

impl AsyncXtpStream {
    /// Opens a stream to XTP `port` at `addr` (needs a tokio runtime with
    /// I/O and time enabled). No handshake: returns at once.
    pub async fn connect(addr: impl ToSocketAddrs, port: u16) -> io::Result<AsyncXtpStream> {
        let peer = tokio::net::lookup_host(addr)
            .await?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to connect to"))?;
        let local = if peer.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
        let shared = spawn(UdpSocket::bind(local).await?, crate::api::client_config(), time_seed());
        let ctx = {
            let mut st = shared.lock();
            let now = shared.now();
            let ctx = st.ep.connect(now, peer, port, ContextConfig::stream()).map_err(|e| {
                st.handles -= 1; // no stream: release the reservation
                io::Error::new(io::ErrorKind::InvalidInput, format!("{e:?}"))
            });
            let ctx = match ctx {
                Ok(ctx) => ctx,
                Err(e) => {
                    drop(st);
                    shared.nudge.notify_one();
                    return Err(e);
                }
            };
            st.ctxs.entry(ctx).or_default();
            ctx
        };
        let stream = AsyncXtpStream::new(shared.clone(), ctx, peer);
        shared.lock().handles -= 1; // the stream's handle replaces the reservation
        shared.nudge.notify_one();
        Ok(stream)
    }

    fn new(shared: Arc<Shared>, ctx: ContextId, peer: SocketAddr) -> AsyncXtpStream {
        {
            let mut st = shared.lock();
            st.handles += 1;
            st.ctxs.entry(ctx).or_default().handles += 1;
        }
        AsyncXtpStream { shared, ctx, peer, pending: Bytes::new(), shut: false }
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }
}

impl AsyncRead for AsyncXtpStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskCx<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.pending.is_empty() {
            let mut st = this.shared.lock();
            let now = this.shared.now();
            match st.ep.read(now, this.ctx) {
                Some(c) => this.pending = c.data,
                None => {
                    let c = st.ctxs.entry(this.ctx).or_default();
                    match &c.closed {
                        Some(CloseReason::Graceful) => return Poll::Ready(Ok(())),
                        Some(r) => return Poll::Ready(Err(reason_error(r))),
                        None if c.peer_finished => return Poll::Ready(Ok(())), // end of stream
                        None => {
                            c.reader = Some(cx.waker().clone());
                            return Poll::Pending;
                        }
                    }
                }
            }
            // Fill the caller's buffer with every chunk already here, not
            // one packet's worth per call: a copy loop above (FTP's file
            // writes) then makes one write per buffer, not one per packet,
            // and the driver is nudged once per read, not once per chunk.
            loop {
                let n = buf.remaining().min(this.pending.len());
                buf.put_slice(&this.pending.split_to(n));
                if buf.remaining() == 0 {
                    break;
                }
                match st.ep.read(now, this.ctx) {
                    Some(c) => this.pending = c.data,
                    None => break,
                }
            }
            // Reading freed window space: let the driver tell the peer.
            drop(st);
            this.shared.nudge.notify_one();
            return Poll::Ready(Ok(()));
        }
        let n = buf.remaining().min(this.pending.len());
        buf.put_slice(&this.pending.split_to(n));
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for AsyncXtpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut TaskCx<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if self.shut {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, "write after shutdown")));
        }
        let mut st = self.shared.lock();
        if let Some(r) = &st.ctxs.entry(self.ctx).or_default().closed {
            return Poll::Ready(Err(reason_error(r)));
        }
        // Wait while the engine's send buffer is full (woken on Acked; the
        // engine would refuse the write with WouldBlock) or our bound on
        // unsent bytes is reached (woken once they have left).
        if !st.ep.writable(self.ctx, WRITE_BUFFER) {
            st.ctxs.entry(self.ctx).or_default().writer = Some(cx.waker().clone());
            if st.ep.can_write(self.ctx) && !st.unsent_waiters.contains(&self.ctx) {
                st.unsent_waiters.push(self.ctx);
            }
            return Poll::Pending;
        }
        let now = self.shared.now();
        let r = st.ep.write(now, self.ctx, Bytes::copy_from_slice(data), false, None);
        drop(st);
        self.shared.nudge.notify_one();
        Poll::Ready(
            r.map(|()| data.len())
                .map_err(|e| io::Error::new(io::ErrorKind::BrokenPipe, format!("cannot write: {e:?}"))),
        )
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut TaskCx<'_>) -> Poll<io::Result<()>> {
        self.shared.nudge.notify_one();
        Poll::Ready(Ok(()))
    }

    /// Closes our sending side and waits until the context has closed
    /// gracefully (everything we wrote acknowledged, the peer finished too).
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskCx<'_>) -> Poll<io::Result<()>> {
        let mut st = self.shared.lock();
        if !self.shut {
            let now = self.shared.now();
            st.ep.close(now, self.ctx);
            drop(st);
            self.shut = true;
            self.shared.nudge.notify_one();
            st = self.shared.lock();
        }
        let c = st.ctxs.entry(self.ctx).or_default();
        match &c.closed {
            Some(CloseReason::Graceful) => Poll::Ready(Ok(())),
            Some(r) => Poll::Ready(Err(reason_error(r))),
            None => {
                c.writer = Some(cx.waker().clone());
                // The peer's finish can also be what we wait for.
                c.reader = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for AsyncXtpStream {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        let now = self.shared.now();
        if !self.shut {
            st.ep.close(now, self.ctx);
        }
        st.handles -= 1;
        if let Some(c) = st.ctxs.get_mut(&self.ctx) {
            c.handles -= 1;
            if c.handles == 0 {
                st.ctxs.remove(&self.ctx);
            }
        }
        drop(st);
        self.shared.nudge.notify_one();
    }
}

/// Accepts XTP streams on a UDP address and XTP port, for tokio.
pub struct AsyncXtpListener {
    shared: Arc<Shared>,
    local: SocketAddr,
}

impl AsyncXtpListener {
    /// Binds `addr` (UDP) and listens on XTP `port`.
    pub async fn bind(addr: impl ToSocketAddrs, port: u16) -> io::Result<AsyncXtpListener> {
        let sock = UdpSocket::bind(addr).await?;
        let local = sock.local_addr()?;
        let shared = spawn(sock, EndpointConfig::default(), time_seed());
        {
            let mut st = shared.lock();
            // The listener's handle is the creator's reservation; on error
            // it is released so the driver ends.
            if let Err(e) = st.ep.listen(port, ContextConfig::stream()) {
                st.handles -= 1;
                drop(st);
                shared.nudge.notify_one();
                return Err(io::Error::new(io::ErrorKind::AddrInUse, format!("XTP port {port}: {e:?}")));
            }
        }
        Ok(AsyncXtpListener { shared, local })
    }

    /// The UDP address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The next incoming stream.
    pub async fn accept(&self) -> io::Result<(AsyncXtpStream, SocketAddr)> {
        let (ctx, peer) = std::future::poll_fn(|cx| {
            let mut st = self.shared.lock();
            match st.incoming.pop_front() {
                Some(next) => Poll::Ready(next),
                None => {
                    st.acceptor = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await;
        Ok((AsyncXtpStream::new(self.shared.clone(), ctx, peer), peer))
    }
}

impl Drop for AsyncXtpListener {
    fn drop(&mut self) {
        self.shared.lock().handles -= 1;
        self.shared.nudge.notify_one();
    }
}
